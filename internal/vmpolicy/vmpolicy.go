// Package vmpolicy decides what to do about a Compute Engine TPU VM, or the
// VMs of one multi-host slice, from what was just observed of them, the
// evidence the audit log gave (system events, persons' admin activity) and
// what this project already did in the incident. It is the instance
// counterpart of remediate.Decide: pure, level-triggered, no I/O; the
// computevm package observes, acts and records.
//
// It must never return a mutating action for an instance a person stopped,
// suspended or deleted, or one the guest shut down: those are held.
package vmpolicy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Action is what Decide asks for. record, defer and skip are the same words
// as for nodes; start, recreate and recreateInstances are the instance
// calls; held means "a person (or the guest) did this: never touched".
type Action string

// Actions.
const (
	ActionRecord            Action = "record"
	ActionDefer             Action = "defer"
	ActionStart             Action = "start"             // instances.start of each target
	ActionRecreate          Action = "recreate"          // instances.insert of each target from its saved spec
	ActionRecreateInstances Action = "recreateInstances" // instanceGroupManagers.recreateInstances of the targets
	ActionHeld              Action = "held"
	ActionPrepare           Action = "prepare"  // instances.setMetadata autoheal-maintenance on each target
	ActionMaintain          Action = "maintain" // instances.performMaintenance on each target (mode early)
	// ActionReportFaulty is instances.reportHostAsFaulty of each target
	// (IMMEDIATE, CHIP_ERROR): opt-in, Config.FaultyHosts.
	ActionReportFaulty Action = "reportHostAsFaulty"
)

// Actions lists every Action, for those that show them (the CLI's table
// sizes its ACTION column from it).
var Actions = []Action{ActionRecord, ActionDefer, ActionStart, ActionRecreate, ActionRecreateInstances, ActionHeld,
	ActionPrepare, ActionMaintain, ActionReportFaulty}

// ReasonRunning is the reason of a record decision about a slice whose
// every instance is RUNNING with no maintenance notice.
const ReasonRunning = "every instance is RUNNING"

// SaysRunning reports whether reason is that of a decision Decide makes
// only when every instance of the slice is RUNNING: ReasonRunning, or one
// about a maintenance notice ("maintenance at …"). The incident report
// reads it as the slice healthy again; any other record decision (the MIG
// repairs it, a call already sent, not ours) is not.
func SaysRunning(reason string) bool {
	return reason == ReasonRunning || strings.HasPrefix(reason, maintenanceAt)
}

// maintenanceAt begins the reason of every decision about a RUNNING
// slice's maintenance notice (prepare and early).
const maintenanceAt = "maintenance at "

// Mutates reports whether a is a call that changes an instance.
func (a Action) Mutates() bool {
	return a == ActionStart || a == ActionRecreate || a == ActionRecreateInstances || a == ActionPrepare || a == ActionMaintain || a == ActionReportFaulty
}

// Status values of a Compute Engine instance (compute/v1 Instance.status).
const (
	StatusRunning     = "RUNNING"
	StatusTerminated  = "TERMINATED"
	StatusSuspended   = "SUSPENDED"
	StatusStopping    = "STOPPING"
	StatusSuspending  = "SUSPENDING"
	StatusPendingStop = "PENDING_STOP"
)

// inProgress are the statuses of an instance on its way somewhere: defer.
var inProgress = []string{"PROVISIONING", "STAGING", "PENDING", "REPAIRING", StatusStopping, StatusPendingStop, StatusSuspending, "DEPROVISIONING"}

// comingUp is the part of inProgress on the way to RUNNING (being made,
// started or repaired): no person's stop leaves an instance there, so a
// MIG's instance stuck in one past the stuck grace needs no system event
// to be recreated (a stop with no entry ends TERMINATED, and a stopping
// one is on its way there).
var comingUp = []string{"PROVISIONING", "STAGING", "PENDING", "REPAIRING"}

