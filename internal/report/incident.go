package report

import (
	"sort"
	"strings"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpumachine"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// Outcomes of an incident, as the report words them.
const (
	OutcomeSelf       = "recovered by itself"
	OutcomeRecreated  = "recreated"
	OutcomeReset      = "reset"
	OutcomePrepared   = "prepared"
	OutcomeMaintained = "maintained early"
	OutcomeAbandoned  = "abandoned"
	OutcomeSkipped    = "skipped" // "skipped: <guard>"
	// Outcomes of a Compute Engine instance incident (a VM, or the VMs of
	// one slice): instances.start, instanceGroupManagers.recreateInstances,
	// instances.reportHostAsFaulty; held: a person (or the guest) stopped
	// it, never touched. An instance recreated from its saved spec
	// (instances.insert) is "recreated", as a node is.
	OutcomeStarted        = "started"
	OutcomeMIGRecreated   = "recreated by its MIG"
	OutcomeReportedFaulty = "reported faulty"
	OutcomeHeld           = "held"
	// OutcomeOpen: the records end before the incident did (still deferred,
	// or a recovery in flight).
	OutcomeOpen = "open"
)

// Phase names of an incident's timeline: each is the span that ends at the
// milestone it leads to.
const (
	PhaseDetect = "detect" // first event → first decision
	PhaseWait   = "wait"   // first decision → claim (grace periods, deferrals)
	PhaseDelete = "delete" // claim → node deleted
	PhaseCreate = "create" // deleted → created (less any capacity wait)
	// PhaseCapacity is waiting for capacity: from the first create refused
	// for it (a stockout) to the create that got the node.
	PhaseCapacity = "capacity"
	PhaseReset    = "reset"   // claim → queued resource reset done
	PhaseBoot     = "boot"    // created or reset → READY and HEALTHY
	PhaseRecover  = "recover" // first decision → seen healthy without us
	PhaseResume   = "resume"  // READY → training resumed on every worker
)

// PhaseOrder is the order phases are drawn and listed in.
var PhaseOrder = []string{PhaseDetect, PhaseWait, PhaseDelete, PhaseCapacity, PhaseCreate, PhaseReset, PhaseBoot, PhaseRecover, PhaseResume}

// SameEventWindow: a record about a node whose event is within this long of
// the node's incident's first event belongs to that incident, closed or
// not. The audit entries one maintenance event writes (one per worker)
// arrive within seconds to minutes of each other.
const SameEventWindow = 15 * time.Minute

// PhaseSpan is one phase of an incident.
type PhaseSpan struct {
	Phase      string
	Start, End time.Time
}

// Incident is one node's incident and what it cost.
type Incident struct {
	Node            string
	Zone            string
	AcceleratorType string
	Chips           int
	Cause           string
	Start           time.Time // the first event
	Detected        time.Time // the first decision
	Claimed         time.Time // zero: never claimed (no recovery of ours)
	Deleted         time.Time
	Created         time.Time
	Recovered       time.Time // READY and HEALTHY again; zero: not seen
	Resumed         time.Time // training resumed on every worker; zero: not reported
	End             time.Time // the last record's time
	Outcome         string
	Reason          string // the reason of the record that decided the outcome
	Closed          bool   // the records show the incident's end
	// Downtime is from the first event until training resumed, else until
	// the node was READY again, else (abandoned, open) until the last
	// record. Zero for skipped incidents: what happens to a node we leave
	// alone is not tracked.
	Downtime time.Duration
	// LostProgress is first event − checkpoint time, from the resumed
	// record; LostProgressKnown is false without one.
	LostProgress      time.Duration
	LostProgressKnown bool
	Phases            []PhaseSpan
	Records           int
	// CapacityWait is the time spent waiting for capacity (stockouts),
	// from the first create refused for it to the create that got the
	// node, or to the last record while none did; CapacityFrom and
	// CapacityTo bound it (zero: no stockout).
	CapacityWait             time.Duration
	CapacityFrom, CapacityTo time.Time
	// Job is the job the node belongs to as its records name it (metadata
	// autoheal-job, or its queued resource); "" when they do not.
	Job string
	// ZoneMovedTo is where an autoheal-stockout zones: fallback moved the
	// node (its full name in that zone), as its last record saying so
	// names it; "" when it stayed.
	ZoneMovedTo string
}

// ChipHoursLost is Downtime × Chips, in chip-hours.
func (i Incident) ChipHoursLost() float64 { return i.Downtime.Hours() * float64(i.Chips) }

// DetectionLatency is first decision − first event.
func (i Incident) DetectionLatency() time.Duration { return nonNeg(i.Detected.Sub(i.Start)) }

// TimeToRecover is READY again − first event (0, false if not recovered).
func (i Incident) TimeToRecover() (time.Duration, bool) {
	if i.Recovered.IsZero() {
		return 0, false
	}
	return nonNeg(i.Recovered.Sub(i.Start)), true
}

func nonNeg(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d
}

// Grouper groups records, in the order they were recorded, into incidents.
// It keeps one open builder per node and the finished incidents.
type Grouper struct {
	open    map[string]*builder
	done    []Incident
	strings map[string]string // one copy of each repeated string
}

// NewGrouper returns an empty grouper.
func NewGrouper() *Grouper {
	return &Grouper{open: map[string]*builder{}, strings: map[string]string{}}
}

// intern returns the grouper's copy of s, so that a million records about
// a few thousand nodes hold a few thousand node names.
func (g *Grouper) intern(s string) string {
	if c, ok := g.strings[s]; ok {
		return c
	}
	if len(g.strings) < 1<<16 {
		g.strings[s] = s
	}
	return s
}

// Add adds one record. Rejects and records about no node are ignored.
func (g *Grouper) Add(r Record) {
	if r.Node == "" || r.Action == string(remediate.ActionReject) {
		return
	}
	r.Node, r.Zone, r.Cause, r.AcceleratorType = g.intern(r.Node), g.intern(r.Zone), g.intern(r.Cause), g.intern(r.AcceleratorType)
	r.Reason = g.intern(r.Reason)
	b := g.open[r.Node]
	if b != nil && !b.takes(r) {
		if !opens(r) {
			return
		}
		g.done = append(g.done, b.incident())
		delete(g.open, r.Node)
		b = nil
	}
	if b == nil {
		if !opens(r) {
			return
		}
		b = newBuilder(r)
		g.open[r.Node] = b
	}
	b.add(r)
}

// Incidents finishes every incident and returns them by start, then node.
// The grouper is empty afterwards.
func (g *Grouper) Incidents() []Incident {
	out := g.done
	for _, b := range g.open {
		out = append(out, b.incident())
	}
	g.done, g.open = nil, map[string]*builder{}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Start.Equal(out[j].Start) {
			return out[i].Start.Before(out[j].Start)
		}
		return out[i].Node < out[j].Node
	})
	return out
}

