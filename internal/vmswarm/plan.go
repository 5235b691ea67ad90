package vmswarm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
)

// The simulated fleet is computefake's testdata fleet: two zones of one
// project.
const (
	Project = "acme-ml"
	ZoneC   = "us-central1-c"
	ZoneE   = "us-east5-a"
)

// People: Alice's acts reach the function as audit entries; Bob's never do
// (the sink lost them, or they came before the function was deployed).
const (
	Alice = "alice@example.com"
	Bob   = "bob@example.com"
)

// Us is the principal the Recovery's calls are audited as.
const Us = computefake.DefaultCaller

func name(zone, instance string) string { return computefake.InstanceName(Project, zone, instance) }

// The instances of the fleet the plan draws from: every TPU VM (web-1 is
// not one: nothing may ever be called on it).
var (
	// Standalone single-host VMs.
	Standalone = []string{name(ZoneC, "trainer-a"), name(ZoneC, "spot-stop"), name(ZoneC, "spot-delete"), name(ZoneC, "reserved-1"), name(ZoneC, "stopped-by-alice")}
	// Spot VMs (preemptible): spot-stop is STOPped, spot-delete DELETEd.
	Spot = []string{name(ZoneC, "spot-stop"), name(ZoneC, "spot-delete")}
	// ServeMIG are the two single-host VMs of a MIG without a workload
	// policy; SliceMIG the four VMs of a multi-host slice's MIG; Policy the
	// two VMs of a slice that shares a resource policy (no MIG).
	ServeMIG = []string{name(ZoneC, "serve-mig-a1b2"), name(ZoneC, "serve-mig-c3d4")}
	SliceMIG = []string{name(ZoneC, "slice-mig-w0"), name(ZoneC, "slice-mig-w1"), name(ZoneC, "slice-mig-w2"), name(ZoneC, "slice-mig-w3")}
	Policy   = []string{name(ZoneE, "wp-0"), name(ZoneE, "wp-1")}
	// NotTPU is the VM of the project that is no TPU VM.
	NotTPU = name(ZoneC, "web-1")

	TPUVMs = slices.Concat(Standalone, ServeMIG, SliceMIG, Policy)

	MIGs = map[string][]string{
		computefake.MIGName(Project, ZoneC, "serve-mig"): ServeMIG,
		computefake.MIGName(Project, ZoneC, "slice-mig"): SliceMIG,
	}
)

// sliceOf is the instances acted on with instance: its multi-host slice,
// else itself.
func sliceOf(instance string) []string {
	for _, s := range [][]string{SliceMIG, Policy} {
		if slices.Contains(s, instance) {
			return s
		}
	}
	return []string{instance}
}

// EventKind is what the platform or a person does to an instance.
type EventKind string

const (
	HostError   EventKind = "host-error"  // compute.instances.hostError
	Preempt     EventKind = "preempt"     // compute.instances.preempted (STOP or DELETE, as the VM says)
	Maintenance EventKind = "maintenance" // a notice, then terminate on host maintenance at its window
	PersonStop  EventKind = "person-stop"
	PersonDel   EventKind = "person-delete"
	PersonStart EventKind = "person-start"
	PersonLabel EventKind = "person-relabel" // opts the VM out
	MIGStuck    EventKind = "mig-stuck"      // the MIG stops repairing (For later it repairs again; 0: never)
)

// Event is one thing that happens At after the start. An event that cannot
// happen then (a host error of a VM that is not RUNNING) does not.
type Event struct {
	At     time.Duration
	Kind   EventKind
	Target string // an instance, or a MIG for MIGStuck
	By     string // the person, for the person-… kinds
	// For: a MIG's stuck time; a maintenance's time from the notice to its
	// window. StaysDown: the VM stays TERMINATED after the maintenance.
	For       time.Duration
	StaysDown bool
}

func (e Event) String() string {
	s := fmt.Sprintf("+%v %s %s", e.At, e.Kind, short(e.Target))
	if e.By != "" {
		s += " by " + e.By
	}
	switch {
	case e.Kind == MIGStuck && e.For == 0:
		s += " for good"
	case e.For > 0:
		s += fmt.Sprintf(" for %v", e.For)
	}
	if e.StaysDown {
		s += ", stays down"
	}
	return s
}