// Instance is what was observed of one instance.
type Instance struct {
	Name    string // projects/P/zones/Z/instances/I
	Found   bool   // false: instances.get answered NOT FOUND
	ID      uint64 // the instance id (0 when not found)
	Status  string
	OptedIn bool // the opt-in label; for a vanished one, its saved spec's
	// LastStop is lastStopTimestamp (zero when never stopped); LastStart
	// lastStartTimestamp (vanished: as its saved spec recorded it): a
	// person's stop or delete after it explains the instance's state now,
	// whatever system event came before, and a system event before it
	// explains nothing (Compute Engine's own clock on both sides).
	LastStop  time.Time
	LastStart time.Time
	// Seen is, for a vanished instance, when its saved spec was saved with
	// the instance RUNNING (zero: unknown): a system event dated before it
	// did not make it vanish (an old entry, redelivered or replayed).
	Seen time.Time
	// AutomaticRestart is scheduling.automaticRestart: Compute Engine may
	// start the instance again by itself after a host error.
	AutomaticRestart bool
	// MIG is the managed instance group that owns it
	// (projects/P/zones/Z/instanceGroupManagers/M), "" for a standalone VM.
	MIG string
	// HasSpec: a spec saved before it broke exists (for recreate).
	HasSpec bool
	// Maintenance is the window start of its upcoming maintenance when
	// PENDING (resourceStatus.upcomingMaintenance), "" for none; Notified
	// the notice (window start) its autoheal-maintenance metadata holds,
	// "" for none; NoPrepare: its maintenance mode is off.
	Maintenance string
	Notified    string
	NoPrepare   bool
	// NoticeSent is when the notice its metadata holds was written (the
	// notice's sentAt): the checkpoint timeout runs from it.
	NoticeSent time.Time
	// Early: its maintenance mode is early. CanReschedule is the PENDING
	// notice's canReschedule; Checkpoint the notice (window start) its
	// guest's autoheal/checkpoint reports, "" for none read; Maintained
	// the window this project sent instances.performMaintenance for, ""
	// for none (per instance id: a VM made again under the name has not).
	Early         bool
	CanReschedule bool
	Checkpoint    string
	Maintained    string
	// MaintainedUntil is the window end of that maintenance (zero: none
	// sent): the maintenance this project started may hold the instance
	// down until then. WindowStart and WindowEnd are the window of its
	// latest maintenance notice known (PENDING or ONGOING on the
	// instance, else the one its autoheal-maintenance metadata holds;
	// zero: none): a terminateOnHostMaintenance inside it is that
	// maintenance. Either way the instance does not count as stuck until
	// the window's end plus StuckGrace.
	MaintainedUntil        time.Time
	WindowStart, WindowEnd time.Time
	// ReservationBound is scheduling.provisioningModel RESERVATION_BOUND:
	// only such a VM's host can be reported faulty.
	ReservationBound bool
	// FaultyReported is when this project last reported its host faulty
	// (zero: never): the VM is held until it was started after it, and
	// only host errors after it count toward another report.
	FaultyReported time.Time
}

// EvidenceKind says what an audit entry showed.
type EvidenceKind string

// Evidence kinds.
const (
	// EvidenceSystem is a Compute Engine system event that may have broken
	// the instance: hostError, preempted, terminateOnHostMaintenance.
	EvidenceSystem EvidenceKind = "system"
	// EvidencePerson is a person's stop, suspend or delete
	// (admin activity with a principal that is not ours).
	EvidencePerson EvidenceKind = "person"
	// EvidenceRestart is compute.instances.automaticRestart: Compute
	// Engine restarted it itself (kept for the record; the instance's
	// status says the rest).
	EvidenceRestart EvidenceKind = "restart"
	// EvidenceNotice is a maintenance notice (upcomingMaintenance,
	// upcomingInfraMaintenance): nothing broke yet.
	EvidenceNotice EvidenceKind = "notice"
)

// Evidence is one audit entry about one instance.
type Evidence struct {
	Instance string
	Kind     EvidenceKind
	Method   string
	Time     time.Time
	InsertID string
}

// Incident is what this project already did about the slice: the last
// mutating action sent and when (zero: none).
type Incident struct {
	Action Action
	At     time.Time
}