// Group groups records into incidents.
func Group(records []Record) []Incident {
	g := NewGrouper()
	for _, r := range records {
		g.Add(r)
	}
	return g.Incidents()
}

// opens reports whether r can start an incident: a record about an event
// (an audit entry), or a sweep's record that the node needs attention.
// A sweep writes a record about every node it looks at; "nothing to do"
// about a healthy node is not an incident.
func opens(r Record) bool {
	if r.InsertID != "" || !r.EventTime.IsZero() {
		return true
	}
	switch remediate.Action(r.Action) {
	case remediate.ActionRecreate, remediate.ActionReset, remediate.ActionDefer, remediate.ActionPrepare, remediate.ActionMaintain:
		return true
	}
	switch vmpolicy.Action(r.Action) {
	case vmpolicy.ActionStart, vmpolicy.ActionRecreateInstances, vmpolicy.ActionReportFaulty:
		return true
	}
	return false
}

// IsInstance reports whether node names a Compute Engine instance
// incident: projects/P/zones/Z/instances/I (a single-host VM) or
// projects/P/zones/Z/instanceGroupManagers/M (the VMs of a slice), as the
// instance path's records name them; a Cloud TPU node is
// projects/P/locations/Z/nodes/N.
func IsInstance(node string) bool {
	seg := strings.Split(node, "/")
	return len(seg) == 6 && seg[0] == "projects" && seg[2] == "zones" && (seg[4] == "instances" || seg[4] == "instanceGroupManagers")
}

