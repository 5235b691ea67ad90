package function_test

import (
	"context"
	"strings"
	"testing"
	"time"

	iam "google.golang.org/api/iam/v1"
	"google.golang.org/api/option"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/preflight/iamfake"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/seal"
)

const trainer = "trainer@acme-ml.iam.gserviceaccount.com"

func newIAMFake(t *testing.T, held map[string][]string) *iamfake.Server {
	t.Helper()
	s := iamfake.New()
	t.Cleanup(s.Close)
	for email, perms := range held {
		s.Held["projects/-/serviceAccounts/"+email] = perms
	}
	return s
}

func iamOptions(s *iamfake.Server) []option.ClientOption {
	return []option.ClientOption{option.WithEndpoint(s.URL), option.WithoutAuthentication()}
}

func TestIAMActAsAsksTestIamPermissionsAndCaches(t *testing.T) {
	fake := newIAMFake(t, map[string][]string{trainer: {function.PermissionActAs}, "other@acme-ml.iam.gserviceaccount.com": {}})
	svc, err := iam.NewService(context.Background(), iamOptions(fake)...)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)
	c := function.NewCachedActAs(function.IAMActAs{Service: svc}, time.Minute, func() time.Time { return now })
	ctx := context.Background()
	for _, tc := range []struct {
		email string
		want  bool
	}{
		{trainer, true},
		{"other@acme-ml.iam.gserviceaccount.com", false},
		{"gone@acme-ml.iam.gserviceaccount.com", false}, // NOT FOUND is a no
		{trainer, true}, // cached
	} {
		got, err := c.CanActAs(ctx, tc.email)
		if err != nil || got != tc.want {
			t.Errorf("CanActAs(%s) = %v, %v; want %v", tc.email, got, err, tc.want)
		}
	}
	if n := len(fake.Requests()); n != 3 {
		t.Errorf("requests = %d (%v), want 3: the second question about %s answered from the cache", n, fake.Requests(), trainer)
	}
	now = now.Add(time.Minute)
	if _, err := c.CanActAs(ctx, trainer); err != nil {
		t.Fatal(err)
	}
	if n := len(fake.Requests()); n != 4 {
		t.Errorf("requests after the TTL = %d, want 4", n)
	}
}

// The deployed wiring: AUTOHEAL_NODE_SERVICE_ACCOUNTS and IAM's answer
// guard the delete; a local Sealer seals the saved spec.
func TestFunctionGuardsTheNodeServiceAccount(t *testing.T) {
	for _, tc := range []struct {
		name    string
		held    []string
		deletes int
		reason  string
	}{
		{"actAs held: recreated", []string{function.PermissionActAs}, 1, ""},
		{"actAs missing: skipped before the delete", nil, 0, "cannot act as " + trainer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, tc2 := newFleetTPU(t)
			env := fleetEnv()
			env["AUTOHEAL_NODE_SERVICE_ACCOUNTS"] = trainer
			cfg, err := load(t, env)
			if err != nil {
				t.Fatal(err)
			}
			iamFake := newIAMFake(t, map[string][]string{trainer: tc.held})
			keys, _ := seal.NewLocalKeys("t/1", map[string][]byte{"t/1": []byte(strings.Repeat("x", 32))})
			store := ledger.NewMemory()
			recs := &sliceRecorder{}
			clk := eventTime.Add(time.Minute)
			fn, err := function.New(context.Background(), cfg,
				function.WithDiagnostics(&syncBuffer{}), function.WithTPU(tc2), function.WithStore(store),
				function.WithRecorder(recs), function.WithClock(func() time.Time { return clk }),
				function.WithIAMOptions(iamOptions(iamFake)...), function.WithSealer(keys))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fn.Close() })
			if err := fn.HandleMessage(context.Background(), pushBody(readTestdata(t, "terminate-maintenance.json"))); err != nil {
				t.Fatal(err)
			}
			if got := fake.Count("nodes.delete", ""); got != tc.deletes {
				t.Errorf("deletes = %d, want %d", got, tc.deletes)
			}
			all := recs.records()
			last := all[len(all)-1]
			if tc.reason == "" {
				u, _ := store.Unfinished(context.Background())
				if len(u) != 1 || u[0].SpecSeal.KeyVersion != "t/1" {
					t.Errorf("unfinished = %+v; want one recovery whose spec is sealed with t/1", u)
				}
				return
			}
			if last.Action != remediate.ActionSkip || !strings.Contains(last.Reason, tc.reason) {
				t.Errorf("record %s %q; want skip, %q", last.Action, last.Reason, tc.reason)
			}
		})
	}
}
