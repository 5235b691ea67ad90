package remediate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/seal"
)

// The ledger is not a trust root (#19): whoever can write its database
// could otherwise rewrite a saved spec (its service account, its startup
// script) and have the function create it. So a spec taken from the node
// is sealed (Handler.Sealer) before it is saved, and the seal is verified
// before the delete and before the create, each time from what the ledger
// gave back. The checks sit around the state machine, in run: Advance stays
// pure and never sees a seal.
//
// A spec that does not verify, an unsealed one included (see
// Handler.TrustUnsealedSpecs), is never deleted for nor created: the
// recovery is abandoned with an ERROR record naming the tampering. A
// Sealer that gives no verdict (a KMS outage) only delays the step: no
// failure is counted, the recovery is looked at again after SealRetry.

// SealRetry is how soon a recovery whose seal could not be made or checked
// (no verdict: KMS unavailable) is looked at again.
const SealRetry = 30 * time.Second

// errUnsealedTrusted says verifySpec found no seal and TrustUnsealedSpecs
// accepts that: the spec is sealed now.
var errUnsealedTrusted = errors.New("unsealed spec trusted")

// specMessage is what a recovery's spec seal covers: its node, generation
// and spec in the ledger's encoding (JSON of the decoded node; CloneNode
// makes the bytes the same before and after a trip through the ledger).
func specMessage(rec Recovery) ([]byte, error) {
	b, err := json.Marshal(CloneNode(rec.Spec))
	if err != nil {
		return nil, fmt.Errorf("encode spec of %s: %w", rec.Node, err)
	}
	return seal.SpecMessage(rec.Node, int64(rec.Generation), b), nil
}

// sealSpec seals rec's spec, just taken from the node.
func (h *Handler) sealSpec(ctx context.Context, rec *Recovery) error {
	msg, err := specMessage(*rec)
	if err != nil {
		return err
	}
	s, err := h.Sealer.Seal(ctx, msg)
	if err != nil {
		return err
	}
	rec.SpecSeal = s
	return nil
}

// verifySpec checks rec's spec against its seal: nil (verified, or no spec
// to check), errUnsealedTrusted, an error matching seal.ErrNotVerified (a
// verdict), or any other error (no verdict).
func (h *Handler) verifySpec(ctx context.Context, rec Recovery) error {
	if rec.Spec == nil {
		return nil // a delete needs none; Advance abandons a create without one
	}
	if rec.SpecSeal.IsZero() && h.TrustUnsealedSpecs {
		return errUnsealedTrusted
	}
	msg, err := specMessage(rec)
	if err != nil {
		return err
	}
	return h.Sealer.Verify(ctx, msg, rec.SpecSeal)
}

// checkSeal runs the seal's part of one step of run: next is what Advance
// made of rec and eff the call it asks for. It seals a spec Advance just
// took from the node, and verifies the saved spec before a delete or a
// create. It returns the recovery to save and the call to make (a
// tampered spec: abandoned, no call), or an error when the Sealer gave no
// verdict (nothing saved, no call: the caller waits).
func (h *Handler) checkSeal(ctx context.Context, rec, next Recovery, eff Effect, r *Record) (Recovery, Effect, error) {
	if h.Sealer == nil {
		return next, eff, nil
	}
	fresh := next.Spec != nil && next.Spec != rec.Spec
	if fresh {
		// Taken from the node just read: sealed before it is saved, and
		// the call made with it needs no check of what was just sealed.
		if err := h.sealSpec(ctx, &next); err != nil {
			return next, eff, err
		}
		return next, eff, nil
	}
	if eff.Kind != EffectDelete && eff.Kind != EffectCreate && eff.Kind != EffectCreateQR {
		return next, eff, nil
	}
	switch err := h.verifySpec(ctx, next); {
	case err == nil:
		return next, eff, nil
	case errors.Is(err, errUnsealedTrusted):
		r.Warnings = append(r.Warnings, fmt.Sprintf("saved spec of recovery gen %d has no seal (saved before seals); trusted and sealed now, as TrustUnsealedSpecs says", next.Generation))
		if err := h.sealSpec(ctx, &next); err != nil {
			return next, eff, err
		}
		return next, eff, nil
	case errors.Is(err, seal.ErrNotVerified):
		verb := map[EffectKind]string{EffectDelete: "deleted for it", EffectCreate: "created from it", EffectCreateQR: "queued from it"}[eff.Kind]
		why := fmt.Sprintf("saved spec tampered with (%v): the node is not %s; the ledger's spec was changed or written by someone else: check who can write the ledger (autoheal preflight)", err, verb)
		if next.SpecSeal.IsZero() {
			why += "; a spec saved by a version before seals has none: see docs/security.md"
		}
		// The record shows the spec as the ledger has it (metadata values
		// redacted), not as a create would have sent it.
		r.Spec = next.Spec
		return abandon(next, why), Effect{}, nil
	default:
		return next, eff, err
	}
}

