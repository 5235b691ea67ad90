package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

// GenerationLabel is the label set on a recreated node: the recovery
// generation that created it. It tells our own node apart from one somebody
// else created under the same name.
const GenerationLabel = "tpu-autoheal-generation"

// Node states and health values of the TPU v2 API that Decide branches on.
const (
	stateReady      = "READY"
	stateTerminated = "TERMINATED"
	statePreempted  = "PREEMPTED"
	stateDeleting   = "DELETING"
	healthHealthy   = "HEALTHY"
)

// ParseSelector splits an opt-in label selector "key=value".
func ParseSelector(s string) (key, value string, err error) {
	k, v, ok := strings.Cut(s, "=")
	k, v = strings.TrimSpace(k), strings.TrimSpace(v)
	if !ok || k == "" || v == "" || strings.ContainsAny(v, "=,") {
		return "", "", fmt.Errorf("label selector %q: want key=value", s)
	}
	return k, v, nil
}

// Decide says what to do about the node an event (or a sweep, ev.Method == "")
// is about. It is pure. The event is only a hint: the observed node decides.
// See the decision table in the design document; every branch's reason says
// which row or guard applied.
//
// The decision carries every ledger effect the handler performs (plan):
// hold, deferral set or cleared, claim, close.
func Decide(ev events.Event, obs Observed, h History, now time.Time, cfg Config) Decision {
	if h.Pause != nil { // a person's pause (#12): see pause.go
		unpaused := h
		unpaused.Pause = nil
		d := Decide(ev, obs, unpaused, now, cfg)
		if pd := pausedDecision(d, *h.Pause, now); pd.Action != d.Action {
			// A mutation held back: no claim, and a look again later.
			pd = plan(pd, ev, obs, h, now, cfg)
			pd.SeenReady = seenReady(h.Recovery, obs.Node, now)
			return pd
		}
		return d
	}
	return plan(decide(ev, obs, h, now, cfg), ev, obs, h, now, cfg)
}

// plan adds to d the ledger effects that carry it out.
func plan(d Decision, ev events.Event, obs Observed, h History, now time.Time, cfg Config) Decision {
	name := ev.Node.Name()
	if name == "" {
		return d
	}
	switch d.Action {
	case ActionSkip:
		rec := h.Recovery
		inRecovery := rec != nil && rec.Unfinished() && deleteSent(*rec)
		if ev.Cause == events.CauseUser && obs.Node != nil && !held(h.Hold, obs.Node) && !inRecovery {
			d.Hold = &Hold{Node: name, Project: ev.Node.Project, NodeID: obs.Node.Id, Since: now, EventID: ev.InsertID, Reason: d.Reason}
		}
		if d.Final && h.Deferral != nil {
			d.ClearDeferral = true
		}
		if !d.Due.IsZero() {
			d.Deferral = deferral(ev, h, now, d.Due, d.Reason)
		}
	case ActionRecord:
		d.ClearDeferral = h.Deferral != nil
		d.ClearHold = h.Hold != nil && !held(h.Hold, obs.Node)
		if rec := h.Recovery; rec != nil && rec.Unfinished() && !now.Before(rec.LeaseUntil) && !cfg.DryRun {
			d.Close = d.Reason
		}
	case ActionDefer:
		d.Deferral = deferral(ev, h, now, d.Due, d.Reason)
		if !d.Since.IsZero() {
			d.Deferral.Since = d.Since
		}
	case ActionRecreate, ActionReset:
		d.Claim = true
		d.ClearDeferral = h.Deferral != nil
	}
	return d
}

// deferral is the node's deferral due at due, keeping the Since of a
// pending one.
func deferral(ev events.Event, h History, now, due time.Time, reason string) *Deferral {
	df := Deferral{Node: ev.Node.Name(), Project: ev.Node.Project, Since: now, Due: due, Reason: reason}
	if h.Deferral != nil && !h.Deferral.Since.IsZero() && h.Deferral.Since.Before(now) {
		df.Since = h.Deferral.Since
	}
	return &df
}

