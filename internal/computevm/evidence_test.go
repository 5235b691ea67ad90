package computevm_test

import (
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// TestAnOldHostErrorReplayedAfterAPersonActedDoesNothing: a host error is
// recovered (one start), a person then stops or deletes the VM and that
// entry never reaches the function; the old host error, redelivered, and
// every later sweep do nothing: the system event is older than the VM's
// last start (stop) or than when it was last seen running (delete).
func TestAnOldHostErrorReplayedAfterAPersonActedDoesNothing(t *testing.T) {
	for _, what := range []string{"stop", "delete"} {
		t.Run(what, func(t *testing.T) {
			e := newEnv(t)
			vm := name("reserved-1") // automaticRestart false, no MIG
			e.sweep(vm)
			old, err := e.fake.HostError(vm)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.deliver(old); got != "start" {
				t.Fatalf("host error: %s, want start", got)
			}
			e.clock.add(computefake.DefaultStartTime + time.Minute)
			e.sweep(vm) // RUNNING again: its spec saved with the new start
			e.clock.add(time.Hour)
			var lost []computefake.LogEntry // the person's entries, never delivered
			if what == "stop" {
				lost, err = e.fake.PersonStop(vm, "alice@acme.example")
			} else {
				lost, err = e.fake.PersonDelete(vm, "alice@acme.example")
			}
			if err != nil || len(lost) == 0 {
				t.Fatal(lost, err)
			}
			e.clock.add(5 * time.Minute)
			if got := e.deliver(old); vmpolicy.Action(got).Mutates() {
				t.Errorf("the old host error redelivered after a person's %s: %s, want nothing", what, got)
			}
			for range 3 {
				e.clock.add(10 * time.Minute)
				if got := e.sweep(vm); vmpolicy.Action(got).Mutates() {
					t.Errorf("swept after a person's %s: %s, want nothing", what, got)
				}
			}
			if got := e.calls("instances.start") + e.calls("instances.insert"); got != 1 {
				t.Errorf("%d starts and inserts, want 1 (the first host error's start)", got)
			}
		})
	}
}
