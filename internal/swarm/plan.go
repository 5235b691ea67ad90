package swarm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// The simulated fleet: two zones of one region of one project, listed two
// nodes a page, so the first zone's listing has pages and the sweep has a
// zone after it; a zones: fallback (zones.go) moves a node between them.
const (
	Project = "acme-ml"
	ZoneA   = "us-central2-b"
	ZoneB   = "us-central2-a"
)

// People: Alice's acts reach the function as audit entries (the sink routes
// them); Bob's never do (the Unaudited kind). Mallory only forges entries.
const (
	Alice   = "alice@example.com"
	Bob     = "bob@example.com"
	Mallory = "mallory@example.com"
)

// Us is the principal the function's calls are audited as.
var Us = tpufake.DefaultCaller(Project)

func parent(zone string) string { return "projects/" + Project + "/locations/" + zone }

// NodeNames are the simulated nodes: four in ZoneA, two in ZoneB.
var NodeNames = []string{
	parent(ZoneA) + "/nodes/a0", parent(ZoneA) + "/nodes/a1", parent(ZoneA) + "/nodes/a2", parent(ZoneA) + "/nodes/a3",
	parent(ZoneB) + "/nodes/b0", parent(ZoneB) + "/nodes/b1",
}

// Plan is what one seed drew: the fleet's broken nodes, the TPU API's fault
// rules, people's acts between steps, ledger faults, forged entries, and
// the schedule of sweeps and audit deliveries. The same seed and kinds give
// the same plan on every machine (math/rand/v2's PCG).
type Plan struct {
	Seed  uint64
	Kinds []Kind
	// Broken are the nodes TERMINATED at the start (a terminate entry each).
	Broken []string
	// Rules are the TPU API's faults (tpufake.Draw, filtered by kind).
	Rules []tpufake.FailRule
	// Acts are people acting between steps, at a time after the start.
	Acts []TimedAct
	// Ledger are the ledger's faults.
	Ledger []LedgerFault
	// Forged are entries from a log that is not the audit log.
	Forged []ForgedEntry
	// Pauses are `autoheal pause` and, later, `autoheal resume`.
	Pauses []TimedPause
	// SweepEvery is how often Cloud Scheduler's sweep comes; AuditDelay how
	// long after an act its audit entry reaches the function.
	SweepEvery, AuditDelay time.Duration
	// Stockouts and QueueFails are the capacity faults (capacity.go);
	// Fallback each node's metadata autoheal-stockout (absent: none).
	Stockouts  []CapFault
	QueueFails []QueueSuspend
	Fallback   map[string]string
	// Pinned are the nodes whose spec pins them to their zone (zones.go):
	// what pins it, PinDisk or PinReserved.
	Pinned map[string]string
}

// TimedAct is a person's act at At after the start.
type TimedAct struct {
	At  time.Duration
	Act tpufake.Act
}

// TimedPause pauses Node (or, with Zone set, its zone) at At after the
// start and resumes it For later.
type TimedPause struct {
	At, For time.Duration
	Node    string
	Zone    bool
}

func (p TimedPause) String() string {
	what := "node " + short(p.Node)
	if p.Zone {
		what = "zone of " + short(p.Node)
	}
	return fmt.Sprintf("at +%v: pause %s, resumed %v later", p.At, what, p.For)
}

// ForgedEntry is an entry delivered At after the start: Variant says what
// it forges (forgedVariants).
type ForgedEntry struct {
	At      time.Duration
	Node    string
	Variant int
}

var forgedVariants = []string{
	"terminate from a look-alike log",
	"person's DeleteNode from another log",
	"terminate without a logName",
}

// Faults is how many faults the plan injects.
func (p Plan) Faults() int {
	return len(p.Rules) + len(p.Acts) + len(p.Ledger) + len(p.Forged) + len(p.Pauses) + len(p.Stockouts) + len(p.QueueFails)
}

