package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/events"
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

// A recovery closed on a made node that is not labelled ours (READY, so
// the close loses nothing) says what the conclusion rests on: the person's
// create when it is in evidence, else that it is one read of the label
// (rule 14: a conclusion about who did what names its evidence). Both
// phases that close on it: creating (the create's answer lost) and created.
func TestForeignReadyNodeCloseNamesItsEvidence(t *testing.T) {
	cfg := DefaultConfig()
	alice := Evidence{InsertID: "a-1", Change: events.ChangeCreateNode, Principal: "alice@example.com", Time: t0.Add(-5 * time.Minute), OperationID: "op-alice"}
	for _, phase := range []Phase{PhaseCreating, PhaseCreated} {
		for _, tc := range []struct {
			name     string
			evidence []Evidence
			want     string
		}{
			{"a person's create in evidence", []Evidence{alice}, "created by alice@example.com"},
			{"no evidence", nil, "no person's create in evidence: judged on one read"},
		} {
			t.Run(string(phase)+"/"+tc.name, func(t *testing.T) {
				rec := *recovery(phase, t0.Add(-time.Minute), CleanSpec(optedIn("TERMINATED", "")))
				rec.Evidence = tc.evidence
				got, eff := Advance(rec, Observation{Node: unlabelled("READY", "HEALTHY")}, StepResult{Effect: EffectGet}, t0, cfg)
				if got.Phase != PhaseClosed || eff.Kind != EffectNone {
					t.Fatalf("phase %s, effect %q; want closed, nothing done", got.Phase, eff.Kind)
				}
				if !strings.Contains(got.LastError, tc.want) {
					t.Errorf("close reason %q, want it to say %q", got.LastError, tc.want)
				}
			})
		}
	}
}
