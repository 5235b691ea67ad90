package policy

import (
	"strings"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

// Once a recovery's delete is sent it owns every outcome: a read showing
// the node stopped, healthy or opted out does not close it while the delete
// has no verdict (seeds 54, 85, 562 of the swarm: the delete landed after
// the close and the node was lost), and a person's recreate whose node our
// delete removed is ours to create again (seed 1021).
func TestAdvanceDeleteVerdict(t *testing.T) {
	now := time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)
	cfg := DefaultConfig()
	const name = "projects/p/locations/z/nodes/n"
	const op = "projects/p/locations/z/operations/op-1"
	node := func(state string, id int64, labels map[string]string) *tpu.Node {
		n := &tpu.Node{Name: name, Id: id, State: state, AcceleratorType: "v4-8", RuntimeVersion: "r", Labels: labels}
		if state == "READY" {
			n.Health = "HEALTHY"
		}
		return n
	}
	in := map[string]string{"tpu-autoheal": "enabled"}
	out := map[string]string{"team": "someone-else"}
	spec := CleanSpec(node("TERMINATED", 7, in))
	base := func(mod func(*Recovery)) Recovery {
		r := Recovery{Node: name, Action: ActionRecreate, Phase: PhaseDeleting, Generation: 1, StartedAt: now.Add(-5 * time.Minute),
			Spec: spec, NodeID: 7, DeleteSent: true}
		mod(&r)
		return r
	}
	unanswered := func(r *Recovery) { r.DeleteUnanswered = true }
	answered := func(r *Recovery) { r.DeleteAnswered, r.SentOps = true, []string{op} }
	person := func(c events.Change, at time.Duration) Evidence {
		return Evidence{InsertID: "e-" + string(c), Change: c, Principal: "alice@example.com", Time: now.Add(-5*time.Minute + at), OperationID: "op-p-" + string(c)}
	}
	for _, tc := range []struct {
		name      string
		rec       Recovery
		node      *tpu.Node
		wantPhase Phase
		wantEff   EffectKind
		reason    string // substring of LastError
	}{
		{"delete's answer lost, node STOPPED: looked at again, not closed", base(unanswered), node("STOPPED", 7, in), PhaseDeleting, EffectNone, "no verdict"},
		{"delete's answer lost, node READY: looked at again, not closed", base(unanswered), node("READY", 7, in), PhaseDeleting, EffectNone, "no verdict"},
		{"delete's answer lost, node opted out: looked at again, never deleted again", base(unanswered), node("TERMINATED", 7, out), PhaseDeleting, EffectNone, "opted out"},
		{"delete's answer lost, another node READY: looked at again, never deleted", base(unanswered), node("READY", 9, out), PhaseDeleting, EffectNone, "another id"},
		{"another node DELETING (our delete on it): waited for, not closed", base(answered), node("DELETING", 9, out), PhaseDeleting, EffectNone, "DELETING"},
		{"delete finished, node there opted out: closed, not deleted again", base(answered), node("TERMINATED", 7, out), PhaseClosed, EffectNone, "opted out"},
		{"delete finished, node STOPPED: closed", base(answered), node("STOPPED", 7, in), PhaseClosed, EffectNone, "did not happen"},
		{"person deleted and created it again, then NOT FOUND: our delete removed theirs, create", base(func(r *Recovery) {
			answered(r)
			r.Evidence = []Evidence{person(events.ChangeDeleteNode, time.Minute), person(events.ChangeCreateNode, time.Minute)}
		}), nil, PhaseCreating, EffectCreate, ""},
		{"person created it again, then deleted it: closed naming them", base(func(r *Recovery) {
			answered(r)
			r.Evidence = []Evidence{person(events.ChangeDeleteNode, time.Minute), person(events.ChangeCreateNode, time.Minute), person(events.ChangeDeleteNode, 2*time.Minute)}
		}), nil, PhaseClosed, EffectNone, "alice@example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, eff := Advance(tc.rec, Observation{Node: tc.node}, StepResult{Effect: EffectGet}, now, cfg)
			if got.Phase != tc.wantPhase || eff.Kind != tc.wantEff {
				t.Fatalf("phase %s effect %q (%s); want %s %q", got.Phase, eff.Kind, got.LastError, tc.wantPhase, tc.wantEff)
			}
			if !strings.Contains(got.LastError, tc.reason) {
				t.Errorf("LastError %q, want it to contain %q", got.LastError, tc.reason)
			}
		})
	}
}

// TestDecideDeleteSent: decide never closes a recovery whose delete has no
// verdict on one read; after the node was seen gone (creating) it does.
func TestDecideDeleteSent(t *testing.T) {
	cfg := DefaultConfig()
	spec := CleanSpec(optedIn("TERMINATED", ""))
	sent := func(p Phase) *Recovery {
		r := recovery(p, t0.Add(-time.Minute), spec)
		r.DeleteSent, r.DeleteOp = true, "projects/acme-ml/locations/us-central2-b/operations/op-1"
		return r
	}
	for _, tc := range []struct {
		name string
		node *tpu.Node
		rec  *Recovery
		want Action
	}{
		{"deleting, node STOPPED: the recovery goes on", withLabel(optedIn("STOPPED", ""), "x", "y"), sent(PhaseDeleting), ActionRecreate},
		{"deleting, node READY and HEALTHY: the recovery goes on", optedIn("READY", "HEALTHY"), sent(PhaseDeleting), ActionRecreate},
		{"deleting, node opted out: the recovery goes on", unlabelled("TERMINATED", ""), sent(PhaseDeleting), ActionRecreate},
		{"saved with its delete sent, node opted out: the recovery goes on", unlabelled("READY", "HEALTHY"), sent(PhaseSaved), ActionRecreate},
		{"saved, delete never sent, node STOPPED: closed", optedIn("STOPPED", ""), recovery(PhaseSaved, t0.Add(-time.Minute), spec), ActionRecord},
		{"creating, node opted out: closed", unlabelled("READY", "HEALTHY"), sent(PhaseCreating), ActionRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decide(sweepEvent(), Observed{Node: tc.node}, History{Recovery: tc.rec}, t0, cfg)
			if d.Action != tc.want {
				t.Errorf("decided %s (%s), want %s", d.Action, d.Reason, tc.want)
			}
		})
	}
}
