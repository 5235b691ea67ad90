package remediate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/api/googleapi"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/googleerr"
)

// TestAdvance has one row per transition of the recovery state machine.
func TestAdvance(t *testing.T) {
	now := time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)
	cfg := DefaultConfig()
	const name = "projects/p/locations/z/nodes/n"
	const op = "projects/p/locations/z/operations/op-1"
	node := func(state string, labels ...string) *tpu.Node {
		n := &tpu.Node{Name: name, Id: 7, State: state, AcceleratorType: "v4-8", RuntimeVersion: "r",
			Labels: map[string]string{"tpu-autoheal": "enabled"}}
		if state == "READY" {
			n.Health = "HEALTHY"
		}
		for i := 0; i+1 < len(labels); i += 2 {
			n.Labels[labels[i]] = labels[i+1]
		}
		return n
	}
	ours := func(state string) *tpu.Node { n := node(state, GenerationLabel, "1"); n.Id = 8; return n }
	spec := CleanSpec(node("TERMINATED"))
	rec := func(p Phase, mod ...func(*Recovery)) Recovery {
		r := Recovery{Node: name, Action: ActionRecreate, Phase: p, Generation: 1, StartedAt: now.Add(-time.Minute)}
		if p != PhaseClaimed {
			r.Spec, r.NodeID = spec, 7
		}
		for _, m := range mod {
			m(&r)
		}
		return r
	}
	withDeleteOp := func(r *Recovery) { r.DeleteOp = op }
	// answered: the delete was sent and answered with op (not ambiguous).
	answered := func(r *Recovery) { r.DeleteSent, r.DeleteAnswered, r.SentOps = true, true, []string{op} }
	// unanswered: the delete was sent and its answer lost.
	unanswered := func(r *Recovery) { r.DeleteSent, r.DeleteUnanswered = true, true }
	// kept adds an admin-activity entry of a node delete by principal
	// through operation opName, at when.
	kept := func(principal, opName string, when time.Time) func(*Recovery) {
		return func(r *Recovery) {
			r.Evidence = append(r.Evidence, Evidence{InsertID: "e-" + principal, Change: events.ChangeDeleteNode, Principal: principal, Time: when, OperationID: opName, Last: true})
		}
	}
	closedNaming := func(want string) func(t *testing.T, got Recovery) {
		return func(t *testing.T, got Recovery) {
			if !strings.Contains(got.LastError, want) {
				t.Errorf("closed with %q, want it to name %q", got.LastError, want)
			}
		}
	}
	actorCfg := cfg
	actorCfg.Actor = "autoheal@acme-ops.iam.gserviceaccount.com"
	withCreateOp := func(r *Recovery) { r.CreateOp = op }
	withResetOp := func(r *Recovery) { r.ResetOp = op }
	reset := func(r *Recovery) {
		r.Action, r.QueuedResource = ActionReset, "projects/p/locations/z/queuedResources/q"
	}
	api := func(code int, msg string) error { return googleerr.FromAPI(&googleapi.Error{Code: code, Message: msg}) }
	qr := func(state string) *tpu.QueuedResource {
		return &tpu.QueuedResource{State: &tpu.QueuedResourceState{State: state}}
	}

	tests := []struct {
		name      string
		rec       Recovery
		obs       Observation
		res       StepResult
		wantPhase Phase
		wantEff   EffectKind
		wantWait  bool // NextLookAt set
		check     func(t *testing.T, got Recovery)
		actor     bool // Config.Actor set (actorCfg)
	}{
		{name: "claimed: the node is read first", rec: rec(PhaseClaimed), wantPhase: PhaseClaimed, wantEff: EffectGet},
		{name: "claimed, node still TERMINATED: spec saved with the deleting phase, then delete", rec: rec(PhaseClaimed),
			obs: Observation{Node: node("TERMINATED")}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseDeleting, wantEff: EffectDelete,
			check: func(t *testing.T, got Recovery) {
				if got.Spec == nil || got.NodeID != 7 || !got.DeleteSent {
					t.Errorf("spec %v node id %d DeleteSent %v; want the spec and id saved with the delete", got.Spec, got.NodeID, got.DeleteSent)
				}
			}},
		{name: "claimed, node recovered by itself: closed", rec: rec(PhaseClaimed), obs: Observation{Node: node("READY")}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseClosed},
		{name: "claimed, node NOT FOUND: closed, not ours", rec: rec(PhaseClaimed), res: StepResult{Effect: EffectGet}, wantPhase: PhaseClosed},
		{name: "claimed, read fails transiently: wait", rec: rec(PhaseClaimed), res: StepResult{Effect: EffectGet, Err: api(503, "")}, wantPhase: PhaseClaimed, wantWait: true},
		{name: "deleting, delete answered: operation saved, wait", rec: rec(PhaseDeleting), res: StepResult{Effect: EffectDelete, Operation: op}, wantPhase: PhaseDeleting, wantWait: true,
			check: func(t *testing.T, got Recovery) {
				if got.DeleteOp != op {
					t.Errorf("DeleteOp = %q, want %q", got.DeleteOp, op)
				}
			}},
		{name: "deleting, delete answered 404: read the node", rec: rec(PhaseDeleting), res: StepResult{Effect: EffectDelete, Err: api(404, "")}, wantPhase: PhaseDeleting, wantEff: EffectGet},
		{name: "deleting, delete refused: read the node before backing off", rec: rec(PhaseDeleting), res: StepResult{Effect: EffectDelete, Err: api(400, "FAILED_PRECONDITION")}, wantPhase: PhaseDeleting, wantEff: EffectGet, wantWait: true},
		{name: "deleting, after a refused delete the node is there: back to saved, wait", rec: rec(PhaseDeleting, func(r *Recovery) { r.NextLookAt = now.Add(time.Minute) }),
			obs: Observation{Node: node("TERMINATED")}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseSaved, wantWait: true},
		{name: "deleting without operation, node there: delete again", rec: rec(PhaseDeleting), obs: Observation{Node: node("TERMINATED")}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseDeleting, wantEff: EffectDelete},
		{name: "deleting, node NOT FOUND: deleted, create with the saved spec", rec: rec(PhaseDeleting, answered), res: StepResult{Effect: EffectGet}, wantPhase: PhaseCreating, wantEff: EffectCreate,
			check: func(t *testing.T, got Recovery) {
				if !got.CreateSentAt.Equal(now) {
					t.Errorf("CreateSentAt = %v, want %v", got.CreateSentAt, now)
				}
			}},
		{name: "deleting, answer lost, node NOT FOUND: wait for evidence before creating", rec: rec(PhaseDeleting, unanswered), res: StepResult{Effect: EffectGet}, wantPhase: PhaseDeleting, wantWait: true,
			check: func(t *testing.T, got Recovery) {
				if !got.GoneAt.Equal(now) || !got.NextLookAt.Equal(now.Add(DefaultEvidenceWait)) || got.Failures != 0 {
					t.Errorf("GoneAt %v NextLookAt %v Failures %d; want gone now, looked at again after the evidence wait, uncounted", got.GoneAt, got.NextLookAt, got.Failures)
				}
			}},
		{name: "deleting, answer lost, NOT FOUND past the evidence wait, no evidence: ours, create", rec: rec(PhaseDeleting, unanswered, func(r *Recovery) { r.GoneAt = now.Add(-DefaultEvidenceWait) }),
			res: StepResult{Effect: EffectGet}, wantPhase: PhaseCreating, wantEff: EffectCreate},
		{name: "deleting, NOT FOUND, a person's delete in evidence: closed naming it", rec: rec(PhaseDeleting, answered, kept("alice@acme.example", "projects/p/locations/z/operations/op-9", now.Add(-30*time.Second))),
			res: StepResult{Effect: EffectGet}, wantPhase: PhaseClosed, check: closedNaming("alice@acme.example")},
		{name: "deleting, NOT FOUND, the entry of our own delete's operation: ours, create", rec: rec(PhaseDeleting, answered, kept("autoheal@acme-ops.iam.gserviceaccount.com", op, now.Add(-30*time.Second))),
			res: StepResult{Effect: EffectGet}, wantPhase: PhaseCreating, wantEff: EffectCreate},
		{name: "deleting, NOT FOUND, a person's delete before the recovery started: not this one's evidence", rec: rec(PhaseDeleting, answered, kept("alice@acme.example", "op-9", now.Add(-time.Hour))),
			res: StepResult{Effect: EffectGet}, wantPhase: PhaseCreating, wantEff: EffectCreate},
		{name: "deleting, answer lost, an entry matching neither our operation nor any actor: unattributable, wait", rec: rec(PhaseDeleting, unanswered, kept("someone@acme.example", "op-9", now.Add(-30*time.Second))),
			res: StepResult{Effect: EffectGet}, wantPhase: PhaseDeleting, wantWait: true},
		{name: "deleting, answer lost, Actor set, someone else's delete in evidence: closed naming it", actor: true, rec: rec(PhaseDeleting, unanswered, kept("someone@acme.example", "op-9", now.Add(-30*time.Second))),
			res: StepResult{Effect: EffectGet}, wantPhase: PhaseClosed, check: closedNaming("someone@acme.example")},
		{name: "deleting, answer lost, Actor set, the Actor's delete in evidence, past the wait: ours, create", actor: true,
			rec: rec(PhaseDeleting, unanswered, kept("autoheal@acme-ops.iam.gserviceaccount.com", "op-9", now.Add(-30*time.Second)), func(r *Recovery) { r.GoneAt = now.Add(-DefaultEvidenceWait) }),
			res: StepResult{Effect: EffectGet}, wantPhase: PhaseCreating, wantEff: EffectCreate},
		{name: "deleting, node DELETING past the failure limit: abandoned with the spec", rec: rec(PhaseDeleting, answered, func(r *Recovery) { r.Failures = failureLimit(cfg) - 1 }),
			obs: Observation{Node: node("DELETING")}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseAbandoned},
		{name: "deleting, answered delete then a refusal, node there: stays deleting (the first may land)", rec: rec(PhaseDeleting, answered, func(r *Recovery) { r.NextLookAt = now.Add(time.Minute) }),
			obs: Observation{Node: node("TERMINATED")}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseDeleting, wantWait: true},
		{name: "deleting, node still DELETING: counted wait", rec: rec(PhaseDeleting), obs: Observation{Node: node("DELETING")}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseDeleting, wantWait: true,
			check: func(t *testing.T, got Recovery) {
				if got.Failures != 1 {
					t.Errorf("Failures = %d, want 1: a node still DELETING after its delete is counted", got.Failures)
				}
			}},
		{name: "deleting, a node of another id: closed, never deleted", rec: rec(PhaseDeleting), obs: Observation{Node: func() *tpu.Node { n := node("TERMINATED"); n.Id = 99; return n }()}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseClosed},
		{name: "deleting with operation: look at it once", rec: rec(PhaseDeleting, withDeleteOp), wantPhase: PhaseDeleting, wantEff: EffectPoll},
		{name: "deleting, operation running: wait", rec: rec(PhaseDeleting, withDeleteOp), res: StepResult{Effect: EffectPoll}, wantPhase: PhaseDeleting, wantWait: true},
		{name: "deleting, operation done: never polled again, read the node", rec: rec(PhaseDeleting, withDeleteOp), res: StepResult{Effect: EffectPoll, Done: true}, wantPhase: PhaseDeleting, wantEff: EffectGet,
			check: func(t *testing.T, got Recovery) {
				if got.DeleteOp != "" {
					t.Errorf("DeleteOp = %q, want it cleared", got.DeleteOp)
				}
			}},
		{name: "deleting, operation failed: counted, read the node (it may have taken effect)", rec: rec(PhaseDeleting, withDeleteOp, answered), res: StepResult{Effect: EffectPoll, Done: true, Err: googleerr.Operation(op, 13, "internal")}, wantPhase: PhaseDeleting, wantEff: EffectGet, wantWait: true,
			check: func(t *testing.T, got Recovery) {
				if !got.DeleteSent || got.DeleteOp != "" || got.Failures != permanentWeight {
					t.Errorf("DeleteSent %v DeleteOp %q Failures %d; want the delete still sent, its operation forgotten, the failure counted", got.DeleteSent, got.DeleteOp, got.Failures)
				}
			}},
		{name: "deleting, operation unknown (404): read the node", rec: rec(PhaseDeleting, withDeleteOp), res: StepResult{Effect: EffectPoll, Err: api(404, "")}, wantPhase: PhaseDeleting, wantEff: EffectGet},
		{name: "deleting, poll rate-limited (429): transient wait", rec: rec(PhaseDeleting, withDeleteOp), res: StepResult{Effect: EffectPoll, Err: api(429, "Quota exceeded for requests per minute")}, wantPhase: PhaseDeleting, wantWait: true,
			check: func(t *testing.T, got Recovery) {
				if got.Failures != transientWeight {
					t.Errorf("Failures = %d, want %d (transient)", got.Failures, transientWeight)
				}
			}},
		{name: "saved, delete not sent, node there: deleting, delete", rec: rec(PhaseSaved), obs: Observation{Node: node("TERMINATED")}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseDeleting, wantEff: EffectDelete},
		{name: "saved, delete not sent, node NOT FOUND: closed, deleted by someone else", rec: rec(PhaseSaved), res: StepResult{Effect: EffectGet}, wantPhase: PhaseClosed},
		{name: "saved before Step with DeleteSent: resumes as deleting", rec: rec(PhaseSaved, func(r *Recovery) { r.DeleteSent = true }), wantPhase: PhaseDeleting, wantEff: EffectGet},
		{name: "deleted: creating, create", rec: rec(PhaseDeleted), wantPhase: PhaseCreating, wantEff: EffectCreate},
		{name: "creating, create answered: operation saved, wait", rec: rec(PhaseCreating), res: StepResult{Effect: EffectCreate, Operation: op}, wantPhase: PhaseCreating, wantWait: true},
		{name: "creating, stockout: back to deleted, not counted", rec: rec(PhaseCreating), res: StepResult{Effect: EffectCreate, Err: api(429, "There is no more capacity in the zone")}, wantPhase: PhaseDeleted, wantWait: true,
			check: func(t *testing.T, got Recovery) {
				if got.Failures != 0 {
					t.Errorf("Failures = %d, want 0 for a stockout", got.Failures)
				}
			}},
		{name: "creating, answer lost: wait, then read", rec: rec(PhaseCreating), res: StepResult{Effect: EffectCreate, Err: api(500, "")}, wantPhase: PhaseCreating, wantWait: true},
		{name: "creating, ALREADY_EXISTS: read whose node it is", rec: rec(PhaseCreating), res: StepResult{Effect: EffectCreate, Err: api(409, "ALREADY_EXISTS")}, wantPhase: PhaseCreating, wantEff: EffectGet},
		{name: "creating, our node CREATING: never recovered, wait", rec: rec(PhaseCreating), obs: Observation{Node: ours("CREATING")}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseCreating, wantWait: true},
		{name: "creating, our node READY: recovered", rec: rec(PhaseCreating), obs: Observation{Node: ours("READY")}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseRecovered},
		{name: "creating, node NOT FOUND: the create did not take, create again", rec: rec(PhaseCreating), res: StepResult{Effect: EffectGet}, wantPhase: PhaseCreating, wantEff: EffectCreate},
		{name: "creating, the original node (our delete never happened): delete it", rec: rec(PhaseCreating), obs: Observation{Node: node("TERMINATED")}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseDeleting, wantEff: EffectDelete},
		{name: "creating, someone else's node: closed", rec: rec(PhaseCreating), obs: Observation{Node: func() *tpu.Node { n := node("READY"); n.Id = 99; return n }()}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseClosed},
		{name: "creating with operation: look at it once", rec: rec(PhaseCreating, withCreateOp), wantPhase: PhaseCreating, wantEff: EffectPoll},
		{name: "creating, operation done: created, read the node", rec: rec(PhaseCreating, withCreateOp), res: StepResult{Effect: EffectPoll, Done: true}, wantPhase: PhaseCreated, wantEff: EffectGet},
		{name: "creating, operation ended RESOURCE_EXHAUSTED: back to deleted, spec kept, not counted", rec: rec(PhaseCreating, withCreateOp),
			res: StepResult{Effect: EffectPoll, Done: true, Err: googleerr.Operation(op, 8, "There is no more capacity in the zone")}, wantPhase: PhaseDeleted, wantWait: true,
			check: func(t *testing.T, got Recovery) {
				lo, hi := StockoutWindow(cfg, 1)
				if got.Spec == nil || got.Failures != 0 || got.CreateOp != "" || got.Stockouts != 1 || got.NextLookAt.Before(now.Add(lo)) || !got.NextLookAt.Before(now.Add(hi)) {
					t.Errorf("got %+v; want spec kept, not counted, the first stockout, operation forgotten, next look within the first stockout window", got)
				}
			}},
		{name: "creating, operation ended PERMISSION_DENIED: back to deleted, counted permanent", rec: rec(PhaseCreating, withCreateOp),
			res: StepResult{Effect: EffectPoll, Done: true, Err: googleerr.Operation(op, 7, "denied")}, wantPhase: PhaseDeleted, wantWait: true,
			check: func(t *testing.T, got Recovery) {
				if got.Failures != permanentWeight {
					t.Errorf("Failures = %d, want %d", got.Failures, permanentWeight)
				}
			}},
		{name: "created, our node READY: recovered", rec: rec(PhaseCreated), obs: Observation{Node: ours("READY")}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseRecovered},
		{name: "created, node without our label: closed", rec: rec(PhaseCreated), obs: Observation{Node: node("READY")}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseClosed},
		{name: "created, node NOT FOUND: a person's delete, wait for its entry, never create again", rec: rec(PhaseCreated, answered, func(r *Recovery) { r.CreateSentAt = now.Add(-time.Minute) }),
			res: StepResult{Effect: EffectGet}, wantPhase: PhaseCreated, wantWait: true},
		{name: "created, node NOT FOUND, a person's delete in evidence: closed naming it", rec: rec(PhaseCreated, answered, func(r *Recovery) { r.CreateSentAt = now.Add(-time.Minute) }, kept("alice@acme.example", "op-9", now.Add(-10*time.Second))),
			res: StepResult{Effect: EffectGet}, wantPhase: PhaseClosed, check: closedNaming("alice@acme.example")},
		{name: "created, node NOT FOUND past the evidence wait, no evidence: abandoned for a person, never created twice", rec: rec(PhaseCreated, answered, func(r *Recovery) { r.CreateSentAt, r.GoneAt = now.Add(-3*time.Minute), now.Add(-DefaultEvidenceWait) }),
			res: StepResult{Effect: EffectGet}, wantPhase: PhaseAbandoned, check: closedNaming("not created again")},
		{name: "creating, node NOT FOUND, a person's delete since our create in evidence: closed", rec: rec(PhaseCreating, answered, func(r *Recovery) { r.CreateSentAt = now.Add(-time.Minute) }, kept("alice@acme.example", "op-9", now.Add(-10*time.Second))),
			res: StepResult{Effect: EffectGet}, wantPhase: PhaseClosed, check: closedNaming("alice@acme.example")},
		{name: "created, our node still CREATING: counted wait", rec: rec(PhaseCreated), obs: Observation{Node: ours("CREATING")}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseCreated, wantWait: true},
		{name: "failed before Step, node gone after our delete: deleting, the evidence rule waits (no create on one read)", rec: rec(PhaseFailed, func(r *Recovery) { r.DeleteSent = true }), res: StepResult{Effect: EffectGet}, wantPhase: PhaseDeleting, wantWait: true},
		{name: "failed before Step, node gone, never deleted by us: closed", rec: rec(PhaseFailed), res: StepResult{Effect: EffectGet}, wantPhase: PhaseClosed},
		{name: "failed before Step, our node with a create operation: look at the operation", rec: rec(PhaseFailed, withCreateOp), obs: Observation{Node: ours("READY")}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseCreating, wantEff: EffectPoll},
		{name: "done before Step: terminal", rec: rec(PhaseDone), wantPhase: PhaseDone},
		{name: "too many failures: abandoned", rec: rec(PhaseDeleting, func(r *Recovery) { r.Failures = failureLimit(cfg) - 1 }), res: StepResult{Effect: EffectDelete, Err: api(503, "")}, wantPhase: PhaseAbandoned},
		{name: "too old: abandoned", rec: rec(PhaseDeleted, func(r *Recovery) { r.StartedAt = now.Add(-MaxRecoveryAge) }), wantPhase: PhaseAbandoned},

		{name: "reset claimed: read the node", rec: rec(PhaseClaimed, reset), wantPhase: PhaseClaimed, wantEff: EffectGet},
		{name: "reset claimed, node PREEMPTED: claim the incident's one reset", rec: rec(PhaseClaimed, reset),
			obs: Observation{Node: func() *tpu.Node {
				n := node("PREEMPTED")
				n.QueuedResource = "projects/p/locations/z/queuedResources/q"
				return n
			}()}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseClaimed, wantEff: EffectMarkReset},
		{name: "reset claimed, this recovery holds the reset: resetting, reset", rec: rec(PhaseClaimed, reset), res: StepResult{Effect: EffectMarkReset, First: true}, wantPhase: PhaseResetting, wantEff: EffectReset},
		{name: "reset claimed, another slice reset it: closed, look again later", rec: rec(PhaseClaimed, reset), res: StepResult{Effect: EffectMarkReset}, wantPhase: PhaseClosed, wantEff: EffectDefer},
		{name: "resetting, reset answered: wait", rec: rec(PhaseResetting, reset), res: StepResult{Effect: EffectReset, Operation: op}, wantPhase: PhaseResetting, wantWait: true},
		{name: "resetting without operation: read the queued resource", rec: rec(PhaseResetting, reset), wantPhase: PhaseResetting, wantEff: EffectGetQR},
		{name: "resetting, queued resource provisioning: our reset took effect", rec: rec(PhaseResetting, reset), obs: Observation{QueuedResource: qr("PROVISIONING")}, res: StepResult{Effect: EffectGetQR}, wantPhase: PhaseReset, wantWait: true},
		{name: "resetting, queued resource FAILED: reset again", rec: rec(PhaseResetting, reset), obs: Observation{QueuedResource: qr("FAILED")}, res: StepResult{Effect: EffectGetQR}, wantPhase: PhaseResetting, wantEff: EffectReset},
		{name: "resetting, queued resource ACTIVE: the node tells", rec: rec(PhaseResetting, reset), obs: Observation{QueuedResource: qr("ACTIVE")}, res: StepResult{Effect: EffectGetQR}, wantPhase: PhaseResetting, wantEff: EffectGet},
		{name: "resetting, ACTIVE and node READY: recovered, no second reset", rec: rec(PhaseResetting, reset), obs: Observation{Node: node("READY")}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseRecovered},
		{name: "resetting, queued resource NOT FOUND: closed", rec: rec(PhaseResetting, reset), res: StepResult{Effect: EffectGetQR}, wantPhase: PhaseClosed, check: closedNaming("NOT FOUND")},
		{name: "resetting, operation running and the node NOT FOUND: read the queued resource", rec: rec(PhaseResetting, reset, withResetOp), res: StepResult{Effect: EffectPoll}, wantPhase: PhaseResetting, wantEff: EffectGetQR},
		{name: "resetting, operation running, queued resource NOT FOUND: closed naming it", rec: rec(PhaseResetting, reset, withResetOp), res: StepResult{Effect: EffectGetQR}, wantPhase: PhaseClosed, check: closedNaming("queuedResources/q NOT FOUND")},
		{name: "resetting, queued resource NOT FOUND, a person's delete of it in evidence: closed naming them", rec: rec(PhaseResetting, reset, withResetOp, func(r *Recovery) {
			r.Evidence = []Evidence{{InsertID: "qr-1", Change: events.ChangeDeleteQueuedResource, Principal: "alice@acme.example", Time: now.Add(-10 * time.Second), QueuedResource: r.QueuedResource}}
		}), res: StepResult{Effect: EffectGetQR}, wantPhase: PhaseClosed, check: closedNaming("alice@acme.example")},
		{name: "resetting, operation running, queued resource there: wait", rec: rec(PhaseResetting, reset, withResetOp), obs: Observation{QueuedResource: qr("PROVISIONING")}, res: StepResult{Effect: EffectGetQR}, wantPhase: PhaseResetting, wantWait: true},
		{name: "resetting with operation: look at it once", rec: rec(PhaseResetting, reset, withResetOp), wantPhase: PhaseResetting, wantEff: EffectPoll},
		{name: "resetting, operation done: reset, read the node", rec: rec(PhaseResetting, reset, withResetOp), res: StepResult{Effect: EffectPoll, Done: true}, wantPhase: PhaseReset, wantEff: EffectGet},
		{name: "resetting, operation ended INTERNAL: counted as permanent, operation forgotten", rec: rec(PhaseResetting, reset, withResetOp), res: StepResult{Effect: EffectPoll, Done: true, Err: googleerr.Operation(op, 13, "internal")}, wantPhase: PhaseResetting, wantWait: true,
			check: func(t *testing.T, got Recovery) {
				if got.ResetOp != "" || got.Failures != permanentWeight {
					t.Errorf("ResetOp %q Failures %d; want the finished operation forgotten and the failure bounded", got.ResetOp, got.Failures)
				}
			}},
		{name: "reset, node READY: recovered", rec: rec(PhaseReset, reset), obs: Observation{Node: node("READY")}, res: StepResult{Effect: EffectGet}, wantPhase: PhaseRecovered},
		{name: "reset, node not back yet: counted wait", rec: rec(PhaseReset, reset), res: StepResult{Effect: EffectGet}, wantPhase: PhaseReset, wantWait: true},
		{name: "reset saved before Step as creating: resetting with its operation", rec: rec(PhaseCreating, reset, withResetOp), wantPhase: PhaseResetting, wantEff: EffectPoll},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			if tt.actor {
				c = actorCfg
			}
			got, eff := Advance(tt.rec, tt.obs, tt.res, now, c)
			if got.Phase != tt.wantPhase || eff.Kind != tt.wantEff {
				t.Errorf("Advance = phase %s effect %q (last error %q), want phase %s effect %q", got.Phase, eff.Kind, got.LastError, tt.wantPhase, tt.wantEff)
			}
			if wait := !got.NextLookAt.IsZero(); wait != tt.wantWait {
				t.Errorf("NextLookAt = %v, want set %v", got.NextLookAt, tt.wantWait)
			}
			if got.Phase.Terminal() && eff.Kind != EffectNone && eff.Kind != EffectDefer {
				t.Errorf("terminal phase %s asks for %s", got.Phase, eff.Kind)
			}
			if eff.Kind == EffectDelete && got.Spec == nil {
				t.Error("delete asked for without a saved spec")
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

func TestKindOfFinishedOperation(t *testing.T) {
	for _, tt := range []struct {
		code int32
		msg  string
		want Kind
	}{
		{8, "There is no more capacity in the zone", KindStockout},
		{8, "Quota 'TPUV4_CHIPS' exceeded. Limit: 32.0 in region us-central2.", KindQuota},
		{9, "Insufficient reserved capacity. Contact customer support to increase your reservation.", KindStockout},
		{14, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: The zone does not have enough resources available", KindStockout},
		{13, "internal", KindTransient},
		{14, "unavailable", KindTransient},
		{3, "bad", KindPermanent},
		{7, "denied", KindPermanent},
		{9, "precondition", KindPermanent},
		{5, "gone", KindNotFound},
	} {
		if got := KindOf(googleerr.Operation("op", tt.code, tt.msg)); got != tt.want {
			t.Errorf("KindOf(operation ended %d %q) = %s, want %s", tt.code, tt.msg, got, tt.want)
		}
	}
	if KindOf(errors.New("unexpected end of JSON input")) != KindTransient {
		t.Error("a malformed answer is not transient")
	}
}
