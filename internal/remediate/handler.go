package remediate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/seal"
)

// Handler observes a node, decides once and does exactly what the decision
// says; for a recovery it advances the state machine (Advance) by as many
// steps as need no waiting, saving each phase before its call, and returns
// once an operation is running. One Handler serves many concurrent calls; it
// holds no per-call state.
//
// Dry run (Config.DryRun): Decide never returns recreate or reset, so the
// Handler never claims a recovery and never calls a mutating TPU method. It
// still writes the ledger's bookkeeping (event marks, deferrals).
type Handler struct {
	TPU      TPU
	Store    Store
	Recorder Recorder
	Config   Config
	// Now, Holder, CallTimeout, Workers and Log are set by New, which
	// fills their defaults once (deps.go); the Handler never re-applies them.
	Now    func() time.Time
	Holder string // claim owner id
	// CallTimeout bounds each TPU call: a call that hangs is a transient
	// failure of its step, never a stuck request.
	CallTimeout time.Duration
	// Workers bounds how many recoveries and nodes Continue and Sweep
	// advance at once.
	Workers int
	// Log receives diagnostics.
	Log *slog.Logger
	// Maintenance handles upcoming-maintenance notices of opted-in READY
	// nodes (prepare, maintain; #10); nil = off.
	Maintenance *Maintainer
	// Resume closes incidents once the guest reports training resumed
	// (#11): checked after a record of a node seen READY and HEALTHY, and
	// for every open incident at the end of a sweep (resume_hook.go); nil
	// = off. Its incidents open and close from records when the Recorder
	// is Resume.Recording(…).
	Resume *ResumeWatcher
	// Sealer seals every spec a recovery saves and verifies it before the
	// delete and before the create (specseal.go); nil = specs are neither
	// sealed nor verified (tests of other things). The function always has
	// one: Cloud KMS (AUTOHEAL_MAC_KEY) or a local key.
	Sealer seal.Sealer
	// TrustUnsealedSpecs accepts a saved spec with no seal at all (saved by
	// a version before seals) at its next check and seals it then; false
	// (the default) abandons such a recovery like a tampered one.
	TrustUnsealedSpecs bool
	// Accounts is the service-account guard checked before a recreate is
	// claimed (nil = not checked).
	Accounts *AccountGuard
	// Lease, Histories and Kicker: the optional capabilities of Deps
	// (deps.go), nil = off.
	Lease     FollowerLease
	Histories HistoriesReader
	Kicker    Kicker
}

// Defaults of the Handler's knobs.
const (
	DefaultCallTimeout = 30 * time.Second
	DefaultWorkers     = 8
	// maxStepsPerCall bounds the steps one delivery takes: a recovery that
	// keeps asking for calls without waiting is saved and looked at again.
	maxStepsPerCall = 12
)

// ActError is a failure carrying out a decision: the step, the node and
// whether retrying can help. Handle returns it (wrapped) only when Transient;
// a permanent one is recorded (Record.Err) and Handle returns nil.
type ActError struct {
	Step      string // get, history, claim, ledger, record, …
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

// EventKey is the ledger's dedupe key of an event: Cloud Logging's identity
// of an entry is insertId + timestamp + logName (which carries the project).
func EventKey(ev events.Event) string {
	if ev.InsertID == "" {
		return ""
	}
	return ev.InsertID + "|" + ev.Time.UTC().Format(time.RFC3339Nano) + "|" + ev.LogName
}

// EventKeyTime is the entry timestamp in an EventKey (false when key is not
// one): replay, deciding in time order, forgets the marks of entries older
// than any entry still to come, since a duplicate has the original's
// timestamp.
func EventKeyTime(key string) (time.Time, bool) {
	j := strings.LastIndexByte(key, '|')
	if j < 0 {
		return time.Time{}, false
	}
	i := strings.LastIndexByte(key[:j], '|')
	if i < 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, key[i+1:j])
	return t, err == nil
}

// Handle handles one event: observes the node (GetNode, and GetQueuedResource
// when a queued resource owns it), reads the node's history, decides, acts and
// writes exactly one Record. It returns an error only for a transient failure
// the ledger or the first read had (the caller retries, Pub/Sub redelivers);
// then the event is not marked as processed. A TPU failure during a recovery
// is saved in the recovery, which a later look continues.
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
	r := Record{Time: h.Now(), InsertID: p.InsertID, EventTime: p.Time, Node: p.Node.Name(), Zone: p.Node.Zone,
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
	hist     *History // sweep: the node's history from the page's batched read; nil = read it now
	sweep    bool     // no event: a refusal recorded before is not recorded again (errRefusedBefore)
}