// Config are the graces of the instance table.
type Config struct {
	// RestartGrace is how long after a host error an instance with
	// automaticRestart is left to Compute Engine before it is started.
	RestartGrace time.Duration
	// StuckGrace is how long a MIG, or an instance in progress, is given.
	StuckGrace time.Duration
	// EventSlack is how far before lastStopTimestamp a system event may be
	// dated and still be the cause of that stop (the entry is written as
	// the instance stops; clocks and the write differ by seconds).
	EventSlack time.Duration
	// FaultyHosts reports a reservation-bound VM's host faulty after this
	// many host errors in a window (zero Count: never).
	FaultyHosts FaultyHosts
	// CheckpointTimeout is AUTOHEAL_CHECKPOINT_TIMEOUT: in mode early, how
	// long after the notice was sent every guest may take to report its
	// checkpoint; then the maintenance is left to Compute Engine (zero:
	// DefaultCheckpointTimeout).
	CheckpointTimeout time.Duration
}

// DefaultCheckpointTimeout is AUTOHEAL_CHECKPOINT_TIMEOUT's default, as
// for nodes.
const DefaultCheckpointTimeout = 30 * time.Minute

// FaultyHosts is AUTOHEAL_REPORT_FAULTY_HOSTS: Count host errors within
// Window.
type FaultyHosts struct {
	Count  int
	Window time.Duration
}

// DefaultFaultyHosts is what AUTOHEAL_REPORT_FAULTY_HOSTS=true means.
var DefaultFaultyHosts = FaultyHosts{Count: 3, Window: 7 * 24 * time.Hour}

// ParseFaultyHosts parses AUTOHEAL_REPORT_FAULTY_HOSTS: "", "false" or
// "off" (never), "true" or "on" (DefaultFaultyHosts), or COUNT/WINDOW such
// as "3/7d" (WINDOW a Go duration, or a whole number of days with "d").
func ParseFaultyHosts(s string) (FaultyHosts, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "false", "off":
		return FaultyHosts{}, nil
	case "true", "on":
		return DefaultFaultyHosts, nil
	}
	c, w, ok := strings.Cut(s, "/")
	if !ok {
		return FaultyHosts{}, fmt.Errorf("%q: want COUNT/WINDOW such as 3/7d, true or false", s)
	}
	n, err := strconv.Atoi(c)
	if err != nil || n <= 0 {
		return FaultyHosts{}, fmt.Errorf("%q: COUNT %q is not a positive integer", s, c)
	}
	var window time.Duration
	if d, ok := strings.CutSuffix(w, "d"); ok {
		days, err := strconv.Atoi(d)
		if err != nil || days <= 0 {
			return FaultyHosts{}, fmt.Errorf("%q: WINDOW %q is not a positive number of days", s, w)
		}
		window = time.Duration(days) * 24 * time.Hour
	} else if window, err = time.ParseDuration(w); err != nil || window <= 0 {
		return FaultyHosts{}, fmt.Errorf("%q: WINDOW %q is not a positive duration such as 7d or 72h", s, w)
	}
	return FaultyHosts{Count: n, Window: window}, nil
}

// DefaultConfig are the defaults: a 5-minute restart grace (the fake and
// the documented automatic restart take about a minute), the node stuck
// grace of 30 minutes, and a 2-minute event slack.
func DefaultConfig() Config {
	return Config{RestartGrace: 5 * time.Minute, StuckGrace: 30 * time.Minute, EventSlack: 2 * time.Minute, CheckpointTimeout: DefaultCheckpointTimeout}
}

// Input is everything Decide reads.
type Input struct {
	Slice    []Instance // one instance, or every instance of a multi-host slice
	Evidence []Evidence // about the slice's instances, any order
	Incident Incident
	// Since is when the slice was first seen not RUNNING by this project
	// (a deferral's start), zero when unknown.
	Since time.Time
	// CheckpointLate is the notice (window start) whose checkpoint was
	// concluded not reported in time in this slice (a Decision's
	// CheckpointLate, kept), "" for none: it is never started early.
	CheckpointLate string
	// MaintenanceUntil is the end of a maintenance window a look found
	// the broken slice in (a Decision's MaintenanceUntil, kept until the
	// slice is healthy again), zero for none: a VM the MIG makes again
	// during or after the maintenance no longer holds the notice, and
	// the slice still does not count as stuck before it plus StuckGrace.
	MaintenanceUntil time.Time
	Now              time.Time
}