// ClaimRefused is the decision when the ledger refused the claim d asked
// for: the storm breaker (skip until it closes), or a guard the ledger saw
// and History did not (a concurrent claim): look again when it may clear.
// ok is false for an error that is no refusal (the ledger failed).
func ClaimRefused(d Decision, err error, ev events.Event, h History, now time.Time, cfg Config) (Decision, bool) {
	var be *BreakerOpenError
	var pe *PausedError
	switch {
	case errors.As(err, &pe):
		// A pause written between History and Claim: as Decide would have.
		nd := pausedDecision(d, pe.Pause, now)
		return plan(nd, ev, Observed{}, h, now, cfg), true
	case errors.As(err, &be):
		due := be.Until
		if !due.After(now) {
			due = inFlightRetry(now, cfg)
		}
		nd := Decision{Action: ActionSkip, Reason: be.Error(), Due: due}
		return plan(nd, ev, Observed{}, h, now, cfg), true
	case errors.Is(err, ErrClaimed):
		return Decision{Action: ActionSkip, Reason: "recovery in flight: " + err.Error()}, true
	case errors.Is(err, ErrCooldown), errors.Is(err, ErrWindowCap), errors.Is(err, ErrInFlightCap):
		due := inFlightRetry(now, cfg)
		if _, d := guard(h, now, cfg); !d.IsZero() {
			due = d
		}
		nd := Decision{Action: ActionSkip, Due: due, Reason: fmt.Sprintf("guard: %s; look again at %s", err, due.UTC().Format(time.RFC3339))}
		return plan(nd, ev, Observed{}, h, now, cfg), true
	}
	return d, false
}

func decide(ev events.Event, obs Observed, h History, now time.Time, cfg Config) Decision {
	name := ev.Node.Name()
	if name == "" {
		return Decision{Action: ActionReject, Reason: "event names no node"}
	}
	if ev.Method != "" && h.EventSeen {
		return Decision{Action: ActionSkip, Reason: fmt.Sprintf("event %s already handled", ev.InsertID)}
	}

	node := obs.Node
	rec := h.Recovery
	ours := rec != nil && rec.Unfinished()

	if node == nil && rec != nil && rec.Phase == PhaseAbandoned {
		return Decision{Action: ActionRecord, Reason: fmt.Sprintf(
			"node NOT FOUND: recovery gen %d was abandoned (%s); not recreated until a person does", rec.Generation, rec.LastError)}
	}
	if node == nil && !ours {
		return Decision{Action: ActionRecord, Reason: "node NOT FOUND: deleted by someone else; not ours"}
	}
	if node == nil && rec.Spec == nil {
		return Decision{Action: ActionRecord, Reason: fmt.Sprintf(
			"node NOT FOUND before recovery gen %d saved its spec: deleted by someone else; not ours", rec.Generation)}
	}

	labels := map[string]string(nil)
	if node != nil {
		labels = node.Labels
	} else {
		labels = rec.Spec.Labels
	}
	// A recovery whose delete was sent owns every outcome of it: a read
	// that shows the node opted out, healthy, stopped or held never closes
	// it here; Advance judges the read with the delete's verdict. So does
	// one whose create is under way: a node opted out while our create
	// runs is gone again when the create fails (a stockout), and closing
	// on the opt-out would lose it.
	deleteSentOurs := ours && deleteSent(*rec)
	if (labels[cfg.LabelKey] != cfg.LabelValue || cfg.LabelKey == "") && !(ours && node != nil && (deleteUnresolved(*rec) || createUnresolved(*rec, cfg))) {
		why := fmt.Sprintf("not opted in: label %s=%s missing", cfg.LabelKey, cfg.LabelValue)
		if v, ok := labels[cfg.LabelKey]; ok {
			why += fmt.Sprintf(" (has %s=%s)", cfg.LabelKey, v)
		}
		if ours && node != nil && !now.Before(rec.LeaseUntil) {
			// The live node opted out during our recovery: never touched
			// again, and the recovery must not hold the project's
			// in-flight cap forever. (A node NOT FOUND is judged by its
			// saved spec and is not closed on it: we may have deleted it.)
			return Decision{Action: ActionRecord, Reason: fmt.Sprintf("%s: closing recovery gen %d (%s)", why, rec.Generation, rec.Phase)}
		}
		return Decision{Action: ActionSkip, Reason: why, Final: true}
	}
	// A user's terminate holds a node not in recovery. It never closes a
	// recovery whose delete was sent: that recovery owns the node's
	// outcome, and only a person's delete, in evidence, ends it.
	if ev.Cause == events.CauseUser && deleteSentOurs {
		return Decision{Action: ActionSkip, Reason: fmt.Sprintf(
			"terminated by a user after recovery gen %d sent its delete: the recovery goes on", rec.Generation)}
	}
	if ev.Cause == events.CauseUser {
		return Decision{Action: ActionSkip, Reason: "terminated by a user: never undone", Final: true}
	}
	if held(h.Hold, node) && !deleteSentOurs {
		why := fmt.Sprintf("terminated by a user at %s (event %s): never undone",
			h.Hold.Since.UTC().Format(time.RFC3339), h.Hold.EventID)
		switch {
		case !ours:
			return Decision{Action: ActionSkip, Reason: why + "; held until the node is READY and HEALTHY again or replaced", Final: true}
		case !now.Before(rec.LeaseUntil):
			// The held node is the one the user terminated (same id): our
			// recovery never replaced it, and must not now.
			return Decision{Action: ActionRecord, Reason: fmt.Sprintf("%s: closing recovery gen %d (%s)", why, rec.Generation, rec.Phase)}
		}
	}

	if ours {
		return decideOurs(obs, h, *rec, now, cfg)
	}
	cause := ev.Cause
	if cause == "" || cause == events.CauseUnknown {
		cause = CauseOf(node)
	}
	return decideNode(obs, h, now, cfg, cause)
}