// builder accumulates one incident.
type builder struct {
	inc Incident

	gen                                int
	recreate, reset, prepare, maintain bool
	// instance: a Compute Engine instance incident (IsInstance); started,
	// migRecreate, faulty: its instance calls; held: a held decision.
	instance, started, migRecreate, faulty, held bool
	abandoned, self, dry                         bool
	skipReason                                   string
	decisiveReason, abandonReason                string
	resetDone                                    time.Time
	closedAt                                     time.Time
	recoveredByOutcome                           bool
	// outage is the earliest event of the incident that is not a
	// maintenance notice: downtime starts there (a notice's checkpoint
	// request is not an outage).
	outage time.Time
	// lastKind is the last delete, create or reset step seen: the
	// operation a later poll waits for.
	lastKind string
	// firstStockout and lastStockout are when the first and last records
	// of a create refused for capacity were written; lastCreate is the
	// start of the last create step.
	firstStockout, lastStockout, lastCreate time.Time
}

func eventOf(r Record) time.Time {
	if !r.EventTime.IsZero() {
		return r.EventTime
	}
	return r.Time
}

func newBuilder(r Record) *builder {
	return &builder{inc: Incident{Node: r.Node, Start: eventOf(r), Detected: r.Time}, instance: IsInstance(r.Node)}
}

// endMark is when the incident visibly ended: training resumed, closed, or
// the node READY again; zero while it is going on.
func (b *builder) endMark() time.Time {
	switch {
	case !b.inc.Resumed.IsZero():
		return b.inc.Resumed
	case !b.closedAt.IsZero():
		return b.closedAt
	case !b.inc.Recovered.IsZero():
		return b.inc.Recovered
	}
	return time.Time{}
}

// takes reports whether r belongs to this incident rather than a new one.
func (b *builder) takes(r Record) bool {
	t := eventOf(r)
	if !t.After(b.inc.Start.Add(SameEventWindow)) {
		return true // the same event's other entries, or the watcher's record
	}
	end := b.endMark()
	return end.IsZero() || !t.After(end)
}

