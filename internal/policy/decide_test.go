package policy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

var t0 = time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)

const nodeName = "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128"

func terminateEvent(cause events.Cause) events.Event {
	return events.Event{
		InsertID: "abc123",
		Time:     t0.Add(-time.Minute),
		Method:   events.MethodTerminate,
		Node:     events.NodeRef{Project: "acme-ml", Zone: "us-central2-b", Node: "llm-v4-128"},
		Cause:    cause,
	}
}

func sweepEvent() events.Event {
	return events.Event{Node: events.NodeRef{Project: "acme-ml", Zone: "us-central2-b", Node: "llm-v4-128"}}
}

func optedIn(state, health string) *tpu.Node {
	return &tpu.Node{
		Name:   nodeName,
		State:  state,
		Health: health,
		Labels: map[string]string{"tpu-autoheal": "enabled"},
	}
}

func withLabel(n *tpu.Node, k, v string) *tpu.Node {
	n.Labels[k] = v
	return n
}

func withID(n *tpu.Node, id int64) *tpu.Node {
	n.Id = id
	return n
}

func unlabelled(state, health string) *tpu.Node {
	n := optedIn(state, health)
	n.Labels = map[string]string{"team": "llm"}
	return n
}

func qrOwned(state string) *tpu.Node {
	n := optedIn(state, "")
	n.QueuedResource = "projects/acme-ml/locations/us-central2-b/queuedResources/qr-1"
	return n
}

func qr(state string) *tpu.QueuedResource {
	return &tpu.QueuedResource{
		Name:  "projects/acme-ml/locations/us-central2-b/queuedResources/qr-1",
		State: &tpu.QueuedResourceState{State: state},
	}
}

func recovery(phase Phase, leaseUntil time.Time, spec *tpu.Node) *Recovery {
	return &Recovery{Node: nodeName, Project: "acme-ml", Action: ActionRecreate, Phase: phase,
		Spec: spec, Generation: 2, Holder: "other", LeaseUntil: leaseUntil, StartedAt: t0.Add(-20 * time.Minute)}
}

