package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	tpu "google.golang.org/api/tpu/v2"
)

// The maintenance contract with the guest (startup/resume-training.sh, or a
// user's own script that takes part). The function writes the notice to the
// node's metadata; every worker that wrote a checkpoint for it reports so in
// a guest attribute.
const (
	// NoticeMetadataKey is the metadata key the notice is written to.
	NoticeMetadataKey = "autoheal-maintenance"
	// MaintenanceLabel overrides Config.MaintenanceMode per node.
	MaintenanceLabel = "tpu-autoheal-maintenance"
	// CheckpointNamespace and CheckpointKey name the guest attribute
	// autoheal/checkpoint = {"notice", "checkpoint", "time"}.
	CheckpointNamespace = "autoheal"
	CheckpointKey       = "checkpoint"
	// CheckpointQueryPath is the getGuestAttributes query path of it.
	CheckpointQueryPath = CheckpointNamespace + "/" + CheckpointKey
)

// Notice steps, claimed once per notice (node, windowStartTime) in the
// NoticeStore. prepare and maintain are the two actions; the others make a
// record-only observation about a notice appear once, not on every sweep.
const (
	NoticeStepPrepare      = "prepare"
	NoticeStepMaintain     = "maintain"
	NoticeStepOngoing      = "ongoing"
	NoticeStepOff          = "off"
	NoticeStepTimeout      = "timeout"
	NoticeStepNoReschedule = "no-reschedule"
	NoticeStepInvalid      = "invalid"
	NoticeStepDryPrepare   = "dry-run-prepare"
	NoticeStepDryMaintain  = "dry-run-maintain"
)

// Upcoming maintenance values of the TPU v2 API (UpcomingMaintenance).
const (
	maintenancePending = "PENDING"
	maintenanceOngoing = "ONGOING"
)

// MaintenanceNotice is the JSON written to metadata autoheal-maintenance:
// the node's upcomingMaintenance as the function saw it, and when it was
// sent. Notice (the window start) identifies it: a guest answers a notice
// by echoing it in autoheal/checkpoint.
type MaintenanceNotice struct {
	Notice        string    `json:"notice"`
	SentAt        time.Time `json:"sentAt"`
	Status        string    `json:"status"`
	Type          string    `json:"type"`
	WindowStart   string    `json:"windowStart"`
	WindowEnd     string    `json:"windowEnd"`
	CanReschedule bool      `json:"canReschedule"`
}

// CheckpointReport is the value of guest attribute autoheal/checkpoint.
type CheckpointReport struct {
	Notice     string `json:"notice"`
	Checkpoint string `json:"checkpoint"`
	Time       string `json:"time"`
}

// NoticeKey names one notice: a node (its name and id) and its upcoming
// maintenance window. The id tells a replacement node (a person recreated
// it: same name, new id) from the one the notice was sent to, so the
// replacement gets its own notice for the same window. NodeID 0 is the key
// notices were claimed under before ids were part of it (by name only):
// the Maintainer still honours those (maintenance_act.go, noticeSteps).
type NoticeKey struct {
	Node        string
	NodeID      int64
	WindowStart string
}

// ByName is the key's old form, without the node id.
func (k NoticeKey) ByName() NoticeKey { k.NodeID = 0; return k }

// MaintenanceObserved is what DecideMaintenance looks at.
type MaintenanceObserved struct {
	Node *tpu.Node
	// Steps are the notice steps already claimed for the node's current
	// notice (NoticeStore.NoticeSteps), with when.
	Steps map[string]time.Time
	// CheckpointsRead: Checkpoints holds the guest attribute autoheal/checkpoint
	// as read now (getGuestAttributes), one entry per worker that has one.
	CheckpointsRead bool
	Checkpoints     []GuestAttribute
}

// MaintenanceDecision is DecideMaintenance's answer.
type MaintenanceDecision struct {
	// Action is prepare, maintain, record, or skip (dry run); "" when the
	// node has nothing to do with maintenance (no notice, not READY, not
	// opted in): the node decision stands alone.
	Action Action
	Reason string
	Mode   string    // the node's effective maintenance mode
	Key    NoticeKey // the notice
	// Step is the notice step to claim before acting or recording; "" means
	// nothing new: the decision is not worth a record of its own.
	Step string
	// Notice is the JSON to write for prepare.
	Notice *MaintenanceNotice
	// ReadCheckpoints: decide again with the guest's checkpoint reports.
	ReadCheckpoints bool
	Warnings        []string
}

