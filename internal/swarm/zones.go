package swarm

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/policy"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// Another zone: the ZoneMove kind makes some nodes ask, in metadata
// autoheal-stockout, for zones:Z1,Z2,… — after AUTOHEAL_STOCKOUT_ZONE_AFTER
// stockouts their recreate creates the spec in another listed zone of the
// region (docs/capacity.md, "Another zone"). The fleet's two zones are of
// one region and both in AUTOHEAL_ZONES, so a stockout (capacity.go) in
// one moves a node to the other; some values are refused (a zone of
// another region, a zone not watched) and some specs are pinned to their
// zone (a data disk, a reservation), so the move is refused and the node
// waits at home. A node moved lives under its home name's recovery with
// the same id in the other zone: the checks (check.go) count every copy
// of a name, in whichever zone, as that node.

// Pins: what holds a node's spec to its zone.
const (
	PinDisk     = "data-disk"   // a zonal data disk attached
	PinReserved = "reservation" // created under a reservation
)

// zoneFallbacks are the zones: values a node draws: the first three move a
// node of either zone (or, for a node whose zone is the only one listed,
// leave it waiting at home), the others are refused.
var zoneFallbacks = []string{
	"zones:" + ZoneA + "," + ZoneB,
	"zones:" + ZoneB + "," + ZoneA,
	"zones:" + ZoneB,
	"zones:" + ZoneA + ",us-east5-a",                  // another region: refused
	"zones:" + ZoneA + "," + ZoneB + ",us-central2-c", // not in AUTOHEAL_ZONES: refused
}

// drawZones draws the nodes' zones: fallbacks and pinned specs: after every
// other draw, so the plans of seeds without ZoneMove are the ones they
// always were.
func (p *Plan) drawZones(r *rand.Rand, has func(...Kind) bool) {
	if !has(ZoneMove) {
		return
	}
	if p.Fallback == nil {
		p.Fallback = map[string]string{}
	}
	p.Pinned = map[string]string{}
	for _, n := range NodeNames {
		if r.IntN(2) != 0 {
			continue
		}
		p.Fallback[n] = zoneFallbacks[r.IntN(len(zoneFallbacks))]
		if r.IntN(4) == 0 {
			p.Pinned[n] = []string{PinDisk, PinReserved}[r.IntN(2)]
		}
	}
}

// pin makes n's spec pinned to its zone by what ("": not pinned).
func pin(n *tpu.Node, what string) {
	_, zone := policy.NodeProjectZone(n.Name)
	switch what {
	case PinDisk:
		n.DataDisks = []*tpu.AttachedDisk{{SourceDisk: "projects/" + Project + "/zones/" + zone + "/disks/" + short(n.Name) + "-data", Mode: "READ_WRITE"}}
	case PinReserved:
		n.SchedulingConfig = &tpu.SchedulingConfig{Reserved: true}
	}
}

// movable reports whether some node asks for zones:.
func (p Plan) movable() bool {
	for _, f := range p.Fallback {
		if strings.HasPrefix(f, policy.FallbackZones+":") {
			return true
		}
	}
	return false
}

// copiesOf is every name the node named home can have: home first, then
// the same id in the fleet's other zone.
func copiesOf(home string) []string {
	out := []string{home}
	for _, z := range []string{ZoneA, ZoneB} {
		if c := policy.NodeInZone(home, z); c != home {
			out = append(out, c)
		}
	}
	return out
}

// makers is who made each node last, by the first audit entry of its last
// create ("" for a node of the starting fleet never created again): a node
// a person made is theirs, whatever labels they copied.
func (w *world) makers() map[string]string {
	madeBy := map[string]string{}
	for _, e := range w.fake.AuditLog() {
		if e.First && strings.HasSuffix(e.Method, ".CreateNode") {
			madeBy[e.Resource] = e.Principal
		}
	}
	return madeBy
}

// notPeoples are the copies of home in nodes that no person made (ours, or
// the starting fleet's) and that are READY (ready) or present at all, not
// DELETING.
func notPeoples(home string, nodes map[string]*tpu.Node, madeBy map[string]string, ready bool) []string {
	var out []string
	for _, c := range copiesOf(home) {
		n := nodes[c]
		if n == nil || n.State == "DELETING" || (ready && n.State != "READY") {
			continue
		}
		if by := madeBy[c]; by != "" && by != Us {
			continue
		}
		out = append(out, c)
	}
	return out
}

// stepZones checks, at every step of a run where some node asks for
// zones:, that no node is READY in two zones at once, unless a person made
// one of them.
func (w *world) stepZones(now time.Time) {
	if !w.plan.movable() {
		return
	}
	if w.cap.seen == nil {
		w.cap.seen = map[string]bool{}
	}
	nodes := map[string]*tpu.Node{}
	for _, n := range w.fake.Fleet().Nodes {
		nodes[n.Name] = n
	}
	var madeBy map[string]string
	for _, home := range NodeNames {
		present := 0
		for _, c := range copiesOf(home) {
			if n := nodes[c]; n != nil && n.State == "READY" {
				present++
			}
		}
		if present < 2 {
			continue
		}
		if madeBy == nil {
			madeBy = w.makers()
		}
		if ours := notPeoples(home, nodes, madeBy, true); len(ours) > 1 {
			w.capViolation("zones:"+home, "%s READY in two zones at once (%s), neither made by a person, at +%v", short(home), zonesOf(ours), now.Sub(t0))
		}
	}
}

// zonesOf is the zones of nodes, comma-separated.
func zonesOf(nodes []string) string {
	zs := make([]string, len(nodes))
	for i, n := range nodes {
		_, zs[i] = policy.NodeProjectZone(n)
	}
	return strings.Join(zs, ",")
}

// checkZones is the zones: invariant at quiescence: a node exists in one
// zone, home or where its recovery moved it; a copy left in another zone is
// a double create unless a person made it.
func (w *world) checkZones(nodes map[string]*tpu.Node, madeBy map[string]string, recs []remediate.Record) {
	moved := map[string]bool{}
	for _, r := range recs {
		if r.ZoneMovedTo != "" {
			moved[r.Node] = true
		}
		if r.Refusal != nil && strings.HasPrefix(r.Refusal.Fallback, "zones: refused") {
			w.res.ZoneRefused++
		}
	}
	w.res.Moved = len(moved)
	for _, home := range NodeNames {
		if ours := notPeoples(home, nodes, madeBy, false); len(ours) > 1 {
			states := make([]string, len(ours))
			for i, c := range ours {
				states[i] = nodes[c].State
			}
			w.res.Violations = append(w.res.Violations, fmt.Sprintf("%s left in %d zones at the end (%s: %s), none of them made by a person",
				short(home), len(ours), zonesOf(ours), strings.Join(states, ",")))
		}
	}
}
