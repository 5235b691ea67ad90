package policy

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

// The queue fallback (metadata autoheal-stockout=queue[:VALID_FOR]), as
// pure transitions: after the first stockout of a recreate (the refused
// create's verdict: its call's refusal or its operation's error, so no
// create of ours is still under way), the recreate becomes a queued
// resource with the saved spec, followed like any recovery:
//
//	queue-creating → queued (WAITING_FOR_RESOURCES … ACTIVE, the node READY
//	with our generation label) → recovered
//	queued (FAILED: valid-until passed; SUSPENDED) → queue-deleting →
//	queue-creating (a new queued resource), at most MaxRequeues times;
//	then, or when the raised cap is reached, queue-deleting → abandoned.
//
// Our queued resource is named after the node, the generation and the
// requeue, and saved before its create is sent: a create whose answer was
// lost is read back by that name, and created again only when NOT FOUND.
// A queued resource of ours is always deleted before the recovery moves
// on or gives up: a FAILED one still holds quota.

// Phases of the queue fallback.
const (
	PhaseQueueCreating Phase = "queue-creating" // our queued resource's create requested (Queue.Op once its answer came)
	PhaseQueued        Phase = "queued"         // our queued resource exists: waiting for it ACTIVE and the node READY
	PhaseQueueDeleting Phase = "queue-deleting" // our FAILED or SUSPENDED queued resource's delete requested
)

// Effects of the queue fallback.
const (
	EffectCreateQR EffectKind = "create-queued-resource" // create Effect.QueuedResource as Effect.Target
	EffectDeleteQR EffectKind = "delete-queued-resource" // delete the queued resource Effect.Target (and its nodes)
)

// DefaultMaxRequeues is Config.MaxRequeues's default
// (AUTOHEAL_MAX_REQUEUES): how many times a queued recovery queues again
// after its queued resource FAILED or was SUSPENDED.
const DefaultMaxRequeues = 2

// QueueLookAgain is how often a queued resource waiting for capacity is
// read (unless Config.LookAgain is longer): a queue lasts hours, and the
// sweep runs every minute anyway.
const QueueLookAgain = time.Minute

// queueCapSlack is added to VALID_FOR × (requeues+1) when the queue raises
// a recovery's cap: for the delete and create between two queued resources
// and the node's boot after ACTIVE.
const queueCapSlack = time.Hour

// QueueState is a queued recovery's queue: saved in the recovery, copied
// (never changed in place) by every transition.
type QueueState struct {
	Name       string        // our queued resource, projects/P/locations/Z/queuedResources/Q
	Op         string        // its create's or delete's operation, until seen done
	Tier       string        // spot, guaranteed (a reservation) or on-demand
	ValidFor   time.Duration // of each queued resource (queue:VALID_FOR)
	ValidUntil time.Time     // of the current one, from its create
	Requeues   int           // queued again after a FAILED or SUSPENDED one
	// Cap is the recovery's bound while queued (RecoveryAge), raised from
	// MaxRecoveryAge when VALID_FOR × (MaxRequeues+1) does not fit in it.
	Cap time.Duration
	// End, once set, is why the recovery is abandoned when its queued
	// resource is deleted ("" = it queues again).
	End string
}

// RecoveryCap is how long rec may be under way (RecoveryAge) before it is
// abandoned: MaxRecoveryAge, or its queue's raised cap.
func RecoveryCap(rec Recovery) time.Duration {
	if rec.Queue != nil && rec.Queue.Cap > MaxRecoveryAge {
		return rec.Queue.Cap
	}
	return MaxRecoveryAge
}

func queuePhase(p Phase) bool {
	return p == PhaseQueueCreating || p == PhaseQueued || p == PhaseQueueDeleting
}

func maxRequeues(cfg Config) int {
	if cfg.MaxRequeues < 0 {
		return 0
	}
	return cfg.MaxRequeues
}

// queueLook is when a queued resource waiting for capacity is read again.
func queueLook(now time.Time, cfg Config) time.Time {
	return now.Add(max(QueueLookAgain, LookAgainFor(cfg)))
}

// withQueue is rec with a copy of its queue to change.
func withQueue(rec Recovery) (Recovery, *QueueState) {
	q := QueueState{}
	if rec.Queue != nil {
		q = *rec.Queue
	}
	rec.Queue = &q
	return rec, &q
}