// Decision is Decide's answer.
type Decision struct {
	Action  Action
	Reason  string
	Targets []string  // the instances the action is about (mutations only)
	Due     time.Time // for defer: when to look again
	// CheckpointLate is set, to the notice, by the look that concludes
	// its checkpoint was not reported within CheckpointTimeout: the caller
	// keeps it (Input.CheckpointLate) so that no later look starts that
	// maintenance early, whatever the guests report after.
	CheckpointLate string
	// MaintenanceUntil is set by a look that finds a broken instance in a
	// maintenance window ending after Input.MaintenanceUntil: the caller
	// keeps it (Input.MaintenanceUntil) while the slice is broken.
	MaintenanceUntil time.Time
}

// Decide applies the instance decision table to a slice. Rows, in order:
//
//   - an instance not opted in → record;
//   - reported faulty and not started since → held;
//   - every instance RUNNING → record, or, with FaultyHosts, reportHostAsFaulty
//     of a reservation-bound instance with Count host errors in Window since
//     its last report, or prepare for a maintenance notice (delivered to
//     every instance, in mode early: maintain once every guest reported its
//     checkpoint, record once one is CheckpointTimeout late);
//   - a person's stop/suspend/delete of an instance newer than the last
//     system event about it or than its last start (vanished: than when
//     it was last seen running), or SUSPENDED → held;
//   - any instance in progress (PROVISIONING … DEPROVISIONING) → defer,
//     until the stuck grace (then record: nothing of ours to do); an
//     instance in a maintenance window (one this project started, or a
//     terminateOnHostMaintenance inside its notice's window) makes the
//     stuck grace run from the window's end, here and in the MIG row;
//   - MIG-owned: record while the MIG repairs (within the stuck grace of
//     the incident), then recreateInstances of the slice's broken
//     instances (all of a multi-host slice), once per incident, only when
//     every broken instance has a system event dated at or after its
//     lastStopTimestamp (vanished: when it was last seen running), less
//     EventSlack (its own: in a multi-host slice, an event about another
//     instance explains nothing about this one); else record;
//   - TERMINATED with a system event dated at or after its lastStopTimestamp
//     (less EventSlack): defer within RestartGrace when automaticRestart is
//     on, then start once per incident; TERMINATED otherwise (guest
//     shutdown, a stop we have no evidence of) → held;
//   - NOT FOUND after a system event dated at or after when it was last
//     seen running (less EventSlack) → recreate from the saved spec, once
//     per incident; without a spec or such an event → record.
func Decide(in Input, cfg Config) Decision {
	if len(in.Slice) == 0 {
		return Decision{Action: ActionRecord, Reason: "no instance observed"}
	}
	for _, i := range in.Slice {
		if !i.OptedIn {
			return Decision{Action: ActionRecord, Reason: fmt.Sprintf("%s is not opted in", i.Name)}
		}
	}
	var broken []Instance
	for _, i := range in.Slice {
		if !i.Found || i.Status != StatusRunning {
			broken = append(broken, i)
		}
	}
	for _, i := range broken {
		// Reported faulty: the host's repair takes days; never started
		// nor recreated until it runs again.
		if !i.FaultyReported.IsZero() && !i.LastStart.After(i.FaultyReported) {
			return Decision{Action: ActionHeld, Reason: fmt.Sprintf("the host of %s was reported faulty at %s: held until it is RUNNING again (the repair takes days)", i.Name, i.FaultyReported.Format(time.RFC3339))}
		}
	}
	if len(broken) == 0 {
		if d, ok := reportFaulty(in, cfg.FaultyHosts); ok {
			return d
		}
		return prepare(in, cfg)
	}
	for _, i := range broken {
		sys, person := latest(in.Evidence, i.Name, EvidenceSystem), latest(in.Evidence, i.Name, EvidencePerson)
		// A person's stop, suspend or delete holds the instance when it is
		// newer than the last system event, or newer than the instance's
		// last start (or, vanished, than when it was last seen running):
		// then it is what the instance's state is now, and an older
		// system event explains nothing.
		since := i.LastStart
		if !i.Found && i.Seen.After(since) {
			since = i.Seen
		}
		if !person.IsZero() && (!person.Before(sys) || !since.IsZero() && person.After(since)) {
			return Decision{Action: ActionHeld, Reason: fmt.Sprintf("a person stopped, suspended or deleted %s at %s: never undone", i.Name, person.Format(time.RFC3339))}
		}
		if i.Found && i.Status == StatusSuspended {
			return Decision{Action: ActionHeld, Reason: fmt.Sprintf("%s is SUSPENDED: only a person suspends", i.Name)}
		}
	}
	// The incident starts at the newest system event about a broken
	// instance (a redelivered entry has the same time; a new failure after
	// a recovery is a new incident), else when the slice was first seen
	// broken.
	since := newestSystem(in.Evidence, broken)
	if since.IsZero() {
		since = in.Since
	}
	if since.IsZero() {
		since = in.Now
	}
	// stuck is when the slice counts as stuck: the stuck grace after the
	// incident's start, or after the end of a maintenance window one of
	// its broken instances is in (a maintenance holds a slice down for as
	// long as it takes; a multi-host slice stays down whole).
	stuck, inMaintenance, until := since.Add(cfg.StuckGrace), "", time.Time{}
	if end := in.MaintenanceUntil; !end.IsZero() && end.Add(cfg.StuckGrace).After(stuck) {
		stuck, inMaintenance = end.Add(cfg.StuckGrace), fmt.Sprintf(" (in a maintenance window until %s)", end.Format(time.RFC3339))
	}
	for _, i := range broken {
		end := maintenanceEnd(i, in.Evidence, cfg.EventSlack)
		if end.After(in.MaintenanceUntil) && end.After(until) {
			until = end
		}
		if !end.IsZero() && end.Add(cfg.StuckGrace).After(stuck) {
			stuck, inMaintenance = end.Add(cfg.StuckGrace), fmt.Sprintf(" (%s is in a maintenance window until %s)", i.Name, end.Format(time.RFC3339))
		}
	}
	d := decideBroken(in, cfg, broken, since, stuck, inMaintenance)
	d.MaintenanceUntil = until
	return d
}

