package policy

import (
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"
)

// A paused look that sees our create finished (the node READY with our
// generation label) keeps that in the ledger though it claims nothing; the
// node NOT FOUND after the resume is then a person's delete, never a second
// create (seed 802 of the swarm: the delete's audit entry was lost and the
// node was created twice).
func TestPausedLookKeepsCreateSeenFinished(t *testing.T) {
	cfg := DefaultConfig()
	spec := CleanSpec(optedIn("TERMINATED", ""))
	pause := &Pause{Scope: PauseZone, Project: "acme-ml", Zone: "us-central2-b", Since: t0.Add(-time.Minute), By: "alice@example.com"}
	creating := func() *Recovery {
		r := recovery(PhaseCreating, t0.Add(-time.Minute), spec)
		r.DeleteSent, r.CreateSentAt = true, t0.Add(-10*time.Minute)
		return r
	}
	ours := func(state, health string) *tpu.Node { return withLabel(optedIn(state, health), GenerationLabel, "2") }
	for _, tc := range []struct {
		name string
		node *tpu.Node
		rec  *Recovery
		keep bool
	}{
		{"creating, READY with our label: kept", ours("READY", "HEALTHY"), creating(), true},
		{"creating, CREATING with our label: nothing", ours("CREATING", ""), creating(), false},
		{"creating, READY without our label: nothing", optedIn("READY", "HEALTHY"), creating(), false},
		{"creating, NOT FOUND: nothing", nil, creating(), false},
		{"kept already: nothing", ours("READY", "HEALTHY"), func() *Recovery {
			r := creating()
			r.Evidence = []Evidence{*seenReady(r, ours("READY", "HEALTHY"), t0)}
			return r
		}(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(sweepEvent(), Observed{Node: tc.node}, History{Recovery: tc.rec, Pause: pause}, t0, cfg)
			if d.Claim || d.Action != ActionSkip && d.Action != ActionRecord {
				t.Fatalf("paused: decided %s claim %v (%s)", d.Action, d.Claim, d.Reason)
			}
			if (d.SeenReady != nil) != tc.keep {
				t.Fatalf("SeenReady %+v, want kept %v", d.SeenReady, tc.keep)
			}
		})
	}

	// After the resume: NOT FOUND in phase creating.
	rec := creating()
	rec.LeaseUntil = time.Time{}
	gone := Observation{}
	if _, eff := Advance(*rec, gone, StepResult{Effect: EffectGet}, t0, cfg); eff.Kind != EffectCreate {
		t.Fatalf("create not seen finished: effect %q, want a create again", eff.Kind)
	}
	rec.Evidence = []Evidence{*seenReady(rec, ours("READY", "HEALTHY"), t0.Add(-5*time.Minute))}
	got, eff := Advance(*rec, gone, StepResult{Effect: EffectGet}, t0, cfg)
	if eff.Kind == EffectCreate || !got.Unfinished() || got.GoneAt.IsZero() {
		t.Fatalf("create seen finished: phase %s effect %q GoneAt %v; want waiting for the evidence, no create", got.Phase, eff.Kind, got.GoneAt)
	}
	got, eff = Advance(got, gone, StepResult{Effect: EffectGet}, t0.Add(evidenceWait(cfg)+time.Minute), cfg)
	if eff.Kind == EffectCreate || got.Phase != PhaseAbandoned {
		t.Fatalf("no one's delete in evidence: phase %s effect %q; want abandoned, never created twice", got.Phase, eff.Kind)
	}
}
