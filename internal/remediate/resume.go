package remediate

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

// This file closes the loop of an incident: after the node is healthy again
// the guest's startup script (startup/resume-training.sh) reports, per
// worker, the guest attribute autoheal/resumed when it started the training
// command. The ResumeWatcher reads those reports and writes ONE record with
// action resumed per incident: how long after the first event training ran
// again on every worker, and how much progress was lost (first event time −
// checkpoint time). Without a report within Config.ResumeWatch of the node
// being seen healthy, it writes one record "no resume reported" instead.

// ChipsOf returns the number of TPU chips of an accelerator type, 0 when the
// type is not recognised. v2, v3, v4 and v5p type names count TensorCores,
// two per chip (v4-128 is 64 chips); v5e (v5litepod-N, v5e-N) and v6e
// (v6e-N) names count chips. `autoheal report` uses the same rule.
func ChipsOf(acceleratorType string) int {
	i := strings.LastIndexByte(acceleratorType, '-')
	if i <= 0 {
		return 0
	}
	n, err := strconv.Atoi(acceleratorType[i+1:])
	if err != nil || n <= 0 {
		return 0
	}
	switch acceleratorType[:i] {
	case "v2", "v3", "v4", "v5p":
		if n < 2 {
			return 0
		}
		return n / 2
	case "v5litepod", "v5e", "v6e":
		return n
	}
	return 0
}

// Guest attributes the startup script writes (namespace autoheal).
const (
	// GuestQueryPath is the query path the watcher reads: every key of the
	// autoheal namespace.
	GuestQueryPath  = "autoheal/"
	GuestNamespace  = "autoheal"
	GuestResumedKey = "resumed"
)

// Step names of a resumed record. They are spans, not calls: their Start
// and Duration carry the incident's figures, so the record format needs no
// new fields.
const (
	// StepGuestAttributes is the getGuestAttributes call.
	StepGuestAttributes = "get-guest-attributes"
	// StepResumed starts at the incident's first event and lasts until
	// training had resumed on every worker.
	StepResumed = "resumed"
	// StepLostProgress starts at the checkpoint training resumed from and
	// lasts until the first event: the progress lost. Absent when no worker
	// named a checkpoint time (a fresh start: the loss is unknown).
	StepLostProgress = "lost-progress"
)

// ReasonNoResume starts the reason of the record written when the watch ran
// out without every worker reporting.
const ReasonNoResume = "no resume reported"

// IncidentMaxAge bounds how long an incident whose node never becomes
// healthy is kept open; after it the watcher closes it with "no resume
// reported".
const IncidentMaxAge = 7 * 24 * time.Hour

// GuestAttributes reads a TPU node's guest attributes
// (tpu.projects.locations.nodes.getGuestAttributes, permission tpu.nodes.get).
// Errors keep the API's error in their chain (IsTransient classifies them).
type GuestAttributes interface {
	GetGuestAttributes(ctx context.Context, node, queryPath string) ([]GuestAttribute, error)
}

// Resumed is the value of the autoheal/resumed guest attribute, written by
// startup/resume-training.sh each time it starts the training command.
type Resumed struct {
	Time           time.Time `json:"time"`
	Checkpoint     string    `json:"checkpoint"`
	CheckpointTime string    `json:"checkpointTime"` // RFC 3339, "" for a fresh start
	Attempt        int       `json:"attempt"`
	Worker         Worker    `json:"worker"`
}

// Worker is a worker number, written as a JSON number (or a string).
type Worker string

// UnmarshalJSON accepts 3 and "3".
func (w *Worker) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*w = Worker(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("worker %s: want a number", b)
	}
	*w = Worker(n.String())
	return nil
}

// ParseResumed reads an autoheal/resumed value.
func ParseResumed(value string) (Resumed, error) {
	var r Resumed
	if err := json.Unmarshal([]byte(value), &r); err != nil {
		return Resumed{}, fmt.Errorf("autoheal/resumed %q: %w", value, err)
	}
	if r.Time.IsZero() {
		return Resumed{}, fmt.Errorf("autoheal/resumed %q: no time", value)
	}
	return r, nil
}

