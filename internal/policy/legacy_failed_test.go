package policy

import (
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

// A legacy recovery in phase failed whose delete was sent and whose answer
// is unknown, reading NOT FOUND, follows the evidence rule of the current
// phases: it waits for an audit entry before it creates, and a person's
// delete in evidence closes it; one read never decides.
func TestLegacyFailedNotFoundWaitsForEvidence(t *testing.T) {
	cfg := DefaultConfig()
	spec := CleanSpec(optedIn("TERMINATED", ""))
	failed := func() Recovery {
		r := recovery(PhaseFailed, t0.Add(-time.Minute), spec)
		r.DeleteSent, r.LeaseUntil = true, time.Time{} // sent, never answered
		return *r
	}
	gone := Observation{}

	got, eff := Advance(failed(), gone, StepResult{Effect: EffectGet}, t0, cfg)
	if eff.Kind == EffectCreate || !got.Unfinished() || got.GoneAt.IsZero() {
		t.Fatalf("first NOT FOUND: phase %s effect %q GoneAt %v; want waiting for the evidence, no create", got.Phase, eff.Kind, got.GoneAt)
	}
	if want := t0.Add(evidenceWait(cfg)); !got.NextLookAt.Equal(want) {
		t.Fatalf("next look %v, want %v (the evidence wait)", got.NextLookAt, want)
	}
	got, eff = Advance(got, gone, StepResult{Effect: EffectGet}, t0.Add(evidenceWait(cfg)), cfg)
	if eff.Kind != EffectCreate {
		t.Fatalf("after the evidence wait: phase %s effect %q, want a create", got.Phase, eff.Kind)
	}

	rec := failed()
	rec.Evidence = []Evidence{{InsertID: "x1", Principal: "alice@example.com", Time: t0.Add(-30 * time.Second), Change: events.ChangeDeleteNode, Last: true}}
	cfg.Actor = "autoheal@acme-ml.iam.gserviceaccount.com" // a delete whose operation we never learned is then attributable
	got, eff = Advance(rec, gone, StepResult{Effect: EffectGet}, t0, cfg)
	if eff.Kind == EffectCreate || got.Phase != PhaseClosed {
		t.Fatalf("a person's delete in evidence: phase %s effect %q, want closed", got.Phase, eff.Kind)
	}
}