// queueAfterStockout is the hook after advanceRecreate: a create of prev
// just refused for capacity, with its verdict (next is back in deleted),
// of a node asking for the queue, starts the queue now.
func queueAfterStockout(prev, next Recovery, eff Effect, now time.Time, cfg Config) (Recovery, Effect) {
	if next.Phase != PhaseDeleted || next.Stockouts <= prev.Stockouts || next.Queue != nil {
		return next, eff
	}
	if f, why := fallbackOf(next, cfg); why == "" && f.Mode == FallbackQueue {
		return startQueue(next, f.ValidFor, now, cfg)
	}
	return next, eff
}

// queueRefusal says why a node with spec cannot be queued ("" when it
// can): a legacy TPU Node (v1) has no queued resources, nor does a spec
// not saved.
func queueRefusal(spec *tpu.Node) string {
	switch {
	case spec == nil:
		return "queue: refused: no saved spec"
	case spec.ApiVersion == "V1" || spec.ApiVersion == "V1_ALPHA1":
		return "queue: refused: a legacy TPU Node (TPU v1 API) has no queued resources"
	}
	return ""
}

// queuedResourceID is our queued resource's id for node nodeID: the node,
// the generation and the requeue, within the API's 63 characters.
func queuedResourceID(nodeID string, gen, requeues int) string {
	suffix := "-autoheal-" + strconv.Itoa(gen) + "-" + strconv.Itoa(requeues)
	if len(nodeID)+len(suffix) > 63 {
		nodeID = strings.TrimRight(nodeID[:63-len(suffix)], "-")
	}
	return nodeID + suffix
}

// startQueue moves rec (deleted, spec saved) to queue-creating with a new
// queued resource and asks for its create.
func startQueue(rec Recovery, validFor time.Duration, now time.Time, cfg Config) (Recovery, Effect) {
	first := rec.Queue == nil
	rec, q := withQueue(rec)
	parent, _, _, nodeID, err := ParseNodeName(rec.Node)
	if err != nil {
		return Abandon(rec, "queue: "+err.Error()), Effect{}
	}
	q.Name = parent + "/queuedResources/" + queuedResourceID(nodeID, rec.Generation, q.Requeues)
	q.ValidFor, q.ValidUntil, q.Op, q.Tier = validFor, now.Add(validFor), "", queueTier(rec.Spec)
	if first {
		q.Cap = MaxRecoveryAge
		var age time.Duration
		if !rec.StartedAt.IsZero() {
			age = RecoveryAge(rec, now)
		}
		if need := age + validFor*time.Duration(maxRequeues(cfg)+1) + queueCapSlack; need > q.Cap {
			q.Cap = need
		}
	}
	rec.Phase, rec.QueuedResource, rec.NextLookAt, rec.GoneAt = PhaseQueueCreating, q.Name, time.Time{}, time.Time{}
	if first {
		// The node is read before the first queued resource is asked for:
		// an earlier create of ours whose operation said it failed may
		// have made it all the same, and a queued resource beside it
		// would be a second node of one name.
		return rec, Effect{Kind: EffectGet, Target: rec.Node}
	}
	qr, spec, warnings := queuedResourceFor(rec, parent, nodeID, cfg)
	return rec, Effect{Kind: EffectCreateQR, Target: q.Name, Spec: spec, QueuedResource: qr, Warnings: warnings}
}

// queueTier is the queued resource tier matching the node's scheduling.
func queueTier(spec *tpu.Node) string {
	switch sc := spec.SchedulingConfig; {
	case sc != nil && (sc.Spot || sc.Preemptible):
		return "spot"
	case sc != nil && sc.Reserved:
		return "guaranteed"
	}
	return "on-demand"
}

// queuedResourceFor is the queued resource rec's queue creates: the saved
// spec as createSpec makes it (the startup script, our generation label),
// under the node's own name, in the tier of its scheduling (spot and
// preemptible → spot, the tier saying what the node's schedulingConfig
// said; reserved → guaranteed, the node's schedulingConfig.reserved kept,
// v2's guaranteed tier naming no reservation; else no tier, on demand),
// valid for the queue's VALID_FOR.
func queuedResourceFor(rec Recovery, parent, nodeID string, cfg Config) (*tpu.QueuedResource, *tpu.Node, []string) {
	spec, warnings := CreateSpec(rec.Spec, rec.Generation, cfg)
	node := *spec
	q := &tpu.QueuedResource{
		Tpu:            &tpu.Tpu{NodeSpec: []*tpu.NodeSpec{{Parent: parent, NodeId: nodeID, Node: &node}}},
		QueueingPolicy: &tpu.QueueingPolicy{ValidUntilDuration: strconv.FormatInt(int64(rec.Queue.ValidFor/time.Second), 10) + "s"},
	}
	switch rec.Queue.Tier {
	case "spot":
		q.Spot = &tpu.Spot{}
		node.SchedulingConfig = nil
	case "guaranteed":
		q.Guaranteed = &tpu.Guaranteed{}
	}
	return q, spec, warnings
}

