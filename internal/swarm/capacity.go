package swarm

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/policy"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// Capacity: the Stockout kind draws windows in which a zone or one node has
// no capacity (the fake's outage rule, operation:nodes.create
// RESOURCE_EXHAUSTED until a time: a direct create's operation ends in the
// stockout, a queued resource waits WAITING_FOR_RESOURCES), sometimes with
// the create call itself refused, a create whose answer is lost while
// capacity is short, or a quota refusal (no stockout: never queued). The
// QueueFail kind suspends a waiting queued resource of ours. With either,
// each node draws its metadata autoheal-stockout.

// Capacity events.
const (
	CapOutage = "outage" // no capacity in Zone (or for Node) from At for For
	CapQuota  = "quota"  // Node's create refused for quota, Times times, from At
)

// CapFault is one drawn capacity event.
type CapFault struct {
	What    string
	At, For time.Duration
	Zone    string // the outage's zone ("": Node alone)
	Node    string
	Refuse  bool   // the create call itself is refused too, not only its operation
	Lost    string // a node whose create sent during the outage has its answer lost
	Times   int    // a quota refusal's count
}

func (s CapFault) String() string {
	if s.What == CapQuota {
		return fmt.Sprintf("at +%v: %s's create refused for quota %d times", s.At, short(s.Node), s.Times)
	}
	where := "node " + short(s.Node)
	if s.Zone != "" {
		where = "zone " + s.Zone
	}
	extra := ""
	if s.Refuse {
		extra += ", the create call refused too"
	}
	if s.Lost != "" {
		extra += ", " + short(s.Lost) + "'s create answer lost"
	}
	return fmt.Sprintf("at +%v: %s out of capacity for %v%s", s.At, where, s.For, extra)
}

// covers reports whether the outage s can refuse node's creates.
func (s CapFault) covers(node string) bool {
	if s.What != CapOutage {
		return false
	}
	if s.Zone != "" {
		return strings.Contains(node, "/locations/"+s.Zone+"/")
	}
	return s.Node == node
}

// QueueSuspend suspends Node's waiting queued resource (if it has one) At
// after the start, as the platform does.
type QueueSuspend struct {
	At   time.Duration
	Node string
}

func (q QueueSuspend) String() string {
	return fmt.Sprintf("at +%v: %s's waiting queued resource SUSPENDED", q.At, short(q.Node))
}

// fallbacks are the autoheal-stockout values a node draws ("": none).
var fallbacks = []string{"", "wait", "queue", "queue:20m", "queue:1h"}

// drawCapacity draws the capacity faults and the nodes' fallbacks: after
// every other draw, so the plans of seeds without these kinds are the ones
// they always were.
func (p *Plan) drawCapacity(r *rand.Rand, has func(...Kind) bool) {
	if !has(Stockout, QueueFail) {
		return
	}
	p.Fallback = map[string]string{}
	for _, n := range NodeNames {
		if v := fallbacks[r.IntN(len(fallbacks))]; v != "" {
			p.Fallback[n] = v
		}
	}
	if has(Stockout) {
		for range 1 + r.IntN(2) {
			s := CapFault{What: CapOutage, At: time.Duration(r.IntN(11)) * time.Minute,
				For: time.Duration(5+r.IntN(86)) * time.Minute, Node: NodeNames[r.IntN(len(NodeNames))]}
			if r.IntN(2) == 0 {
				s.Zone = []string{ZoneA, ZoneB}[r.IntN(2)]
				s.Node = ""
			}
			s.Refuse = r.IntN(3) == 0
			if r.IntN(3) == 0 {
				s.Lost = NodeNames[r.IntN(len(NodeNames))]
			}
			p.Stockouts = append(p.Stockouts, s)
		}
		if r.IntN(3) == 0 {
			p.Stockouts = append(p.Stockouts, CapFault{What: CapQuota, At: time.Duration(r.IntN(11)) * time.Minute,
				Node: NodeNames[r.IntN(len(NodeNames))], Times: 1 + r.IntN(2)})
		}
	}
	if has(QueueFail) {
		for range r.IntN(3) {
			p.QueueFails = append(p.QueueFails, QueueSuspend{At: time.Duration(2+r.IntN(59)) * time.Minute, Node: NodeNames[r.IntN(len(NodeNames))]})
		}
	}
}