// MaintenanceMode is the node's effective mode: the label
// tpu-autoheal-maintenance if valid, else cfg.MaintenanceMode (default
// prepare). An invalid label value is returned as a warning and ignored.
func MaintenanceMode(node *tpu.Node, cfg Config) (mode, warning string) {
	mode = cfg.MaintenanceMode
	if !validMode(mode) {
		mode = MaintenancePrepare
	}
	if node == nil {
		return mode, ""
	}
	if v, ok := node.Labels[MaintenanceLabel]; ok {
		if validMode(v) {
			return v, ""
		}
		return mode, fmt.Sprintf("label %s=%q is not off, prepare or early: ignored (mode %s)", MaintenanceLabel, v, mode)
	}
	return mode, ""
}

func validMode(m string) bool {
	return m == MaintenanceOff || m == MaintenancePrepare || m == MaintenanceEarly
}

// SentNotice returns the notice in the node's metadata autoheal-maintenance,
// nil when there is none or it cannot be read.
func SentNotice(node *tpu.Node) *MaintenanceNotice {
	if node == nil {
		return nil
	}
	v, ok := node.Metadata[NoticeMetadataKey]
	if !ok {
		return nil
	}
	var n MaintenanceNotice
	if err := json.Unmarshal([]byte(v), &n); err != nil {
		return nil
	}
	return &n
}

// Workers is how many workers (hosts) the node has: one network endpoint
// each; at least one.
func Workers(node *tpu.Node) int {
	if node == nil || len(node.NetworkEndpoints) == 0 {
		return 1
	}
	return len(node.NetworkEndpoints)
}

// DecideMaintenance decides about an opted-in READY node's upcoming
// maintenance. It is pure. Rows (see the README):
//
//   - no upcomingMaintenance, not READY, not opted in: "" (not about maintenance)
//   - ONGOING: record (once per notice)
//   - PENDING, mode off: record (once)
//   - PENDING, not yet prepared: prepare (dry run: skip "would prepare")
//   - PENDING, prepared, mode prepare: nothing new
//   - PENDING, prepared, mode early, cannot be rescheduled: record (once)
//   - PENDING, prepared, mode early, canReschedule, every worker reported
//     this notice's checkpoint: maintain (dry run: skip "would maintain")
//   - ... not every worker within CheckpointTimeout of sentAt: record (once)
//   - ... still within it: nothing new (wait)
//
// SCHEDULED and UNSCHEDULED maintenance are decided alike: the type only
// says how much notice there is.
func DecideMaintenance(obs MaintenanceObserved, now time.Time, cfg Config) MaintenanceDecision {
	node := obs.Node
	if node == nil || node.UpcomingMaintenance == nil || node.State != stateReady ||
		cfg.LabelKey == "" || node.Labels[cfg.LabelKey] != cfg.LabelValue {
		return MaintenanceDecision{}
	}
	um := node.UpcomingMaintenance
	mode, warn := MaintenanceMode(node, cfg)
	d := MaintenanceDecision{Mode: mode, Key: NoticeKey{Node: node.Name, NodeID: node.Id, WindowStart: um.WindowStartTime}}
	if warn != "" {
		d.Warnings = append(d.Warnings, warn)
	}
	what := fmt.Sprintf("%s %s maintenance, window %s", OrUnspecified(um.MaintenanceStatus), OrUnspecified(um.Type), window(um))
	claimed := func(step string) bool { _, ok := obs.Steps[step]; return ok }
	record := func(step, reason string) MaintenanceDecision {
		d.Action, d.Step, d.Reason = ActionRecord, step, reason
		if claimed(step) {
			d.Step = ""
		}
		return d
	}

	if um.WindowStartTime == "" {
		return record(NoticeStepInvalid, what+": no windowStartTime, so no notice can name it: not acted on")
	}
	switch um.MaintenanceStatus {
	case maintenanceOngoing:
		return record(NoticeStepOngoing, what+": under way; the node decision takes over if it does not come back")
	case maintenancePending:
	default:
		return record(NoticeStepInvalid, fmt.Sprintf("%s: unrecognised maintenanceStatus %q: not acted on", what, um.MaintenanceStatus))
	}
	if mode == MaintenanceOff {
		return record(NoticeStepOff, what+": maintenance mode off: notice recorded only")
	}

	sent := SentNotice(node)
	prepared := claimed(NoticeStepPrepare) || (sent != nil && sent.Notice == um.WindowStartTime)
	if !prepared {
		if cfg.DryRun {
			d.Action, d.Reason = ActionSkip, "dry run: would prepare: "+what
			return record2(d, NoticeStepDryPrepare, claimed)
		}
		d.Action, d.Step = ActionPrepare, NoticeStepPrepare
		d.Reason = fmt.Sprintf("notice sent to the guest (metadata %s): checkpoint now; %s", NoticeMetadataKey, what)
		d.Notice = &MaintenanceNotice{
			Notice: um.WindowStartTime, SentAt: now.UTC(), Status: um.MaintenanceStatus, Type: um.Type,
			WindowStart: um.WindowStartTime, WindowEnd: um.WindowEndTime, CanReschedule: um.CanReschedule,
		}
		return d
	}
	sentAt := obs.Steps[NoticeStepPrepare]
	if sent != nil && sent.Notice == um.WindowStartTime && !sent.SentAt.IsZero() {
		sentAt = sent.SentAt
	}
	if mode != MaintenanceEarly {
		return record("", fmt.Sprintf("%s: notice sent at %s; maintenance mode %s: the platform starts it", what, stamp(sentAt), mode))
	}
	if claimed(NoticeStepMaintain) {
		return record("", fmt.Sprintf("%s: maintenance started early at %s", what, stamp(obs.Steps[NoticeStepMaintain])))
	}
	if !um.CanReschedule {
		return record(NoticeStepNoReschedule, what+": canReschedule is false: cannot be started early; the platform starts it")
	}
	if claimed(NoticeStepTimeout) {
		return record("", what+": checkpoint was not reported in time: not started early")
	}
	if !obs.CheckpointsRead {
		d.Action, d.ReadCheckpoints = ActionRecord, true
		d.Reason = what + ": waiting for the guest's checkpoint reports"
		return d
	}
	missing := missingWorkers(obs.Checkpoints, um.WindowStartTime, Workers(node))
	if len(missing) == 0 {
		if cfg.DryRun {
			d.Action, d.Reason = ActionSkip, fmt.Sprintf("dry run: would maintain: %s: every worker (%d) reported the checkpoint", what, Workers(node))
			return record2(d, NoticeStepDryMaintain, claimed)
		}
		d.Action, d.Step = ActionMaintain, NoticeStepMaintain
		d.Reason = fmt.Sprintf("maintenance started now: every worker (%d) reported the checkpoint for this notice; %s", Workers(node), what)
		return d
	}
	timeout := cfg.CheckpointTimeout
	if timeout <= 0 {
		timeout = DefaultCheckpointTimeout
	}
	if !sentAt.IsZero() && !now.Before(sentAt.Add(timeout)) {
		return record(NoticeStepTimeout, fmt.Sprintf("%s: checkpoint not reported by worker %s within %s of the notice (sent %s): maintenance not started early; the platform starts it",
			what, strings.Join(missing, ", "), roundDur(timeout), stamp(sentAt)))
	}
	return record("", fmt.Sprintf("%s: waiting for the checkpoint of worker %s (notice sent %s)", what, strings.Join(missing, ", "), stamp(sentAt)))
}