// sealWait saves rec, unchanged but for its next look, after the Sealer gave
// no verdict: no failure is counted (a KMS outage is never a reason to
// abandon), and the step is tried again after SealRetry. The error is
// returned as transient, so a delivery is redelivered.
func (h *Handler) sealWait(ctx context.Context, rec Recovery, err error, r *Record) error {
	rec.NextLookAt = h.Now().Add(SealRetry)
	if serr := h.save(ctx, rec); serr != nil {
		r.Phase, r.Generation = rec.Phase, rec.Generation
		return serr
	}
	r.Phase, r.Generation = rec.Phase, rec.Generation
	r.Reason += fmt.Sprintf("; phase %s, spec seal: no verdict, next look at %s", rec.Phase, rec.NextLookAt.UTC().Format(time.RFC3339))
	return &ActError{Step: "seal", Node: rec.Node, Transient: true, Err: err}
}

// ActAsChecker says whether the function may act as a service account
// (iam.serviceAccounts.actAs on it, which the TPU API's create needs).
// An error is no answer (transient).
type ActAsChecker interface {
	CanActAs(ctx context.Context, email string) (bool, error)
}

// AccountGuard is the service-account guard before a delete: the node's
// service account must be one the recovery may use (Allowed:
// AUTOHEAL_NODE_SERVICE_ACCOUNTS) and one the function can act as, else the
// node is skipped, untouched: a node deleted and then refused its create
// (403 on actAs) would stay deleted.
type AccountGuard struct {
	Allowed []string
	ActAs   ActAsChecker // nil = the allow-list alone
}

// GuardServiceAccounts names the guard in skip reasons.
const GuardServiceAccounts = "node service account"

// Check returns why the node may not be recreated for its service account
// ("" = it may), or an error when the check could not be made.
func (g *AccountGuard) Check(ctx context.Context, n *tpu.Node) (string, error) {
	return g.check(ctx, n, "not recreated")
}

// check is Check for a call that runs as the node's service account
// (a create, a metadata patch); refused says what is then not done.
func (g *AccountGuard) check(ctx context.Context, n *tpu.Node, refused string) (string, error) {
	if g == nil || n == nil {
		return "", nil
	}
	email := ""
	if n.ServiceAccount != nil {
		email = strings.TrimSpace(n.ServiceAccount.Email)
	}
	if email == "" {
		return fmt.Sprintf("guard %s: the node names no service account (it runs as the project's default compute account), which is not in AUTOHEAL_NODE_SERVICE_ACCOUNTS: %s", GuardServiceAccounts, refused), nil
	}
	if !slices.ContainsFunc(g.Allowed, func(a string) bool { return strings.EqualFold(a, email) }) {
		return fmt.Sprintf("guard %s: %s is not in AUTOHEAL_NODE_SERVICE_ACCOUNTS (terraform tpu_service_accounts): %s", GuardServiceAccounts, email, refused), nil
	}
	if g.ActAs == nil {
		return "", nil
	}
	ok, err := g.ActAs.CanActAs(ctx, email)
	if err != nil {
		return "", fmt.Errorf("test iam.serviceAccounts.actAs on %s: %w", email, err)
	}
	if !ok {
		return fmt.Sprintf("guard %s: the function cannot act as %s (iam.serviceAccounts.actAs missing; terraform tpu_service_accounts grants it): %s", GuardServiceAccounts, email, refused), nil
	}
	return "", nil
}