// Incident is one node's incident, from its first event until training
// resumed on it or the incident was closed.
type Incident struct {
	Node            string // full resource name
	Project         string
	Zone            string
	Cause           events.Cause
	InsertID        string    // the first event's insertId ("" for a sweep)
	FirstEvent      time.Time // the first event's time
	OpenedAt        time.Time // when the incident was opened
	AcceleratorType string
	Chips           int
	// HealthyAt is when the node was first seen READY and HEALTHY after the
	// first event: the resume watch starts there. Zero: not yet.
	HealthyAt time.Time
	// ClosedAt is zero while the incident is open.
	ClosedAt    time.Time
	CloseReason string
}

// Open reports whether the incident is still open.
func (i Incident) Open() bool { return i.ClosedAt.IsZero() }

// NewIncident reports whether inc, about the node of latest (its latest
// incident), starts a new incident: not while latest is open, and not when
// inc's event is no later than latest was closed (a late delivery of an
// event the closed incident already covered).
func NewIncident(latest, inc Incident) bool {
	if latest.Open() {
		return false
	}
	return inc.FirstEvent.After(latest.ClosedAt)
}

// IncidentStore keeps the incidents (ledger.MemoryIncidents,
// ledger.FirestoreIncidents). One incident per node is open at a time.
type IncidentStore interface {
	// OpenIncident opens inc unless NewIncident(latest, inc) is false for
	// the node's latest incident, which is then returned unchanged (the
	// first event wins); opened says which.
	OpenIncident(ctx context.Context, inc Incident) (got Incident, opened bool, err error)
	// OpenIncidentOf returns the node's open incident; ok is false when it
	// has none.
	OpenIncidentOf(ctx context.Context, node string) (inc Incident, ok bool, err error)
	// OpenIncidents lists the open incidents, by node name.
	OpenIncidents(ctx context.Context) ([]Incident, error)
	// MarkHealthy sets the open incident's HealthyAt unless it is set.
	MarkHealthy(ctx context.Context, node string, at time.Time) error
	// CloseIncident closes the node's open incident (closing none is not an
	// error).
	CloseIncident(ctx context.Context, node string, at time.Time, reason string) error
}

// ResumeWatcher opens incidents from records, and closes them with one
// resumed record when the guest reports training resumed (or the watch runs
// out). Its zero Now is time.Now; its zero Config.ResumeWatch is
// DefaultResumeWatch.
type ResumeWatcher struct {
	Guest    GuestAttributes
	Store    IncidentStore
	Recorder Recorder
	Config   Config
	Now      func() time.Time
}

func (w *ResumeWatcher) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *ResumeWatcher) watch() time.Duration {
	if w.Config.ResumeWatch > 0 {
		return w.Config.ResumeWatch
	}
	return DefaultResumeWatch
}

// Observe is given every record the handler writes. A record that is the
// first about a node that was acted on or deferred, or an event's record
// that the node recovered by itself, opens an incident; an abandoned
// recovery or a guard's skip with Outcome closed closes it. Rejects, other
// skips, a sweep's "nothing to do" and the watcher's own records are
// ignored.
func (w *ResumeWatcher) Observe(ctx context.Context, r Record) error {
	if r.Node == "" {
		return nil
	}
	switch {
	case r.Outcome == OutcomeAbandoned, r.Outcome == OutcomeClosed && r.Action == ActionSkip:
		if err := w.Store.CloseIncident(ctx, r.Node, r.Time, string(r.Outcome)+": "+r.Reason); err != nil {
			return fmt.Errorf("resume watch: close incident of %s: %w", r.Node, err)
		}
		return nil
	}
	switch r.Action {
	case ActionRecreate, ActionReset, ActionDefer, ActionPrepare, ActionMaintain:
	case ActionRecord:
		// A sweep records every node it looks at; only an event's
		// "nothing to do" (the node recovered by itself) is an incident.
		if r.InsertID == "" && r.EventTime.IsZero() {
			return nil
		}
	default:
		return nil
	}
	if r.DryRun {
		return nil
	}
	first := r.EventTime
	if first.IsZero() {
		first = r.Time
	}
	inc := Incident{
		Node: r.Node, Project: projectOf(r.Node), Zone: r.Zone, Cause: r.Cause,
		InsertID: r.InsertID, FirstEvent: first, OpenedAt: w.now(),
		AcceleratorType: r.AcceleratorType, Chips: r.Chips,
	}
	if inc.Chips == 0 {
		inc.Chips = ChipsOf(inc.AcceleratorType)
	}
	if _, _, err := w.Store.OpenIncident(ctx, inc); err != nil {
		return fmt.Errorf("resume watch: open incident of %s: %w", r.Node, err)
	}
	return nil
}

