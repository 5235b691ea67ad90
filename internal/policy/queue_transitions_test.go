package policy

import (
	"errors"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"
)

var queueNow = time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)

const queueNode = "projects/p/locations/us-central2-b/nodes/n"

// queuedRec is a recovery of queueNode in phase, queued as q0 (queue:vf).
func queuedRec(phase Phase, vf time.Duration) Recovery {
	return Recovery{
		Node: queueNode, Action: ActionRecreate, Phase: phase, Generation: 3, StartedAt: queueNow.Add(-time.Hour),
		Spec: &tpu.Node{AcceleratorType: "v4-8", RuntimeVersion: "r", Metadata: map[string]string{StockoutMetadataKey: "queue"}},
		Queue: &QueueState{Name: "projects/p/locations/us-central2-b/queuedResources/n-autoheal-3-0", ValidFor: vf,
			ValidUntil: queueNow.Add(vf), Tier: "on-demand", Cap: MaxRecoveryAge},
		QueuedResource: "projects/p/locations/us-central2-b/queuedResources/n-autoheal-3-0",
	}
}

func qrIn(state string) *tpu.QueuedResource {
	return &tpu.QueuedResource{Name: "projects/p/locations/us-central2-b/queuedResources/n-autoheal-3-0", State: &tpu.QueuedResourceState{State: state}}
}

// TestQueueTransitions: the queue's phases row by row (queue.go).
func TestQueueTransitions(t *testing.T) {
	cfg := DefaultConfig()
	gen3 := &tpu.Node{Name: queueNode, State: "READY", Health: "HEALTHY", Labels: map[string]string{GenerationLabel: "3"}}
	for _, tt := range []struct {
		name      string
		rec       Recovery
		obs       Observation
		res       StepResult
		wantPhase Phase
		wantEff   EffectKind
	}{
		{"a create's answer lost: read back by its name", queuedRec(PhaseQueueCreating, time.Hour), Observation{},
			StepResult{Effect: EffectCreateQR, Err: &Error{Kind: KindTransient, Err: errors.New("lost")}}, PhaseQueueCreating, EffectNone},
		{"the node read before the first queue: our earlier create made it READY: recovered, not queued (swarm seed 109)", queuedRec(PhaseQueueCreating, time.Hour),
			Observation{Node: gen3}, StepResult{Effect: EffectGet}, PhaseRecovered, EffectNone},
		{"the node read before the first queue: NOT FOUND: the queued resource created", queuedRec(PhaseQueueCreating, time.Hour),
			Observation{}, StepResult{Effect: EffectGet}, PhaseQueueCreating, EffectCreateQR},
		{"the node read before the first queue: someone else's: closed, not queued", queuedRec(PhaseQueueCreating, time.Hour),
			Observation{Node: &tpu.Node{Name: queueNode, State: "READY", Health: "HEALTHY"}}, StepResult{Effect: EffectGet}, PhaseClosed, EffectNone},
		{"after the lost answer, NOT FOUND: created again by the same name", queuedRec(PhaseQueueCreating, time.Hour), Observation{},
			StepResult{Effect: EffectGetQR}, PhaseQueueCreating, EffectCreateQR},
		{"ALREADY_EXISTS: ours landed, read it", queuedRec(PhaseQueueCreating, time.Hour), Observation{},
			StepResult{Effect: EffectCreateQR, Err: &Error{Kind: KindAlreadyExists, Err: errors.New("exists")}}, PhaseQueueCreating, EffectGetQR},
		{"read back WAITING: queued, looked at again later", queuedRec(PhaseQueueCreating, time.Hour), Observation{QueuedResource: qrIn("WAITING_FOR_RESOURCES")},
			StepResult{Effect: EffectGetQR}, PhaseQueued, EffectNone},
		{"ACTIVE: read the node", queuedRec(PhaseQueued, time.Hour), Observation{QueuedResource: qrIn("ACTIVE")},
			StepResult{Effect: EffectGetQR}, PhaseQueued, EffectGet},
		{"ACTIVE and the node READY with our label: recovered", queuedRec(PhaseQueued, time.Hour), Observation{Node: gen3},
			StepResult{Effect: EffectGet}, PhaseRecovered, EffectNone},
		{"FAILED: our queued resource deleted", queuedRec(PhaseQueued, time.Hour), Observation{QueuedResource: qrIn("FAILED")},
			StepResult{Effect: EffectGetQR}, PhaseQueueDeleting, EffectDeleteQR},
		{"SUSPENDED: our queued resource deleted", queuedRec(PhaseQueued, time.Hour), Observation{QueuedResource: qrIn("SUSPENDED")},
			StepResult{Effect: EffectGetQR}, PhaseQueueDeleting, EffectDeleteQR},
		{"SUSPENDING: waited for", queuedRec(PhaseQueued, time.Hour), Observation{QueuedResource: qrIn("SUSPENDING")},
			StepResult{Effect: EffectGetQR}, PhaseQueued, EffectNone},
		{"deleted (its delete NOT FOUND): queued again", queuedRec(PhaseQueueDeleting, time.Hour), Observation{},
			StepResult{Effect: EffectDeleteQR, Err: &Error{Kind: KindNotFound, Err: errors.New("gone")}}, PhaseQueueCreating, EffectCreateQR},
		{"its delete's operation polled first", func() Recovery { r := queuedRec(PhaseQueueDeleting, time.Hour); r.Queue.Op = "op-d"; return r }(), Observation{},
			StepResult{}, PhaseQueueDeleting, EffectPoll},
		{"still DELETING: waited for", queuedRec(PhaseQueueDeleting, time.Hour), Observation{QueuedResource: qrIn("DELETING")},
			StepResult{Effect: EffectGetQR}, PhaseQueueDeleting, EffectNone},
		{"no requeue left: abandoned once deleted", func() Recovery { r := queuedRec(PhaseQueueDeleting, time.Hour); r.Queue.Requeues = 2; return r }(), Observation{},
			StepResult{Effect: EffectGetQR}, PhaseAbandoned, EffectNone},
		{"the cap reached while queued: its queued resource deleted first", func() Recovery {
			r := queuedRec(PhaseQueued, time.Hour)
			r.StartedAt = queueNow.Add(-MaxRecoveryAge)
			return r
		}(), Observation{}, StepResult{}, PhaseQueueDeleting, EffectDeleteQR},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := *tt.rec.Queue
			got, eff := Advance(tt.rec, tt.obs, tt.res, queueNow, cfg)
			if got.Phase != tt.wantPhase || eff.Kind != tt.wantEff {
				t.Errorf("Advance = phase %s effect %q (%s), want %s %q", got.Phase, eff.Kind, got.LastError, tt.wantPhase, tt.wantEff)
			}
			if *tt.rec.Queue != before {
				t.Errorf("the queue of the recovery passed in changed: %+v, was %+v", *tt.rec.Queue, before)
			}
		})
	}
}