func (b *builder) add(r Record) {
	in := &b.inc
	in.Records++
	if r.Action != string(remediate.ActionPrepare) {
		if t := eventOf(r); b.outage.IsZero() || t.Before(b.outage) {
			b.outage = t
		}
	}
	if t := eventOf(r); t.Before(in.Start) {
		in.Start = t
	}
	if r.Time.Before(in.Detected) {
		in.Detected = r.Time
	}
	if r.Time.After(in.End) {
		in.End = r.Time
	}
	if in.Zone == "" {
		in.Zone = r.Zone
	}
	if in.Cause == "" || (in.Cause == "unknown" && r.Cause != "") {
		in.Cause = r.Cause
	}
	if in.AcceleratorType == "" && r.AcceleratorType != "" {
		in.AcceleratorType = r.AcceleratorType
	}
	// The largest count any record gives: an instance record counts the
	// chips of the slice's VMs it observed (chips per VM of the machine
	// type, summed), and a record that could not read every VM counts fewer.
	in.Chips = max(in.Chips, r.Chips)
	if r.DryRun {
		b.dry = true
	}
	if r.Generation != 0 && b.gen == 0 {
		b.gen = r.Generation
	}
	if in.Job == "" {
		in.Job = r.Job
	}
	if r.ZoneMovedTo != "" {
		in.ZoneMovedTo = r.ZoneMovedTo
	}
	for _, s := range r.Steps {
		if s.Name == "create" && s.Start.After(b.lastCreate) {
			b.lastCreate = s.Start
		}
	}
	if r.Refusal == "stockout" {
		seen := b.lastStepEnd(r, r.Time)
		if b.firstStockout.IsZero() || seen.Before(b.firstStockout) {
			b.firstStockout = seen
		}
		if seen.After(b.lastStockout) {
			b.lastStockout = seen
		}
	}

	switch remediate.Action(r.Action) {
	case remediate.ActionRecreate, remediate.ActionReset:
		if r.Action == string(remediate.ActionRecreate) {
			b.recreate = true
		} else {
			b.reset = true
		}
		if b.decisiveReason == "" {
			b.decisiveReason = r.Reason
		}
		b.steps(r)
		// (An instance's phase done is the insert sent, not the VM RUNNING.)
		if r.Outcome == "" && r.Err == "" && r.Phase == string(remediate.PhaseDone) && !r.DryRun && !b.instance {
			// Records written before Outcome existed: done means the
			// node was created again and READY.
			b.recovered(b.lastStepEnd(r, r.Time), false)
		}
	case remediate.ActionPrepare:
		b.prepare = true
		if b.decisiveReason == "" {
			b.decisiveReason = r.Reason
		}
	case remediate.ActionMaintain:
		b.maintain = true
		b.decisiveReason = r.Reason
		b.steps(r)
	case remediate.ActionSkip:
		if b.skipReason == "" && !strings.Contains(r.Reason, "already handled") {
			b.skipReason = r.Reason
			// A guard that left the node alone ends the incident; one
			// that held off a second delivery during our recovery does not.
			if b.closedAt.IsZero() && b.gen == 0 && r.Generation == 0 && !b.ours() {
				b.closedAt = r.Time
			}
		}
	case remediate.ActionRecord:
		switch {
		case b.instance:
			// An instance's record is healthy only when every VM of the
			// slice is RUNNING; else it watches (the MIG repairs it, a
			// call already sent, the VM is not ours to act on).
			if r.Err == "" && vmpolicy.SaysRunning(r.Reason) {
				b.self = b.self || !b.ours()
				b.recovered(r.Time, false)
			}
		case r.Err == "" && !b.recreate && !b.reset:
			// Nothing to do about a node we never recovered: it is fine.
			b.self = true
			b.recovered(r.Time, false)
		}
	case remediate.Action(vmpolicy.ActionStart), remediate.Action(vmpolicy.ActionRecreateInstances), remediate.Action(vmpolicy.ActionReportFaulty):
		switch vmpolicy.Action(r.Action) {
		case vmpolicy.ActionStart:
			b.started = true
		case vmpolicy.ActionRecreateInstances:
			b.migRecreate = true
		default:
			b.faulty = true
		}
		if b.decisiveReason == "" {
			b.decisiveReason = r.Reason
		}
		b.steps(r)
	case remediate.Action(vmpolicy.ActionHeld):
		// A person (or the guest) stopped it: left alone, as a skip.
		if !b.held && !b.ours() {
			b.held, b.decisiveReason = true, r.Reason
			if b.closedAt.IsZero() {
				b.closedAt = r.Time
			}
		}
	case remediate.ActionResumed:
		if r.Outcome == string(remediate.OutcomeResumed) {
			resumed := r.Time
			for _, s := range r.Steps {
				switch s.Name {
				case remediate.StepResumed:
					resumed = s.End()
				case remediate.StepLostProgress:
					in.LostProgress, in.LostProgressKnown = s.Duration, true
				}
			}
			in.Resumed = resumed
		}
		// Either way ("no resume reported" too) the incident ends here.
		if b.closedAt.IsZero() {
			b.closedAt = r.Time
		}
	}
	switch remediate.Outcome(r.Outcome) {
	case remediate.OutcomeRecovered:
		b.recovered(b.lastStepEnd(r, r.Time), true)
	case remediate.OutcomeAbandoned:
		b.abandoned = true
		b.abandonReason = r.Reason
		if b.closedAt.IsZero() {
			b.closedAt = r.Time
		}
	case remediate.OutcomeClosed:
		if b.closedAt.IsZero() {
			b.closedAt = r.Time
		}
		if r.Action != string(remediate.ActionSkip) && b.skipReason == "" && !b.ours() {
			b.decisiveReason = r.Reason
		}
	case remediate.OutcomePrepared:
		b.prepare = true
	case remediate.OutcomeMaintained:
		b.maintain = true
	}
	if r.Phase == "recovered" && r.Outcome == "" {
		b.recovered(b.lastStepEnd(r, r.Time), false)
	}
	if r.Phase == string(remediate.PhaseAbandoned) {
		b.abandoned = true
		if b.abandonReason == "" {
			b.abandonReason = r.Reason
		}
	}
}