// capacityMessage is the TPU API's wording of a stockout.
func capacityMessage(zone string) string {
	return fmt.Sprintf("There is no more capacity in the zone %q; you can try in another zone where Cloud TPU Nodes are offered", zone)
}

// rules are the fake's rules of s, from at (t0 + s.At).
func (s CapFault) rules(at time.Time) []tpufake.FailRule {
	zone := s.Zone
	if zone == "" {
		zone = s.Node[len("projects/"+Project+"/locations/"):strings.Index(s.Node, "/nodes/")]
	}
	if s.What == CapQuota {
		return []tpufake.FailRule{{RPC: "nodes.create", Name: s.Node, Status: "RESOURCE_EXHAUSTED", Times: s.Times,
			Message: fmt.Sprintf("Quota 'TPUV4PodPerProjectPerZoneForTPUAPI' exceeded. Limit: 32.0 in zone %s.", zone)}}
	}
	until := at.Add(s.For)
	var out []tpufake.FailRule
	if s.Lost != "" {
		// Carried out (its operation then ends in the stockout), the
		// answer lost on the way back.
		out = append(out, tpufake.FailRule{RPC: "nodes.create", Name: s.Lost, Effect: tpufake.EffectNow, Drop: true, Times: 1, Until: until})
	}
	name := s.Node
	if s.Zone != "" {
		name = ""
	}
	out = append(out, tpufake.FailRule{RPC: "operation:nodes.create", Zone: s.Zone, Name: name, Status: "RESOURCE_EXHAUSTED",
		Message: capacityMessage(zone), Until: until})
	if s.Refuse {
		out = append(out, tpufake.FailRule{RPC: "nodes.create", Zone: s.Zone, Name: name, Status: "RESOURCE_EXHAUSTED",
			Message: capacityMessage(zone), Until: until})
	}
	return out
}

// capacity is the run's capacity state: which faults were applied, and
// what the per-step checks saw.
type capacity struct {
	applied, failed []bool
	seen            map[string]bool // violations already reported
}

// lastCapacityAt is when the last drawn capacity fault has happened.
func (p Plan) lastCapacityAt() time.Duration {
	last := time.Duration(0)
	for _, s := range p.Stockouts {
		last = max(last, s.At+s.For)
	}
	for _, q := range p.QueueFails {
		last = max(last, q.At)
	}
	return last
}

// stepCapacity applies the capacity faults due at now and checks the
// queued resources: at most one live queued resource of ours per node, and
// never a live one beside a node our direct create made.
func (w *world) stepCapacity(now time.Time) {
	p := w.plan
	if len(p.Stockouts)+len(p.QueueFails) == 0 && len(p.Fallback) == 0 {
		return
	}
	c := &w.cap
	if c.applied == nil {
		c.applied, c.failed, c.seen = make([]bool, len(p.Stockouts)), make([]bool, len(p.QueueFails)), map[string]bool{}
	}
	for i, s := range p.Stockouts {
		if at := t0.Add(s.At); !c.applied[i] && !now.Before(at) {
			c.applied[i] = true
			for _, r := range s.rules(at) {
				w.fake.Fail(r)
			}
		}
	}
	fleet := w.fake.Fleet()
	for i, q := range p.QueueFails {
		if c.failed[i] || now.Before(t0.Add(q.At)) {
			continue
		}
		c.failed[i] = true
		for _, qr := range fleet.QueuedResources {
			if qrNode(qr) == q.Node && qrState(qr) == "WAITING_FOR_RESOURCES" {
				if err := w.fake.SuspendQueuedResource(qr.Name); err != nil {
					w.res.Violations = append(w.res.Violations, "setup: "+err.Error())
				}
			}
		}
		fleet = w.fake.Fleet()
	}
	if len(fleet.QueuedResources) == 0 {
		return
	}
	nodes := map[string]*tpu.Node{}
	for _, n := range fleet.Nodes {
		nodes[n.Name] = n
	}
	// The node a person made last (their recreate copies our labels) is
	// not our direct create's: its create's first audit entry names them.
	madeBy := w.makers()
	live := map[string][]string{}
	for _, qr := range fleet.QueuedResources {
		switch qrState(qr) {
		case "FAILED", "SUSPENDED", "DELETING":
			continue
		}
		node := qrNode(qr)
		live[node] = append(live[node], short(qr.Name))
		if n := nodes[node]; n != nil && n.QueuedResource == "" && n.State != "DELETING" && n.Labels[policy.GenerationLabel] != "" && madeBy[node] == Us {
			w.capViolation("double:"+node, "%s: our queued resource %s is %s while our direct create's node (generation %s) exists, at +%v",
				short(node), short(qr.Name), qrState(qr), n.Labels[policy.GenerationLabel], now.Sub(t0))
		}
	}
	for node, qrs := range live {
		if len(qrs) > 1 {
			w.capViolation("live:"+node, "%s: %d live queued resources of ours at once (%s), at +%v", short(node), len(qrs), strings.Join(qrs, ","), now.Sub(t0))
		}
	}
}