// TestQueueRequeueNamesANewQueuedResource: queued again after a FAILED
// one, the next queued resource has the next name, a new valid-until, and
// the requeue counted; the cap is the one set at the first queue.
func TestQueueRequeueNamesANewQueuedResource(t *testing.T) {
	rec := queuedRec(PhaseQueueDeleting, time.Hour)
	rec.Queue.Cap = 30 * time.Hour
	got, eff := Advance(rec, Observation{}, StepResult{Effect: EffectGetQR}, queueNow, DefaultConfig())
	want := "projects/p/locations/us-central2-b/queuedResources/n-autoheal-3-1"
	if eff.Kind != EffectCreateQR || eff.Target != want || got.Queue.Name != want || got.Queue.Requeues != 1 {
		t.Fatalf("effect %s %s, queue %+v; want a create of %s, requeue 1", eff.Kind, eff.Target, *got.Queue, want)
	}
	if !got.Queue.ValidUntil.Equal(queueNow.Add(time.Hour)) || got.Queue.Cap != 30*time.Hour {
		t.Errorf("valid until %s cap %s, want %s and the cap kept (30h)", got.Queue.ValidUntil, got.Queue.Cap, queueNow.Add(time.Hour))
	}
	if eff.QueuedResource.QueueingPolicy.ValidUntilDuration != "3600s" || eff.QueuedResource.Tpu.NodeSpec[0].NodeId != "n" {
		t.Errorf("queued resource %+v, want valid for 3600s, node n", eff.QueuedResource)
	}
}