// decideBroken is Decide's rows about a slice with broken instances, no
// person's act holding it: since is when its incident started, stuck when
// it counts as stuck.
func decideBroken(in Input, cfg Config, broken []Instance, since, stuck time.Time, inMaintenance string) Decision {
	for _, i := range broken {
		if i.Found && slices.Contains(inProgress, i.Status) {
			if in.Now.Before(stuck) {
				return Decision{Action: ActionDefer, Reason: fmt.Sprintf("%s is %s: in progress%s", i.Name, i.Status, inMaintenance), Due: stuck}
			}
			if i.MIG == "" {
				return Decision{Action: ActionRecord, Reason: fmt.Sprintf("%s is still %s after the stuck grace: nothing to call on an instance in progress", i.Name, i.Status)}
			}
		}
	}
	if mig := broken[0].MIG; mig != "" {
		if in.Now.Before(stuck) {
			return Decision{Action: ActionRecord, Reason: fmt.Sprintf("owned by %s: the MIG repairs it (watched until %s)%s", mig, stuck.Format(time.RFC3339), inMaintenance), Due: stuck}
		}
		if in.Incident.Action == ActionRecreateInstances && !in.Incident.At.Before(since) {
			return Decision{Action: ActionRecord, Reason: fmt.Sprintf("recreateInstances already sent to %s for this incident at %s", mig, in.Incident.At.Format(time.RFC3339))}
		}
		for _, i := range broken {
			if i.Found && slices.Contains(comingUp, i.Status) {
				continue
			}
			if why := unexplained(i, in.Evidence, cfg.EventSlack); why != "" {
				return Decision{Action: ActionRecord, Reason: fmt.Sprintf("not RUNNING %v after the stuck grace, but %s: not recreated (a stop we have no entry of is never undone)", in.Now.Sub(since), why)}
			}
		}
		targets := names(broken)
		if len(in.Slice) > 1 {
			targets = names(in.Slice) // a multi-host slice is recreated whole
		}
		return Decision{Action: ActionRecreateInstances, Reason: fmt.Sprintf("not RUNNING %v after the stuck grace: %s did not repair it", in.Now.Sub(since), mig), Targets: targets}
	}
	// Standalone: every broken instance must have a system event that
	// explains it; one that has not is held, and the slice with it.
	var terminated, vanished []Instance
	for _, i := range broken {
		sys := latest(in.Evidence, i.Name, EvidenceSystem)
		switch {
		case !i.Found:
			if sys.IsZero() {
				return Decision{Action: ActionRecord, Reason: fmt.Sprintf("%s is NOT FOUND with no system event: not ours to recreate", i.Name)}
			}
			if sys.Before(i.LastStart) || !i.Seen.IsZero() && sys.Before(i.Seen.Add(-cfg.EventSlack)) {
				return Decision{Action: ActionRecord, Reason: fmt.Sprintf("%s is NOT FOUND; its last system event (%s) is older than when it was last seen running (%s): not what made it vanish", i.Name, sys.Format(time.RFC3339), i.Seen.Format(time.RFC3339))}
			}
			if !i.HasSpec {
				return Decision{Action: ActionRecord, Reason: fmt.Sprintf("%s vanished after a system event but no spec was saved before it broke", i.Name)}
			}
			vanished = append(vanished, i)
		case i.Status == StatusTerminated:
			if sys.IsZero() || sys.Before(i.LastStop.Add(-cfg.EventSlack)) {
				return Decision{Action: ActionHeld, Reason: fmt.Sprintf("%s is TERMINATED with no system event since it stopped at %s: a guest shutdown or a stop we cannot explain", i.Name, i.LastStop.Format(time.RFC3339))}
			}
			terminated = append(terminated, i)
		default:
			return Decision{Action: ActionRecord, Reason: fmt.Sprintf("%s is %s: no row of the table acts on it", i.Name, i.Status)}
		}
	}
	if len(vanished) > 0 {
		if in.Incident.Action == ActionRecreate && !in.Incident.At.Before(since) {
			return Decision{Action: ActionRecord, Reason: fmt.Sprintf("insert already sent for this incident at %s", in.Incident.At.Format(time.RFC3339))}
		}
		return Decision{Action: ActionRecreate, Reason: "NOT FOUND after a system event: recreated from the spec saved before it broke", Targets: names(vanished)}
	}
	for _, i := range terminated {
		if i.AutomaticRestart && in.Now.Sub(since) < cfg.RestartGrace {
			return Decision{Action: ActionDefer, Reason: fmt.Sprintf("%s has automaticRestart: Compute Engine may restart it", i.Name), Due: since.Add(cfg.RestartGrace)}
		}
	}
	if in.Incident.Action == ActionStart && !in.Incident.At.Before(since) {
		return Decision{Action: ActionRecord, Reason: fmt.Sprintf("start already sent for this incident at %s", in.Incident.At.Format(time.RFC3339))}
	}
	return Decision{Action: ActionStart, Reason: "TERMINATED by a system event", Targets: names(terminated)}
}