func (w *world) capViolation(key, format string, args ...any) {
	if w.cap.seen[key] {
		return
	}
	w.cap.seen[key] = true
	w.res.Violations = append(w.res.Violations, fmt.Sprintf(format, args...))
}

// checkCapacity is the capacity invariants at quiescence: every FAILED or
// SUSPENDED queued resource of ours deleted (it holds quota), none waiting
// with no recovery to follow it, no queued resource for a node no
// stockout covered (a quota refusal is never queued), and a node's queued
// resources bounded by its recoveries and AUTOHEAL_MAX_REQUEUES.
func (w *world) checkCapacity(gens map[string]int) {
	v := func(format string, args ...any) {
		w.res.Violations = append(w.res.Violations, fmt.Sprintf(format, args...))
	}
	for _, qr := range w.fake.Fleet().QueuedResources {
		if s := qrState(qr); s != "ACTIVE" {
			v("%s: our queued resource %s left %s at the end", short(qrNode(qr)), short(qr.Name), s)
		}
	}
	creates := w.budget.qrCreates()
	for _, name := range NodeNames {
		n := creates[name]
		if n == 0 {
			continue
		}
		if !slices.ContainsFunc(w.plan.Stockouts, func(s CapFault) bool { return s.covers(name) }) {
			v("%s: %d queued resource creates, but no stockout covered it (a quota refusal is never queued)", short(name), n)
		}
		if bound := (w.maxRequeues + 1 + qrCreateSlack) * max(gens[name], 1); n > bound {
			v("%s: %d queued resource creates in %d recoveries, want at most %d", short(name), n, gens[name], bound)
		}
	}
}

// qrCreateSlack is the creates a queued resource may take beyond one per
// queueing: a create failed cleanly and retried.
const qrCreateSlack = 3

// qrNode is the node a queued resource of ours is for.
func qrNode(qr *tpu.QueuedResource) string {
	if qr.Tpu == nil || len(qr.Tpu.NodeSpec) == 0 {
		return ""
	}
	return qr.Tpu.NodeSpec[0].Parent + "/nodes/" + qr.Tpu.NodeSpec[0].NodeId
}

func qrState(qr *tpu.QueuedResource) string {
	if qr.State == nil {
		return ""
	}
	return qr.State.State
}

// qrCounter counts the queued resource creates the function sent, and its
// creates refused for capacity or quota, by node.
type qrCounter struct {
	mu         sync.Mutex
	n, refused map[string]int
}

func (b *budget) countRefused(node string) {
	b.qr.mu.Lock()
	defer b.qr.mu.Unlock()
	if b.qr.refused == nil {
		b.qr.refused = map[string]int{}
	}
	b.qr.refused[node]++
}

// refusedCreates is how many of node's creates of ours were refused for
// capacity or quota, by the call or by its operation: they are retried
// with a back-off until capacity returns, bounded by the recovery's cap,
// not by the attempts.
func (w *world) refusedCreates(node string) int {
	w.budget.qr.mu.Lock()
	n := w.budget.qr.refused[node]
	w.budget.qr.mu.Unlock()
	for _, e := range w.fake.AuditLog() {
		if e.Resource == node && e.Last && e.Principal == Us && e.Code == 8 && strings.HasSuffix(e.Method, ".CreateNode") {
			n++
		}
	}
	return n
}

func (b *budget) countQR(q *tpu.QueuedResource) {
	b.qr.mu.Lock()
	defer b.qr.mu.Unlock()
	if b.qr.n == nil {
		b.qr.n = map[string]int{}
	}
	b.qr.n[qrNode(q)]++
}

func (b *budget) qrCreates() map[string]int {
	b.qr.mu.Lock()
	defer b.qr.mu.Unlock()
	return maps.Clone(b.qr.n)
}