// ours reports whether the incident saw a recovery call of ours.
func (b *builder) ours() bool {
	return b.recreate || b.reset || b.started || b.migRecreate || b.faulty
}

// recovered notes the node READY again at t; an Outcome recovered record
// wins over an inferred time.
func (b *builder) recovered(t time.Time, byOutcome bool) {
	switch {
	case b.inc.Recovered.IsZero():
	case byOutcome && !b.recoveredByOutcome:
	default:
		return
	}
	b.inc.Recovered = t
	b.recoveredByOutcome = b.recoveredByOutcome || byOutcome
}

func (b *builder) lastStepEnd(r Record, def time.Time) time.Time {
	end := def
	for _, s := range r.Steps {
		if e := s.End(); e.After(end) {
			end = e
		}
	}
	return end
}

// steps reads the milestones of a recreate, reset or maintain record from
// its steps, in order: a delete, create or reset step is done when the
// wait for its operation ends (a wait-* or poll-operation step after it,
// in this record or a later one), or at its own end when there is no wait. get steps are observation, not
// progress. A record that names the phase reached but has no such steps
// marks it at the record's time.
func (b *builder) steps(r Record) {
	in := &b.inc
	claimed := time.Time{}
	mark := func(kind string, t time.Time) {
		switch kind {
		case "delete":
			if t.After(in.Deleted) {
				in.Deleted = t
			}
		case "create":
			if t.After(in.Created) {
				in.Created = t
			}
		case "reset":
			if t.After(b.resetDone) {
				b.resetDone = t
			}
		}
	}
	for _, s := range r.Steps {
		if s.Name == "get" || s.Name == remediate.StepGuestAttributes {
			continue
		}
		if claimed.IsZero() || s.Start.Before(claimed) {
			claimed = s.Start
		}
		kind := s.Name
		switch s.Name {
		case "wait-delete", "wait-create", "wait-reset":
			kind = strings.TrimPrefix(s.Name, "wait-")
		case "insert": // an instance created again from its saved spec
			kind = "create"
		case "poll-operation", "wait-operation":
			kind = b.lastKind // also one requested by an earlier record
		}
		if s.Err != "" {
			continue
		}
		switch kind {
		case "delete", "create", "reset":
			mark(kind, s.End())
			b.lastKind = kind
		}
	}
	if claimed.IsZero() {
		claimed = r.Time
	}
	if in.Claimed.IsZero() || claimed.Before(in.Claimed) {
		in.Claimed = claimed
	}
	switch r.Phase {
	case "deleted", "creating":
		if in.Deleted.IsZero() {
			in.Deleted = r.Time
		}
	case "created":
		if in.Created.IsZero() {
			in.Created = r.Time
		}
	case "reset":
		if b.resetDone.IsZero() {
			b.resetDone = r.Time
		}
	}
}