// held reports whether hold still applies to the observed node: the same
// node (by id) that the user terminated, not healthy again.
func held(hold *Hold, node *tpu.Node) bool {
	if hold == nil || node == nil || Healthy(node) {
		return false
	}
	return hold.NodeID == 0 || node.Id == hold.NodeID
}

// decideOurs decides about a node with an unfinished recovery of ours.
func decideOurs(obs Observed, h History, rec Recovery, now time.Time, cfg Config) Decision {
	node := obs.Node
	if now.Before(rec.LeaseUntil) || now.Before(rec.NextLookAt) {
		if rec.Phase == PhaseFailed {
			return Decision{Action: ActionSkip, Reason: fmt.Sprintf(
				"recovery gen %d failed (%s): next attempt after %s", rec.Generation, rec.LastError, rec.LeaseUntil.UTC().Format(time.RFC3339))}
		}
		if !rec.NextLookAt.IsZero() {
			return Decision{Action: ActionSkip, Reason: fmt.Sprintf(
				"recovery in flight: %s (gen %d), next look at %s", rec.Phase, rec.Generation, rec.NextLookAt.UTC().Format(time.RFC3339))}
		}
		return Decision{Action: ActionSkip, Reason: fmt.Sprintf(
			"recovery in flight: %s (gen %d), held by %s until %s", rec.Phase, rec.Generation, rec.Holder, rec.LeaseUntil.UTC().Format(time.RFC3339))}
	}
	if node != nil {
		// A healthy node our recovery created (our generation label), or
		// one our reset brought back, is the recovery's to finish (Advance
		// says recovered); any other healthy node recovered by itself.
		ours := node.Labels[GenerationLabel] == strconv.Itoa(rec.Generation) ||
			(rec.Action == ActionReset && (rec.Phase == PhaseResetting || rec.Phase == PhaseReset || rec.Phase == PhaseCreating))
		// After our delete was sent, Advance decides with its verdict:
		// one read never closes the recovery.
		sent := deleteUnresolved(rec)
		if Healthy(node) && !ours && !sent {
			return Decision{Action: ActionRecord, Reason: fmt.Sprintf(
				"node is %s: recovered; closing recovery gen %d (%s)", Describe(node), rec.Generation, rec.Phase)}
		}
		if OnPurpose(node.State) && !sent {
			return Decision{Action: ActionRecord, Reason: fmt.Sprintf(
				"node is %s: done on purpose, never touched; closing recovery gen %d (%s)", node.State, rec.Generation, rec.Phase)}
		}
	}
	action := rec.Action
	if action != ActionReset {
		action = ActionRecreate
	}
	state := "NOT FOUND"
	if node != nil {
		state = node.State
	}
	if action == ActionReset && node != nil && node.QueuedResource != "" && rec.Phase != PhaseResetting && rec.Phase != PhaseReset {
		// A failed reset is retried only while a reset makes sense.
		why := fmt.Sprintf("%s: recovery gen %d (%s)", state, rec.Generation, rec.Phase)
		if d, ok := queuedResourceBlocks(obs, h, now, cfg, why); ok {
			return Decision{Action: ActionRecord, Reason: d.Reason + "; closing the recovery"}
		}
	}
	what := fmt.Sprintf("%s: continue recovery gen %d from phase %s (lease expired)", state, rec.Generation, rec.Phase)
	if cfg.DryRun {
		return Decision{Action: ActionSkip, Reason: fmt.Sprintf("dry run: would %s: %s", action, what)}
	}
	return Decision{Action: action, Reason: what}
}