func TestDecide(t *testing.T) {
	cfg := DefaultConfig()
	dry := cfg
	dry.DryRun = true
	spec := CleanSpec(optedIn("TERMINATED", ""))

	tests := []struct {
		name       string
		ev         events.Event
		obs        Observed
		h          History
		cfg        *Config
		want       Action
		wantReason string // substring
		wantDue    time.Time
	}{
		// Input.
		{name: "event without a node name is rejected", ev: events.Event{Method: events.MethodTerminate},
			obs: Observed{Node: optedIn("TERMINATED", "")}, want: ActionReject, wantReason: "names no node"},
		{name: "event already handled is skipped", ev: terminateEvent(events.CauseMaintenance),
			obs: Observed{Node: optedIn("TERMINATED", "")}, h: History{EventSeen: true},
			want: ActionSkip, wantReason: "event abc123 already handled"},
		{name: "sweep ignores EventSeen", ev: sweepEvent(),
			obs: Observed{Node: optedIn("TERMINATED", "")}, h: History{EventSeen: true},
			want: ActionRecreate},

		// Decision table rows.
		{name: "ready healthy node recovered by itself is recorded", ev: terminateEvent(events.CauseMaintenance),
			obs: Observed{Node: optedIn("READY", "HEALTHY")}, want: ActionRecord, wantReason: "READY and HEALTHY: recovered by itself"},
		{name: "late terminate of a node we already recreated is recorded as our recovery", ev: terminateEvent(events.CauseMaintenance),
			obs:  Observed{Node: withLabel(optedIn("READY", "HEALTHY"), GenerationLabel, "2")},
			h:    History{Recovery: recovery(PhaseDone, t0.Add(-time.Minute), spec)},
			want: ActionRecord, wantReason: "recovered by tpu-autoheal (recovery gen 2, recreate)"},
		{name: "ready node without reported health is recorded, never deleted on a guess", ev: terminateEvent(events.CauseMaintenance),
			obs: Observed{Node: optedIn("READY", "")}, want: ActionRecord, wantReason: "health not reported"},
		{name: "ready node under maintenance is deferred for the unhealthy grace", ev: terminateEvent(events.CauseMaintenance),
			obs: Observed{Node: optedIn("READY", "UNHEALTHY_MAINTENANCE")}, want: ActionDefer,
			wantReason: "READY but UNHEALTHY_MAINTENANCE", wantDue: t0.Add(10 * time.Minute)},
		{name: "ready node timing out keeps the first-seen time of its deferral", ev: sweepEvent(),
			obs: Observed{Node: optedIn("READY", "TIMEOUT")}, h: History{Deferral: &Deferral{Since: t0.Add(-4 * time.Minute)}},
			want: ActionDefer, wantDue: t0.Add(6 * time.Minute)},
		{name: "ready node with unhealthy tensorflow past the grace is recreated", ev: sweepEvent(),
			obs: Observed{Node: optedIn("READY", "UNHEALTHY_TENSORFLOW")}, h: History{Deferral: &Deferral{Since: t0.Add(-11 * time.Minute)}},
			want: ActionRecreate, wantReason: "READY but UNHEALTHY_TENSORFLOW for 11m0s >= grace 10m0s: recreate"},
		{name: "restarting node is deferred for the stuck grace", ev: events.Event{Method: events.MethodRestart, InsertID: "r1", Node: sweepEvent().Node},
			obs: Observed{Node: optedIn("RESTARTING", "")}, want: ActionDefer, wantDue: t0.Add(30 * time.Minute)},
		{name: "repairing node stuck past the grace is recreated", ev: sweepEvent(),
			obs: Observed{Node: optedIn("REPAIRING", "")}, h: History{Deferral: &Deferral{Since: t0.Add(-31 * time.Minute)}},
			want: ActionRecreate, wantReason: "REPAIRING for 31m0s >= grace 30m0s"},
		{name: "node in unknown state is deferred", ev: sweepEvent(), obs: Observed{Node: optedIn("UNKNOWN", "")}, want: ActionDefer},
		{name: "creating node is deferred", ev: sweepEvent(), obs: Observed{Node: optedIn("CREATING", "")}, want: ActionDefer},
		{name: "terminated node under maintenance is recreated", ev: terminateEvent(events.CauseMaintenance),
			obs: Observed{Node: optedIn("TERMINATED", "")}, want: ActionRecreate, wantReason: "TERMINATED (maintenance): recreate"},
		{name: "terminated spot node is recreated", ev: sweepEvent(),
			obs: Observed{Node: func() *tpu.Node {
				n := optedIn("PREEMPTED", "")
				n.SchedulingConfig = &tpu.SchedulingConfig{Spot: true}
				return n
			}()}, want: ActionRecreate, wantReason: "PREEMPTED (preemption): recreate"},
		{name: "terminated node owned by an active queued resource is reset", ev: terminateEvent(events.CauseMaintenance),
			obs: Observed{Node: qrOwned("TERMINATED"), QueuedResource: qr("ACTIVE")}, want: ActionReset, wantReason: "reset queued resource"},
		{name: "queued resource already provisioning is deferred, not reset", ev: terminateEvent(events.CauseMaintenance),
			obs: Observed{Node: qrOwned("TERMINATED"), QueuedResource: qr("PROVISIONING")}, want: ActionDefer, wantReason: "the platform is recovering it"},
		{name: "queued resource waiting for resources past the grace is recorded for a person", ev: sweepEvent(),
			obs: Observed{Node: qrOwned("PREEMPTED"), QueuedResource: qr("WAITING_FOR_RESOURCES")},
			h:   History{Deferral: &Deferral{Since: t0.Add(-time.Hour)}}, want: ActionRecord, wantReason: "needs a person"},
		{name: "failed queued resource is recorded, not reset", ev: sweepEvent(),
			obs: Observed{Node: qrOwned("TERMINATED"), QueuedResource: qr("FAILED")}, want: ActionRecord, wantReason: "makes no sense"},
		{name: "missing queued resource is recorded", ev: sweepEvent(),
			obs: Observed{Node: qrOwned("TERMINATED")}, want: ActionRecord, wantReason: "NOT FOUND"},
		{name: "stopped node is never touched", ev: sweepEvent(), obs: Observed{Node: optedIn("STOPPED", "")}, want: ActionRecord, wantReason: "never touch"},
		{name: "stopping node is never touched", ev: sweepEvent(), obs: Observed{Node: optedIn("STOPPING", "")}, want: ActionRecord},
		{name: "hidden node is never touched", ev: sweepEvent(), obs: Observed{Node: optedIn("HIDDEN", "")}, want: ActionRecord},
		{name: "hiding node is never touched", ev: sweepEvent(), obs: Observed{Node: optedIn("HIDING", "")}, want: ActionRecord},
		{name: "deleting node not ours is recorded", ev: terminateEvent(events.CauseMaintenance),
			obs: Observed{Node: optedIn("DELETING", "")}, want: ActionRecord, wantReason: "deleted by someone else; not ours"},
		{name: "node not found without a recovery of ours is recorded", ev: terminateEvent(events.CauseMaintenance),
			want: ActionRecord, wantReason: "NOT FOUND: deleted by someone else; not ours"},
		{name: "node not found with a finished recovery is recorded", ev: terminateEvent(events.CauseMaintenance),
			h: History{Recovery: recovery(PhaseDone, t0.Add(-time.Hour), spec)}, want: ActionRecord},
		{name: "unrecognised state is recorded", ev: sweepEvent(), obs: Observed{Node: optedIn("EXPLODED", "")}, want: ActionRecord, wantReason: "unrecognised"},

		// Our own recoveries.
		{name: "recovery in flight by someone else is skipped", ev: terminateEvent(events.CauseMaintenance),
			obs: Observed{Node: optedIn("TERMINATED", "")}, h: History{Recovery: recovery(PhaseSaved, t0.Add(time.Minute), spec)},
			want: ActionSkip, wantReason: "recovery in flight"},
		{name: "failed recovery waits for its lease before the next attempt", ev: sweepEvent(),
			h: History{Recovery: func() *Recovery {
				r := recovery(PhaseFailed, t0.Add(time.Minute), spec)
				r.LastError = "stockout"
				return r
			}()},
			want: ActionSkip, wantReason: "failed (stockout)"},
		{name: "unfinished recovery with an expired lease continues though the node is gone", ev: sweepEvent(),
			h: History{Recovery: recovery(PhaseDeleted, t0.Add(-time.Minute), spec)}, want: ActionRecreate, wantReason: "NOT FOUND: continue recovery gen 2 from phase deleted"},
		{name: "unfinished recovery with an expired lease continues while the node is deleting", ev: terminateEvent(events.CauseMaintenance),
			obs: Observed{Node: optedIn("DELETING", "")}, h: History{Recovery: recovery(PhaseDeleting, t0.Add(-time.Minute), spec)}, want: ActionRecreate},
		{name: "failed recovery past its lease is retried", ev: sweepEvent(),
			h: History{Recovery: recovery(PhaseFailed, t0.Add(-time.Minute), spec)}, want: ActionRecreate},
		{name: "unfinished recovery continues despite the cooldown", ev: sweepEvent(),
			h:    History{Recovery: recovery(PhaseDeleted, t0.Add(-time.Minute), spec), Recreates: []time.Time{t0.Add(-time.Minute)}},
			want: ActionRecreate},
		{name: "unfinished recovery of a node that recovered is closed by a record", ev: sweepEvent(),
			obs: Observed{Node: optedIn("READY", "HEALTHY")}, h: History{Recovery: recovery(PhaseSaved, t0.Add(-time.Minute), spec)},
			want: ActionRecord, wantReason: "closing recovery gen 2"},
		{name: "unfinished recovery of a stopped node is closed, never touched", ev: sweepEvent(),
			obs: Observed{Node: optedIn("STOPPED", "")}, h: History{Recovery: recovery(PhaseSaved, t0.Add(-time.Minute), spec)},
			want: ActionRecord, wantReason: "never touched"},
		{name: "unfinished reset continues as a reset", ev: sweepEvent(),
			obs: Observed{Node: qrOwned("TERMINATED"), QueuedResource: qr("ACTIVE")},
			h: History{Recovery: func() *Recovery {
				r := recovery(PhaseCreating, t0.Add(-time.Minute), nil)
				r.Action = ActionReset
				return r
			}()},
			want: ActionReset},
		{name: "node gone before the spec was saved is not ours to recreate", ev: sweepEvent(),
			h: History{Recovery: recovery(PhaseClaimed, t0.Add(-time.Minute), nil)}, want: ActionRecord, wantReason: "before recovery gen 2 saved its spec"},
		{name: "a second terminate after the recovery finished does not recreate again", ev: terminateEvent(events.CauseMaintenance),
			obs:  Observed{Node: optedIn("READY", "HEALTHY")},
			h:    History{Recovery: recovery(PhaseDone, t0.Add(-time.Hour), spec), Recreates: []time.Time{t0.Add(-20 * time.Minute)}},
			want: ActionRecord},

		// Guards, in order.
		{name: "unlabelled node is not opted in", ev: terminateEvent(events.CauseMaintenance),
			obs: Observed{Node: unlabelled("TERMINATED", "")}, want: ActionSkip, wantReason: "not opted in: label tpu-autoheal=enabled missing"},
		{name: "label with another value is not opted in", ev: terminateEvent(events.CauseMaintenance),
			obs:  Observed{Node: func() *tpu.Node { n := optedIn("TERMINATED", ""); n.Labels["tpu-autoheal"] = "disabled"; return n }()},
			want: ActionSkip, wantReason: "not opted in"},
		{name: "opt-in label read from the saved spec when the node is gone", ev: sweepEvent(),
			h:    History{Recovery: recovery(PhaseDeleted, t0.Add(-time.Minute), CleanSpec(unlabelled("TERMINATED", "")))},
			want: ActionSkip, wantReason: "not opted in"},
		{name: "recovery closed when a person removed the opt-in label from the node", ev: sweepEvent(),
			obs:  Observed{Node: unlabelled("TERMINATED", "")},
			h:    History{Recovery: recovery(PhaseFailed, t0.Add(-time.Minute), CleanSpec(optedIn("TERMINATED", "")))},
			want: ActionRecord, wantReason: "not opted in: label tpu-autoheal=enabled missing: closing recovery gen"},
		{name: "opt-out of the node our create is making does not close the recovery: the create may yet fail (a stockout) and the node be gone", ev: sweepEvent(),
			obs:  Observed{Node: unlabelled("CREATING", "")},
			h:    History{Recovery: recovery(PhaseCreating, t0.Add(-time.Minute), CleanSpec(optedIn("TERMINATED", "")))},
			want: ActionRecreate, wantReason: "continue recovery gen"},
		{name: "opt-out during a live lease is skipped, the holder is not interfered with", ev: sweepEvent(),
			obs:  Observed{Node: unlabelled("TERMINATED", "")},
			h:    History{Recovery: recovery(PhaseDeleting, t0.Add(time.Minute), CleanSpec(optedIn("TERMINATED", "")))},
			want: ActionSkip, wantReason: "not opted in"},
		{name: "our failed recovery of a node a user then terminated is closed, not continued", ev: sweepEvent(),
			obs: Observed{Node: withID(optedIn("TERMINATED", ""), 7)},
			h: History{Hold: &Hold{Node: nodeName, NodeID: 7, Since: t0, EventID: "u1"},
				Recovery: recovery(PhaseFailed, t0.Add(-time.Minute), CleanSpec(optedIn("TERMINATED", "")))},
			want: ActionRecord, wantReason: "terminated by a user at"},
		{name: "READY with a health value the API added later is recorded, not acted on", ev: sweepEvent(),
			obs: Observed{Node: optedIn("READY", "SOMETHING_NEW")}, want: ActionRecord, wantReason: `unrecognised health "SOMETHING_NEW"`},
		{name: "node of an abandoned recovery is left for a person", ev: sweepEvent(),
			h: History{Recovery: &Recovery{Node: nodeName, Action: ActionRecreate, Phase: PhaseAbandoned, Generation: 2,
				Spec: spec, LastError: "abandoned after 5 attempts; needs a person: create: INVALID_ARGUMENT"}},
			want: ActionRecord, wantReason: "recovery gen 2 was abandoned"},
		{name: "termination by a user is never undone", ev: terminateEvent(events.CauseUser),
			obs: Observed{Node: optedIn("TERMINATED", "")}, want: ActionSkip, wantReason: "terminated by a user: never undone"},
		{name: "a user's terminate after our delete was sent does not stop the recovery", ev: terminateEvent(events.CauseUser),
			obs: Observed{Node: optedIn("TERMINATED", "")},
			h: History{Recovery: func() *Recovery {
				r := recovery(PhaseDeleting, t0.Add(-time.Minute), spec)
				r.DeleteSent = true
				return r
			}()},
			want: ActionSkip, wantReason: "sent its delete: the recovery goes on"},
		{name: "a hold never closes a recovery whose delete was sent: it goes on", ev: sweepEvent(),
			obs: Observed{Node: withID(optedIn("DELETING", ""), 7)},
			h: History{Hold: &Hold{Node: nodeName, NodeID: 7, Since: t0, EventID: "u1"}, Recovery: func() *Recovery {
				r := recovery(PhaseDeleting, t0.Add(-time.Minute), spec)
				r.DeleteSent = true
				return r
			}()},
			want: ActionRecreate, wantReason: "continue recovery gen 2"},
		{name: "node a user terminated is not recovered by a sweep", ev: sweepEvent(),
			obs: Observed{Node: withID(optedIn("TERMINATED", ""), 7)}, h: History{Hold: &Hold{Node: nodeName, NodeID: 7, Since: t0, EventID: "u1"}},
			want: ActionSkip, wantReason: "terminated by a user at"},
		{name: "node a user terminated is not recovered on a later maintenance event", ev: terminateEvent(events.CauseMaintenance),
			obs: Observed{Node: withID(optedIn("TERMINATED", ""), 7)}, h: History{Hold: &Hold{Node: nodeName, NodeID: 7, Since: t0, EventID: "u1"}},
			want: ActionSkip, wantReason: "never undone"},
		{name: "hold does not apply to a node the user created again under the same name", ev: sweepEvent(),
			obs: Observed{Node: withID(optedIn("TERMINATED", ""), 8)}, h: History{Hold: &Hold{Node: nodeName, NodeID: 7, Since: t0}},
			want: ActionRecreate},
		{name: "held node healthy again is recorded", ev: sweepEvent(),
			obs: Observed{Node: withID(optedIn("READY", "HEALTHY"), 7)}, h: History{Hold: &Hold{Node: nodeName, NodeID: 7, Since: t0}},
			want: ActionRecord},
		{name: "dry run would recreate", ev: terminateEvent(events.CauseMaintenance), cfg: &dry,
			obs: Observed{Node: optedIn("TERMINATED", "")}, want: ActionSkip, wantReason: "dry run: would recreate: TERMINATED (maintenance)"},
		{name: "dry run would reset", ev: terminateEvent(events.CauseMaintenance), cfg: &dry,
			obs: Observed{Node: qrOwned("TERMINATED"), QueuedResource: qr("ACTIVE")}, want: ActionSkip, wantReason: "dry run: would reset"},
		{name: "dry run would continue a recovery", ev: sweepEvent(), cfg: &dry,
			h: History{Recovery: recovery(PhaseDeleted, t0.Add(-time.Minute), spec)}, want: ActionSkip, wantReason: "dry run: would recreate"},
		{name: "dry run still defers", ev: sweepEvent(), cfg: &dry, obs: Observed{Node: optedIn("READY", "TIMEOUT")}, want: ActionDefer},
		{name: "recreate within the cooldown is skipped", ev: terminateEvent(events.CauseMaintenance),
			obs: Observed{Node: optedIn("TERMINATED", "")}, h: History{Recreates: []time.Time{t0.Add(-2 * time.Hour), t0.Add(-12 * time.Minute)}},
			want: ActionSkip, wantReason: "guard: cooldown: last recreate 12m0s ago < 30m0s; look again at 2026", wantDue: t0.Add(18 * time.Minute)},
		{name: "recreate past the cooldown is allowed", ev: terminateEvent(events.CauseMaintenance),
			obs: Observed{Node: optedIn("TERMINATED", "")}, h: History{Recreates: []time.Time{t0.Add(-31 * time.Minute)}}, want: ActionRecreate},
		{name: "recreates at the window cap are skipped", ev: terminateEvent(events.CauseMaintenance),
			obs:  Observed{Node: optedIn("TERMINATED", "")},
			h:    History{Recreates: []time.Time{t0.Add(-20 * time.Hour), t0.Add(-10 * time.Hour), t0.Add(-time.Hour)}},
			want: ActionSkip, wantReason: "guard: window cap: 3 recreates in 24h0m0s >= 3", wantDue: t0.Add(4 * time.Hour)},
		{name: "recreates outside the window do not count", ev: terminateEvent(events.CauseMaintenance),
			obs:  Observed{Node: optedIn("TERMINATED", "")},
			h:    History{Recreates: []time.Time{t0.Add(-50 * time.Hour), t0.Add(-30 * time.Hour), t0.Add(-time.Hour)}},
			want: ActionRecreate},
		{name: "project at the in-flight cap is skipped", ev: terminateEvent(events.CauseMaintenance),
			obs: Observed{Node: optedIn("TERMINATED", "")}, h: History{InFlight: 64}, want: ActionSkip, wantReason: "guard: in-flight cap", wantDue: t0.Add(5 * time.Minute)},
		{name: "reset is guarded too", ev: terminateEvent(events.CauseMaintenance),
			obs: Observed{Node: qrOwned("TERMINATED"), QueuedResource: qr("ACTIVE")}, h: History{InFlight: 70}, want: ActionSkip, wantReason: "in-flight cap"},
		{name: "failed reset is closed, not retried, while the queued resource is provisioning", ev: sweepEvent(),
			obs:  Observed{Node: qrOwned("CREATING"), QueuedResource: qr("PROVISIONING")},
			h:    History{Recovery: &Recovery{Node: nodeName, Action: ActionReset, Phase: PhaseFailed, Generation: 2, LeaseUntil: t0.Add(-time.Minute)}},
			want: ActionRecord, wantReason: "is PROVISIONING: the platform is recovering it; look again at"},
		{name: "failed reset is retried while the queued resource is active", ev: sweepEvent(),
			obs:  Observed{Node: qrOwned("PREEMPTED"), QueuedResource: qr("ACTIVE")},
			h:    History{Recovery: &Recovery{Node: nodeName, Action: ActionReset, Phase: PhaseFailed, Generation: 2, LeaseUntil: t0.Add(-time.Minute)}},
			want: ActionReset, wantReason: "continue recovery gen 2"},
		{name: "dry run is named before the cooldown", ev: terminateEvent(events.CauseMaintenance), cfg: &dry,
			obs: Observed{Node: optedIn("TERMINATED", "")}, h: History{Recreates: []time.Time{t0.Add(-time.Minute)}},
			want: ActionSkip, wantReason: "dry run: would recreate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			if tt.cfg != nil {
				c = *tt.cfg
			}
			got := Decide(tt.ev, tt.obs, tt.h, t0, c)
			if got.Action != tt.want {
				t.Errorf("Decide() = %s %q, want %s", got.Action, got.Reason, tt.want)
			}
			if !strings.Contains(got.Reason, tt.wantReason) {
				t.Errorf("Decide() reason = %q, want it to contain %q", got.Reason, tt.wantReason)
			}
			if !tt.wantDue.IsZero() && !got.Due.Equal(tt.wantDue) {
				t.Errorf("Decide() due = %s, want %s", got.Due, tt.wantDue)
			}
			if got.Reason == "" {
				t.Error("Decide() gave no reason")
			}
		})
	}
}

