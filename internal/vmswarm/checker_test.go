package vmswarm

import (
	"context"
	"fmt"
	"strings"
	"testing"

	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/computevm"
)

// The checker's own tests: an engine broken on purpose must break the
// invariants it breaks, whatever the seed draws.

// violations runs seeds 1..n with opts and returns every violation.
func violations(t *testing.T, n int, opts Options) []string {
	t.Helper()
	var out []string
	for seed := uint64(1); seed <= uint64(n); seed++ {
		out = append(out, Run(context.Background(), seed, opts).Violations...)
	}
	return out
}

func anyContains(vs []string, sub string) bool {
	for _, v := range vs {
		if strings.Contains(v, sub) {
			return true
		}
	}
	return false
}

// TestCheckerCatchesAnEngineThatStartsEverything: an engine that starts
// every TERMINATED TPU VM after each sweep starts stopped-by-alice, which
// nothing broke, and the VMs people stop.
func TestCheckerCatchesAnEngineThatStartsEverything(t *testing.T) {
	opts := options(t, "default")
	n := 0
	opts.afterSweep = func(ctx context.Context, c *computevm.Client) {
		for _, vm := range TPUVMs {
			ref, err := computevm.ParseRef(vm)
			if err != nil {
				t.Fatal(err)
			}
			if in, err := c.GetInstance(ctx, ref); err == nil && in.Status == "TERMINATED" {
				n++
				_, _ = c.Start(ctx, ref, computevm.RequestID(fmt.Sprint("sabotage", n)))
			}
		}
	}
	vs := violations(t, 4, opts)
	for _, want := range []string{"stopped-by-alice: our start", "before the platform ever broke its slice"} {
		if !anyContains(vs, want) {
			t.Errorf("no violation %q among %d: %v", want, len(vs), vs)
		}
	}
}

// refusing is an engine whose starts, inserts and recreateInstances are
// all refused.
type refusing struct{ computevm.Instances }

func (refusing) Start(context.Context, computevm.Ref, string) (string, error) {
	return "", fmt.Errorf("sabotage: no start")
}

func (refusing) Insert(context.Context, computevm.Ref, *compute.Instance, string) (string, error) {
	return "", fmt.Errorf("sabotage: no insert")
}

func (refusing) RecreateInstances(context.Context, string, []string, string) (string, error) {
	return "", fmt.Errorf("sabotage: no recreateInstances")
}

// TestCheckerCatchesAnEngineThatNeverActs: with every start, insert and
// recreateInstances refused, a VM the platform broke and nothing repairs
// is lost.
func TestCheckerCatchesAnEngineThatNeverActs(t *testing.T) {
	opts := options(t, "default")
	opts.engine = func(i computevm.Instances) computevm.Instances { return refusing{i} }
	if vs := violations(t, 4, opts); !anyContains(vs, "lost: broken by the platform") {
		t.Errorf("no VM lost among %d violations: %v", len(vs), vs)
	}
}
