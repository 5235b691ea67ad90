package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

// This file is the recovery as a pure state machine: Advance takes the saved
// recovery, what was last observed and what the last call returned, and
// gives the next recovery and the one call to make next. The handler
// (run.go) saves the next recovery before it makes the call, and never
// waits for an operation: after a delete, create or reset is issued the
// recovery is saved with its operation and a NextLookAt, and a later
// delivery, sweep or Continue looks at the operation once.

// EffectKind is the call a recovery asks for next.
type EffectKind string

// Effects. All are TPU calls but markReset and defer, which are ledger
// writes.
const (
	EffectNone      EffectKind = ""                    // nothing now: terminal, or waiting until NextLookAt
	EffectGet       EffectKind = "get"                 // read the node (Observation.Node)
	EffectGetQR     EffectKind = "get-queued-resource" // read the queued resource (Observation.QueuedResource)
	EffectDelete    EffectKind = "delete"              // delete the node
	EffectCreate    EffectKind = "create"              // create the node from Effect.Spec
	EffectPoll      EffectKind = "poll-operation"      // look at Effect.Target's operation once
	EffectReset     EffectKind = "reset"               // reset the queued resource
	EffectMarkReset EffectKind = "mark-reset"          // ledger: claim the one reset of this incident of the queued resource
	EffectDefer     EffectKind = "defer"               // ledger: look at the node again at Effect.Due
)

// Effect is the one call to make next.
type Effect struct {
	Kind   EffectKind
	Target string    // the node, operation or queued resource
	Spec   *tpu.Node // create: the node to create (createSpec of the saved spec)
	// QueuedResource: create-queued-resource's queued resource (queue.go).
	QueuedResource *tpu.QueuedResource
	Due            time.Time // defer
	Reason         string    // defer
	// Warnings are for the record (create: no startup script to resume
	// training with, say).
	Warnings []string
}

// Observation is the node (and its queued resource) as last read.
type Observation struct {
	Node           *tpu.Node           // nil: NOT FOUND
	QueuedResource *tpu.QueuedResource // nil: NOT FOUND (or not read)
}

// StepResult is what the last effect returned. The zero value means no
// effect was made yet in this call: the first Advance after a claim, or a
// continuation.
type StepResult struct {
	Effect    EffectKind
	Operation string // delete, create, reset: the operation started
	Done      bool   // poll: the operation finished (Err is then its error)
	First     bool   // mark-reset: this recovery holds the incident's one reset
	Err       error  // the call's failure (get: NOT FOUND is not an error but a nil node)
}

// Timing of continuations.
const (
	// LookAgain is when an operation just started, or a node in progress,
	// is looked at again, unless Config.LookAgain says otherwise. Sweeps
	// run every minute (the Terraform module), so without a sweep that
	// follows its recoveries (SweepOptions.Follow) the next look is
	// within a minute of this.
	LookAgain = 30 * time.Second
	// maxBackoff caps the back-off after a transient failure.
	maxBackoff = 10 * time.Minute
	// TransientWeight and PermanentWeight are what a failure adds to
	// Recovery.Failures; the limit is PermanentWeight×MaxAttempts.
	TransientWeight = 1
	PermanentWeight = 4
)

