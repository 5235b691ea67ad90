package tpufake

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Seeded fault schedules: Draw picks a fault mix and a schedule from a seed
// (math/rand/v2's PCG), so that the same seed and Mix give the same rules in
// the same order, on every machine and run; a failing seed prints itself
// (Schedule.String) and replays exactly. Every drawn rule names the method,
// the resource and the nth call it applies to, as a hand-written one does.

// Mix is what Draw draws from.
type Mix struct {
	// Nodes are the nodes faults and people's acts are about (full names);
	// QueuedResources the queued resources (reset faults, their deletes);
	// Locations the parents (projects/P/locations/Z) of paging faults.
	Nodes           []string
	QueuedResources []string
	Locations       []string
	// Faults is how many rules to draw (0: DefaultFaults).
	Faults int
	// Weights of the fault classes; all zero: all equal. Ambiguous: a
	// mutating call or its operation failing with an effect (now, later,
	// after the deadline, half-way); Errors: clean failures of any call;
	// Lag: stale reads; Paging: nodes.list anomalies; People: a person
	// acting right after a call.
	Ambiguous, Errors, Lag, Paging, People int
	// MaxDelay bounds the drawn delays: EffectDelay, Stale, an act's After
	// (0: DefaultMaxDelay).
	MaxDelay time.Duration
	// MaxNth bounds the drawn nth call (0: DefaultMaxNth).
	MaxNth int
}

// Defaults of Mix.
const (
	DefaultFaults   = 4
	DefaultMaxDelay = 5 * time.Minute
	DefaultMaxNth   = 3
)

// Schedule is a drawn set of rules and the seed and mix it came from.
type Schedule struct {
	Seed  uint64
	Rules []FailRule
}

// String is the schedule, one rule a line after the seed: what a failing
// run prints.
func (sc Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d rules", sc.Seed, len(sc.Rules))
	for i, r := range sc.Rules {
		fmt.Fprintf(&b, "\n  %d. %s", i+1, r)
	}
	return b.String()
}

// Apply adds every rule of sc, in order (Fail).
func (s *Server) Apply(sc Schedule) {
	for _, r := range sc.Rules {
		s.Fail(r)
	}
}

// Mutating RPCs, for the request and for the operation.
var (
	nodeMutations = []string{"nodes.delete", "nodes.create", "nodes.patch", "nodes.performMaintenance"}
	readRPCs      = []string{"nodes.get", "nodes.list", "queuedResources.get"}
	transient     = []struct {
		code   int
		status string
	}{{503, "UNAVAILABLE"}, {429, "RESOURCE_EXHAUSTED"}, {500, "INTERNAL"}, {504, "DEADLINE_EXCEEDED"}}
)

// Draw draws a schedule from seed.
func Draw(seed uint64, m Mix) Schedule {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	n := m.Faults
	if n <= 0 {
		n = DefaultFaults
	}
	maxDelay := m.MaxDelay
	if maxDelay <= 0 {
		maxDelay = DefaultMaxDelay
	}
	maxNth := m.MaxNth
	if maxNth <= 0 {
		maxNth = DefaultMaxNth
	}
	d := drawer{r: r, m: m, maxDelay: maxDelay, maxNth: maxNth}
	weights := []int{m.Ambiguous, m.Errors, m.Lag, m.Paging, m.People}
	if m.Ambiguous+m.Errors+m.Lag+m.Paging+m.People == 0 {
		weights = []int{1, 1, 1, 1, 1}
	}
	draws := []func() (FailRule, bool){d.ambiguous, d.clean, d.lag, d.paging, d.person}
	sc := Schedule{Seed: seed}
	for tries := 0; len(sc.Rules) < n && tries < 100*n; tries++ {
		if rule, ok := draws[pick(r, weights)](); ok {
			sc.Rules = append(sc.Rules, rule)
		}
	}
	return sc
}

