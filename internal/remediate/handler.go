package remediate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

// Handler observes a node, decides and acts. One Handler serves many
// concurrent calls; it holds no per-call state.
//
// Dry run (Config.DryRun): Decide never returns recreate or reset, so the
// Handler never claims a recovery and never calls a mutating TPU method. It
// still writes the ledger's bookkeeping (event marks, deferrals), so that a
// dry run shows when a deferred node would be recreated. A node a guard
// (cooldown, window cap, in-flight cap) skips gets a deferral due when the
// guard can clear, so it is decided again even when the sweep lists no
// zones; a dry run names itself before the guards ("dry run: would …") and
// so sets no such deferral: a dry-run skip is not re-evaluated by itself.
//
// A recovery that fails Config.MaxAttempts times with an error other than a
// stockout or quota error is abandoned (PhaseAbandoned, an ERROR record
// with the saved spec); a recovery is closed without finishing when its
// next step is not ours to take: its node was replaced (another node id) or
// deleted (before we requested the delete) by someone else, opted out, or
// terminated by a user.
type Handler struct {
	TPU      TPU
	Store    Store
	Recorder Recorder
	Config   Config
	Now      func() time.Time // nil = time.Now
	Holder   string           // claim owner id; "" = hostname and pid
	// Backoff is the in-process retry policy for transient TPU errors;
	// the zero value means DefaultBackoff.
	Backoff     Backoff
	Maintenance *Maintainer // maint hook (#10): prepare/maintain on upcoming maintenance; nil = off
}

// ActError is a failure carrying out a decision: the step, the node and
// whether retrying can help. Handle returns it (wrapped) only when Transient;
// a permanent one is recorded (Record.Err) and Handle returns nil.
type ActError struct {
	Step      string // get, history, claim, save-spec, delete, wait-delete, create, wait-create, reset, wait-reset, ledger, record
	Node      string
	Transient bool
	Err       error
}

func (e *ActError) Error() string {
	kind := "permanent"
	if e.Transient {
		kind = "transient"
	}
	return fmt.Sprintf("%s %s (%s): %v", e.Step, e.Node, kind, e.Err)
}

func (e *ActError) Unwrap() error { return e.Err }

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

func (h *Handler) maxAttempts() int {
	if h.Config.MaxAttempts > 0 {
		return h.Config.MaxAttempts
	}
	return DefaultMaxAttempts
}