// String is the plan, one fault a line: what a failing seed prints.
func (p Plan) String() string {
	var b strings.Builder
	ks := make([]string, len(p.Kinds))
	for i, k := range p.Kinds {
		ks[i] = string(k)
	}
	fmt.Fprintf(&b, "seed %d (kinds %s): %d faults; broken %s; sweep every %v, audit entries %v late",
		p.Seed, strings.Join(ks, ","), p.Faults(), short(p.Broken...), p.SweepEvery, p.AuditDelay)
	for _, r := range p.Rules {
		fmt.Fprintf(&b, "\n  [%s] %s", kindOf(r), r)
	}
	for _, a := range p.Acts {
		fmt.Fprintf(&b, "\n  [%s] at +%v: %s", personKind(a.Act.Kind), a.At, a.Act)
	}
	for _, l := range p.Ledger {
		fmt.Fprintf(&b, "\n  [%s] %s", l.kind(), l)
	}
	for _, f := range p.Forged {
		fmt.Fprintf(&b, "\n  [%s] at +%v: %s about %s", Forged, f.At, forgedVariants[f.Variant], short(f.Node))
	}
	for _, ps := range p.Pauses {
		fmt.Fprintf(&b, "\n  [%s] %s", PersonPause, ps)
	}
	for _, s := range p.Stockouts {
		fmt.Fprintf(&b, "\n  [%s] %s", Stockout, s)
	}
	for _, q := range p.QueueFails {
		fmt.Fprintf(&b, "\n  [%s] %s", QueueFail, q)
	}
	for _, n := range NodeNames {
		if f, ok := p.Fallback[n]; ok {
			fmt.Fprintf(&b, "\n  %s: autoheal-stockout=%s", short(n), f)
		}
		if pin, ok := p.Pinned[n]; ok {
			fmt.Fprintf(&b, "\n  [%s] %s: spec pinned to its zone by %s", ZoneMove, short(n), pin)
		}
	}
	return b.String()
}

// short is the nodes' short names.
func short(names ...string) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = n[strings.LastIndexByte(n, '/')+1:]
	}
	return strings.Join(s, ",")
}

// maxActAt bounds when drawn acts and forged entries happen: the run is
// quiescent only some time after the last of them.
const maxActAt = 30 * time.Minute

// deadline is how long a call the simulation makes hang takes to fail:
// the handler's own call deadline (remediate.DefaultCallTimeout).
const deadline = 30 * time.Second