// TestQueueStartsAfterTheStockoutsVerdictWithTierAndCap: a create whose
// operation ended in a stockout (its verdict) of a node asking for the
// queue becomes a create of a queued resource at once, in the tier of the
// node's scheduling; the recovery cap is raised when VALID_FOR ×
// (AUTOHEAL_MAX_REQUEUES+1) does not fit in MaxRecoveryAge, and kept when
// it does.
func TestQueueStartsAfterTheStockoutsVerdictWithTierAndCap(t *testing.T) {
	stockout := &Error{Kind: KindStockout, Err: errors.New(`create operation op-c: There is no more capacity in the zone "us-central2-b"`)}
	for _, tt := range []struct {
		name       string
		value      string
		scheduling *tpu.SchedulingConfig
		wantTier   string
		wantCap    time.Duration
	}{
		// Started an hour ago: 1h + 12h×3 + 1h slack.
		{"spot, default 12h: cap raised", "queue", &tpu.SchedulingConfig{Spot: true}, "spot", 38 * time.Hour},
		{"preemptible is spot", "queue:6h", &tpu.SchedulingConfig{Preemptible: true}, "spot", MaxRecoveryAge},
		{"reserved is guaranteed", "queue:2h", &tpu.SchedulingConfig{Reserved: true}, "guaranteed", MaxRecoveryAge},
		{"on demand has no tier", "queue:8h", nil, "on-demand", 26 * time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := Recovery{Node: queueNode, Action: ActionRecreate, Phase: PhaseCreating, Generation: 3, StartedAt: queueNow.Add(-time.Hour), CreateOp: "op-c",
				Spec: &tpu.Node{AcceleratorType: "v4-8", RuntimeVersion: "r", SchedulingConfig: tt.scheduling, Metadata: map[string]string{StockoutMetadataKey: tt.value}}}
			got, eff := Advance(rec, Observation{}, StepResult{Effect: EffectPoll, Done: true, Err: stockout}, queueNow, DefaultConfig())
			if got.Phase != PhaseQueueCreating || eff.Kind != EffectGet || eff.Target != queueNode {
				t.Fatalf("Advance = %s %q, want queue-creating and the node read first", got.Phase, eff.Kind)
			}
			got, eff = Advance(got, Observation{}, StepResult{Effect: EffectGet}, queueNow, DefaultConfig())
			if got.Phase != PhaseQueueCreating || eff.Kind != EffectCreateQR || got.Stockouts != 1 {
				t.Fatalf("Advance = %s %q (stockouts %d), want queue-creating, create-queued-resource, the stockout counted", got.Phase, eff.Kind, got.Stockouts)
			}
			q := eff.QueuedResource
			tier := "on-demand"
			switch {
			case q.Spot != nil:
				tier = "spot"
			case q.Guaranteed != nil:
				tier = "guaranteed"
			}
			if tier != tt.wantTier || got.Queue.Cap != tt.wantCap {
				t.Errorf("tier %s cap %s, want %s %s", tier, got.Queue.Cap, tt.wantTier, tt.wantCap)
			}
			if n := q.Tpu.NodeSpec[0].Node; n.Labels[GenerationLabel] != "3" || (tier == "spot") != (n.SchedulingConfig == nil && tt.scheduling != nil) {
				t.Errorf("node spec labels %v scheduling %+v: want our generation, the scheduling in the tier for spot only", n.Labels, n.SchedulingConfig)
			}
		})
	}
}

// TestQueueDoesNotStartOnAQuotaNorForAWaitNode: only a stockout, of a node
// asking for the queue, starts it.
func TestQueueDoesNotStartOnAQuotaNorForAWaitNode(t *testing.T) {
	quota := &Error{Kind: KindQuota, Err: errors.New("create operation op-c: Quota 'TPUV4_CHIPS' exceeded. Limit: 64.0 in region us-central2.")}
	stockout := &Error{Kind: KindStockout, Err: errors.New(`create operation op-c: There is no more capacity in the zone "us-central2-b"`)}
	for name, tt := range map[string]struct {
		value string
		err   error
	}{"a quota": {"queue", quota}, "a node asking to wait": {"wait", stockout}} {
		t.Run(name, func(t *testing.T) {
			rec := Recovery{Node: queueNode, Action: ActionRecreate, Phase: PhaseCreating, Generation: 3, StartedAt: queueNow, CreateOp: "op-c",
				Spec: &tpu.Node{AcceleratorType: "v4-8", RuntimeVersion: "r", Metadata: map[string]string{StockoutMetadataKey: tt.value}}}
			got, eff := Advance(rec, Observation{}, StepResult{Effect: EffectPoll, Done: true, Err: tt.err}, queueNow, DefaultConfig())
			if got.Phase != PhaseDeleted || eff.Kind != EffectNone || got.Queue != nil {
				t.Errorf("Advance = %s %q queue %v, want deleted, waiting, no queue", got.Phase, eff.Kind, got.Queue)
			}
		})
	}
}
