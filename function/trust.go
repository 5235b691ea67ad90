package function

// Trust wiring (#19): the seal over every saved spec (Cloud KMS with
// AUTOHEAL_MAC_KEY) and the service-account guard before a delete
// (AUTOHEAL_NODE_SERVICE_ACCOUNTS and iam.serviceAccounts.actAs, asked of
// IAM with testIamPermissions and cached).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	kms "cloud.google.com/go/kms/apiv1"
	"google.golang.org/api/googleapi"
	iam "google.golang.org/api/iam/v1"
	"google.golang.org/api/option"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/seal"
)

// trustDeps are the dependencies of the trust wiring a test may replace.
type trustDeps struct {
	sealer seal.Sealer
	iam    []option.ClientOption
}

// WithSealer seals specs with s instead of the Cloud KMS key
// AUTOHEAL_MAC_KEY names (tests, `autoheal serve`: seal.LocalKeys).
func WithSealer(s seal.Sealer) Option { return func(d *deps) { d.trust.sealer = s } }

// WithIAMOptions passes client options to the IAM client that asks
// testIamPermissions.
func WithIAMOptions(opts ...option.ClientOption) Option {
	return func(d *deps) { d.trust.iam = append(d.trust.iam, opts...) }
}

// ActAsCacheTTL is how long an answer of testIamPermissions is reused: a
// sweep checks every recreate's account, and a grant changes rarely.
const ActAsCacheTTL = 5 * time.Minute

// wireTrust sets the engine's Sealer and service-account guard.
func (f *Function) wireTrust(ctx context.Context, cfg Config, d *deps, rd *remediate.Deps) error {
	rd.TrustUnsealedSpecs = cfg.TrustUnsealedSpecs
	switch {
	case d.trust.sealer != nil:
		rd.Sealer = d.trust.sealer
	case cfg.MACKey != "":
		c, err := kms.NewKeyManagementClient(ctx)
		if err != nil {
			return fmt.Errorf("%s_MAC_KEY: cloud kms client: %w", EnvPrefix, err)
		}
		f.closers = append(f.closers, c.Close)
		k, err := seal.NewKMS(c, cfg.MACKey, 0)
		if err != nil {
			return fmt.Errorf("%s_MAC_KEY: %w", EnvPrefix, err)
		}
		rd.Sealer = k
	}
	// Without AUTOHEAL_MAC_KEY (local runs; Terraform always sets it)
	// specs are neither sealed nor verified, and without
	// AUTOHEAL_NODE_SERVICE_ACCOUNTS no account is checked: docs/security.md.
	if len(cfg.NodeServiceAccounts) == 0 {
		return nil
	}
	svc, err := iam.NewService(ctx, d.trust.iam...)
	if err != nil {
		return fmt.Errorf("iam client: %w", err)
	}
	actAs := NewCachedActAs(IAMActAs{Service: svc}, ActAsCacheTTL, f.now)
	rd.Accounts = &remediate.AccountGuard{Allowed: cfg.NodeServiceAccounts, ActAs: actAs}
	return nil
}

// PermissionActAs is what a create as a service account needs.
const PermissionActAs = "iam.serviceAccounts.actAs"

// IAMActAs asks IAM whether the caller (the function's account) holds
// iam.serviceAccounts.actAs on a service account: testIamPermissions on
// it. The account not existing is a no; any other failure is no answer.
type IAMActAs struct{ Service *iam.Service }

// CanActAs implements remediate.ActAsChecker.
func (c IAMActAs) CanActAs(ctx context.Context, email string) (bool, error) {
	req := &iam.TestIamPermissionsRequest{Permissions: []string{PermissionActAs}}
	resp, err := c.Service.Projects.ServiceAccounts.TestIamPermissions("projects/-/serviceAccounts/"+email, req).Context(ctx).Do() // rest: iam.projects.serviceAccounts.testIamPermissions
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Code == http.StatusNotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return slices.Contains(resp.Permissions, PermissionActAs), nil
}

// CachedActAs reuses each account's answer for a TTL; an error is never
// cached.
type CachedActAs struct {
	next remediate.ActAsChecker
	ttl  time.Duration
	now  func() time.Time

	mu      sync.Mutex
	answers map[string]cachedAnswer
}

type cachedAnswer struct {
	ok    bool
	until time.Time
}

// NewCachedActAs caches next's answers for ttl on the clock now.
func NewCachedActAs(next remediate.ActAsChecker, ttl time.Duration, now func() time.Time) *CachedActAs {
	return &CachedActAs{next: next, ttl: ttl, now: now, answers: map[string]cachedAnswer{}}
}

// CanActAs implements remediate.ActAsChecker.
func (c *CachedActAs) CanActAs(ctx context.Context, email string) (bool, error) {
	key := strings.ToLower(email)
	c.mu.Lock()
	a, ok := c.answers[key]
	c.mu.Unlock()
	if ok && c.now().Before(a.until) {
		return a.ok, nil
	}
	yes, err := c.next.CanActAs(ctx, email)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	c.answers[key] = cachedAnswer{ok: yes, until: c.now().Add(c.ttl)}
	c.mu.Unlock()
	return yes, nil
}