// Crash is the process dying at the Nth write of the store or the ledger:
// before it (the write is lost) or right after it (its answer is).
type Crash struct {
	Nth   int
	After bool
}

func (c Crash) String() string {
	if c.After {
		return fmt.Sprintf("crash right after write %d", c.Nth)
	}
	return fmt.Sprintf("crash at write %d (not written)", c.Nth)
}

// Kind is a kind of fault that can be left out of a run: a kind that breaks
// an invariant of the engine today is off in Enabled (the default run's
// kinds) until the engine is fixed, and on with -kinds all.
type Kind string

const (
	// Unaudited: some people's acts (Bob's) never reach the function as
	// audit entries.
	Unaudited Kind = "unaudited"
	// CrashAfter: the process dies right after a write of the store or the
	// ledger (the write done, its answer never seen); crashes before a
	// write are always drawn.
	CrashAfter Kind = "crash-after"
	// SliceDelete: a person deletes a VM of the multi-host slice's MIG
	// (without it, a drawn delete of one is a stop).
	SliceDelete Kind = "slice-delete"
	// PageSkip: a listing's page token passes over a page (computefake's
	// page-skip among the per-call faults).
	PageSkip Kind = "page-skip"
)

// AllKinds are every kind.
var AllKinds = []Kind{CrashAfter, PageSkip, SliceDelete, Unaudited}

// Enabled are the kinds the default run (go test ./... and CI) draws.
// CrashAfter is on since a start or insert is saved with its incident as
// sent, outcome unknown (seeds 93 and 135 of -kinds all: the process died
// right after saving the incident, before the call, and the next one read
// "already sent for this incident" for ever). PageSkip and SliceDelete are
// on since a MIG's slice is taken from the MIG (listManagedInstances), not
// from the zone's listing (seeds 297, 181 and 522: a listing that passed
// over a page, or a VM a person deleted, left the slice decided from part
// of it and recreateInstances naming part of it, which the MIG carried out
// on the whole slice, undoing the person's stop or delete), and since an
// entry's evidence is kept when its read fails transiently (seed 315 of
// the three: every delivery of a preemption failed to read the VM).
// Unaudited is on since vmpolicy's MIG row asks every broken VM for a
// system event of its own newer than its last stop, and computevm keeps a
// system event whose VM reads NOT FOUND with no saved spec (seeds 12, 68,
// 181, 297, 479, 528 of -kinds all: a person stops or deletes a VM of a
// stuck MIG, the entry never comes, and past the stuck grace
// recreateInstances undid it).
var Enabled = []Kind{CrashAfter, PageSkip, SliceDelete, Unaudited}

// ParseKinds reads a comma-separated list of kinds; "all" is AllKinds,
// "default" Enabled.
func ParseKinds(s string) ([]Kind, error) {
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		switch f = strings.TrimSpace(f); f {
		case "":
		case "all":
			out = append(out, AllKinds...)
		case "default":
			out = append(out, Enabled...)
		default:
			if !slices.Contains(AllKinds, Kind(f)) {
				return nil, fmt.Errorf("unknown fault kind %q (want all, default, or some of %v)", f, AllKinds)
			}
			out = append(out, Kind(f))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Plan is what one seed drew.
type Plan struct {
	Seed   uint64
	Kinds  []Kind
	Events []Event
	// Rate is the chance that a Compute Engine call gets a fault, until
	// FaultsFor after the start; then no more faults.
	Rate      float64
	FaultsFor time.Duration
	Calls     []computefake.FaultKind // the kinds of those faults
	Crashes   []Crash
	// SweepEvery is how often the sweep comes; AuditDelay how late audit
	// entries reach the function.
	SweepEvery, AuditDelay time.Duration
}

// Faults is how many faults the plan schedules besides the per-call ones
// (events, crashes); the per-call faults are counted in a run (Result).
func (p Plan) Faults() int { return len(p.Events) + len(p.Crashes) }

func (p Plan) String() string {
	var b strings.Builder
	ks := make([]string, len(p.Calls))
	for i, k := range p.Calls {
		ks[i] = string(k)
	}
	kinds := make([]string, len(p.Kinds))
	for i, k := range p.Kinds {
		kinds[i] = string(k)
	}
	fmt.Fprintf(&b, "seed %d (kinds %q): faults on %.0f%% of calls for %v (%s); sweep every %v, audit entries %v late",
		p.Seed, strings.Join(kinds, ","), 100*p.Rate, p.FaultsFor, strings.Join(ks, ","), p.SweepEvery, p.AuditDelay)
	for _, e := range p.Events {
		fmt.Fprintf(&b, "\n  %s", e)
	}
	for _, c := range p.Crashes {
		fmt.Fprintf(&b, "\n  %s", c)
	}
	return b.String()
}

func short(names ...string) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = n[strings.LastIndexByte(n, '/')+1:]
	}
	return strings.Join(s, ",")
}

