package computevm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tpu-autoheal/autoheal/internal/seal"
)

// Saved instance specs are sealed as saved node specs are
// (remediate/specseal.go, #19): whoever can write the ledger's database
// could otherwise rewrite a saved spec (its service account, its startup
// script) and have the function insert it. A spec is sealed when the sweep
// saves it and verified before every insert from it; one that does not
// verify, an unsealed one included unless TrustUnsealedSpecs, is never
// inserted: the look records why, at ERROR. A Sealer that gives no verdict
// (a KMS outage) only delays the insert.

// specMessage is what an instance spec's seal covers: seal.SpecMessage of
// the instance's name, its Seen time in microseconds (the place of a
// node recovery's generation: a seal made at one save does not verify the
// same spec with another Seen, so Seen cannot be moved back to make an old
// system event count), and the spec's JSON.
func specMessage(name string, s SavedSpec) ([]byte, error) {
	b, err := json.Marshal(s.Spec)
	if err != nil {
		return nil, fmt.Errorf("encode spec of %s: %w", name, err)
	}
	return seal.SpecMessage(name, s.Seen.UnixMicro(), b), nil
}

// sealSpec seals s, just taken from the instance (no Sealer: unsealed).
func (r *Recovery) sealSpec(ctx context.Context, name string, s *SavedSpec) error {
	if r.Sealer == nil {
		return nil
	}
	msg, err := specMessage(name, *s)
	if err != nil {
		return err
	}
	if s.Seal, err = r.Sealer.Seal(ctx, msg); err != nil {
		return err
	}
	return nil
}

// verifySpecs checks the saved spec of every target before an insert from
// it. It returns warnings for the record (an unsealed spec trusted), or
// refused, the reason no insert may be made (a verdict: tampered), or an
// error when the Sealer gave no verdict.
func (r *Recovery) verifySpecs(ctx context.Context, targets []string, members []member) (warnings []string, refused string, _ error) {
	if r.Sealer == nil {
		return nil, "", nil
	}
	for _, t := range targets {
		for _, m := range members {
			if m.ref.String() != t || m.spec == nil {
				continue
			}
			if m.saved.Seal.IsZero() && r.TrustUnsealedSpecs {
				warnings = append(warnings, fmt.Sprintf("saved spec of %s has no seal (saved before seals); trusted, as TrustUnsealedSpecs says", t))
				continue
			}
			msg, err := specMessage(t, m.saved)
			if err != nil {
				return nil, "", err
			}
			switch err := r.Sealer.Verify(ctx, msg, m.saved.Seal); {
			case err == nil:
			case errors.Is(err, seal.ErrNotVerified):
				why := fmt.Sprintf("saved spec of %s tampered with (%v): not inserted; the ledger's spec was changed or written by someone else: check who can write the ledger (autoheal preflight)", t, err)
				if m.saved.Seal.IsZero() {
					why += "; a spec saved by a version before seals has none: see docs/security.md"
				}
				return nil, why, nil
			default:
				return nil, "", err
			}
		}
	}
	return warnings, "", nil
}