// histories is a spread of ledger states, for the properties below.
func histories() []History {
	spec := CleanSpec(optedIn("TERMINATED", ""))
	var hs []History
	for _, rec := range []*Recovery{nil,
		recovery(PhaseDone, t0.Add(-time.Hour), spec),
		recovery(PhaseSaved, t0.Add(-time.Minute), spec),
		recovery(PhaseDeleted, t0.Add(-time.Minute), spec),
		recovery(PhaseCreating, t0.Add(-time.Minute), spec),
		recovery(PhaseFailed, t0.Add(-time.Minute), spec),
		recovery(PhaseDeleting, t0.Add(time.Minute), spec),
		recovery(PhaseClaimed, t0.Add(-time.Minute), nil),
	} {
		for _, df := range []*Deferral{nil, {Since: t0.Add(-48 * time.Hour)}} {
			for _, seen := range []bool{false, true} {
				hs = append(hs, History{Recovery: rec, Deferral: df, EventSeen: seen})
			}
		}
	}
	return hs
}

func eventsForProperties() []events.Event {
	var evs []events.Event
	for _, c := range []events.Cause{"", events.CauseMaintenance, events.CausePreemption, events.CauseHardware, events.CauseUnknown} {
		ev := terminateEvent(c)
		evs = append(evs, ev, sweepEvent())
		ev.Method = events.MethodRestart
		evs = append(evs, ev)
	}
	return evs
}