// NewPlan draws the plan of seed from kinds.
func NewPlan(seed uint64, kinds []Kind) Plan {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	has := func(k ...Kind) bool {
		for _, x := range k {
			if slices.Contains(kinds, x) {
				return true
			}
		}
		return false
	}
	p := Plan{Seed: seed, Kinds: kinds,
		SweepEvery: time.Duration(1+r.IntN(5)) * time.Minute,
		AuditDelay: time.Duration(r.IntN(61)) * time.Second}
	for _, n := range NodeNames {
		if r.IntN(3) == 0 {
			p.Broken = append(p.Broken, n)
		}
	}
	if len(p.Broken) == 0 {
		p.Broken = []string{NodeNames[r.IntN(len(NodeNames))]}
	}

	mix := tpufake.Mix{Nodes: NodeNames, Locations: []string{parent(ZoneA), parent(ZoneB)}, Faults: 2 + r.IntN(7)}
	w := func(on bool) int {
		if on {
			return 1
		}
		return 0
	}
	mix.Ambiguous = 2 * w(has(AmbiguousDelete, AmbiguousCreate, AmbiguousPatch, AmbiguousMaintenance))
	mix.Errors = w(has(Errors))
	mix.Lag = w(has(Lag))
	mix.Paging = w(has(PageRepeat, PageLoop, PageSkip, PageEmpty))
	mix.People = 2 * w(has(PersonDelete, PersonRecreate, PersonRelabel, PersonStop, PersonMaintenance))
	if mix.Ambiguous+mix.Errors+mix.Lag+mix.Paging+mix.People > 0 {
		for _, rule := range tpufake.Draw(r.Uint64(), mix).Rules {
			if !has(kindOf(rule)) {
				continue
			}
			p.Rules = append(p.Rules, p.settle(r, rule, has(Unaudited)))
		}
	}

	// People between two steps, at any time in the first half hour.
	var acts []tpufake.ActKind
	for k, kind := range map[tpufake.ActKind]Kind{tpufake.ActDelete: PersonDelete, tpufake.ActRecreate: PersonRecreate,
		tpufake.ActRelabel: PersonRelabel, tpufake.ActStop: PersonStop, tpufake.ActStartMaintenance: PersonMaintenance} {
		if has(kind) {
			acts = append(acts, k)
		}
	}
	slices.Sort(acts) // map order is random: the plan must not be
	if len(acts) > 0 {
		for range r.IntN(3) {
			a := tpufake.Act{Kind: acts[r.IntN(len(acts))], Target: NodeNames[r.IntN(len(NodeNames))], Principal: Alice}
			if has(Unaudited) && r.IntN(2) == 0 {
				a.Principal = Bob
			}
			if a.Kind == tpufake.ActRelabel || a.Kind == tpufake.ActRecreate && r.IntN(2) == 0 {
				a.Labels = map[string]string{"team": "someone-else"}
			}
			if r.IntN(2) == 0 || a.Kind == tpufake.ActStartMaintenance {
				a.After = max(time.Duration(r.Int64N(int64(5*time.Minute)))/time.Second*time.Second, time.Second)
			}
			p.Acts = append(p.Acts, TimedAct{At: time.Duration(r.Int64N(int64(maxActAt))) / time.Second * time.Second, Act: a})
		}
	}

	for _, k := range []Kind{LedgerAbort, LedgerLostCommit} {
		if !has(k) {
			continue
		}
		for range r.IntN(4) {
			p.Ledger = append(p.Ledger, LedgerFault{
				Op:   ledgerOps[r.IntN(len(ledgerOps))],
				Node: NodeNames[r.IntN(len(NodeNames))],
				Nth:  1 + r.IntN(4),
				Lost: k == LedgerLostCommit,
			})
		}
	}
	if has(Forged) {
		for range r.IntN(4) {
			p.Forged = append(p.Forged, ForgedEntry{
				At:      time.Duration(r.Int64N(int64(maxActAt))) / time.Second * time.Second,
				Node:    NodeNames[r.IntN(len(NodeNames))],
				Variant: r.IntN(len(forgedVariants)),
			})
		}
	}
	if has(PersonPause) {
		for range r.IntN(3) {
			p.Pauses = append(p.Pauses, TimedPause{
				At:   time.Duration(r.Int64N(int64(maxActAt))) / time.Second * time.Second,
				For:  time.Duration(1+r.IntN(60)) * time.Minute,
				Node: NodeNames[r.IntN(len(NodeNames))],
				Zone: r.IntN(3) == 0,
			})
		}
	}
	p.drawCapacity(r, has)
	p.drawZones(r, has)
	return p
}

// settle makes a drawn rule fit the simulation: a hang past the deadline
// becomes its answer lost at the deadline, the effect landing then (the
// simulation's clock is virtual, a hang would wait on the wall clock); a
// person acts as Alice, or as Bob when unaudited acts are drawn (the fake
// audits every act; the simulation withholds Bob's entries); maintenance
// always ends; an act after "any operation's poll" is tied to its target's
// own reads when several nodes are broken (several recoveries poll at once,
// and which poll is the nth would depend on scheduling).
func (p Plan) settle(r *rand.Rand, f tpufake.FailRule, unaudited bool) tpufake.FailRule {
	if f.Hang {
		f.Hang, f.Drop = false, true
		if f.Effect == tpufake.EffectAfterDeadline {
			f.Effect, f.EffectDelay = tpufake.EffectLater, deadline
		}
	}
	if f.Effect == tpufake.EffectLater {
		f.EffectDelay = f.EffectDelay / time.Second * time.Second
	}
	if f.Stale > 0 {
		f.Stale = max(f.Stale/time.Second*time.Second, time.Second)
	}
	if f.Person != nil {
		a := *f.Person
		a.Principal = Alice
		if a.NoAudit && unaudited {
			a.Principal = Bob
		}
		a.NoAudit = false
		if a.Kind == tpufake.ActStartMaintenance && a.After == 0 {
			a.After = time.Duration(r.Int64N(int64(5 * time.Minute)))
		}
		if a.After > 0 {
			a.After = max(a.After/time.Second*time.Second, time.Second)
		}
		f.Person = &a
		if f.RPC == "operations.get" && len(p.Broken) > 1 {
			f.RPC, f.Name = "nodes.get", a.Target
		}
	}
	return f
}
