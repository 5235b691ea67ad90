package policy

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	tpu "google.golang.org/api/tpu/v2"
)

// An error no adapter classified (a fake's bare error, a broken
// connection) reaches Advance as it is and is read as transient: Advance
// does with it exactly what it does with the same error classified
// transient, at every step. No wrapper is needed in front of Advance (the
// interpreter had one, remediate's classified, which changed nothing).
func TestAdvanceReadsAnUnclassifiedErrorAsTransient(t *testing.T) {
	now := time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)
	cfg := DefaultConfig()
	const name = "projects/p/locations/z/nodes/n"
	spec := &tpu.Node{Name: name, AcceleratorType: "v4-8", RuntimeVersion: "r", Labels: map[string]string{"tpu-autoheal": "enabled"}}
	bare := errors.New("read tcp 10.0.0.2:443: connection reset by peer")
	for _, tc := range []struct {
		name  string
		phase Phase
		res   StepResult
		// failed: the step is a failure (LastError); a delete that
		// failed may still have taken effect: deleting, no failure yet.
		failed bool
	}{
		{"get", PhaseClaimed, StepResult{Effect: EffectGet}, true},
		{"delete", PhaseSaved, StepResult{Effect: EffectDelete}, false},
		{"create", PhaseCreating, StepResult{Effect: EffectCreate}, true},
		{"poll of the create", PhaseCreating, StepResult{Effect: EffectPoll}, true},
		{"create's operation ended in error", PhaseCreating, StepResult{Effect: EffectPoll, Done: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := Recovery{Node: name, Action: ActionRecreate, Phase: tc.phase, Generation: 1, StartedAt: now.Add(-time.Minute),
				Spec: spec, NodeID: 7, CreateOp: "projects/p/locations/z/operations/c-1"}
			obs := Observation{Node: &tpu.Node{Name: name, Id: 7, State: "TERMINATED", Labels: spec.Labels}}
			withBare, withKind := tc.res, tc.res
			withBare.Err, withKind.Err = bare, &Error{Kind: KindTransient, Err: bare}
			gotRec, gotEff := Advance(rec, obs, withBare, now, cfg)
			wantRec, wantEff := Advance(rec, obs, withKind, now, cfg)
			if diff := cmp.Diff(wantRec, gotRec, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("recovery after a bare error (-classified transient +bare):\n%s", diff)
			}
			if diff := cmp.Diff(wantEff, gotEff, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("effect after a bare error (-classified transient +bare):\n%s", diff)
			}
			if failed := gotRec.LastError != ""; failed != tc.failed {
				t.Errorf("failure recorded %v (LastError %q, phase %s), want %v", failed, gotRec.LastError, gotRec.Phase, tc.failed)
			}
		})
	}
}