// advanceQueue is Advance for a recovery in a queue phase. Its bound is
// the queue's cap (QueueState.Cap), checked before anything but the
// delete of our queued resource, which ends the queue either way.
func advanceQueue(rec Recovery, obs Observation, res StepResult, now time.Time, cfg Config) (Recovery, Effect) {
	if rec.Queue == nil || rec.Spec == nil {
		return Abandon(rec, fmt.Sprintf("phase %s without its queue or spec", rec.Phase)), Effect{}
	}
	if rec.Phase != PhaseQueueDeleting && !rec.StartedAt.IsZero() && RecoveryAge(rec, now) >= rec.Queue.Cap {
		return queueDelete(rec, fmt.Sprintf("still unfinished %s after it started, the cap raised for its queue (phase %s; last error: %s)",
			rec.Queue.Cap, rec.Phase, orNone(rec.LastError)), true)
	}
	switch rec.Phase {
	case PhaseQueueCreating:
		return advanceQueueCreating(rec, obs, res, now, cfg)
	case PhaseQueued:
		return advanceQueued(rec, obs, res, now, cfg)
	}
	return advanceQueueDeleting(rec, obs, res, now, cfg)
}

// queueOp is the common part of following our create or delete of the
// queued resource: the call's answer, and its operation to its verdict.
// done is true when the operation finished without error (or the call
// said NOT FOUND, for a delete: nothing left to delete); handled is false
// when none of this applies (res is a read, or nothing).
func queueOp(rec Recovery, res StepResult, call EffectKind, now time.Time, cfg Config) (next Recovery, eff Effect, done, handled bool) {
	rec, q := withQueue(rec)
	step := string(call)
	switch {
	case res.Effect == call && res.Err == nil:
		q.Op = res.Operation
		if res.Operation != "" {
			rec.SentOps = AppendOp(rec.SentOps, res.Operation)
		}
		next, eff = wait(rec, now, cfg, "", false)
		return next, eff, false, true
	case res.Effect == call && call == EffectDeleteQR && IsNotFound(res.Err):
		q.Op = ""
		return rec, Effect{}, true, true
	case res.Effect == call && call == EffectCreateQR && IsAlreadyExists(res.Err):
		// The name is ours alone: an earlier create of ours landed.
		return rec, Effect{Kind: EffectGetQR, Target: q.Name}, false, true
	case res.Effect == call:
		next, eff = fail(rec, step, res.Err, now, cfg) // the next look reads it
		return next, eff, false, true
	case q.Op != "" && res.Effect != EffectPoll:
		return rec, Effect{Kind: EffectPoll, Target: q.Op}, false, true
	case q.Op != "" && !res.Done && IsNotFound(res.Err):
		q.Op = "" // the operation is unknown: believe the queued resource
		return rec, Effect{Kind: EffectGetQR, Target: q.Name}, false, true
	case q.Op != "" && !res.Done && res.Err != nil:
		next, eff = fail(rec, "poll-"+step, res.Err, now, cfg)
		return next, eff, false, true
	case q.Op != "" && !res.Done:
		next, eff = wait(rec, now, cfg, "", false)
		return next, eff, false, true
	case q.Op != "" && res.Err == nil:
		q.Op = ""
		return rec, Effect{}, true, true
	case q.Op != "":
		// Ended in error, never polled again; it may have taken effect
		// all the same: the queued resource tells, at the next look.
		q.Op = ""
		next, eff = fail(rec, step+" operation", res.Err, now, cfg)
		return next, eff, false, true
	}
	return rec, Effect{}, false, false
}

// queueLooked is what a queue-creating or queue-deleting recovery does
// with a failed look, or with the node read before its queued resource: a
// node of our generation is an earlier create of ours (not queued); one
// without it was made by someone else.
func queueLooked(rec Recovery, obs Observation, res StepResult, now time.Time, cfg Config) (Recovery, Effect) {
	switch {
	case res.Effect == EffectGet && res.Err != nil:
		return fail(rec, "get", res.Err, now, cfg)
	case res.Effect == EffectGetQR:
		return fail(rec, "get-queued-resource", res.Err, now, cfg)
	case ourGeneration(rec, obs.Node):
		// An earlier create of ours made the node: not queued.
		rec.Queue, rec.QueuedResource, rec.Phase = nil, "", PhaseCreated
		if Healthy(obs.Node) {
			return recovered(rec, obs.Node), Effect{}
		}
		return wait(rec, now, cfg, "node is "+Describe(obs.Node)+": an earlier create of ours made it; not queued", false)
	}
	return CloseRecovery(rec, fmt.Sprintf("node %s has no label %s=%d: created by someone else before it was queued; left as it is", Describe(obs.Node), GenerationLabel, rec.Generation)), Effect{}
}

