package remediate_test

import (
	"context"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// A sweep with Follow takes a recovery's later steps itself, on the wall
// clock, instead of leaving one step per sweep; without it the sweep
// returns after its first step.
func TestSweepFollowsARecoveryToItsEnd(t *testing.T) {
	for _, tc := range []struct {
		name      string
		follow    time.Duration
		wantState string
	}{
		{name: "following sweep finishes the recreate", follow: time.Minute, wantState: "READY"},
		{name: "sweep without follow leaves the delete running", follow: 0, wantState: "DELETING"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := tpufake.New(tpufake.Fleet{Nodes: []*tpu.Node{sweptNode("w", "TERMINATED", "")}},
				tpufake.WithOperationDelay("delete", 100*time.Millisecond), tpufake.WithOperationDelay("create", 100*time.Millisecond))
			t.Cleanup(fake.Close)
			svc, err := fake.Service(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			cfg := remediate.DefaultConfig()
			cfg.StartupScript = script
			cfg.LookAgain = 50 * time.Millisecond
			mem := ledger.NewMemory()
			h := remediate.Filled(&remediate.Handler{TPU: tpuapi.New(svc), Store: mem, Lease: mem, Histories: mem, Recorder: &records{}, Config: cfg, Holder: "test"})
			if _, err := h.Sweep(context.Background(), remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone}, Follow: tc.follow}); err != nil {
				t.Fatalf("Sweep: %v", err)
			}
			var got []string
			for _, n := range fake.Fleet().Nodes {
				got = append(got, n.State)
			}
			if len(got) != 1 || got[0] != tc.wantState {
				t.Errorf("node after the sweep: %v, want [%s]", got, tc.wantState)
			}
		})
	}
}