func projectOf(node string) string {
	p := strings.Split(node, "/")
	if len(p) >= 2 && p[0] == "projects" {
		return p[1]
	}
	return ""
}

// CheckNode checks the open incident of node (observed just now), if any.
func (w *ResumeWatcher) CheckNode(ctx context.Context, node *tpu.Node) (Record, bool, error) {
	if node == nil || node.Name == "" {
		return Record{}, false, nil
	}
	inc, ok, err := w.Store.OpenIncidentOf(ctx, node.Name)
	if err != nil {
		return Record{}, false, fmt.Errorf("resume watch: incident of %s: %w", node.Name, err)
	}
	if !ok {
		return Record{}, false, nil
	}
	return w.Check(ctx, node, inc)
}

// CheckOpen checks every open incident, reading each node with get (a NOT
// FOUND node is passed as nil). It is the sweep's hook; it returns the
// records written and the first error (the others are still checked).
func (w *ResumeWatcher) CheckOpen(ctx context.Context, get func(ctx context.Context, name string) (*tpu.Node, error)) ([]Record, error) {
	incs, err := w.Store.OpenIncidents(ctx)
	if err != nil {
		return nil, fmt.Errorf("resume watch: list open incidents: %w", err)
	}
	var out []Record
	var first error
	for _, inc := range incs {
		n, err := get(ctx, inc.Node)
		if err != nil && !IsNotFound(err) {
			if first == nil {
				first = fmt.Errorf("resume watch: get %s: %w", inc.Node, err)
			}
			continue
		}
		if err != nil {
			n = nil
		}
		r, wrote, err := w.Check(ctx, n, inc)
		if err != nil && first == nil {
			first = err
		}
		if wrote {
			out = append(out, r)
		}
	}
	return out, first
}