// process decides once about an observed node, performs the decision's
// ledger effects and recovery, and records the outcome.
func (h *Handler) process(ctx context.Context, ev events.Event, obs Observed, r Record, o processOpts) (Record, error) {
	cfg := h.Config
	name := ev.Node.Name()
	now := r.Time
	eventID := ""
	if ev.Method != "" {
		eventID = EventKey(ev)
	}
	var hist History
	var err error
	if o.hist != nil && eventID == "" {
		hist = *o.hist
	} else {
		hist, err = h.Store.History(ctx, name, ev.Node.Project, eventID, now, cfg.Window)
	}
	if err != nil {
		r.Action, r.Reason = ActionSkip, "ledger unavailable: not decided"
		return h.finish(ctx, ev, r, &ActError{Step: "history", Node: name, Transient: true, Err: err}, "")
	}
	if obs.Maintenance == nil {
		obs.Maintenance = h.ourMaintenance(ctx, obs.Node) // maintenance_exempt.go
	}
	d := Decide(ev, obs, hist, now, cfg)
	if d, err = h.zoneMoveGuard(ctx, name, obs, d, now); err != nil { // zonemove_handler.go
		r.Action, r.Reason = ActionSkip, "ledger unavailable: not decided"
		return h.finish(ctx, ev, r, &ActError{Step: "history", Node: name, Transient: true, Err: err}, "")
	}
	r.Action, r.Reason = d.Action, d.Reason
	if hist.Pause != nil && DeletedWhilePaused(hist.Recovery) && d.Action == ActionSkip {
		// A person should see this one: the node is down until resume.
		r.Severity, r.Reason = SeverityWarning, pausedDeletedReason(*hist.Recovery, *hist.Pause, now)+"; "+r.Reason
	}
	if obs.Node != nil {
		// Every record that saw the node says its size, so a report counts
		// chip-hours of self-recoveries too.
		r.AcceleratorType, r.Chips = obs.Node.AcceleratorType, ChipsOf(obs.Node.AcceleratorType)
	}
	if rec := hist.Recovery; rec != nil {
		r.Generation, r.Phase = rec.Generation, rec.Phase
	}
	if o.markID != "" {
		r.InsertID, r.EventTime = o.markID, o.markTime
		r.Cause = events.CauseMaintenance
		r.Reason = fmt.Sprintf("maintenance event at %s seen in healthDescription; %s", o.markTime.UTC().Format(time.RFC3339Nano), r.Reason)
	}
	actErr := h.perform(ctx, ev, &obs, hist, d, &r)
	if errors.Is(actErr, errRefusedBefore) {
		if o.sweep && o.markID == "" {
			return r, errRefusedBefore // sweepNode: not recorded
		}
		actErr = nil
	}
	noted := false
	if d.Action == ActionRecord && actErr == nil && d.Close == "" {
		if hist.Pause != nil {
			// A pause holds back every mutation, a notice's metadata
			// patch and early maintenance included: the notice is
			// handled once the pause is lifted (while it is still ahead).
			if n := obs.Node; n != nil && n.UpcomingMaintenance != nil {
				r.Reason += "; maintenance notice not handled: " + hist.Pause.Why()
			}
		} else {
			noted, actErr = h.maintenanceHook(ctx, ev, obs, &r)
		}
	}
	if o.quiet && r.Action == ActionRecord && actErr == nil && o.markID == "" && r.Outcome == "" && !noted {
		return r, nil
	}
	r, err = h.finish(ctx, ev, r, actErr, eventID)
	h.resumeHook(ctx, obs.Node, r, err)
	return r, err
}