var allStates = []string{"", "STATE_UNSPECIFIED", "CREATING", "READY", "RESTARTING", "REIMAGING", "DELETING", "REPAIRING",
	"STOPPED", "STOPPING", "STARTING", "PREEMPTED", "TERMINATED", "HIDING", "HIDDEN", "UNHIDING", "UNKNOWN"}

func TestDecideNeverRepairsAReadyHealthyNode(t *testing.T) {
	for _, health := range []string{"HEALTHY", ""} {
		for _, owned := range []bool{false, true} {
			for _, h := range histories() {
				for _, ev := range eventsForProperties() {
					obs := Observed{Node: optedIn("READY", health)}
					if owned {
						obs = Observed{Node: qrOwned("READY"), QueuedResource: qr("ACTIVE")}
						obs.Node.Health = health
					}
					got := Decide(ev, obs, h, t0, DefaultConfig())
					if got.Action == ActionRecreate || got.Action == ActionReset {
						t.Fatalf("Decide(%+v, READY %q, %+v) = %s %q, want neither recreate nor reset", ev, health, h, got.Action, got.Reason)
					}
				}
			}
		}
	}
}

func TestDecideNeverActsOnAnUnlabelledNode(t *testing.T) {
	for _, state := range allStates {
		for _, health := range []string{"", "HEALTHY", "TIMEOUT", "UNHEALTHY_MAINTENANCE"} {
			for _, h := range histories() {
				if h.Recovery != nil && h.Recovery.Spec != nil {
					h.Recovery.Spec = CleanSpec(unlabelled("TERMINATED", ""))
				}
				for _, ev := range eventsForProperties() {
					for _, obs := range []Observed{{Node: unlabelled(state, health)}, {}} {
						got := Decide(ev, obs, h, t0, DefaultConfig())
						switch got.Action {
						case ActionRecreate, ActionReset, ActionDefer:
							t.Fatalf("Decide(%+v, %s %s unlabelled, %+v) = %s %q, want no action on an unlabelled node",
								ev, state, health, h, got.Action, got.Reason)
						}
					}
				}
			}
		}
	}
}

