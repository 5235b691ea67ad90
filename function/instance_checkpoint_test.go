package function_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// instanceFunction is the function with the instance path on, against the
// simulated Compute Engine's fleet file (zone us-central1-c), env added to
// fleetEnv's, on the clock *clk.
func instanceFunction(t *testing.T, env map[string]string, clk *time.Time) (*computefake.Server, *function.Function) {
	t.Helper()
	e := fleetEnv()
	for k, v := range env {
		e[k] = v
	}
	fn, fake := newInstanceFunction(t, func() time.Time { return *clk }, e)
	return fake, fn
}

// TestInstanceCheckpointTimeoutSetAndUnset: with AUTOHEAL_MAINTENANCE=early
// and AUTOHEAL_CHECKPOINT_TIMEOUT=5m, a TPU7x VM whose guest reports its
// checkpoint 6 minutes after the notice is left to Compute Engine (no
// performMaintenance); unset (30m), the same report starts it early.
func TestInstanceCheckpointTimeoutSetAndUnset(t *testing.T) {
	for _, set := range []bool{true, false} {
		t.Run(map[bool]string{true: "set", false: "unset"}[set], func(t *testing.T) {
			clk := time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)
			env := map[string]string{"AUTOHEAL_MAINTENANCE": "early"}
			if set {
				env["AUTOHEAL_CHECKPOINT_TIMEOUT"] = "5m"
			}
			fake, fn := instanceFunction(t, env, &clk)
			sweep := func() {
				t.Helper()
				if err := fn.HandleMessage(context.Background(), []byte(events.SweepMessage)); err != nil {
					t.Fatal(err)
				}
			}
			vm := computefake.InstanceName("acme-ml", "us-central1-c", "trainer-a")
			window := clk.Add(7 * 24 * time.Hour)
			if _, err := fake.ScheduleMaintenance(vm, computefake.Maintenance{WindowStart: window, WindowEnd: window.Add(4 * time.Hour), CanReschedule: true}); err != nil {
				t.Fatal(err)
			}
			sweep() // prepare
			for range 6 {
				clk = clk.Add(time.Minute)
				sweep()
			}
			b, _ := json.Marshal(remediate.CheckpointReport{Notice: window.Format(time.RFC3339), Checkpoint: "gs://acme-ml-ckpt/step-10", Time: clk.Format(time.RFC3339)})
			if err := fake.SetGuestAttribute(vm, remediate.CheckpointNamespace, remediate.CheckpointKey, string(b)); err != nil {
				t.Fatal(err)
			}
			clk = clk.Add(time.Minute)
			sweep()
			want := 1
			if set {
				want = 0
			}
			if got := fake.Count("instances.setMetadata", vm); got != 1 {
				t.Errorf("%d setMetadata, want 1 (the notice)", got)
			}
			if got := fake.Count("instances.performMaintenance", vm); got != want {
				t.Errorf("%d performMaintenance, want %d", got, want)
			}
		})
	}
}