// decideNode decides about a node with no unfinished recovery.
func decideNode(obs Observed, h History, now time.Time, cfg Config, cause events.Cause) Decision {
	node := obs.Node
	switch state := node.State; {
	case state == stateDeleting:
		return Decision{Action: ActionRecord, Reason: "DELETING: deleted by someone else; not ours"}
	case state == stateReady && Healthy(node):
		if rec := h.Recovery; rec != nil && (rec.Phase == PhaseDone || rec.Phase == PhaseRecovered) && node.Labels[GenerationLabel] == strconv.Itoa(rec.Generation) {
			return Decision{Action: ActionRecord, Reason: fmt.Sprintf("node is %s: recovered by tpu-autoheal (recovery gen %d, %s)", Describe(node), rec.Generation, rec.Action)}
		}
		return Decision{Action: ActionRecord, Reason: fmt.Sprintf("node is %s: recovered by itself", Describe(node))}
	case state == stateReady && !knownUnhealthy(node.Health):
		return Decision{Action: ActionRecord, Reason: fmt.Sprintf("READY with unrecognised health %q: not touched", node.Health)}
	case state == stateReady:
		return afterGrace(obs, h, now, cfg, cfg.UnhealthyGrace, "READY but "+node.Health)
	case state == stateTerminated || state == statePreempted:
		return repair(obs, h, now, cfg, fmt.Sprintf("%s (%s)", state, cause))
	case OnPurpose(state):
		return Decision{Action: ActionRecord, Reason: state + ": done on purpose; never touch"}
	case inProgress(state):
		if state == "" {
			state = "STATE_UNSPECIFIED"
		}
		return afterGrace(obs, h, now, cfg, cfg.StuckGrace, state)
	default:
		return Decision{Action: ActionRecord, Reason: fmt.Sprintf("unrecognised state %q: not touched", state)}
	}
}

// afterGrace defers until the node has been in its condition for grace, then
// repairs it. The condition started at the pending deferral's Since, or now.
//
// A node in maintenance (ONGOING, or the one tpu-autoheal started) is not
// counted against its grace until the maintenance is over, within the
// bound cfg.MaintenanceMax (maintenanceExemption).
func afterGrace(obs Observed, h History, now time.Time, cfg Config, grace time.Duration, cond string) Decision {
	since := now
	if h.Deferral != nil && !h.Deferral.Since.IsZero() && h.Deferral.Since.Before(now) {
		since = h.Deferral.Since
	}
	exempt, from, exemptDue, why, inMaint := maintenanceExemption(obs, since, now, cfg)
	if exempt {
		return Decision{Action: ActionDefer, Due: exemptDue, Since: from, Reason: fmt.Sprintf(
			"%s; %s: look again at %s", cond, why, exemptDue.UTC().Format(time.RFC3339))}
	}
	if inMaint {
		since = from
		cond += " (" + why + ")"
	}
	due := since.Add(grace)
	if now.Before(due) {
		return Decision{Action: ActionDefer, Due: due, Reason: fmt.Sprintf(
			"%s for %s < grace %s: look again at %s", cond, roundDur(now.Sub(since)), grace, due.UTC().Format(time.RFC3339))}
	}
	return repair(obs, h, now, cfg, fmt.Sprintf("%s for %s >= grace %s", cond, roundDur(now.Sub(since)), grace))
}