// perform does what the decision says, in order: ledger effects, then a
// close or a claim and the recovery's steps.
// obs is updated with the node as the recovery last read it.
func (h *Handler) perform(ctx context.Context, ev events.Event, obs *Observed, hist History, d Decision, r *Record) error {
	name := ev.Node.Name()
	ledgerErr := func(what string, err error) error {
		return &ActError{Step: "ledger", Node: name, Transient: true, Err: fmt.Errorf("%s: %w", what, err)}
	}
	if d.Hold != nil {
		if err := h.Store.SetHold(ctx, *d.Hold); err != nil {
			return ledgerErr("set hold", err)
		}
	}
	if d.ClearHold {
		if err := h.Store.ClearHold(ctx, name); err != nil {
			return ledgerErr("clear hold", err)
		}
	}
	if d.ClearDeferral && !d.Claim {
		if err := h.Store.ClearDeferral(ctx, name); err != nil {
			return ledgerErr("clear deferral", err)
		}
	}
	if d.Deferral != nil && !sameDeferral(hist.Deferral, d.Deferral) {
		if err := h.Store.SetDeferral(ctx, *d.Deferral); err != nil {
			return ledgerErr("set deferral", err)
		}
	}
	if d.SeenReady != nil {
		if _, err := h.Store.KeepEvidence(ctx, name, *d.SeenReady); err != nil {
			return ledgerErr("keep create seen finished", err)
		}
	}
	if d.Close != "" && hist.Recovery != nil {
		return h.closeRecovery(ctx, *hist.Recovery, d.Close, r)
	}
	if d.Claim {
		return h.recover(ctx, ev, obs, hist, d, r)
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
	r.Elapsed = h.Now().Sub(r.Time)
	if err := h.Recorder.Record(ctx, r); err != nil {
		h.Log.Warn("record lost", "node", r.Node, "action", r.Action, "error", err.Error())
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

// failObserve records a failure to read the node: transient (a 5xx, a
// deadline, a malformed answer) → returned for a retry; permanent (403, …)
// → recorded as skip and acknowledged.
func (h *Handler) failObserve(ctx context.Context, ev events.Event, r Record, err error) (Record, error) {
	if KindOf(err) != KindPermanent {
		r.Action, r.Reason = ActionSkip, "could not read the node: transient error; will be retried"
		return h.finish(ctx, ev, r, &ActError{Step: "get", Node: ev.Node.Name(), Transient: true, Err: err}, "")
	}
	r.Action, r.Reason = ActionSkip, "could not read the node: permanent error"
	eventID := ""
	if ev.Method != "" {
		eventID = EventKey(ev)
	}
	return h.finish(ctx, ev, r, &ActError{Step: "get", Node: ev.Node.Name(), Err: err}, eventID)
}

// observe reads the node (nil when NOT FOUND) and the queued resource
// owning it (nil when none or NOT FOUND).
func (h *Handler) observe(ctx context.Context, name string, r *Record) (Observed, error) {
	var obs Observed
	n, err := timedGet(h, ctx, r, EffectGet, name, h.TPU.GetNode)
	if err != nil {
		return obs, err
	}
	obs.Node = n
	if n != nil && n.QueuedResource != "" {
		qr, err := timedGet(h, ctx, r, EffectGetQR, n.QueuedResource, h.TPU.GetQueuedResource)
		if err != nil {
			return obs, err
		}
		obs.QueuedResource = qr
	}
	return obs, nil
}

// timedGet reads one resource within CallTimeout as a recorded step; NOT
// FOUND is a nil resource, not an error.
func timedGet[T any](h *Handler, ctx context.Context, r *Record, kind EffectKind, name string, get func(context.Context, string) (*T, error)) (*T, error) {
	var v *T
	err := h.call(ctx, r, string(kind), "", func(ctx context.Context) (string, error) {
		var err error
		v, err = get(ctx, name)
		return "", err
	})
	if IsNotFound(err) {
		return nil, nil
	}
	return v, err
}

// call makes one TPU call within CallTimeout and appends a Step to the
// record. It never retries: a failure is the state machine's to handle.
func (h *Handler) call(ctx context.Context, r *Record, name, op string, f func(context.Context) (string, error)) error {
	s := Step{Name: name, Start: h.Now(), Operation: op}
	cctx, cancel := context.WithTimeout(ctx, h.CallTimeout)
	started, err := f(cctx)
	cancel()
	if started != "" {
		s.Operation = started
	}
	// On the handler's clock, as Start is: a replay at the event clock
	// records the incident's times, not those of the machine replaying it.
	s.Duration = h.Now().Sub(s.Start)
	if err != nil {
		s.Err = err.Error()
	}
	r.Steps = append(r.Steps, s)
	return err
}

// newRecord starts the record of an event.
func (h *Handler) newRecord(ev events.Event) Record {
	return Record{
		Time:      h.Now(),
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

// recover claims the node's recovery (new, or taken over) and advances it;
// obs ends as the recovery last observed the node.
func (h *Handler) recover(ctx context.Context, ev events.Event, obs *Observed, hist History, d Decision, r *Record) error {
	name := ev.Node.Name()
	now := r.Time
	if d.Action == ActionRecreate && (hist.Recovery == nil || !hist.Recovery.Unfinished()) {
		// Checked before anything is claimed or deleted (bounds.go).
		if refused, err := h.refuseOversize(ctx, obs.Node, r); refused {
			return err
		}
		// A new recreate, before anything is claimed or deleted (a
		// takeover finishes what was started).
		why, err := h.Accounts.Check(ctx, obs.Node) // specseal.go
		if err != nil {
			return &ActError{Step: "service-account", Node: name, Transient: true, Err: err}
		}
		if why != "" {
			r.Action, r.Reason = ActionSkip, why
			return h.accountRefused(ctx, obs.Node, r) // account_handler.go
		}
	}
	rec, err := h.Store.Claim(ctx, ClaimRequest{
		Node: name, Project: ev.Node.Project, Zone: ev.Node.Zone, Holder: h.Holder, Now: now,
		Action: d.Action, EventID: ev.InsertID, Cause: ev.Cause, Config: h.Config,
	})
	if err != nil {
		nd, ok := claimRefused(d, err, ev, hist, now, h.Config)
		if !ok {
			return &ActError{Step: "claim", Node: name, Transient: true, Err: err}
		}
		r.Action, r.Reason = nd.Action, nd.Reason
		var be *BreakerOpenError
		if errors.As(err, &be) && be.Tripped {
			r.Err = be.Error() // one ERROR record per trip pages a person
		}
		nd.Claim = false
		return h.perform(ctx, ev, obs, hist, nd, r)
	}
	r.Action, r.Generation = rec.Action, rec.Generation
	if rec.Action == ActionRecreate && rec.Phase == PhaseClaimed && obs.Node != nil {
		// Say now what the recreated node will come back with (its
		// startup script, or nothing that resumes training): the create is
		// made by a later continuation, whose record says it again.
		_, warnings := createSpec(CleanSpec(obs.Node), rec.Generation, h.Config)
		r.Warnings = append(r.Warnings, warnings...)
	}
	if d.ClearDeferral {
		if err := h.Store.ClearDeferral(ctx, name); err != nil {
			r.Warnings = append(r.Warnings, "clear deferral: "+err.Error())
		}
	}
	o := Observation{Node: obs.Node, QueuedResource: obs.QueuedResource}
	err = h.run(ctx, rec, &o, r)
	obs.Node, obs.QueuedResource = o.Node, o.QueuedResource
	return err
}

// closeRecovery ends an unfinished recovery that is no longer needed (the
// node recovered by itself, is stopped on purpose, opted out or held):
// taken over, then closed with why.
func (h *Handler) closeRecovery(ctx context.Context, old Recovery, why string, r *Record) error {
	rec, err := h.Store.Claim(ctx, ClaimRequest{
		Node: old.Node, Project: old.Project, Zone: zoneOf(old.Node), Holder: h.Holder, Now: r.Time,
		Action: old.Action, EventID: old.EventID, Cause: old.Cause, Config: h.Config,
	})
	if errors.Is(err, ErrClaimed) {
		return nil // somebody else is on it
	}
	if errors.Is(err, ErrPaused) {
		// Not a failure: the recovery stays as it is until the pause is
		// lifted, and the next look after it closes it.
		r.Reason += "; recovery left open: " + err.Error()
		return nil
	}
	if err != nil {
		return &ActError{Step: "claim", Node: old.Node, Transient: true, Err: err}
	}
	if rec.Generation != old.Generation || !rec.Unfinished() {
		r.Warnings = append(r.Warnings, fmt.Sprintf("closing recovery: store started gen %d instead of taking over gen %d", rec.Generation, old.Generation))
	}
	rec = closeRec(rec, why)
	err = h.save(ctx, rec)
	r.Phase, r.Generation, r.Outcome = rec.Phase, rec.Generation, OutcomeClosed
	return err
}

func zoneOf(node string) string {
	_, _, zone, _, _ := parseNodeName(node)
	return zone
}

// save writes the recovery's new phase.
func (h *Handler) save(ctx context.Context, rec Recovery) error {
	rec.UpdatedAt = h.Now()
	if err := h.Store.Update(ctx, rec); err != nil {
		if errors.Is(err, ErrLeaseLost) {
			return &ActError{Step: "ledger", Node: rec.Node, Transient: false, Err: err}
		}
		if permanentLedgerError(err) {
			// The ledger refused the write itself: no retry can mend it.
			return &ActError{Step: "ledger", Node: rec.Node, Transient: false, Err: fmt.Errorf("save phase %s: %w", rec.Phase, err)}
		}
		return &ActError{Step: "ledger", Node: rec.Node, Transient: true, Err: fmt.Errorf("save phase %s: %w", rec.Phase, err)}
	}
	return nil
}

// defaultLog writes diagnostics as JSON lines in Cloud Logging's shape.
var defaultLog = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{
	ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		switch {
		case len(groups) > 0:
		case a.Key == slog.LevelKey:
			a.Key = "severity"
			if l, ok := a.Value.Any().(slog.Level); ok && l == slog.LevelWarn {
				a.Value = slog.StringValue("WARNING")
			}
		case a.Key == slog.MessageKey:
			a.Key = "message"
		case a.Key == slog.TimeKey:
			a.Key = "timestamp"
		}
		return a
	},
}))

// sameDeferral reports whether writing d would change nothing: a skipped
// or deferred node seen again by every delivery of a burst is written once
// (#14), not once per delivery.
func sameDeferral(old, d *Deferral) bool {
	return old != nil && d != nil && old.Node == d.Node && old.Project == d.Project &&
		old.Since.Equal(d.Since) && old.Due.Equal(d.Due) && old.Reason == d.Reason
}