// prepare is the decision about a RUNNING slice: with a PENDING
// maintenance notice on any of its instances, deliver the earliest window's
// notice to every instance of the slice that does not hold it yet (the
// guests checkpoint: one slice, one notice); else record.
func prepare(in Input, cfg Config) Decision {
	slice := in.Slice
	notice := ""
	for _, i := range slice {
		if i.Maintenance != "" && (notice == "" || i.Maintenance < notice) {
			notice = i.Maintenance
		}
	}
	if notice == "" {
		return Decision{Action: ActionRecord, Reason: ReasonRunning}
	}
	for _, i := range slice {
		if i.NoPrepare {
			return Decision{Action: ActionRecord, Reason: fmt.Sprintf(maintenanceAt+"%s; maintenance mode off for %s", notice, i.Name)}
		}
	}
	var targets []string
	for _, i := range slice {
		if i.Notified != notice {
			targets = append(targets, i.Name)
		}
	}
	if len(targets) == 0 {
		return early(in, notice, cfg)
	}
	return Decision{Action: ActionPrepare, Reason: fmt.Sprintf(maintenanceAt+"%s: ask the workload to checkpoint now", notice), Targets: targets}
}

// early is the decision about a slice whose every instance holds the
// notice: in mode early, once every guest reported its checkpoint for it and
// every notice can be rescheduled, start the maintenance now
// (instances.performMaintenance), once per instance and window.
//
// All or nothing: a multi-host slice is maintained only when every one of
// its instances holds the same PENDING notice, can be rescheduled and
// reported the checkpoint; then one performMaintenance per instance not
// yet sent (Compute Engine maintains a multi-host slice as a whole, so the
// first call may start it for all; a later VM's call is then refused and
// counted as sent, see computevm.Recovery.maintain). One instance in
// another mode keeps the whole slice at prepare.
//
// The checkpoint timeout, as for nodes: when a guest has not reported
// CheckpointTimeout after the notice was sent (the latest sentAt of the
// slice's instances, so every guest had the whole timeout), the look says
// so and sets CheckpointLate; from then on that notice is never started
// early (Compute Engine starts it in its window), even when the late
// guest reports after. A look past the timeout that finds every
// checkpoint reported, before any look concluded it late, still starts it.
func early(in Input, notice string, cfg Config) Decision {
	slice := in.Slice
	delivered := fmt.Sprintf(maintenanceAt+"%s: the notice is delivered to every instance", notice)
	var targets, missing, fixed []string
	for _, i := range slice {
		if !i.Early {
			return Decision{Action: ActionRecord, Reason: delivered}
		}
		switch {
		case sameTime(i.Maintained, notice):
			continue
		case !sameTime(i.Maintenance, notice):
			return Decision{Action: ActionRecord, Reason: fmt.Sprintf("%s; %s has no PENDING notice for this window: not started early", delivered, i.Name)}
		case !i.CanReschedule:
			fixed = append(fixed, i.Name)
		case !sameTime(i.Checkpoint, notice):
			missing = append(missing, i.Name)
		}
		targets = append(targets, i.Name)
	}
	switch {
	case len(targets) == 0:
		return Decision{Action: ActionRecord, Reason: fmt.Sprintf(maintenanceAt+"%s: started early on every instance", notice)}
	case len(fixed) > 0:
		return Decision{Action: ActionRecord, Reason: fmt.Sprintf("%s; cannot be started early (canReschedule false): %s", delivered, strings.Join(fixed, ", "))}
	case sameTime(in.CheckpointLate, notice):
		return Decision{Action: ActionRecord, Reason: fmt.Sprintf("%s; the checkpoint was not reported in time: not started early, Compute Engine starts it in its window", delivered)}
	case len(missing) > 0:
		timeout := cfg.CheckpointTimeout
		if timeout <= 0 {
			timeout = DefaultCheckpointTimeout
		}
		var sent time.Time
		for _, i := range slice {
			if i.NoticeSent.After(sent) {
				sent = i.NoticeSent
			}
		}
		if !sent.IsZero() && !in.Now.Before(sent.Add(timeout)) {
			return Decision{Action: ActionRecord, CheckpointLate: notice,
				Reason: fmt.Sprintf("%s; checkpoint not reported by %s within %s of the notice (sent %s): not started early, Compute Engine starts it in its window",
					delivered, strings.Join(missing, ", "), timeout, sent.UTC().Format(time.RFC3339))}
		}
		return Decision{Action: ActionRecord, Reason: fmt.Sprintf("%s; waiting for the checkpoint of %s", delivered, strings.Join(missing, ", "))}
	}
	return Decision{Action: ActionMaintain, Reason: fmt.Sprintf(maintenanceAt+"%s: every guest reported its checkpoint; start it now", notice), Targets: targets}
}