// CallKinds are the per-call fault kinds drawn from: every kind of
// computefake but the hangs (a hang waits on the wall clock; its
// ambiguous twin, an answer lost after the call took effect, is drawn).
var CallKinds = slices.DeleteFunc(slices.Clone(computefake.AllKinds), func(k computefake.FaultKind) bool {
	return k == computefake.KindHang || k == computefake.KindHangApplied
})

// maxEventAt bounds when drawn events happen.
const maxEventAt = 40 * time.Minute

// NewPlan draws the plan of seed from kinds. The draws are the same
// whatever the kinds: a kind left out changes only what its draws make.
func NewPlan(seed uint64, kinds []Kind) Plan {
	r := rand.New(rand.NewPCG(seed, 0x7e57))
	at := func() time.Duration { return time.Duration(r.Int64N(int64(maxEventAt))) / time.Second * time.Second }
	pick := func(from []string) string { return from[r.IntN(len(from))] }
	p := Plan{Seed: seed, Kinds: kinds,
		Rate:       []float64{0.05, 0.1, 0.2, 0.3}[r.IntN(4)],
		FaultsFor:  time.Duration(30+r.IntN(91)) * time.Minute,
		SweepEvery: time.Duration(3+r.IntN(8)) * time.Minute,
		AuditDelay: time.Duration(r.IntN(61)) * time.Second,
	}
	for _, k := range CallKinds {
		if r.IntN(4) != 0 && (k != computefake.KindPageSkip || slices.Contains(kinds, PageSkip)) {
			p.Calls = append(p.Calls, k)
		}
	}
	if len(p.Calls) == 0 {
		p.Calls = []computefake.FaultKind{computefake.KindLost}
	}
	for range 1 + r.IntN(4) {
		e := Event{At: at()}
		switch r.IntN(4) {
		case 0:
			e.Kind, e.Target = Preempt, pick(Spot)
		case 1:
			e.Kind, e.Target = Maintenance, pick(TPUVMs)
			e.For = time.Duration(1+r.IntN(20)) * time.Minute
			e.StaysDown = r.IntN(2) == 0
		default:
			e.Kind, e.Target = HostError, pick(TPUVMs)
		}
		p.Events = append(p.Events, e)
	}
	for range r.IntN(3) {
		e := Event{At: at(), Target: pick(TPUVMs), By: Alice}
		e.Kind = []EventKind{PersonStop, PersonDel, PersonStart, PersonLabel}[r.IntN(4)]
		if r.IntN(3) == 0 && slices.Contains(kinds, Unaudited) {
			e.By = Bob
		}
		if e.Kind == PersonDel && slices.Contains(SliceMIG, e.Target) && !slices.Contains(kinds, SliceDelete) {
			e.Kind = PersonStop
		}
		p.Events = append(p.Events, e)
	}
	for _, mig := range []string{computefake.MIGName(Project, ZoneC, "serve-mig"), computefake.MIGName(Project, ZoneC, "slice-mig")} {
		if r.IntN(3) == 0 {
			e := Event{At: at(), Kind: MIGStuck, Target: mig}
			if r.IntN(2) == 0 {
				e.For = time.Duration(10+r.IntN(110)) * time.Minute
			}
			p.Events = append(p.Events, e)
		}
	}
	slices.SortStableFunc(p.Events, func(a, b Event) int { return int(a.At - b.At) })
	n := 0
	for range r.IntN(4) {
		n += 1 + r.IntN(40)
		p.Crashes = append(p.Crashes, Crash{Nth: n, After: r.IntN(2) == 0 && slices.Contains(kinds, CrashAfter)})
	}
	return p
}