// repair chooses recreate, or reset for a node owned by a queued resource,
// and applies the guards.
func repair(obs Observed, h History, now time.Time, cfg Config, why string) Decision {
	action := ActionRecreate
	if qr := obs.Node.QueuedResource; qr != "" {
		action = ActionReset
		if d, ok := queuedResourceBlocks(obs, h, now, cfg, why); ok {
			return d
		}
		why += ": reset queued resource " + qr
	} else {
		why += ": recreate"
	}
	// Guards in order: dry run, cooldown, window cap, in-flight cap.
	if cfg.DryRun {
		return Decision{Action: ActionSkip, Reason: "dry run: would " + string(action) + ": " + why}
	}
	if g, due := guard(h, now, cfg); g != "" {
		return Decision{Action: ActionSkip, Due: due, Reason: fmt.Sprintf("%s; guard: %s; look again at %s", why, g, due.UTC().Format(time.RFC3339))}
	}
	return Decision{Action: action, Reason: why}
}

// queuedResourceBlocks says whether the owning queued resource is in a state
// in which a reset makes no sense, and what to do instead.
func queuedResourceBlocks(obs Observed, h History, now time.Time, cfg Config, why string) (Decision, bool) {
	name := obs.Node.QueuedResource
	qr := obs.QueuedResource
	if qr == nil {
		return Decision{Action: ActionRecord, Reason: fmt.Sprintf("%s: queued resource %s NOT FOUND: not touched", why, name)}, true
	}
	state := ""
	if qr.State != nil {
		state = qr.State.State
	}
	switch state {
	case "ACTIVE", "SUSPENDED":
		return Decision{}, false
	case "CREATING", "ACCEPTED", "PROVISIONING", "WAITING_FOR_RESOURCES", "SUSPENDING":
		// The platform is already working on it (a reset in progress shows
		// as SUSPENDING then PROVISIONING): give it the stuck grace.
		d := afterGraceOnly(h, now, cfg.StuckGrace)
		if d.IsZero() {
			return Decision{Action: ActionRecord, Reason: fmt.Sprintf(
				"%s: queued resource %s stuck in %s past grace %s: not reset; needs a person", why, name, state, cfg.StuckGrace)}, true
		}
		return Decision{Action: ActionDefer, Due: d, Reason: fmt.Sprintf(
			"%s: queued resource %s is %s: the platform is recovering it; look again at %s", why, name, state, d.UTC().Format(time.RFC3339))}, true
	default: // FAILED, DELETING, STATE_UNSPECIFIED, unknown
		if state == "" {
			state = "STATE_UNSPECIFIED"
		}
		return Decision{Action: ActionRecord, Reason: fmt.Sprintf(
			"%s: queued resource %s is %s: a reset makes no sense; not touched", why, name, state)}, true
	}
}

// afterGraceOnly returns the due time of a deferral with grace, or the zero
// time when the grace has passed.
func afterGraceOnly(h History, now time.Time, grace time.Duration) time.Time {
	since := now
	if h.Deferral != nil && !h.Deferral.Since.IsZero() && h.Deferral.Since.Before(now) {
		since = h.Deferral.Since
	}
	due := since.Add(grace)
	if now.Before(due) {
		return due
	}
	return time.Time{}
}

// guard returns why a new recovery may not start, or "" when every guard
// passes: cooldown, window cap, project in-flight cap, in that order. As in
// the ledger's Claim (which re-checks them atomically), a zero limit turns
// its guard off. due is when the guard can clear: the node is looked at
// again then (a skip records a deferral), so a node skipped by a guard is
// not forgotten when the sweep lists no zones.
func guard(h History, now time.Time, cfg Config) (why string, due time.Time) {
	why, due, _ = Guard(h.Recreates, h.InFlight, now, cfg)
	return why, due
}