func (h *Handler) holder() string {
	if h.Holder != "" {
		return h.Holder
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// Handle handles one event: observes the node (GetNode, and GetQueuedResource
// when a queued resource owns it), reads the node's history, decides, acts and
// writes exactly one Record. It returns an error only for a transient failure
// (the caller retries, Pub/Sub redelivers); then the event is not marked as
// processed, so the redelivery is handled. A permanent failure is recorded
// and Handle returns nil.
func (h *Handler) Handle(ctx context.Context, ev events.Event) (Record, error) {
	r := h.newRecord(ev)
	name := ev.Node.Name()
	if name == "" {
		d := Decide(ev, Observed{}, History{}, r.Time, h.Config)
		r.Action, r.Reason = d.Action, d.Reason
		return h.finish(ctx, ev, r, nil, "")
	}
	obs, err := h.observe(ctx, name, &r)
	if err != nil {
		return h.failObserve(ctx, ev, r, err)
	}
	return h.process(ctx, ev, obs, r, processOpts{})
}

// Reject records input that could not be parsed into an event. What can be
// read of it (events.Peek: insertId, time, method, node) goes in the record,
// bare or wrapped in a Pub/Sub push body or CloudEvent data.
func (h *Handler) Reject(ctx context.Context, raw []byte, err error) Record {
	p := events.Peek(raw)
	r := Record{Time: h.now(), InsertID: p.InsertID, EventTime: p.Time, Node: p.Node.Name(), Zone: p.Node.Zone,
		Worker: p.Worker, Method: p.Method, Action: ActionReject, DryRun: h.Config.DryRun}
	r.Reason = "rejected"
	if err != nil {
		r.Reason = "rejected: " + err.Error()
	}
	_ = h.Recorder.Record(ctx, r) // a lost reject record is not worth a redelivery of bad input
	return r
}

// Skip records an event that is not acted on for a reason decided before
// looking at the node (the function's stale-entry check). The node is not
// read and the event is not marked: a redelivery is skipped the same way.
func (h *Handler) Skip(ctx context.Context, ev events.Event, reason string) Record {
	r := h.newRecord(ev)
	r.Action, r.Reason = ActionSkip, reason
	_ = h.Recorder.Record(ctx, r) // the Recorder falls back to stdout itself; nothing to retry
	return r
}

type processOpts struct {
	quiet    bool   // sweep: do not record a plain "record" decision
	markID   string // sweep: synthetic id of a maintenance event seen in healthDescription (already marked)
	markTime time.Time
}

// process decides and acts on an observed node and records the outcome.
func (h *Handler) process(ctx context.Context, ev events.Event, obs Observed, r Record, o processOpts) (Record, error) {
	cfg := h.Config
	name := ev.Node.Name()
	now := r.Time
	eventID := ""
	if ev.Method != "" {
		eventID = ev.InsertID
	}
	hist, err := h.Store.History(ctx, name, ev.Node.Project, eventID, now, cfg.Window)
	if err != nil {
		r.Action, r.Reason = ActionSkip, "ledger unavailable: not decided"
		return h.finish(ctx, ev, r, &ActError{Step: "history", Node: name, Transient: true, Err: err}, "")
	}
	d := Decide(ev, obs, hist, now, cfg)
	r.Action, r.Reason = d.Action, d.Reason
	if rec := hist.Recovery; rec != nil {
		r.Generation = rec.Generation
		r.Phase = rec.Phase
	}
	if o.markID != "" {
		r.InsertID, r.EventTime = o.markID, o.markTime
		r.Cause = events.CauseMaintenance
		r.Reason = fmt.Sprintf("maintenance event at %s seen in healthDescription; %s", o.markTime.UTC().Format(time.RFC3339Nano), r.Reason)
	}

	var actErr error
	switch d.Action {
	case ActionSkip:
		if ev.Cause == events.CauseUser && obs.Node != nil && !held(hist.Hold, obs.Node) {
			hold := Hold{Node: name, Project: ev.Node.Project, NodeID: obs.Node.Id, Since: now, EventID: ev.InsertID, Reason: d.Reason}
			if err := h.Store.SetHold(ctx, hold); err != nil {
				actErr = &ActError{Step: "ledger", Node: name, Transient: true, Err: fmt.Errorf("set hold: %w", err)}
			}
		}
		if d.Final && hist.Deferral != nil && actErr == nil {
			if err := h.Store.ClearDeferral(ctx, name); err != nil {
				actErr = &ActError{Step: "ledger", Node: name, Transient: true, Err: fmt.Errorf("clear deferral: %w", err)}
			}
		}
		if !d.Due.IsZero() && actErr == nil {
			// A guard skipped it: look again when the guard can clear.
			actErr = h.deferUntil(ctx, ev, hist, now, d.Due, d.Reason)
		}
	case ActionRecord:
		if hist.Deferral != nil {
			if err := h.Store.ClearDeferral(ctx, name); err != nil {
				actErr = &ActError{Step: "ledger", Node: name, Transient: true, Err: fmt.Errorf("clear deferral: %w", err)}
			}
		}
		if hist.Hold != nil && actErr == nil && !held(hist.Hold, obs.Node) {
			if err := h.Store.ClearHold(ctx, name); err != nil {
				actErr = &ActError{Step: "ledger", Node: name, Transient: true, Err: fmt.Errorf("clear hold: %w", err)}
			}
		}
		if rec := hist.Recovery; actErr == nil && rec != nil && rec.Unfinished() && !now.Before(rec.LeaseUntil) && !cfg.DryRun {
			actErr = h.closeRecovery(ctx, *rec, d.Reason, &r)
		}
	case ActionDefer:
		actErr = h.deferUntil(ctx, ev, hist, now, d.Due, d.Reason)
	case ActionRecreate, ActionReset:
		actErr = h.recover(ctx, ev, obs, hist, d, &r)
	}
	if d.Action == ActionRecord && actErr == nil {
		actErr = h.maintenanceHook(ctx, ev, obs, &r, o.quiet)
	} // maint hook (#10)
	if o.quiet && r.Action == ActionRecord && actErr == nil && o.markID == "" {
		return r, nil
	}
	return h.finish(ctx, ev, r, actErr, eventID)
}

// deferUntil records a deferral of the event's node due at due, keeping the
// Since of a pending one.
func (h *Handler) deferUntil(ctx context.Context, ev events.Event, hist History, now, due time.Time, reason string) error {
	name := ev.Node.Name()
	df := Deferral{Node: name, Project: ev.Node.Project, Since: now, Due: due, Reason: reason}
	if hist.Deferral != nil && !hist.Deferral.Since.IsZero() && hist.Deferral.Since.Before(now) {
		df.Since = hist.Deferral.Since
	}
	if err := h.Store.SetDeferral(ctx, df); err != nil {
		return &ActError{Step: "ledger", Node: name, Transient: true, Err: fmt.Errorf("set deferral: %w", err)}
	}
	return nil
}

// finish marks the event processed (unless handling failed transiently),
// writes the record and says what the caller must retry.
func (h *Handler) finish(ctx context.Context, ev events.Event, r Record, actErr error, eventID string) (Record, error) {
	var ae *ActError
	transient := actErr != nil && (!errors.As(actErr, &ae) || ae.Transient)
	if actErr != nil {
		r.Err = actErr.Error()
	}
	if !transient && eventID != "" {
		if _, err := h.Store.MarkEvent(ctx, eventID, r.Time.Add(h.eventTTL())); err != nil {
			actErr, transient = &ActError{Step: "ledger", Node: r.Node, Transient: true, Err: fmt.Errorf("mark event %s: %w", eventID, err)}, true
			r.Err = actErr.Error()
		}
	}
	if err := h.Recorder.Record(ctx, r); err != nil {
		if !transient {
			// The decision is made and acted on; the redelivery decides again
			// from the node's state and records it.
			return r, &ActError{Step: "record", Node: r.Node, Transient: true, Err: err}
		}
		return r, errors.Join(actErr, err)
	}
	if transient {
		return r, fmt.Errorf("handle %s: %w", ev.Node.Name(), actErr)
	}
	return r, nil
}

func (h *Handler) eventTTL() time.Duration {
	if h.Config.EventTTL > 0 {
		return h.Config.EventTTL
	}
	return DefaultConfig().EventTTL
}

// failObserve records a failure to read the node: transient → returned for
// a retry; permanent (403, …) → recorded as skip and acknowledged.
func (h *Handler) failObserve(ctx context.Context, ev events.Event, r Record, err error) (Record, error) {
	var ae *ActError
	if errors.As(err, &ae) && ae.Transient {
		r.Action, r.Reason = ActionSkip, "could not read the node: transient error; will be retried"
		return h.finish(ctx, ev, r, err, "")
	}
	r.Action, r.Reason = ActionSkip, "could not read the node: permanent error"
	eventID := ""
	if ev.Method != "" {
		eventID = ev.InsertID
	}
	return h.finish(ctx, ev, r, err, eventID)
}

// observe reads the node (nil when NOT FOUND) and the queued resource
// owning it (nil when none or NOT FOUND).
func (h *Handler) observe(ctx context.Context, name string, r *Record) (Observed, error) {
	var obs Observed
	n, err := h.getNode(ctx, name, r)
	if err != nil {
		return obs, err
	}
	obs.Node = n
	if n != nil && n.QueuedResource != "" {
		qr, err := h.getQueuedResource(ctx, n.QueuedResource, r)
		if err != nil {
			return obs, err
		}
		obs.QueuedResource = qr
	}
	return obs, nil
}

func (h *Handler) getNode(ctx context.Context, name string, r *Record) (*tpu.Node, error) {
	return getStep(h, ctx, r, "get", name, h.TPU.GetNode)
}

func (h *Handler) getQueuedResource(ctx context.Context, name string, r *Record) (*tpu.QueuedResource, error) {
	return getStep(h, ctx, r, "get-queued-resource", name, h.TPU.GetQueuedResource)
}

// getStep reads one resource as a recorded, retried step; NOT FOUND is a
// nil resource, not an error.
func getStep[T any](h *Handler, ctx context.Context, r *Record, step, name string, get func(context.Context, string) (*T, error)) (*T, error) {
	var v *T
	err := h.step(ctx, r, step, name, func() (string, error) {
		var err error
		v, err = get(ctx, name)
		return "", err
	})
	if IsNotFound(err) {
		return nil, nil
	}
	return v, err
}

// step runs one TPU call with retries on transient errors, appends a Step
// to the record and returns an *ActError on failure. A NOT FOUND is returned
// unwrapped-classifiable (IsNotFound still works through ActError).
func (h *Handler) step(ctx context.Context, r *Record, name, target string, f func() (op string, err error)) error {
	return h.stepIf(ctx, r, name, target, IsTransient, f)
}

func (h *Handler) stepIf(ctx context.Context, r *Record, name, target string, transient func(error) bool, f func() (string, error)) error {
	s := Step{Name: name, Start: h.now()}
	start := time.Now()
	err := h.Backoff.retry(ctx, transient, func() error {
		op, err := f()
		if op != "" {
			s.Operation = op
		}
		return err
	})
	s.Duration = time.Since(start)
	if err != nil {
		s.Err = err.Error()
	}
	r.Steps = append(r.Steps, s)
	if err != nil {
		// A call cut short because the caller gave up (the function's
		// deadline, a shutdown) is not a verdict on the node: transient, so
		// the event is not marked processed and no failure is saved.
		return &ActError{Step: name, Node: target, Transient: transient(err) || ctx.Err() != nil, Err: err}
	}
	return nil
}

// newRecord starts the record of an event.
func (h *Handler) newRecord(ev events.Event) Record {
	return Record{
		Time:      h.now(),
		InsertID:  ev.InsertID,
		EventTime: ev.Time,
		Node:      ev.Node.Name(),
		Zone:      ev.Node.Zone,
		Worker:    ev.Worker,
		Method:    ev.Method,
		Cause:     ev.Cause,
		DryRun:    h.Config.DryRun,
	}
}

// recover claims the node's recovery (new, or taken over) and runs it.
func (h *Handler) recover(ctx context.Context, ev events.Event, obs Observed, hist History, d Decision, r *Record) error {
	name := ev.Node.Name()
	now := r.Time
	rec, err := h.Store.Claim(ctx, ClaimRequest{
		Node: name, Project: ev.Node.Project, Holder: h.holder(), Now: now,
		Action: d.Action, EventID: ev.InsertID, Cause: ev.Cause, Config: h.Config,
	})
	switch {
	case errors.Is(err, ErrClaimed):
		r.Action, r.Reason = ActionSkip, "recovery in flight: "+err.Error()
		return nil
	case errors.Is(err, ErrCooldown), errors.Is(err, ErrWindowCap), errors.Is(err, ErrInFlightCap):
		// The ledger saw what History did not (a concurrent claim): look
		// again when the guard may clear; Decide then says exactly when.
		due := inFlightRetry(now, h.Config)
		if _, d := guard(hist, now, h.Config); !d.IsZero() {
			due = d
		}
		r.Action, r.Reason = ActionSkip, fmt.Sprintf("guard: %s; look again at %s", err, due.UTC().Format(time.RFC3339))
		return h.deferUntil(ctx, ev, hist, now, due, r.Reason)
	case err != nil:
		return &ActError{Step: "claim", Node: name, Transient: true, Err: err}
	}
	r.Action = rec.Action
	r.Generation = rec.Generation
	if hist.Deferral != nil {
		if err := h.Store.ClearDeferral(ctx, name); err != nil {
			r.Warnings = append(r.Warnings, "clear deferral: "+err.Error())
		}
	}
	if rec.Action == ActionReset {
		err = h.runReset(ctx, &rec, obs, r)
	} else {
		err = h.runRecreate(ctx, &rec, r)
	}
	r.Phase = rec.Phase
	return err
}

// closeRecovery ends an unfinished recovery that is no longer needed (the
// node recovered, or is stopped on purpose): taken over, then marked done.
func (h *Handler) closeRecovery(ctx context.Context, old Recovery, why string, r *Record) error {
	rec, err := h.Store.Claim(ctx, ClaimRequest{
		Node: old.Node, Project: old.Project, Holder: h.holder(), Now: r.Time,
		Action: old.Action, EventID: old.EventID, Cause: old.Cause, Config: h.Config,
	})
	if errors.Is(err, ErrClaimed) {
		return nil // somebody else is on it
	}
	if err != nil {
		return &ActError{Step: "claim", Node: old.Node, Transient: true, Err: err}
	}
	if rec.Generation != old.Generation || !rec.Unfinished() {
		// Not a takeover: the store started a new recovery. Leave it to
		// expire as claimed; it will be closed the same way.
		r.Warnings = append(r.Warnings, fmt.Sprintf("closing recovery: store started gen %d instead of taking over gen %d", rec.Generation, old.Generation))
	}
	rec.Phase = PhaseDone
	rec.LastError = "closed without finishing: " + why
	err = h.update(ctx, &rec, r)
	r.Phase, r.Generation = rec.Phase, rec.Generation
	return err
}

// update saves the recovery's progress and renews its lease.
func (h *Handler) update(ctx context.Context, rec *Recovery, r *Record) error {
	now := h.now()
	rec.UpdatedAt = now
	rec.LeaseUntil = now.Add(h.lease())
	if err := h.Store.Update(ctx, *rec); err != nil {
		if errors.Is(err, ErrLeaseLost) {
			return &ActError{Step: "ledger", Node: rec.Node, Transient: false, Err: err}
		}
		return &ActError{Step: "ledger", Node: rec.Node, Transient: true, Err: fmt.Errorf("save phase %s: %w", rec.Phase, err)}
	}
	return nil
}

func (h *Handler) lease() time.Duration {
	if h.Config.Lease > 0 {
		return h.Config.Lease
	}
	return DefaultConfig().Lease
}

// fail ends an attempt. A transient failure leaves the phase as it is (the
// redelivery or the sweep, once the lease expires, continues from there); a
// permanent one saves PhaseFailed with LastError, the spec kept, and the
// lease renewed: the lease is the back-off before the next attempt.
func (h *Handler) fail(ctx context.Context, rec *Recovery, r *Record, err error) error {
	var ae *ActError
	if errors.As(err, &ae) && ae.Transient {
		return err
	}
	if errors.Is(err, ErrLeaseLost) {
		return err
	}
	rec.Phase = PhaseFailed
	rec.LastError = err.Error()
	if rec.Attempts >= h.maxAttempts() && !isExhausted(err) {
		// Retrying cannot fix it (a retired runtime version, a missing
		// permission): a person must. The spec stays in the ledger and in
		// the record, and the project's in-flight slot is freed.
		rec.Phase = PhaseAbandoned
		rec.LastError = fmt.Sprintf("abandoned after %d attempts; needs a person: %v", rec.Attempts, err)
		if r.Spec == nil && rec.Spec != nil && rec.Action != ActionReset {
			r.Spec, _ = createSpec(rec.Spec, rec.Generation, h.Config)
		}
		r.Reason += fmt.Sprintf("; abandoned after %d attempts: needs a person", rec.Attempts)
		err = fmt.Errorf("recovery gen %d abandoned after %d attempts, needs a person: %w", rec.Generation, rec.Attempts, err)
	}
	uerr := h.update(ctx, rec, r)
	r.Phase = rec.Phase
	if uerr != nil {
		return errors.Join(err, uerr)
	}
	return err
}

// notToRecreate re-runs the node decision on the node as read right after
// the claim, before its spec is saved and it is deleted: the decision was
// made from an earlier read. It says why the node must not be recreated, or
// "" when it still needs it.
func notToRecreate(node *tpu.Node, cfg Config) string {
	switch {
	case node == nil:
		return "node NOT FOUND before its spec was saved: deleted by someone else; not recreated"
	case healthy(node), onPurpose(node.State):
		return "node is " + describe(node) + " by the time it was claimed: not recreated"
	case node.State == stateDeleting:
		return "node is DELETING by the time it was claimed: deleted by someone else; not recreated"
	case cfg.LabelKey == "" || node.Labels[cfg.LabelKey] != cfg.LabelValue:
		return fmt.Sprintf("node no longer has label %s=%s by the time it was claimed: not recreated", cfg.LabelKey, cfg.LabelValue)
	case node.QueuedResource != "":
		return "node is owned by queued resource " + node.QueuedResource + " by the time it was claimed: not recreated (a queued resource is reset, never its node deleted)"
	}
	return ""
}

// closeAsNotOurs ends the recovery without finishing it: what it would do
// next is not ours to do (the node was created or deleted by someone else).
func (h *Handler) closeAsNotOurs(ctx context.Context, rec *Recovery, r *Record, why string) error {
	r.Action, r.Reason = ActionRecord, why
	rec.Phase, rec.LastError = PhaseDone, "closed without finishing: "+why
	return h.update(ctx, rec, r)
}

// notOurNode says why node (non-nil) must not be deleted by rec: it is not
// the node whose spec rec saved. "" when it is, or when that is unknown
// (NodeID 0: a legacy TPU Node, or a recovery saved before NodeID existed).
func notOurNode(rec Recovery, node *tpu.Node) string {
	if rec.NodeID == 0 || node.Id == 0 || node.Id == rec.NodeID {
		return ""
	}
	return fmt.Sprintf("node %s is id %d, not id %d whose spec recovery gen %d saved: created by someone else; never deleted",
		describe(node), node.Id, rec.NodeID, rec.Generation)
}

// deleteSent reports whether rec may have requested the node's delete.
// Recoveries saved before DeleteSent existed say so by their operations.
func deleteSent(rec Recovery) bool {
	return rec.DeleteSent || rec.DeleteOp != "" || rec.CreateOp != ""
}

// runRecreate runs a recreate from rec.Phase to done: save the spec, delete,
// wait, create with the saved spec, wait. Each phase is saved before the
// step it names, so any crash is finished from the recorded phase.
func (h *Handler) runRecreate(ctx context.Context, rec *Recovery, r *Record) error {
	parent, _, _, nodeID, err := parseNodeName(rec.Node)
	if err != nil {
		return h.fail(ctx, rec, r, &ActError{Step: "parse", Node: rec.Node, Err: err})
	}
	// fresh: the node was read in this call since the recovery was last
	// saved, so PhaseSaved need not read it again before deleting it.
	fresh := false
	for {
		switch rec.Phase {
		case PhaseDone:
			return nil

		case PhaseFailed:
			// Where to resume is read from the node, not guessed.
			node, err := h.getNode(ctx, rec.Node, r)
			if err != nil {
				return h.fail(ctx, rec, r, err)
			}
			phase, why := resumePhase(*rec, node)
			if why != "" {
				return h.closeAsNotOurs(ctx, rec, r, why)
			}
			rec.Phase, fresh = phase, true
			if rec.Phase == PhaseDone {
				r.Warnings = append(r.Warnings, "node of this recovery's generation already exists: recovery finished")
				if err := h.update(ctx, rec, r); err != nil {
					return err
				}
			}

		case PhaseClaimed:
			node, err := h.getNode(ctx, rec.Node, r)
			if err != nil {
				return h.fail(ctx, rec, r, err)
			}
			if why := notToRecreate(node, h.Config); why != "" {
				return h.closeAsNotOurs(ctx, rec, r, why)
			}
			rec.Spec = CleanSpec(node)
			rec.NodeID = node.Id
			rec.Phase = PhaseSaved
			fresh = true
			s := Step{Name: "save-spec", Start: h.now()}
			err = h.update(ctx, rec, r)
			if err != nil {
				s.Err = err.Error()
			}
			r.Steps = append(r.Steps, s)
			if err != nil {
				return err
			}

		case PhaseSaved:
			if !fresh {
				// Taken over (or resumed) in this phase: the node may have
				// changed hands since the spec was saved. Read it again
				// right before deleting it.
				node, err := h.getNode(ctx, rec.Node, r)
				if err != nil {
					return h.fail(ctx, rec, r, err)
				}
				switch {
				case node == nil && !deleteSent(*rec):
					return h.closeAsNotOurs(ctx, rec, r, fmt.Sprintf(
						"node NOT FOUND before recovery gen %d requested its delete: deleted by someone else; not recreated", rec.Generation))
				case node != nil && notOurNode(*rec, node) != "":
					return h.closeAsNotOurs(ctx, rec, r, notOurNode(*rec, node))
				}
				fresh = true
			}
			if !rec.DeleteSent {
				// Saved before the request: a crash right after it must
				// still find the node ours to recreate.
				rec.DeleteSent = true
				if err := h.update(ctx, rec, r); err != nil {
					return err
				}
			}
			var op string
			err := h.step(ctx, r, "delete", rec.Node, func() (string, error) {
				var err error
				op, err = h.TPU.DeleteNode(ctx, rec.Node)
				return op, err
			})
			var ae *ActError
			switch {
			case IsNotFound(err):
				rec.Phase, rec.DeleteOp = PhaseDeleted, ""
			case err != nil:
				if errors.As(err, &ae) && !ae.Transient {
					// Refused now, but an earlier try (retried in process, or
					// by a crashed holder) may have been accepted: believe
					// the node, not the answer.
					if n, gerr := h.getNode(ctx, rec.Node, r); gerr == nil && n != nil && n.State != stateDeleting {
						rec.DeleteSent = false
					}
				}
				return h.fail(ctx, rec, r, err)
			default:
				rec.Phase, rec.DeleteOp = PhaseDeleting, op
			}
			if err := h.update(ctx, rec, r); err != nil {
				return err
			}

		case PhaseDeleting:
			var waitErr error
			if rec.DeleteOp != "" {
				waitErr = h.step(ctx, r, "wait-delete", rec.Node, func() (string, error) {
					return rec.DeleteOp, h.TPU.WaitOperation(ctx, rec.DeleteOp)
				})
			}
			// Deleted only when the API says so, whatever the operation said.
			node, err := h.getNode(ctx, rec.Node, r)
			if err != nil {
				return h.fail(ctx, rec, r, err)
			}
			switch {
			case node == nil:
				rec.Phase = PhaseDeleted
				if err := h.update(ctx, rec, r); err != nil {
					return err
				}
			case node.State == stateDeleting:
				return h.fail(ctx, rec, r, &ActError{Step: "wait-delete", Node: rec.Node, Transient: true,
					Err: errors.Join(errors.New("node is still DELETING"), waitErr)})
			case notOurNode(*rec, node) != "":
				return h.closeAsNotOurs(ctx, rec, r, notOurNode(*rec, node))
			case waitErr != nil && !IsNotFound(waitErr):
				// The delete failed; the node is still there. Request it again next time.
				rec.Phase, rec.DeleteSent, rec.DeleteOp = PhaseSaved, false, ""
				var ae *ActError
				if errors.As(waitErr, &ae) && ae.Transient {
					if err := h.update(ctx, rec, r); err != nil {
						return err
					}
				}
				return h.fail(ctx, rec, r, waitErr)
			default:
				rec.Phase = PhaseSaved // the delete did not happen: request it again
				fresh = true           // of the node just read, ours
			}

		case PhaseDeleted:
			spec, warnings := createSpec(rec.Spec, rec.Generation, h.Config)
			r.Warnings = append(r.Warnings, warnings...)
			r.Spec = spec
			// A request-rate 429 is retried in process like any transient
			// error; a stockout or quota (IsTransient false) fails the
			// attempt and waits for the lease.
			var op string
			err := h.stepIf(ctx, r, "create", rec.Node, IsTransient, func() (string, error) {
				var err error
				op, err = h.TPU.CreateNode(ctx, parent, nodeID, spec)
				return op, err
			})
			if IsAlreadyExists(err) {
				node, gerr := h.getNode(ctx, rec.Node, r)
				if gerr != nil {
					return h.fail(ctx, rec, r, gerr)
				}
				if node == nil {
					return h.fail(ctx, rec, r, &ActError{Step: "create", Node: rec.Node, Transient: true,
						Err: fmt.Errorf("ALREADY_EXISTS but NOT FOUND: %w", err)})
				}
				if node.Labels[GenerationLabel] != strconv.Itoa(rec.Generation) {
					r.Warnings = append(r.Warnings, "node already existed when recreating it: created by someone else; left as it is")
				}
				rec.Phase = PhaseDone
				return h.update(ctx, rec, r)
			}
			if err != nil {
				return h.fail(ctx, rec, r, err)
			}
			rec.Phase, rec.CreateOp = PhaseCreating, op
			if err := h.update(ctx, rec, r); err != nil {
				return err
			}

		case PhaseCreating:
			if r.Spec == nil && rec.Spec != nil {
				r.Spec, _ = createSpec(rec.Spec, rec.Generation, h.Config)
			}
			if rec.CreateOp != "" {
				transient := func(err error) bool { return IsTransient(err) && !isExhausted(err) }
				waitErr := h.stepIf(ctx, r, "wait-create", rec.Node, transient, func() (string, error) {
					return rec.CreateOp, h.TPU.WaitOperation(ctx, rec.CreateOp)
				})
				if waitErr != nil {
					// Believe the node: if it is not there, the create failed
					// (a stockout shows up here) and is requested again next
					// time, from PhaseDeleted.
					node, err := h.getNode(ctx, rec.Node, r)
					if err != nil {
						return h.fail(ctx, rec, r, err)
					}
					if node != nil && IsNotFound(waitErr) {
						rec.Phase = PhaseDone
						return h.update(ctx, rec, r)
					}
					if node == nil {
						if IsNotFound(waitErr) {
							rec.Phase = PhaseDeleted
							continue
						}
						rec.Phase = PhaseDeleted
						var ae *ActError
						if errors.As(waitErr, &ae) && ae.Transient {
							if err := h.update(ctx, rec, r); err != nil {
								return err
							}
						}
					}
					return h.fail(ctx, rec, r, waitErr)
				}
			}
			rec.Phase = PhaseDone
			return h.update(ctx, rec, r)

		default:
			return h.fail(ctx, rec, r, &ActError{Step: "resume", Node: rec.Node, Err: fmt.Errorf("unknown phase %q", rec.Phase)})
		}
	}
}

// resumePhase says where a failed recreate resumes, from the node as the API
// shows it now, or (why != "") that the recovery must be closed: what it
// would do next is not ours to do.
func resumePhase(rec Recovery, node *tpu.Node) (phase Phase, why string) {
	switch {
	case node == nil && rec.Spec == nil:
		return PhaseClaimed, "" // PhaseClaimed closes it: nothing to recreate from
	case node == nil && !deleteSent(rec):
		return "", fmt.Sprintf("node NOT FOUND, and recovery gen %d never deleted it: deleted by someone else; not recreated", rec.Generation)
	case node == nil:
		return PhaseDeleted, ""
	case node.Labels[GenerationLabel] == strconv.Itoa(rec.Generation):
		if node.State == "CREATING" && rec.CreateOp != "" {
			return PhaseCreating, ""
		}
		return PhaseDone, ""
	case notOurNode(rec, node) != "":
		return "", notOurNode(rec, node)
	case node.State == stateDeleting && deleteSent(rec):
		return PhaseDeleting, ""
	case rec.Spec == nil:
		return PhaseClaimed, ""
	default:
		return PhaseSaved, ""
	}
}

// runReset resets the queued resource owning the node: claimed → saved (the
// queued resource's name recorded) → creating (the reset operation in
// CreateOp) → done.
func (h *Handler) runReset(ctx context.Context, rec *Recovery, obs Observed, r *Record) error {
	for {
		switch rec.Phase {
		case PhaseDone:
			return nil
		case PhaseClaimed, PhaseFailed:
			if rec.QueuedResource == "" && obs.Node != nil {
				rec.QueuedResource = obs.Node.QueuedResource
			}
			if rec.QueuedResource == "" {
				rec.Phase, rec.LastError = PhaseDone, "closed without finishing: no queued resource to reset"
				r.Action, r.Reason = ActionRecord, "node is no longer owned by a queued resource: not reset"
				return h.update(ctx, rec, r)
			}
			if rec.Spec == nil && obs.Node != nil {
				rec.Spec = CleanSpec(obs.Node)
				rec.NodeID = obs.Node.Id
			}
			if rec.Phase == PhaseClaimed {
				// One reset per incident of a queued resource: the slices
				// of a multislice one are separate nodes, each with its
				// own recovery, all preempted together.
				first, err := h.Store.MarkEvent(ctx, "reset:"+rec.QueuedResource, h.now().Add(max(h.Config.Cooldown, h.lease())))
				if err != nil {
					return h.fail(ctx, rec, r, &ActError{Step: "ledger", Node: rec.Node, Transient: true, Err: fmt.Errorf("mark reset of %s: %w", rec.QueuedResource, err)})
				}
				if !first {
					why := fmt.Sprintf("queued resource %s reset recently (another slice's recovery)", rec.QueuedResource)
					// The mark may be this recovery's own (a takeover after a
					// crash or a failed save): look again when it expires.
					due := h.now().Add(max(h.Config.Cooldown, h.lease()))
					if err := h.Store.SetDeferral(ctx, Deferral{Node: rec.Node, Project: rec.Project, Since: h.now(), Due: due, Reason: why}); err != nil {
						return h.fail(ctx, rec, r, &ActError{Step: "ledger", Node: rec.Node, Transient: true, Err: err})
					}
					rec.Phase, rec.LastError = PhaseDone, "closed without finishing: "+why
					r.Action, r.Reason = ActionSkip, why
					return h.update(ctx, rec, r)
				}
			}
			rec.Phase = PhaseSaved
			if err := h.update(ctx, rec, r); err != nil {
				return err
			}
		case PhaseSaved, PhaseDeleting, PhaseDeleted:
			var op string
			err := h.step(ctx, r, "reset", rec.QueuedResource, func() (string, error) {
				var err error
				op, err = h.TPU.ResetQueuedResource(ctx, rec.QueuedResource)
				return op, err
			})
			if err != nil {
				return h.fail(ctx, rec, r, err)
			}
			rec.Phase, rec.CreateOp = PhaseCreating, op
			if err := h.update(ctx, rec, r); err != nil {
				return err
			}
		case PhaseCreating:
			if rec.CreateOp != "" {
				err := h.step(ctx, r, "wait-reset", rec.QueuedResource, func() (string, error) {
					return rec.CreateOp, h.TPU.WaitOperation(ctx, rec.CreateOp)
				})
				if err != nil && !IsNotFound(err) {
					return h.fail(ctx, rec, r, err)
				}
			}
			rec.Phase = PhaseDone
			return h.update(ctx, rec, r)
		default:
			return h.fail(ctx, rec, r, &ActError{Step: "resume", Node: rec.Node, Err: fmt.Errorf("unknown phase %q", rec.Phase)})
		}
	}
}