// sameTime reports whether two RFC 3339 times name the same instant
// (Compute Engine writes Pacific time, a guest may write UTC).
func sameTime(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	ta, err1 := time.Parse(time.RFC3339Nano, a)
	tb, err2 := time.Parse(time.RFC3339Nano, b)
	if err1 != nil || err2 != nil {
		return a == b
	}
	return ta.Equal(tb)
}

// MethodHostError is the system event a faulty-host report counts.
const MethodHostError = "compute.instances.hostError"

// reportFaulty is the decision about a RUNNING slice whose reservation-bound
// instances had fh.Count host errors within fh.Window since their last
// report: report their hosts faulty, each once.
func reportFaulty(in Input, fh FaultyHosts) (Decision, bool) {
	if fh.Count <= 0 {
		return Decision{}, false
	}
	var targets []string
	n := 0
	for _, i := range in.Slice {
		if !i.ReservationBound {
			continue
		}
		from := in.Now.Add(-fh.Window)
		if i.FaultyReported.After(from) {
			from = i.FaultyReported
		}
		count := 0
		for _, e := range in.Evidence {
			if e.Instance == i.Name && e.Kind == EvidenceSystem && e.Method == MethodHostError && e.Time.After(from) {
				count++
			}
		}
		if count >= fh.Count {
			targets = append(targets, i.Name)
			n = max(n, count)
		}
	}
	if len(targets) == 0 {
		return Decision{}, false
	}
	return Decision{Action: ActionReportFaulty, Reason: fmt.Sprintf("%d host errors within %s (AUTOHEAL_REPORT_FAULTY_HOSTS %d/%s): the host is reported faulty", n, fh.Window, fh.Count, fh.Window), Targets: targets}, true
}