// Check looks at an open incident of a node observed just now (nil: NOT
// FOUND). While the node is not READY and HEALTHY nothing is written (an
// incident older than IncidentMaxAge is closed). Once it is, the watch
// starts (HealthyAt) and the guest attributes are read: when every worker
// reported autoheal/resumed with a time after the incident's first event,
// one resumed record is written and the incident closed; after
// Config.ResumeWatch without that, one "no resume reported" record. wrote
// says whether a record was written. An error reading the guest attributes
// is returned (and nothing written) until the watch runs out.
func (w *ResumeWatcher) Check(ctx context.Context, node *tpu.Node, inc Incident) (Record, bool, error) {
	if !inc.Open() {
		return Record{}, false, nil
	}
	now := w.now()
	healthy := node != nil && node.State == "READY" && (node.Health == "" || node.Health == "HEALTHY")
	if !healthy {
		if now.Sub(inc.FirstEvent) < IncidentMaxAge || inc.FirstEvent.IsZero() {
			return Record{}, false, nil
		}
		why := fmt.Sprintf("%s: node not READY and HEALTHY %s after the first event", ReasonNoResume, IncidentMaxAge)
		r := w.newRecord(inc, node, now, why)
		return r, true, w.finish(ctx, inc, r, now, why)
	}
	// A node with its maintenance still to come (the incident a prepare
	// or maintain record opened) is not done with it: its reports are
	// read, but the watch starts only once the maintenance is behind it.
	if inc.HealthyAt.IsZero() && !maintenanceAhead(node) {
		inc.HealthyAt = now
		if err := w.Store.MarkHealthy(ctx, inc.Node, now); err != nil {
			return Record{}, false, fmt.Errorf("resume watch: mark %s healthy: %w", inc.Node, err)
		}
	}
	expired := !inc.HealthyAt.IsZero() && now.Sub(inc.HealthyAt) >= w.watch()

	start := now
	attrs, err := w.Guest.GetGuestAttributes(ctx, inc.Node, GuestQueryPath)
	step := Step{Name: StepGuestAttributes, Start: start, Duration: w.now().Sub(start)}
	if err != nil {
		step.Err = err.Error()
		if !expired {
			return Record{}, false, fmt.Errorf("resume watch: get guest attributes of %s (retried on the next check): %w", inc.Node, err)
		}
		why := fmt.Sprintf("%s within %s of the node being healthy (guest attributes unreadable: %v)", ReasonNoResume, w.watch(), err)
		r := w.newRecord(inc, node, now, why)
		r.Steps = []Step{step}
		return r, true, w.finish(ctx, inc, r, now, why)
	}
	ev := EvaluateResume(attrs, workersOf(node), inc.FirstEvent)
	if !ev.Complete {
		if !expired {
			return Record{}, false, nil
		}
		why := fmt.Sprintf("%s within %s of the node being healthy: %s", ReasonNoResume, w.watch(), ev.Summary())
		r := w.newRecord(inc, node, now, why)
		r.Steps = []Step{step}
		r.Warnings = ev.Problems
		return r, true, w.finish(ctx, inc, r, now, why)
	}
	why := fmt.Sprintf("training resumed on %d of %d workers %s after the first event", ev.Reported, ev.Workers, ev.Resumed.Sub(inc.FirstEvent).Round(time.Second))
	if !ev.Checkpoint.IsZero() {
		why += fmt.Sprintf(", from %s (progress lost %s)", ev.CheckpointURI, inc.FirstEvent.Sub(ev.Checkpoint).Round(time.Second))
	} else {
		why += ", from no checkpoint (progress lost unknown)"
	}
	r := w.newRecord(inc, node, now, why)
	r.Outcome = OutcomeResumed
	r.Steps = []Step{step, {Name: StepResumed, Start: inc.FirstEvent, Duration: ev.Resumed.Sub(inc.FirstEvent)}}
	if !ev.Checkpoint.IsZero() {
		r.Steps = append(r.Steps, Step{Name: StepLostProgress, Start: ev.Checkpoint, Duration: inc.FirstEvent.Sub(ev.Checkpoint)})
	}
	r.Warnings = ev.Problems
	return r, true, w.finish(ctx, inc, r, now, string(OutcomeResumed)+": "+why)
}

// maintenanceAhead reports whether the node has maintenance pending or
// under way.
func maintenanceAhead(node *tpu.Node) bool {
	um := node.UpcomingMaintenance
	return um != nil && (um.MaintenanceStatus == "PENDING" || um.MaintenanceStatus == "ONGOING")
}

func (w *ResumeWatcher) newRecord(inc Incident, node *tpu.Node, now time.Time, reason string) Record {
	r := Record{
		Time: now, InsertID: inc.InsertID, EventTime: inc.FirstEvent, Node: inc.Node, Zone: inc.Zone,
		Cause: inc.Cause, Action: ActionResumed, Reason: reason,
		AcceleratorType: inc.AcceleratorType, Chips: inc.Chips,
	}
	if node != nil && node.AcceleratorType != "" {
		r.AcceleratorType = node.AcceleratorType
		r.Chips = ChipsOf(node.AcceleratorType)
	}
	if node != nil {
		if g, err := strconv.Atoi(node.Labels[GenerationLabel]); err == nil {
			r.Generation = g
		}
	}
	return r
}

// finish writes the record, then closes the incident: a record lost to a
// failed write is written again on the next check rather than never.
func (w *ResumeWatcher) finish(ctx context.Context, inc Incident, r Record, now time.Time, why string) error {
	if err := w.Recorder.Record(ctx, r); err != nil {
		return fmt.Errorf("resume watch: record %s of %s: %w", r.Action, inc.Node, err)
	}
	if err := w.Store.CloseIncident(ctx, inc.Node, now, why); err != nil {
		return fmt.Errorf("resume watch: close incident of %s: %w", inc.Node, err)
	}
	return nil
}