func (b *builder) incident() Incident {
	in := b.inc
	in.Closed = !b.closedAt.IsZero()
	if in.Chips == 0 {
		in.Chips = remediate.ChipsOf(in.AcceleratorType)
	}
	if in.Chips == 0 { // a Compute Engine machine type: chips of one VM
		// (A slice's records count its VMs; a record without a count, of
		// one VM's worth, undercounts a multi-host slice.)
		in.Chips = tpumachine.ChipsPerVM(in.AcceleratorType)
	}
	switch {
	case b.abandoned:
		in.Outcome, in.Reason = OutcomeAbandoned, b.abandonReason
	case b.maintain:
		in.Outcome, in.Reason = OutcomeMaintained, b.decisiveReason
	case b.recreate:
		in.Outcome, in.Reason = OutcomeRecreated, b.decisiveReason
	case b.reset:
		in.Outcome, in.Reason = OutcomeReset, b.decisiveReason
	case b.migRecreate:
		in.Outcome, in.Reason = OutcomeMIGRecreated, b.decisiveReason
	case b.started:
		in.Outcome, in.Reason = OutcomeStarted, b.decisiveReason
	case b.faulty:
		in.Outcome, in.Reason = OutcomeReportedFaulty, b.decisiveReason
	case b.held:
		in.Outcome, in.Reason = OutcomeHeld, b.decisiveReason
	case b.prepare:
		in.Outcome, in.Reason = OutcomePrepared, b.decisiveReason
	case b.skipReason != "":
		in.Outcome, in.Reason = OutcomeSkipped+": "+guardOf(b.skipReason), b.skipReason
	case b.self:
		in.Outcome, in.Reason = OutcomeSelf, ""
	case b.decisiveReason != "":
		in.Outcome, in.Reason = OutcomeSkipped+": "+guardOf(b.decisiveReason), b.decisiveReason
	default:
		in.Outcome = OutcomeOpen
	}
	if b.dry && b.ours() {
		in.Outcome += " (dry run)"
	}

	switch down := b.outage; {
	case strings.HasPrefix(in.Outcome, OutcomeSkipped), in.Outcome == OutcomeHeld, down.IsZero():
		in.Downtime = 0 // left alone, or only a notice: no outage seen
	case !in.Resumed.IsZero():
		in.Downtime = nonNeg(in.Resumed.Sub(down))
	case !in.Recovered.IsZero():
		in.Downtime = nonNeg(in.Recovered.Sub(down))
	default:
		in.Downtime = nonNeg(in.End.Sub(down))
	}
	if from := b.firstStockout; !from.IsZero() {
		to := in.End // still waiting when the records end
		if b.lastCreate.After(b.lastStockout) {
			to = b.lastCreate // the create that got the node
		}
		if to.After(from) {
			in.CapacityFrom, in.CapacityTo, in.CapacityWait = from, to, to.Sub(from)
		}
	}
	in.Phases = b.phases(in)
	return in
}

// phases builds the timeline from the milestones; each span is added only
// when both its ends are known and in order.
func (b *builder) phases(in Incident) []PhaseSpan {
	var out []PhaseSpan
	at := in.Start
	span := func(name string, end time.Time) {
		if end.IsZero() || end.Before(at) {
			return
		}
		out = append(out, PhaseSpan{Phase: name, Start: at, End: end})
		at = end
	}
	span(PhaseDetect, in.Detected)
	if !in.Claimed.IsZero() {
		span(PhaseWait, in.Claimed)
		switch {
		case b.recreate:
			span(PhaseDelete, in.Deleted)
			if in.CapacityWait > 0 {
				span(PhaseCreate, in.CapacityFrom) // the create refused
				span(PhaseCapacity, in.CapacityTo)
			}
			span(PhaseCreate, in.Created)
		case b.reset:
			span(PhaseReset, b.resetDone)
		}
		span(PhaseBoot, in.Recovered)
	} else if !in.Recovered.IsZero() {
		span(PhaseRecover, in.Recovered)
	}
	if !in.Recovered.IsZero() || !in.Resumed.IsZero() {
		span(PhaseResume, in.Resumed)
	}
	// Zero-length spans say nothing on a timeline.
	n := 0
	for _, p := range out {
		if p.End.After(p.Start) {
			n++
		}
	}
	kept := make([]PhaseSpan, 0, n)
	for _, p := range out {
		if p.End.After(p.Start) {
			kept = append(kept, p)
		}
	}
	return kept
}

// guardOf names the guard of a skip reason: its text before the first
// colon ("not opted in: label ... missing" → "not opted in").
func guardOf(reason string) string {
	g := reason
	if i := strings.IndexByte(g, ':'); i > 0 {
		g = g[:i]
	}
	g = strings.TrimSpace(g)
	if len(g) > 40 {
		g = strings.TrimSpace(g[:40]) + "…"
	}
	return g
}