// pick draws an index with the given weights (some positive).
func pick(r *rand.Rand, weights []int) int {
	total := 0
	for _, w := range weights {
		total += max(w, 0)
	}
	x := r.IntN(total)
	for i, w := range weights {
		if x < max(w, 0) {
			return i
		}
		x -= max(w, 0)
	}
	return len(weights) - 1
}

type drawer struct {
	r        *rand.Rand
	m        Mix
	maxDelay time.Duration
	maxNth   int
}

func (d drawer) nth() int                  { return 1 + d.r.IntN(d.maxNth) }
func (d drawer) delay() time.Duration      { return time.Duration(1 + d.r.Int64N(int64(d.maxDelay))) }
func (d drawer) one(names []string) string { return names[d.r.IntN(len(names))] }

// target picks an RPC of the mutating ones and the resource it is about.
func (d drawer) mutation() (rpc, name string, ok bool) {
	var rpcs []string
	if len(d.m.Nodes) > 0 {
		rpcs = append(rpcs, nodeMutations...)
	}
	if len(d.m.QueuedResources) > 0 {
		rpcs = append(rpcs, "queuedResources.reset")
	}
	if len(rpcs) == 0 {
		return "", "", false
	}
	rpc = d.one(rpcs)
	if rpc == "queuedResources.reset" {
		return rpc, d.one(d.m.QueuedResources), true
	}
	return rpc, d.one(d.m.Nodes), true
}

func (d drawer) ambiguous() (FailRule, bool) {
	rpc, name, ok := d.mutation()
	if !ok {
		return FailRule{}, false
	}
	f := FailRule{RPC: rpc, Name: name, Nth: d.nth(), Times: 1}
	if d.r.IntN(2) == 0 {
		// The operation ends in error: after its effect, half-way with
		// the effect later, or stuck half-way.
		f.RPC = "operation:" + rpc
		f.Status = []string{"INTERNAL", "UNKNOWN", "ABORTED"}[d.r.IntN(3)]
		switch d.r.IntN(3) {
		case 0:
			f.Effect = EffectNow
		case 1:
			f.Effect, f.EffectDelay = EffectLater, d.delay()
		default:
			f.Effect = EffectStuck
		}
		return f, true
	}
	t := transient[d.r.IntN(len(transient))]
	f.Code, f.Status = t.code, t.status
	switch d.r.IntN(4) {
	case 0:
		f.Effect = EffectNow
	case 1:
		f.Effect, f.EffectDelay = EffectLater, d.delay()
	case 2:
		f.Effect, f.Hang = EffectAfterDeadline, true
	default:
		f.Effect, f.Drop = EffectNow, true
	}
	return f, true
}

func (d drawer) clean() (FailRule, bool) {
	rpcs := append([]string(nil), readRPCs...)
	if len(d.m.Nodes) > 0 {
		rpcs = append(rpcs, nodeMutations...)
	}
	rpc := d.one(rpcs)
	var name string
	switch {
	case rpc == "nodes.list" && len(d.m.Locations) > 0:
		name = d.one(d.m.Locations)
	case rpc == "queuedResources.get" && len(d.m.QueuedResources) > 0:
		name = d.one(d.m.QueuedResources)
	case rpc != "nodes.list" && rpc != "queuedResources.get" && len(d.m.Nodes) > 0:
		name = d.one(d.m.Nodes)
	default:
		return FailRule{}, false
	}
	t := transient[d.r.IntN(len(transient))]
	return FailRule{RPC: rpc, Name: name, Nth: d.nth(), Times: 1 + d.r.IntN(3), Code: t.code, Status: t.status}, true
}

func (d drawer) lag() (FailRule, bool) {
	rpc := d.one(readRPCs)
	var names []string
	switch rpc {
	case "nodes.get":
		names = d.m.Nodes
	case "nodes.list":
		names = d.m.Locations
	case "queuedResources.get":
		names = d.m.QueuedResources
	}
	if len(names) == 0 {
		return FailRule{}, false
	}
	return FailRule{RPC: rpc, Name: d.one(names), Nth: d.nth(), Times: 1 + d.r.IntN(3), Stale: d.delay()}, true
}