// record2 keeps d's action (a dry-run skip) and claims step once.
func record2(d MaintenanceDecision, step string, claimed func(string) bool) MaintenanceDecision {
	d.Step = step
	if claimed(step) {
		d.Step = ""
	}
	return d
}

// sameNotice reports whether the notice a guest reported is this one: the
// same window start, compared as times, since a guest that saw the
// platform's own notice first echoes its formatting of the same instant
// (2026-11-27T02:00:00.000Z for 2026-11-27T02:00:00Z).
func sameNotice(reported, notice string) bool {
	if reported == notice {
		return true
	}
	a, err1 := time.Parse(time.RFC3339Nano, reported)
	b, err2 := time.Parse(time.RFC3339Nano, notice)
	return err1 == nil && err2 == nil && a.Equal(b)
}

// missingWorkers lists the workers 0..n-1 whose autoheal/checkpoint does not
// report notice.
func missingWorkers(attrs []GuestAttribute, notice string, n int) []string {
	done := map[string]bool{}
	for _, a := range attrs {
		if a.Namespace != CheckpointNamespace || a.Key != CheckpointKey {
			continue
		}
		var rep CheckpointReport
		if json.Unmarshal([]byte(a.Value), &rep) == nil && sameNotice(rep.Notice, notice) {
			done[a.Worker] = true
		}
	}
	var missing []string
	for w := range n {
		if id := fmt.Sprint(w); !done[id] {
			missing = append(missing, id)
		}
	}
	return slices.Clip(missing)
}

func window(um *tpu.UpcomingMaintenance) string {
	end := um.WindowEndTime
	if end == "" {
		end = "?"
	}
	start := um.WindowStartTime
	if start == "" {
		start = "?"
	}
	return start + " – " + end
}

// OrUnspecified is s, or "UNSPECIFIED" when s is empty.
func OrUnspecified(s string) string {
	if s == "" {
		return "UNSPECIFIED"
	}
	return s
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "(unknown)"
	}
	return t.UTC().Format(time.RFC3339)
}