// workersOf is the number of workers (hosts) of a node: its network
// endpoints, 1 when it lists none.
func workersOf(node *tpu.Node) int {
	if node == nil || len(node.NetworkEndpoints) == 0 {
		return 1
	}
	return len(node.NetworkEndpoints)
}

// ResumeEvaluation is what the guest attributes say about an incident.
type ResumeEvaluation struct {
	Workers  int // workers of the node
	Reported int // workers whose latest report is after the first event
	// Complete: every worker 0..Workers-1 reported after the first event.
	Complete bool
	// Resumed is the latest of the reports' times: training ran on every
	// worker from then on.
	Resumed time.Time
	// Checkpoint is the oldest checkpoint time any worker resumed from
	// (zero: none named one); CheckpointURI its checkpoint.
	Checkpoint    time.Time
	CheckpointURI string
	// Problems: reports that could not be read, or are stale.
	Problems []string
}

// Summary says which workers are missing.
func (e ResumeEvaluation) Summary() string {
	return fmt.Sprintf("%d of %d workers reported autoheal/resumed after the first event", e.Reported, e.Workers)
}

// EvaluateResume judges the autoheal/resumed reports of a node with workers
// workers against an incident whose first event was at first. A report at
// or before first is stale (it predates the incident) and does not count.
// It is pure.
func EvaluateResume(attrs []GuestAttribute, workers int, first time.Time) ResumeEvaluation {
	ev := ResumeEvaluation{Workers: workers}
	fresh := map[string]Resumed{}
	for _, a := range attrs {
		if a.Namespace != GuestNamespace || a.Key != GuestResumedKey {
			continue
		}
		r, err := ParseResumed(a.Value)
		if err != nil {
			ev.Problems = append(ev.Problems, fmt.Sprintf("worker %s: %v", a.Worker, err))
			continue
		}
		if !r.Time.After(first) {
			continue
		}
		fresh[a.Worker] = r
	}
	ids := make([]string, 0, len(fresh))
	for id := range fresh {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := fresh[id]
		n, err := strconv.Atoi(id)
		if err != nil || n < 0 || n >= workers {
			ev.Problems = append(ev.Problems, fmt.Sprintf("worker %q is not one of the node's %d workers", id, workers))
			continue
		}
		ev.Reported++
		if r.Time.After(ev.Resumed) {
			ev.Resumed = r.Time
		}
		if r.CheckpointTime == "" {
			continue
		}
		ct, err := time.Parse(time.RFC3339Nano, r.CheckpointTime)
		if err != nil {
			ev.Problems = append(ev.Problems, fmt.Sprintf("worker %s: checkpointTime %q: %v", id, r.CheckpointTime, err))
			continue
		}
		if ct.After(first) {
			// A checkpoint written after the first event (the maintenance
			// notice's checkpoint, say) lost nothing.
			ct = first
		}
		if ev.Checkpoint.IsZero() || ct.Before(ev.Checkpoint) {
			ev.Checkpoint, ev.CheckpointURI = ct, r.Checkpoint
		}
	}
	ev.Complete = workers > 0 && ev.Reported == workers
	return ev
}

// Recording returns a Recorder that writes each record to next, then
// Observes it, so that incidents open and close without a line in the
// handler. An Observe error does not fail the record (it was written); it
// goes to onErr (nil: dropped). The watcher's own Recorder should be next,
// not the returned one.
func (w *ResumeWatcher) Recording(next Recorder, onErr func(error)) Recorder {
	return observingRecorder{w: w, next: next, onErr: onErr}
}

type observingRecorder struct {
	w     *ResumeWatcher
	next  Recorder
	onErr func(error)
}

func (o observingRecorder) Record(ctx context.Context, r Record) error {
	if err := o.next.Record(ctx, r); err != nil {
		return err
	}
	if err := o.w.Observe(ctx, r); err != nil && o.onErr != nil {
		o.onErr(err)
	}
	return nil
}
