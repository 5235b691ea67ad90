package policy

import (
	"testing"
	"time"
)

// TestCreatingNodeNotJudged: a create of ours whose answer was lost, then a
// read of the node CREATING without our generation label (a person
// relabelled it, or the label comes later), does not close the recovery as
// someone else's node (seed 2879 of the swarm); the same node READY does.
func TestCreatingNodeNotJudged(t *testing.T) {
	cfg := DefaultConfig()
	now := t0
	rec := *recovery(PhaseCreating, t0.Add(-time.Minute), CleanSpec(optedIn("TERMINATED", "")))
	got, _ := Advance(rec, Observation{Node: unlabelled("CREATING", "")}, StepResult{Effect: EffectGet}, now, cfg)
	if got.Phase == PhaseClosed {
		t.Fatalf("closed on one read of a CREATING node: %s", got.LastError)
	}
	got, _ = Advance(rec, Observation{Node: unlabelled("READY", "HEALTHY")}, StepResult{Effect: EffectGet}, now, cfg)
	if got.Phase != PhaseClosed {
		t.Fatalf("phase %s, want closed for a READY node without our label", got.Phase)
	}
}