// Advance is the recovery's transition function. It is pure.
func Advance(rec Recovery, obs Observation, res StepResult, now time.Time, cfg Config) (Recovery, Effect) {
	if rec.Phase.Terminal() {
		return rec, Effect{}
	}
	if queuePhase(rec.Phase) {
		return advanceQueue(rec, obs, res, now, cfg) // queue.go: its own, raised cap
	}
	if !rec.StartedAt.IsZero() && RecoveryAge(rec, now) >= MaxRecoveryAge {
		return Abandon(rec, fmt.Sprintf("still unfinished %s after it started (phase %s; last error: %s)", MaxRecoveryAge, rec.Phase, orNone(rec.LastError))), Effect{}
	}
	if rec.Action == ActionReset {
		return advanceReset(rec, obs, res, now, cfg)
	}
	next, eff := advanceRecreate(rec, obs, res, now, cfg)
	return queueAfterStockout(rec, next, eff, now, cfg) // queue.go
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// get asks for a fresh read of the node unless res is one; ok is true when
// res is a successful read the caller may decide on.
func get(rec Recovery, res StepResult, now time.Time, cfg Config) (next Recovery, eff Effect, ok bool) {
	switch {
	case res.Effect != EffectGet:
		return rec, Effect{Kind: EffectGet, Target: zoneTarget(rec)}, false
	case res.Err != nil:
		next, eff = fail(rec, "get", res.Err, now, cfg)
		return next, eff, false
	}
	return rec, Effect{}, true
}

func advanceRecreate(rec Recovery, obs Observation, res StepResult, now time.Time, cfg Config) (Recovery, Effect) {
	node := obs.Node
	switch rec.Phase {
	case PhaseClaimed:
		next, eff, ok := get(rec, res, now, cfg)
		if !ok {
			return next, eff
		}
		if why := notToRecreate(node, cfg); why != "" {
			return CloseRecovery(rec, why), Effect{}
		}
		// The spec is saved with the phase that requests the delete, in one
		// write, before the delete is sent.
		rec.Spec, rec.NodeID = CleanSpec(node), node.Id
		rec.Phase, rec.DeleteSent, rec.DeleteOp = PhaseDeleting, true, ""
		return rec, Effect{Kind: EffectDelete, Target: rec.Node}

	case PhaseSaved: // saved before Step: the delete was requested only if DeleteSent said so
		if deleteSent(rec) {
			rec.Phase = PhaseDeleting
			return advanceRecreate(rec, obs, StepResult{}, now, cfg)
		}
		next, eff, ok := get(rec, res, now, cfg)
		if !ok {
			return next, eff
		}
		switch {
		case node == nil:
			return CloseRecovery(rec, fmt.Sprintf("node NOT FOUND before recovery gen %d requested its delete: deleted by someone else; not recreated", rec.Generation)), Effect{}
		case notOurNode(rec, node) != "":
			return CloseRecovery(rec, notOurNode(rec, node)), Effect{}
		case Healthy(node) || OnPurpose(node.State):
			return CloseRecovery(rec, "node is "+Describe(node)+" before recovery gen "+strconv.Itoa(rec.Generation)+" deleted it: not deleted"), Effect{}
		case node.State == stateDeleting:
			return CloseRecovery(rec, "node is DELETING before recovery gen "+strconv.Itoa(rec.Generation)+" requested its delete: deleted by someone else; not recreated"), Effect{}
		}
		rec.Phase, rec.DeleteSent = PhaseDeleting, true
		return rec, Effect{Kind: EffectDelete, Target: rec.Node}

	case PhaseFailed: // saved before Step: where to resume is read from the node
		next, eff, ok := get(rec, res, now, cfg)
		if !ok {
			return next, eff
		}
		phase, why := resumePhase(rec, node)
		if why != "" {
			return CloseRecovery(rec, why), Effect{}
		}
		rec.Phase = phase
		return advanceRecreate(rec, obs, res, now, cfg) // the fresh read serves the resumed phase too

	case PhaseDeleting:
		return advanceDeleting(rec, obs, res, now, cfg)

	case PhaseDeleted:
		if rec.Spec == nil {
			return Abandon(rec, "no saved spec to create the node from"), Effect{}
		}
		next, eff, hold := zoneMove(rec, obs, res, now, cfg) // zonemove.go
		if hold {
			return next, eff
		}
		rec = next
		spec, warnings := CreateSpec(rec.Spec, rec.Generation, cfg)
		rec.Phase, rec.CreateOp, rec.CreateSentAt, rec.GoneAt = PhaseCreating, "", now, time.Time{}
		return rec, Effect{Kind: EffectCreate, Target: zoneTarget(rec), Spec: zoneMoveSpec(rec, spec), Warnings: warnings}

	case PhaseCreating:
		return advanceCreating(rec, obs, res, now, cfg)

	case PhaseCreated:
		next, eff, ok := get(rec, res, now, cfg)
		if !ok {
			return next, eff
		}
		switch {
		case node == nil:
			// Our create finished and the node is gone: a person deleted
			// it (or the read lags). Never created twice: wait for the
			// evidence to name, then close.
			return createdThenGone(rec, now, cfg)
		case !ourGeneration(rec, node):
			return CloseRecovery(rec, fmt.Sprintf("node %s has no label %s=%d: created by someone else; left as it is", Describe(node), GenerationLabel, rec.Generation)+createEvidenceNote(rec, cfg)), Effect{}
		case Healthy(node):
			return recovered(rec, node), Effect{}
		}
		rec.GoneAt = time.Time{}
		return wait(rec, now, cfg, fmt.Sprintf("node is %s after the create succeeded", Describe(node)), true)
	}
	return Abandon(rec, fmt.Sprintf("unknown phase %q", rec.Phase)), Effect{}
}

// advanceDeleting: the spec is saved and the delete was requested (or is
// about to be: the effect of the transition into deleting).
func advanceDeleting(rec Recovery, obs Observation, res StepResult, now time.Time, cfg Config) (Recovery, Effect) {
	node := obs.Node
	switch {
	case res.Effect == EffectDelete && res.Err == nil:
		rec.DeleteOp, rec.DeleteAnswered = res.Operation, true
		if res.Operation != "" {
			rec.SentOps = AppendOp(rec.SentOps, res.Operation)
		}
		return wait(rec, now, cfg, "", false)
	case res.Effect == EffectDelete:
		// Refused, lost, or NOT FOUND: whatever the answer, the delete was
		// sent and its outcome is ours (it may land later); read now. The
		// failure is counted (a node that exists while delete says NOT
		// FOUND must not loop forever); a NOT FOUND is looked into at
		// once, other failures after their back-off.
		if k := KindOf(res.Err); k != KindPermanent && k != KindAlreadyExists {
			rec.DeleteUnanswered = true // it may have taken effect, or may yet
		}
		if IsNotFound(res.Err) {
			rec.Failures += TransientWeight
			rec.LastError, rec.LastKind = "delete: "+res.Err.Error(), KindNotFound
			if rec.Failures >= FailureLimit(cfg) {
				return Abandon(rec, "delete answered NOT FOUND too often while the node exists: "+res.Err.Error()), Effect{}
			}
			return rec, Effect{Kind: EffectGet, Target: rec.Node}
		}
		rec, _ = fail(rec, "delete", res.Err, now, cfg)
		if !rec.Unfinished() {
			return rec, Effect{}
		}
		return rec, Effect{Kind: EffectGet, Target: rec.Node}
	case rec.DeleteOp != "" && res.Effect != EffectPoll:
		return rec, Effect{Kind: EffectPoll, Target: rec.DeleteOp}
	case rec.DeleteOp != "" && !res.Done && IsNotFound(res.Err):
		rec.DeleteOp = "" // the operation is unknown: believe the node
		return rec, Effect{Kind: EffectGet, Target: rec.Node}
	case rec.DeleteOp != "" && !res.Done && res.Err != nil:
		return fail(rec, "poll-delete", res.Err, now, cfg)
	case rec.DeleteOp != "" && !res.Done:
		return wait(rec, now, cfg, "", false)
	case rec.DeleteOp != "" && res.Err != nil:
		// Finished with an error, never polled again. It may have taken
		// effect all the same (the node deleted, or DELETING still): the
		// node tells, read now; a person's delete meanwhile is known only
		// from its audit entry.
		rec.DeleteOp = ""
		rec, _ = fail(rec, "delete operation", res.Err, now, cfg)
		if !rec.Unfinished() {
			return rec, Effect{}
		}
		return rec, Effect{Kind: EffectGet, Target: rec.Node}
	case rec.DeleteOp != "":
		// Finished: never polled again. Deleted only when the node says so.
		rec.DeleteOp = ""
		return rec, Effect{Kind: EffectGet, Target: rec.Node}
	}
	next, eff, ok := get(rec, res, now, cfg)
	if !ok {
		return next, eff
	}
	if node != nil {
		rec.GoneAt = time.Time{}
	}
	switch {
	case node == nil:
		return deletedNode(rec, obs, now, cfg)
	case notOurNode(rec, node) != "" && node.State != stateDeleting && !rec.DeleteUnanswered:
		// Another node, not being deleted, after every delete we sent was
		// answered and its operation finished: a person's, made after
		// our delete landed (or it would be DELETING or gone). Left as it is.
		return CloseRecovery(rec, notOurNode(rec, node)+personsCreateNote(rec, cfg)), Effect{}
	case notOurNode(rec, node) != "" && node.State != stateDeleting:
		// Another node while a delete of ours may still land on it: never
		// deleted by us again, and not closed on one read either.
		return wait(rec, now, cfg, "node "+Describe(node)+" has another id while a delete of ours has no verdict", true)
	case node.State == stateDeleting:
		// Our delete (its answer lost, its operation finished, or ended in
		// error) is still under way: look again later, counted, so a node
		// stuck DELETING ends abandoned, with its spec, within the failure
		// limit's back-off (about 2.5 h with the defaults) rather than
		// looked at for a day.
		rec, eff := wait(rec, now, cfg, "node is still DELETING", true)
		if rec.Failures >= FailureLimit(cfg) {
			return Abandon(rec, fmt.Sprintf("node still DELETING %s after recovery gen %d started (weighted failures reached the limit %d)",
				now.Sub(rec.StartedAt).Round(time.Second), rec.Generation, FailureLimit(cfg))), Effect{}
		}
		return rec, eff
	}
	if why := leftAlone(node, cfg); why != "" {
		if rec.DeleteUnanswered {
			// A delete of ours failed in a way that may still land: the
			// read alone does not say it did not happen. Look again,
			// counted: it lands (NOT FOUND, ours to create), or the
			// recovery ends abandoned with its spec, never closed on
			// one read.
			return wait(rec, now, cfg, "node is "+why+" while a delete of ours has no verdict", true)
		}
		return CloseRecovery(rec, "node is "+why+" and our delete did not happen: not deleted"+personsDeleteNote(rec, cfg)+personsCreateNote(rec, cfg)), Effect{}
	}
	// The node is there and not being deleted: the delete did not happen
	// (yet: it may still land).
	if rec.NextLookAt.After(now) {
		// A failure of this call is backing off (run clears NextLookAt
		// when it starts): delete again after it. Every delete sent so
		// far refused (a permanent error, no operation): none can take
		// effect, so back to saved, where a node a person deletes
		// meanwhile is not ours. Otherwise the delete stays sent: if it
		// lands meanwhile, that is our doing.
		if !rec.DeleteAnswered && !rec.DeleteUnanswered {
			rec.Phase, rec.DeleteSent = PhaseSaved, false
		}
		return rec, Effect{}
	}
	return rec, Effect{Kind: EffectDelete, Target: rec.Node}
}

// leftAlone says why the present node (not DELETING) is not to be deleted
// again: healthy, stopped or otherwise done on purpose, or opted out; ""
// when it still needs the recovery.
func leftAlone(node *tpu.Node, cfg Config) string {
	switch {
	case Healthy(node) || OnPurpose(node.State):
		return Describe(node)
	case cfg.LabelKey == "" || node.Labels[cfg.LabelKey] != cfg.LabelValue:
		return fmt.Sprintf("%s without label %s=%s (opted out)", Describe(node), cfg.LabelKey, cfg.LabelValue)
	}
	return ""
}

// deleteUnresolved reports whether rec (a recreate) sent a delete that has
// no verdict yet: the node was not seen gone since. Such a recovery owns
// the node's outcome, and no single read of it closes the recovery.
func deleteUnresolved(rec Recovery) bool {
	if rec.Action == ActionReset || !deleteSent(rec) {
		return false
	}
	switch rec.Phase {
	case PhaseSaved, PhaseDeleting, PhaseFailed:
		return true
	}
	return false
}

// personsCreate is the last kept entry of a person's create of the node at
// or after since, nil when there is none.
func personsCreate(rec Recovery, since time.Time, cfg Config) *Evidence {
	var last *Evidence
	for i := range rec.Evidence {
		e := &rec.Evidence[i]
		if e.Change != events.ChangeCreateNode || e.Code != 0 || e.Time.Before(since) || OurEntry(rec, *e, cfg) {
			continue
		}
		if last == nil || !e.Time.Before(last.Time) {
			last = e
		}
	}
	return last
}

// createEvidenceNote says, in the record of a recovery closed on a node
// made but not labelled ours, what the conclusion rests on: a person's
// create in evidence, named, or one read alone. The close takes no action
// on the node either way (a finished node is never lost by it, unlike a
// CREATING one: TestCreatingNodeNotJudged), so the read is not repeated;
// the record only must not claim evidence it lacks.
func createEvidenceNote(rec Recovery, cfg Config) string {
	if n := personsCreateNote(rec, cfg); n != "" {
		return n
	}
	return " (no person's create in evidence: judged on one read of the label; a create of ours whose node was relabelled reads the same)"
}

// personsDeleteNote names a person's delete of the node in a record, ""
// with none.
func personsDeleteNote(rec Recovery, cfg Config) string {
	if e := personsDelete(rec, events.ChangeDeleteNode, rec.StartedAt, cfg, false); e != nil {
		return " (deleted by " + describeEvidence(e) + ")"
	}
	return ""
}

// personsCreateNote names a person's create in a record, "" with none.
func personsCreateNote(rec Recovery, cfg Config) string {
	if e := personsCreate(rec, rec.StartedAt, cfg); e != nil {
		return " (created by " + describeEvidence(e) + ")"
	}
	return ""
}

// deletedNode: the node is NOT FOUND after our delete was sent, which makes
// it ours to create again, unless a person's delete is in evidence. After
// an ambiguous delete the evidence is waited for (EvidenceWait from the
// first NOT FOUND) before the create.
func deletedNode(rec Recovery, obs Observation, now time.Time, cfg Config) (Recovery, Effect) {
	ambiguous := deleteAmbiguous(rec)
	if e := personsDelete(rec, events.ChangeDeleteNode, rec.StartedAt, cfg, ambiguous); e != nil {
		c := personsCreate(rec, e.Time, cfg)
		if c == nil || personsDelete(rec, events.ChangeDeleteNode, c.Time.Add(time.Nanosecond), cfg, ambiguous) != nil {
			return CloseRecovery(rec, fmt.Sprintf("node NOT FOUND: deleted by %s, not by recovery gen %d; not recreated", describeEvidence(e), rec.Generation)), Effect{}
		}
		// The person deleted the node and created it again, and no one's
		// delete since is in evidence: our delete, sent meanwhile, removed
		// their node. Ours to create, from the saved spec.
		rec.LastError = fmt.Sprintf("node NOT FOUND after %s deleted it and created it again (%s): our delete removed their node; created from the saved spec",
			describeEvidence(e), describeEvidence(c))
		rec.LastKind = KindNone
		rec.Phase, rec.GoneAt = PhaseDeleted, time.Time{}
		return advanceRecreate(rec, obs, StepResult{}, now, cfg)
	}
	if ambiguous {
		if rec.GoneAt.IsZero() {
			rec.GoneAt = now
		}
		if until := rec.GoneAt.Add(evidenceWait(cfg)); now.Before(until) {
			rec.NextLookAt = until
			return rec, Effect{}
		}
	}
	rec.Phase, rec.GoneAt = PhaseDeleted, time.Time{}
	return advanceRecreate(rec, obs, StepResult{}, now, cfg)
}

// createdThenGone: our create finished (its operation succeeded) and the
// node is NOT FOUND. Only a person deletes it now; the recovery waits
// EvidenceWait for their audit entry (a lagging read shows the node again
// meanwhile) and closes naming it, or, with none, is abandoned for a
// person. Never a second create.
func createdThenGone(rec Recovery, now time.Time, cfg Config) (Recovery, Effect) {
	if e := personsDelete(rec, events.ChangeDeleteNode, rec.CreateSentAt, cfg, false); e != nil {
		return CloseRecovery(rec, fmt.Sprintf("node NOT FOUND after recovery gen %d's create finished: deleted by %s; not created again", rec.Generation, describeEvidence(e))), Effect{}
	}
	if rec.GoneAt.IsZero() {
		rec.GoneAt = now
	}
	d := evidenceWait(cfg)
	if until := rec.GoneAt.Add(d); now.Before(until) {
		rec.NextLookAt = until
		return rec, Effect{}
	}
	// No one's delete in evidence: not ours to create again, nor to close
	// as if someone had deleted it. A person decides (ERROR, the spec).
	return Abandon(rec, fmt.Sprintf("node NOT FOUND after recovery gen %d's create finished, and no audit entry of anyone's delete within %s: not created again", rec.Generation, d)), Effect{}
}

// AppendOp adds op to ops once, keeping the last few: an audit entry of one
// of them is ours.
func AppendOp(ops []string, op string) []string {
	const keep = 16
	if slices.Contains(ops, op) {
		return ops
	}
	ops = append(slices.Clip(ops), op)
	if len(ops) > keep {
		ops = ops[len(ops)-keep:]
	}
	return ops
}

// advanceCreating: the create was requested (or is about to be).
func advanceCreating(rec Recovery, obs Observation, res StepResult, now time.Time, cfg Config) (Recovery, Effect) {
	node := obs.Node
	switch {
	case res.Effect == EffectCreate && res.Err == nil:
		rec.CreateOp = res.Operation
		if res.Operation != "" {
			rec.SentOps = AppendOp(rec.SentOps, res.Operation)
		}
		return wait(rec, now, cfg, "", false)
	case res.Effect == EffectCreate && IsAlreadyExists(res.Err):
		return rec, Effect{Kind: EffectGet, Target: zoneTarget(rec)} // whose node is it?
	case res.Effect == EffectCreate && isExhausted(res.Err):
		rec.Phase = PhaseDeleted
		rec, eff := fail(rec, "create", res.Err, now, cfg)
		return zoneMoveSoon(rec, now, cfg), eff
	case res.Effect == EffectCreate:
		// Refused, or its answer lost: read the node next time.
		return fail(rec, "create", res.Err, now, cfg)
	case rec.CreateOp != "" && res.Effect != EffectPoll:
		return rec, Effect{Kind: EffectPoll, Target: rec.CreateOp}
	case rec.CreateOp != "" && !res.Done && IsNotFound(res.Err):
		rec.CreateOp = ""
		return rec, Effect{Kind: EffectGet, Target: zoneTarget(rec)}
	case rec.CreateOp != "" && !res.Done && res.Err != nil:
		return fail(rec, "poll-create", res.Err, now, cfg)
	case rec.CreateOp != "" && !res.Done:
		return wait(rec, now, cfg, "", false)
	case rec.CreateOp != "" && res.Err == nil:
		rec.Phase, rec.CreateOp = PhaseCreated, ""
		return rec, Effect{Kind: EffectGet, Target: zoneTarget(rec)}
	case rec.CreateOp != "":
		// The create's operation failed: never polled again. The recovery
		// returns to "deleted, spec saved" and creates again later.
		rec.Phase, rec.CreateOp = PhaseDeleted, ""
		rec, eff := fail(rec, "create operation", res.Err, now, cfg)
		return zoneMoveSoon(rec, now, cfg), eff
	}
	next, eff, ok := get(rec, res, now, cfg)
	if !ok {
		return next, eff
	}
	switch {
	case node == nil:
		if e := personsDelete(rec, events.ChangeDeleteNode, rec.CreateSentAt, cfg, false); e != nil {
			return CloseRecovery(rec, fmt.Sprintf("node NOT FOUND while recovery gen %d created it: deleted by %s; not created again", rec.Generation, describeEvidence(e))), Effect{}
		}
		if createSeen(rec) {
			// Seen READY with our label while paused: the create finished.
			return createdThenGone(rec, now, cfg)
		}
		rec.Phase = PhaseDeleted // the create did not take: request it again
		return advanceRecreate(rec, obs, StepResult{}, now, cfg)
	case ourGeneration(rec, node) && Healthy(node):
		return recovered(rec, node), Effect{}
	case ourGeneration(rec, node):
		// Ours (the create's answer was lost), not READY yet: a CREATING
		// node is never recovered. Look again.
		return wait(rec, now, cfg, fmt.Sprintf("node is %s", Describe(node)), node.State != "CREATING")
	case rec.NodeID != 0 && node.Id == rec.NodeID:
		// The very node whose spec we saved: our delete never happened.
		rec.Phase = PhaseDeleting
		return rec, Effect{Kind: EffectDelete, Target: rec.Node}
	case node.State == "CREATING":
		// Still being made, without our label (yet): our own create whose
		// answer was lost may explain it (a label applied later, a lagged
		// read, a person's relabel of it). One read of a node not made yet
		// is no evidence it is someone else's: look again; a create that
		// fails takes it away, and ours is sent again.
		return wait(rec, now, cfg, fmt.Sprintf("node is %s without label %s=%d: not judged while CREATING", Describe(node), GenerationLabel, rec.Generation), false)
	}
	return CloseRecovery(rec, fmt.Sprintf("node already existed when recreating it (%s, id %d, no label %s=%d): created by someone else; left as it is",
		Describe(node), node.Id, GenerationLabel, rec.Generation)+createEvidenceNote(rec, cfg)), Effect{}
}

func advanceReset(rec Recovery, obs Observation, res StepResult, now time.Time, cfg Config) (Recovery, Effect) {
	node := obs.Node
	switch rec.Phase {
	case PhaseClaimed:
		if res.Effect == EffectMarkReset {
			switch {
			case res.Err != nil:
				return fail(rec, "mark-reset", res.Err, now, cfg)
			case !res.First:
				// Another slice's recovery reset it (or a crashed attempt of
				// ours marked it): look again when the mark expires.
				why := fmt.Sprintf("queued resource %s reset recently (another slice's recovery)", rec.QueuedResource)
				return CloseRecovery(rec, why), Effect{Kind: EffectDefer, Target: rec.Node, Due: now.Add(ResetMarkTTL(cfg)), Reason: why}
			}
			rec.Phase, rec.ResetOp = PhaseResetting, ""
			return rec, Effect{Kind: EffectReset, Target: rec.QueuedResource}
		}
		next, eff, ok := get(rec, res, now, cfg)
		if !ok {
			return next, eff
		}
		switch {
		case node == nil:
			return CloseRecovery(rec, "node NOT FOUND before the reset: not reset"), Effect{}
		case node.QueuedResource == "":
			return CloseRecovery(rec, "node is no longer owned by a queued resource: not reset"), Effect{}
		case Healthy(node) || OnPurpose(node.State):
			return CloseRecovery(rec, "node is "+Describe(node)+" by the time it was claimed: not reset"), Effect{}
		}
		rec.QueuedResource = node.QueuedResource
		rec.Spec, rec.NodeID = CleanSpec(node), node.Id
		return rec, Effect{Kind: EffectMarkReset, Target: rec.QueuedResource}

	case PhaseSaved, PhaseDeleting, PhaseDeleted, PhaseFailed: // reset phases saved before Step
		rec.Phase = PhaseResetting
		if rec.QueuedResource == "" {
			return CloseRecovery(rec, "no queued resource to reset"), Effect{}
		}
		return advanceReset(rec, obs, StepResult{}, now, cfg)

	case PhaseCreating: // a reset saved before Step (its operation, once in CreateOp, the ledger reads into ResetOp)
		rec.Phase = PhaseResetting
		return advanceReset(rec, obs, res, now, cfg)

	case PhaseResetting:
		return advanceResetting(rec, obs, res, now, cfg)

	case PhaseReset:
		next, eff, ok := get(rec, res, now, cfg)
		if !ok {
			return next, eff
		}
		if node != nil && Healthy(node) {
			return recovered(rec, node), Effect{}
		}
		return wait(rec, now, cfg, "node is "+describeOrNotFound(node)+" after the reset", true)
	}
	return Abandon(rec, fmt.Sprintf("unknown phase %q", rec.Phase)), Effect{}
}

// advanceResetting: the reset was requested (or is about to be). A reset is
// sent again only when the queued resource shows it did not happen, so a
// lost answer never makes a second reset.
func advanceResetting(rec Recovery, obs Observation, res StepResult, now time.Time, cfg Config) (Recovery, Effect) {
	switch {
	case res.Effect == EffectReset && res.Err == nil:
		rec.ResetOp = res.Operation
		return wait(rec, now, cfg, "", false)
	case res.Effect == EffectReset:
		return fail(rec, "reset", res.Err, now, cfg)
	case res.Effect == EffectGetQR && res.Err == nil && obs.QueuedResource == nil:
		return CloseRecovery(rec, queuedResourceGone(rec, cfg)), Effect{}
	case rec.ResetOp != "" && res.Effect == EffectGetQR:
		// Read while the reset runs (the node NOT FOUND): there it is, or
		// it could not be read; the reset goes on.
		return wait(rec, now, cfg, "", false)
	case rec.ResetOp != "" && res.Effect != EffectPoll:
		return rec, Effect{Kind: EffectPoll, Target: rec.ResetOp}
	case rec.ResetOp != "" && !res.Done && IsNotFound(res.Err):
		rec.ResetOp = ""
		return rec, Effect{Kind: EffectGetQR, Target: rec.QueuedResource}
	case rec.ResetOp != "" && !res.Done && res.Err != nil:
		return fail(rec, "poll-reset", res.Err, now, cfg)
	case rec.ResetOp != "" && !res.Done && obs.Node == nil:
		// The node is NOT FOUND while the reset runs: normal while the
		// platform recreates it, unless the queued resource is gone too.
		return rec, Effect{Kind: EffectGetQR, Target: rec.QueuedResource}
	case rec.ResetOp != "" && !res.Done:
		return wait(rec, now, cfg, "", false)
	case rec.ResetOp != "" && res.Err == nil:
		rec.Phase, rec.ResetOp = PhaseReset, ""
		return rec, Effect{Kind: EffectGet, Target: rec.Node}
	case rec.ResetOp != "":
		rec.ResetOp = "" // finished with an error: never polled again
		return fail(rec, "reset operation", res.Err, now, cfg)
	case res.Effect == EffectGetQR && res.Err != nil:
		return fail(rec, "get-queued-resource", res.Err, now, cfg)
	case res.Effect == EffectGetQR:
		qr := obs.QueuedResource
		switch state := qrState(qr); state {
		case "ACTIVE":
			// Reset and finished already (its answer lost), or never sent:
			// the node tells.
			return rec, Effect{Kind: EffectGet, Target: rec.Node}
		case "SUSPENDED", "FAILED":
			return rec, Effect{Kind: EffectReset, Target: rec.QueuedResource}
		default:
			// The platform is working on it: our reset took effect.
			rec.Phase = PhaseReset
			return wait(rec, now, cfg, "", false)
		}
	case res.Effect == EffectGet && res.Err != nil:
		return fail(rec, "get", res.Err, now, cfg)
	case res.Effect == EffectGet:
		if obs.Node != nil && Healthy(obs.Node) {
			return recovered(rec, obs.Node), Effect{}
		}
		return rec, Effect{Kind: EffectReset, Target: rec.QueuedResource}
	}
	return rec, Effect{Kind: EffectGetQR, Target: rec.QueuedResource}
}

// queuedResourceGone is why a reset recovery whose queued resource is NOT
// FOUND closes: deleted by someone else, named when its entry is kept.
func queuedResourceGone(rec Recovery, cfg Config) string {
	why := fmt.Sprintf("queued resource %s NOT FOUND during recovery gen %d's reset: deleted", rec.QueuedResource, rec.Generation)
	if e := personsDelete(rec, events.ChangeDeleteQueuedResource, rec.StartedAt, cfg, false); e != nil {
		why += " by " + describeEvidence(e)
	} else {
		why += " by someone else"
	}
	return why + "; not reset again"
}

func qrState(q *tpu.QueuedResource) string {
	if q.State == nil || q.State.State == "" {
		return "STATE_UNSPECIFIED"
	}
	return q.State.State
}

func describeOrNotFound(n *tpu.Node) string {
	if n == nil {
		return "NOT FOUND"
	}
	return Describe(n)
}

// ResetMarkTTL is how long a queued resource's one reset per incident is
// remembered.
func ResetMarkTTL(cfg Config) time.Duration {
	lease := cfg.Lease
	if lease <= 0 {
		lease = DefaultConfig().Lease
	}
	return max(cfg.Cooldown, lease)
}

func ourGeneration(rec Recovery, n *tpu.Node) bool {
	return n.Labels[GenerationLabel] == strconv.Itoa(rec.Generation)
}

// FailureLimit is the weight of failures (Recovery.Failures) at which a
// recovery is abandoned: PermanentWeight×MaxAttempts.
func FailureLimit(cfg Config) int {
	m := cfg.MaxAttempts
	if m <= 0 {
		m = DefaultMaxAttempts
	}
	return PermanentWeight * m
}

// LookAgainFor is Config.LookAgain, or LookAgain when it is not set.
func LookAgainFor(cfg Config) time.Duration {
	if cfg.LookAgain > 0 {
		return cfg.LookAgain
	}
	return LookAgain
}

func leaseOf(cfg Config) time.Duration {
	if cfg.Lease > 0 {
		return cfg.Lease
	}
	return DefaultConfig().Lease
}

// wait keeps the recovery as it is until NextLookAt. counted waits (a node
// not where it should be) add a transient failure and back off, so they
// are bounded.
func wait(rec Recovery, now time.Time, cfg Config, why string, counted bool) (Recovery, Effect) {
	if !counted {
		rec.NextLookAt = now.Add(LookAgainFor(cfg))
		return rec, Effect{}
	}
	rec.Failures += TransientWeight
	rec.LastError, rec.LastKind = why, KindNone
	rec.NextLookAt = now.Add(backoff(rec.Failures))
	return rec, Effect{}
}

func backoff(failures int) time.Duration {
	d := LookAgain
	for i := 1; i < failures && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// fail records a failed call of step: a stockout waits a seeded, jittered
// back-off (StockoutDelay) and a quota a lease, neither counted; a
// transient failure backs off; a permanent one waits a lease. Either counts toward the limit, beyond which the recovery is
// abandoned.
func fail(rec Recovery, step string, err error, now time.Time, cfg Config) (Recovery, Effect) {
	kind := KindOf(err)
	if kind == KindTransient && strings.HasSuffix(step, " operation") {
		// An operation that ran and ended INTERNAL or UNAVAILABLE is
		// retried, but weighs as a permanent failure: bounded per incident
		// at MaxAttempts, as each retry is a whole create or reset.
		kind = KindPermanent
	}
	rec.LastError, rec.LastKind = fmt.Sprintf("%s (%s): %v", step, kind, err), kind
	switch kind {
	case KindStockout:
		rec.Stockouts++
		rec.NextLookAt = now.Add(StockoutDelay(cfg, rec.Node, rec.Stockouts))
		return rec, Effect{}
	case KindQuota:
		rec.NextLookAt = now.Add(leaseOf(cfg))
		return rec, Effect{}
	case KindPermanent, KindAlreadyExists:
		rec.Failures += PermanentWeight
		rec.NextLookAt = now.Add(leaseOf(cfg))
	default:
		rec.Failures += TransientWeight
		rec.NextLookAt = now.Add(backoff(rec.Failures))
	}
	if rec.Failures >= FailureLimit(cfg) {
		return Abandon(rec, fmt.Sprintf("%d failures (weighted; limit %d), the last: %s", rec.Failures, FailureLimit(cfg), rec.LastError)), Effect{}
	}
	return rec, Effect{}
}

// Abandon ends rec as abandoned (it needs a person), saying why.
func Abandon(rec Recovery, why string) Recovery {
	rec.Phase = PhaseAbandoned
	rec.LastError = "abandoned; needs a person: " + why // LastKind kept: why names the last failure
	rec.NextLookAt = time.Time{}
	return rec
}

// CloseRecovery ends rec as closed without finishing, saying why.
func CloseRecovery(rec Recovery, why string) Recovery {
	rec.Phase = PhaseClosed
	rec.LastError, rec.LastKind = why, KindNone
	rec.NextLookAt = time.Time{}
	return rec
}

func recovered(rec Recovery, n *tpu.Node) Recovery {
	rec.Phase = PhaseRecovered
	rec.LastError, rec.LastKind = "", KindNone
	rec.NextLookAt = time.Time{}
	return rec
}

// notToRecreate re-runs the node decision on the node as read right after
// the claim, before its spec is saved and it is deleted: the decision was
// made from an earlier read. It says why the node must not be recreated, or
// "" when it still needs it.
func notToRecreate(node *tpu.Node, cfg Config) string {
	switch {
	case node == nil:
		return "node NOT FOUND before its spec was saved: deleted by someone else; not recreated"
	case Healthy(node), OnPurpose(node.State):
		return "node is " + Describe(node) + " by the time it was claimed: not recreated"
	case node.State == stateDeleting:
		return "node is DELETING by the time it was claimed: deleted by someone else; not recreated"
	case cfg.LabelKey == "" || node.Labels[cfg.LabelKey] != cfg.LabelValue:
		return fmt.Sprintf("node no longer has label %s=%s by the time it was claimed: not recreated", cfg.LabelKey, cfg.LabelValue)
	case node.QueuedResource != "":
		return "node is owned by queued resource " + node.QueuedResource + " by the time it was claimed: not recreated (a queued resource is reset, never its node deleted)"
	}
	return ""
}

// notOurNode says why node (non-nil) must not be deleted by rec: it is not
// the node whose spec rec saved. "" when it is, or when that is unknown
// (NodeID 0: a legacy TPU Node, or a recovery saved before NodeID existed).
func notOurNode(rec Recovery, node *tpu.Node) string {
	if rec.NodeID == 0 || node.Id == 0 || node.Id == rec.NodeID || ourGeneration(rec, node) {
		return ""
	}
	return fmt.Sprintf("node %s is id %d, not id %d whose spec recovery gen %d saved: created by someone else; never deleted",
		Describe(node), node.Id, rec.NodeID, rec.Generation)
}

// deleteSent reports whether rec may have requested the node's delete.
// Recoveries saved before DeleteSent existed say so by their operations; a
// reset's operation counts as it did while it was kept in CreateOp (a reset
// takes the node down as a delete does).
func deleteSent(rec Recovery) bool {
	return rec.DeleteSent || rec.DeleteOp != "" || rec.CreateOp != "" || rec.ResetOp != ""
}

// resumePhase says where a recreate saved as failed (before Step) resumes,
// from the node as the API shows it now, or (why != "") that the recovery
// must be closed: what it would do next is not ours to do.
func resumePhase(rec Recovery, node *tpu.Node) (phase Phase, why string) {
	switch {
	case node == nil && rec.Spec == nil:
		return PhaseClaimed, "" // claimed closes it: nothing to recreate from
	case node == nil && !deleteSent(rec):
		return "", fmt.Sprintf("node NOT FOUND, and recovery gen %d never deleted it: deleted by someone else; not recreated", rec.Generation)
	case node == nil:
		// Deleting reads the node: NOT FOUND there follows the evidence
		// rule (deletedNode), never concluded from this one read.
		return PhaseDeleting, ""
	case ourGeneration(rec, node):
		return PhaseCreating, "" // creating reads the node: READY is recovered, CREATING waits
	case notOurNode(rec, node) != "":
		return "", notOurNode(rec, node)
	case rec.Spec == nil:
		return PhaseClaimed, ""
	}
	return PhaseDeleting, "" // deleting reads the node: DELETING waits, present is deleted again
}