func TestDecideNeverRepairsInDryRun(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DryRun = true
	for _, state := range allStates {
		for _, h := range histories() {
			for _, ev := range eventsForProperties() {
				got := Decide(ev, Observed{Node: optedIn(state, "TIMEOUT")}, h, t0, cfg)
				if got.Action == ActionRecreate || got.Action == ActionReset {
					t.Fatalf("dry run Decide(%s) = %s %q, want no repair", state, got.Action, got.Reason)
				}
			}
		}
	}
}

func TestParseSelector(t *testing.T) {
	tests := []struct {
		in        string
		key, val  string
		wantError bool
	}{
		{in: "tpu-autoheal=enabled", key: "tpu-autoheal", val: "enabled"},
		{in: " team = llm ", key: "team", val: "llm"},
		{in: "tpu-autoheal", wantError: true},
		{in: "=enabled", wantError: true},
		{in: "a=", wantError: true},
		{in: "a=b=c", wantError: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			k, v, err := ParseSelector(tt.in)
			if (err != nil) != tt.wantError {
				t.Fatalf("ParseSelector(%q) error = %v, want error %v", tt.in, err, tt.wantError)
			}
			if diff := cmp.Diff(fmt.Sprint(tt.key, "=", tt.val), fmt.Sprint(k, "=", v)); !tt.wantError && diff != "" {
				t.Errorf("ParseSelector(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}