func advanceQueueCreating(rec Recovery, obs Observation, res StepResult, now time.Time, cfg Config) (Recovery, Effect) {
	next, eff, done, handled := queueOp(rec, res, EffectCreateQR, now, cfg)
	switch {
	case done:
		// Queued: the stockout that started it is told (its record), and
		// no later look of the queue is a failed attempt.
		next.Phase, next.LastError, next.LastKind = PhaseQueued, "", KindNone
		return next, Effect{Kind: EffectGetQR, Target: next.Queue.Name}
	case handled:
		return next, eff
	case res.Effect == EffectGet && (res.Err != nil || obs.Node != nil), res.Effect == EffectGetQR && res.Err != nil:
		return queueLooked(rec, obs, res, now, cfg)
	case res.Effect == EffectGet || res.Effect == EffectGetQR && obs.QueuedResource == nil:
		// Never created (or its create is not seen yet): create it, by
		// the same name; one that lands meanwhile makes it ALREADY_EXISTS.
		parent, _, _, nodeID, _ := ParseNodeName(rec.Node)
		qr, spec, warnings := queuedResourceFor(rec, parent, nodeID, cfg)
		return rec, Effect{Kind: EffectCreateQR, Target: rec.Queue.Name, Spec: spec, QueuedResource: qr, Warnings: warnings}
	case res.Effect == EffectGetQR:
		rec.Phase, rec.LastError, rec.LastKind = PhaseQueued, "", KindNone
		return advanceQueued(rec, obs, res, now, cfg) // the fresh read serves queued too
	}
	return rec, Effect{Kind: EffectGetQR, Target: rec.Queue.Name}
}

func advanceQueued(rec Recovery, obs Observation, res StepResult, now time.Time, cfg Config) (Recovery, Effect) {
	name := rec.Queue.Name
	switch {
	case res.Effect == EffectGetQR && res.Err != nil:
		return fail(rec, "get-queued-resource", res.Err, now, cfg)
	case res.Effect == EffectGetQR && obs.QueuedResource == nil:
		return queueGone(rec, now, cfg)
	case res.Effect == EffectGetQR:
		rec.GoneAt = time.Time{}
		switch state := qrState(obs.QueuedResource); state {
		case "ACTIVE":
			return rec, Effect{Kind: EffectGet, Target: rec.Node}
		case "FAILED", "SUSPENDED":
			return queueDelete(rec, fmt.Sprintf("queued resource %s %s%s", name, state, qrFailure(obs.QueuedResource)), false)
		case "DELETING":
			// Not by us: we delete only in queue-deleting.
			return wait(rec, now, cfg, "queued resource "+name+" is DELETING, not by this recovery", true)
		default: // CREATING, ACCEPTED, WAITING_FOR_RESOURCES, PROVISIONING, SUSPENDING
			rec.NextLookAt = queueLook(now, cfg)
			return rec, Effect{}
		}
	case res.Effect == EffectGet && res.Err != nil:
		return fail(rec, "get", res.Err, now, cfg)
	case res.Effect == EffectGet:
		node := obs.Node
		switch {
		case node == nil:
			return wait(rec, now, cfg, "node NOT FOUND while queued resource "+name+" is ACTIVE", true)
		case ourGeneration(rec, node) && Healthy(node):
			return recovered(rec, node), Effect{}
		case ourGeneration(rec, node):
			return wait(rec, now, cfg, "node is "+Describe(node)+" after queued resource "+name+" turned ACTIVE", node.State != "CREATING")
		}
		return wait(rec, now, cfg, fmt.Sprintf("node %s has no label %s=%d while queued resource %s is ACTIVE", Describe(node), GenerationLabel, rec.Generation, name), true)
	}
	return rec, Effect{Kind: EffectGetQR, Target: name}
}

// qrFailure is a FAILED queued resource's error, for a record.
func qrFailure(q *tpu.QueuedResource) string {
	if q.State != nil && q.State.FailedData != nil && q.State.FailedData.Error != nil {
		return ": " + q.State.FailedData.Error.Message
	}
	return ""
}