// unexplained says why no system event explains that the MIG-owned
// instance i is broken, "" when one does. A system event explains it when
// it is about i and dated at or after its lastStopTimestamp (vanished: when
// it was last seen running, else its last start), less slack: a stop after
// the last system event is a stop we have no entry of (a person's whose
// audit entry never came, a guest shutdown), and recreating the instance
// would undo it. Every broken instance of a multi-host slice needs its
// own: an event about another instance explains nothing about this one
// (vmswarm seed 181: a person's stop with no entry ended in the same
// second as another VM's host error; no timestamp tells them apart).
func unexplained(i Instance, ev []Evidence, slack time.Duration) string {
	from, what := i.LastStop, "its last stop"
	if !i.Found {
		from, what = i.Seen, "when it was last seen running"
		if from.IsZero() {
			from, what = i.LastStart, "its last start"
		}
	}
	if sys := latest(ev, i.Name, EvidenceSystem); !sys.IsZero() && !sys.Before(from.Add(-slack)) {
		return ""
	}
	if from.IsZero() {
		return fmt.Sprintf("no system event (host error, preemption, terminate on host maintenance) about %s", i.Name)
	}
	return fmt.Sprintf("no system event (host error, preemption, terminate on host maintenance) about %s since %s (%s)", i.Name, what, from.Format(time.RFC3339))
}

// MethodTerminateOnHostMaintenance is the system event of a VM the
// maintenance stopped.
const MethodTerminateOnHostMaintenance = "compute.instances.terminateOnHostMaintenance"

// maintenanceEnd is the end of the maintenance window that explains the
// broken instance i, zero when none does: the window of a maintenance this
// project started on it (MaintainedUntil), or of its notice when a
// terminateOnHostMaintenance about it is dated inside that window (less
// slack at its start).
func maintenanceEnd(i Instance, ev []Evidence, slack time.Duration) time.Time {
	end := i.MaintainedUntil
	if i.WindowEnd.IsZero() || !i.WindowEnd.After(end) {
		return end
	}
	for _, e := range ev {
		if e.Instance == i.Name && e.Kind == EvidenceSystem && e.Method == MethodTerminateOnHostMaintenance &&
			!e.Time.Before(i.WindowStart.Add(-slack)) && !e.Time.After(i.WindowEnd) {
			return i.WindowEnd
		}
	}
	return end
}

// latest is the time of the newest evidence of kind about instance.
func latest(ev []Evidence, instance string, kind EvidenceKind) time.Time {
	var t time.Time
	for _, e := range ev {
		if e.Instance == instance && e.Kind == kind && e.Time.After(t) {
			t = e.Time
		}
	}
	return t
}

// newestSystem is the time of the newest system event about any of the
// broken instances.
func newestSystem(ev []Evidence, broken []Instance) time.Time {
	var t time.Time
	for _, i := range broken {
		if l := latest(ev, i.Name, EvidenceSystem); l.After(t) {
			t = l
		}
	}
	return t
}

func names(is []Instance) []string {
	out := make([]string, len(is))
	for k, i := range is {
		out[k] = i.Name
	}
	return out
}