func (d drawer) paging() (FailRule, bool) {
	if len(d.m.Locations) == 0 {
		return FailRule{}, false
	}
	f := FailRule{RPC: "nodes.list", Name: d.one(d.m.Locations), Nth: d.nth(), Times: 1 + d.r.IntN(3),
		Page: []PageFault{PageRepeat, PageLoopToFirst, PageSkip, PageEmpty}[d.r.IntN(4)]}
	if f.Page == PageLoopToFirst && d.r.IntN(2) == 0 {
		f.Times = 0 // a zone whose listing never ends
	}
	return f, true
}

func (d drawer) person() (FailRule, bool) {
	if len(d.m.Nodes) == 0 && len(d.m.QueuedResources) == 0 {
		return FailRule{}, false
	}
	act := Act{NoAudit: d.r.IntN(2) == 0}
	if len(d.m.QueuedResources) > 0 && (len(d.m.Nodes) == 0 || d.r.IntN(6) == 0) {
		act.Kind, act.Target = ActDeleteQueuedResource, d.one(d.m.QueuedResources)
	} else {
		act.Kind = []ActKind{ActDelete, ActRecreate, ActRelabel, ActStop, ActStartMaintenance}[d.r.IntN(5)]
		act.Target = d.one(d.m.Nodes)
		if act.Kind == ActRelabel || act.Kind == ActRecreate && d.r.IntN(2) == 0 {
			act.Labels = map[string]string{"team": "someone-else"}
		}
	}
	if d.r.IntN(2) == 0 {
		act.After = d.delay()
	}
	// After which call: any of the target's, or a listing.
	trigger := append([]string{"nodes.get", "operations.get"}, nodeMutations...)
	rpc := d.one(trigger)
	name := act.Target
	if rpc == "operations.get" {
		name = ""
	}
	if act.Kind == ActDeleteQueuedResource {
		rpc, name = d.one([]string{"queuedResources.get", "queuedResources.reset"}), act.Target
	}
	return FailRule{RPC: rpc, Name: name, Nth: d.nth(), Times: 1, Person: &act}, true
}

// String is the rule in one line, every field that is set.
func (f FailRule) String() string {
	var b strings.Builder
	b.WriteString(f.RPC)
	if f.Name != "" {
		b.WriteString(" " + f.Name)
	}
	if f.Of != "" {
		b.WriteString(" of=" + f.Of)
	}
	if f.Nth > 1 {
		fmt.Fprintf(&b, " nth=%d", f.Nth)
	}
	if f.Times > 0 {
		fmt.Fprintf(&b, " times=%d", f.Times)
	}
	if f.Code != 0 || f.Status != "" {
		code, status := normalize(f.Code, f.Status)
		fmt.Fprintf(&b, " %d %s", code, status)
	}
	if f.Delay > 0 {
		fmt.Fprintf(&b, " delay=%v", f.Delay)
	}
	if e := f.effect(); e != EffectNone {
		b.WriteString(" effect=" + e.String())
		if e == EffectLater {
			fmt.Fprintf(&b, "+%v", f.EffectDelay)
		}
	}
	for _, flag := range []struct {
		on   bool
		name string
	}{{f.Hang, "hang"}, {f.Drop, "drop"}, {f.Malformed, "malformed"}} {
		if flag.on {
			b.WriteString(" " + flag.name)
		}
	}
	if f.Stale > 0 {
		fmt.Fprintf(&b, " stale=%v", f.Stale)
	}
	if f.Page != PageNone {
		b.WriteString(" page=" + f.Page.String())
	}
	if f.Person != nil {
		b.WriteString(" then " + f.Person.String())
	}
	return b.String()
}