// Guard is the one statement of the guards a new recovery must pass:
// cooldown since the node's last recreate, recreates of the node within the
// window under the cap, the project's other unfinished recoveries under the
// in-flight cap, in that order. Decide applies it to History; the ledger's
// Claim applies it again atomically. A zero limit turns its guard off. It
// returns why (for a person), when the guard can clear, and ErrCooldown,
// ErrWindowCap or ErrInFlightCap; all zero when every guard passes.
func Guard(recreates []time.Time, inFlight int, now time.Time, cfg Config) (why string, due time.Time, err error) {
	var recent []time.Time
	for _, t := range recreates {
		if t.After(now) || (cfg.Window > 0 && !t.After(now.Add(-cfg.Window))) {
			continue
		}
		recent = append(recent, t)
	}
	if cfg.Cooldown > 0 && len(recent) > 0 {
		last := recent[0]
		for _, t := range recent {
			if t.After(last) {
				last = t
			}
		}
		if ago := now.Sub(last); ago < cfg.Cooldown {
			return fmt.Sprintf("cooldown: last recreate %s ago < %s", roundDur(ago), cfg.Cooldown), last.Add(cfg.Cooldown), ErrCooldown
		}
	}
	if cfg.MaxRecreates > 0 && len(recent) >= cfg.MaxRecreates {
		due := inFlightRetry(now, cfg)
		if cfg.Window > 0 {
			oldest := recent[0]
			for _, t := range recent {
				if t.Before(oldest) {
					oldest = t
				}
			}
			due = oldest.Add(cfg.Window)
		}
		return fmt.Sprintf("window cap: %d recreates in %s >= %d", len(recent), cfg.Window, cfg.MaxRecreates), due, ErrWindowCap
	}
	if cfg.MaxInFlight > 0 && inFlight >= cfg.MaxInFlight {
		return fmt.Sprintf("in-flight cap: %d recoveries in flight in the project >= %d", inFlight, cfg.MaxInFlight), inFlightRetry(now, cfg), ErrInFlightCap
	}
	return "", time.Time{}, nil
}

// maxInFlightWait bounds how long a node skipped by the in-flight cap waits
// before it is looked at again.
const maxInFlightWait = 5 * time.Minute

// inFlightRetry is when a node skipped by the project's in-flight cap is
// looked at again: the other recoveries may finish any time, so after the
// cooldown or 5 minutes, whichever is shorter.
func inFlightRetry(now time.Time, cfg Config) time.Time {
	wait := maxInFlightWait
	if cfg.Cooldown > 0 && cfg.Cooldown < wait {
		wait = cfg.Cooldown
	}
	return now.Add(wait)
}

// Healthy reports a node READY, and HEALTHY or with no health reported. A READY node whose
// health the API does not report is never deleted on a guess.
func Healthy(n *tpu.Node) bool {
	if n.State != stateReady {
		return false
	}
	switch n.Health {
	case healthHealthy, "", "HEALTH_UNSPECIFIED":
		return true
	}
	return false
}

// knownUnhealthy: the health values of the TPU v2 API that mean the node is
// broken. A value the API adds later is recorded, never acted on by guess.
func knownUnhealthy(health string) bool {
	switch health {
	case "TIMEOUT", "UNHEALTHY_TENSORFLOW", "UNHEALTHY_MAINTENANCE",
		"DEPRECATED_UNHEALTHY": // the v1 API's (legacy TPU Node) plain unhealthy
		return true
	}
	return false
}

// Describe is a node's state and health, for a reason a person reads.
func Describe(n *tpu.Node) string {
	h := n.Health
	if h == "" {
		h = "health not reported"
	}
	return n.State + " and " + h
}

// OnPurpose reports the states a person or the platform chose; never touched.
func OnPurpose(state string) bool {
	switch state {
	case "STOPPED", "STOPPING", "HIDDEN", "HIDING":
		return true
	}
	return false
}

// inProgress: transitional states that usually end by themselves.
func inProgress(state string) bool {
	switch state {
	case "RESTARTING", "REPAIRING", "CREATING", "STARTING", "REIMAGING", "UNHIDING", "UNKNOWN", "STATE_UNSPECIFIED", "":
		return true
	}
	return false
}

// CauseOf guesses why a swept node is down from its state and health.
func CauseOf(n *tpu.Node) events.Cause {
	switch {
	case n.State == statePreempted:
		return events.CausePreemption
	case n.Health == "UNHEALTHY_MAINTENANCE" || strings.Contains(n.HealthDescription, "maintenance"):
		return events.CauseMaintenance
	case n.SchedulingConfig != nil && (n.SchedulingConfig.Spot || n.SchedulingConfig.Preemptible) && n.State == stateTerminated:
		return events.CausePreemption
	case n.State == stateTerminated:
		return events.CauseMaintenance
	}
	return events.CauseUnknown
}

func roundDur(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Minute)
	}
	return d.Round(time.Second)
}

// createUnresolved: rec's create of a node it saved opted in was sent and
// has no verdict yet (phase creating).
func createUnresolved(rec Recovery, cfg Config) bool {
	return rec.Phase == PhaseCreating && rec.Spec != nil && cfg.LabelKey != "" && rec.Spec.Labels[cfg.LabelKey] == cfg.LabelValue
}