// queueGone: our queued resource is NOT FOUND after its create finished.
// A person's delete in evidence closes the recovery naming it; with none,
// it is waited for (a read may lag) for EvidenceWait, then abandoned: the
// queued resource is not created again on one read.
func queueGone(rec Recovery, now time.Time, cfg Config) (Recovery, Effect) {
	name := rec.Queue.Name
	if e := personsDelete(rec, events.ChangeDeleteQueuedResource, rec.StartedAt, cfg, false); e != nil && e.QueuedResource == name {
		return CloseRecovery(rec, fmt.Sprintf("queued resource %s NOT FOUND: deleted by %s; not queued again", name, describeEvidence(e))), Effect{}
	}
	if rec.GoneAt.IsZero() {
		rec.GoneAt = now
	}
	if until := rec.GoneAt.Add(evidenceWait(cfg)); now.Before(until) {
		rec.NextLookAt = until
		return rec, Effect{}
	}
	return Abandon(rec, fmt.Sprintf("queued resource %s NOT FOUND after its create finished, and no audit entry of anyone's delete within %s: not queued again", name, evidenceWait(cfg))), Effect{}
}

// queueDelete moves rec to queue-deleting: our queued resource is deleted,
// then queued again or, when end (the cap) or no requeue is left, the
// recovery abandoned (queueDeleted). why is what happened to it.
func queueDelete(rec Recovery, why string, end bool) (Recovery, Effect) {
	rec, q := withQueue(rec)
	rec.LastError, rec.LastKind = why, KindNone
	if end && q.End == "" {
		q.End = why
	}
	rec.Phase, q.Op, rec.NextLookAt = PhaseQueueDeleting, "", time.Time{}
	return rec, Effect{Kind: EffectDeleteQR, Target: q.Name}
}

func advanceQueueDeleting(rec Recovery, obs Observation, res StepResult, now time.Time, cfg Config) (Recovery, Effect) {
	next, eff, done, handled := queueOp(rec, res, EffectDeleteQR, now, cfg)
	switch {
	case done:
		return queueDeleted(next, now, cfg)
	case handled:
		return next, eff
	case res.Effect == EffectGet && (res.Err != nil || obs.Node != nil), res.Effect == EffectGetQR && res.Err != nil:
		return queueLooked(rec, obs, res, now, cfg)
	case res.Effect == EffectGet || res.Effect == EffectGetQR && obs.QueuedResource == nil:
		return queueDeleted(rec, now, cfg)
	case res.Effect == EffectGetQR && qrState(obs.QueuedResource) == "DELETING":
		return wait(rec, now, cfg, "queued resource "+rec.Queue.Name+" still DELETING", true)
	case res.Effect == EffectGetQR:
		return rec, Effect{Kind: EffectDeleteQR, Target: rec.Queue.Name}
	}
	return rec, Effect{Kind: EffectGetQR, Target: rec.Queue.Name}
}

// queueDeleted: our queued resource is gone. Queue again, or abandon.
func queueDeleted(rec Recovery, now time.Time, cfg Config) (Recovery, Effect) {
	q := rec.Queue
	switch {
	case q.End != "":
		return Abandon(rec, q.End+"; its queued resource "+q.Name+" deleted"), Effect{}
	case q.Requeues >= maxRequeues(cfg):
		return Abandon(rec, fmt.Sprintf("%s, after %d requeues (AUTOHEAL_MAX_REQUEUES=%d); its queued resource deleted", rec.LastError, q.Requeues, maxRequeues(cfg))), Effect{}
	}
	rec, nq := withQueue(rec)
	nq.Requeues++
	return startQueue(rec, nq.ValidFor, now, cfg)
}

// describeQueue is what a record says of rec's queue: queued, where, in
// which tier, valid until when.
func describeQueue(rec Recovery) string {
	q := rec.Queue
	_, zone := NodeProjectZone(rec.Node)
	s := fmt.Sprintf("queue:%s: queued as %s (%s) in %s, valid until %s", shortDur(q.ValidFor), q.Name, q.Tier, zone, q.ValidUntil.UTC().Format(time.RFC3339))
	if q.Requeues > 0 {
		s += fmt.Sprintf(", requeue %d", q.Requeues)
	}
	if q.Cap > MaxRecoveryAge {
		s += fmt.Sprintf("; recovery cap raised to %s for the queue", shortDur(q.Cap))
	}
	return s
}

func shortDur(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	return strings.TrimSuffix(s, "0m")
}
