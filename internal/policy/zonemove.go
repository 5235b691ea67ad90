package policy

import (
	"fmt"
	"strings"
	"time"

	tpu "google.golang.org/api/tpu/v2"
)

// This file carries out the zones: fallback of metadata autoheal-stockout:
// after StockoutZoneAfter stockouts in the zone a recreate's create was
// sent to, the next create goes to the next zone of a seeded, per-node
// order of the listed zones (the home zone first, then the others; after
// the last, the home zone again). The recovery stays under the home
// zone's key (Recovery.Node) with a pointer to where the node went
// (Recovery.ZoneMoveNode); every read and create of the recovery is of
// that node from then on (zoneTarget).
//
// A move starts only once the refused create has a verdict: a stockout is
// the verdict of the create's operation, or the create call's own refusal
// (an outcome that is unknown is polled first, in creating). Before the
// create elsewhere, the zone the refused create went to is read once more
// and must show no node of that name: a node there (ours after all, or a
// person's) is decided about as creating decides, never joined by a second
// node of the same name in another zone, so two nodes of one name never
// write one checkpoint directory.

// zoneTarget is the node rec reads and creates now: where a zones:
// fallback moved it, else its home (Node).
func zoneTarget(rec Recovery) string {
	if rec.ZoneMoveNode != "" {
		return rec.ZoneMoveNode
	}
	return rec.Node
}

// zoneCycle is the order in which a zones: fallback tries zones for the
// node named home (its full name): the home zone, then the listed zones
// other than it in a random order drawn from seed and the node's name
// (deterministic for replay, different across nodes, so a wave refused in
// one zone does not move as one to the same next zone).
func zoneCycle(seed uint64, home string, f Fallback) []string {
	homeZone := zoneOf(home)
	var others []string
	for _, z := range f.Zones {
		if z != homeZone {
			others = append(others, z)
		}
	}
	// Fisher–Yates with the stockout jitter's draws (n < 0: never a
	// back-off's draw).
	for i := len(others) - 1; i > 0; i-- {
		j := int(jitter(seed, home, -1-i) * float64(i+1))
		others[i], others[j] = others[j], others[i]
	}
	return append([]string{homeZone}, others...)
}

// zoneStockouts is how many creates of rec were refused for capacity in
// the zone it creates in now.
func zoneStockouts(rec Recovery) int {
	return rec.Stockouts - rec.ZoneMoveStockouts
}

// zoneMoveNext says where rec's next create goes when its zones: fallback
// moves it now: the full name of the node in the next zone ("" when no move
// is due: no accepted zones: fallback, fewer than StockoutZoneAfter
// stockouts in the zone, or no other zone to go to).
func zoneMoveNext(rec Recovery, cfg Config) string {
	if rec.Action == ActionReset || zoneStockouts(rec) < stockoutZoneAfter(cfg) {
		return ""
	}
	f, why := fallbackOf(rec, cfg)
	if why != "" || f.Mode != FallbackZones {
		return ""
	}
	cycle := zoneCycle(cfg.StockoutSeed, rec.Node, f)
	if len(cycle) < 2 {
		return ""
	}
	at := zoneOf(zoneTarget(rec))
	next := cycle[0]
	for i, z := range cycle {
		if z == at {
			next = cycle[(i+1)%len(cycle)]
		}
	}
	return NodeInZone(rec.Node, next)
}

// NodeInZone is the full name of node (a full name) in zone.
func NodeInZone(node, zone string) string {
	parent, _, _, id, err := ParseNodeName(node)
	if err != nil {
		return node
	}
	return parent[:strings.LastIndexByte(parent, '/')+1] + zone + "/nodes/" + id
}

// zoneMoveSoon: a stockout that makes the zones: fallback move the node is
// followed at once (LookAgain), not after its back-off: the back-off waits
// for capacity in the zone the node is leaving. The draws of the stockouts
// before it already spread a wave.
func zoneMoveSoon(rec Recovery, now time.Time, cfg Config) Recovery {
	if rec.Unfinished() && zoneMoveNext(rec, cfg) != "" {
		rec.NextLookAt = now.Add(LookAgainFor(cfg))
	}
	return rec
}

// zoneMove is the deleted phase's step before its create (hold false: go
// on and create at zoneTarget of next). When a move is due it reads the
// node where the refused create went; NOT FOUND moves the recovery to the
// next zone; a node there is decided about as creating decides (hold true).
func zoneMove(rec Recovery, obs Observation, res StepResult, now time.Time, cfg Config) (next Recovery, eff Effect, hold bool) {
	to := zoneMoveNext(rec, cfg)
	switch {
	case to == "":
		return rec, Effect{}, false
	case res.Effect != EffectGet:
		return rec, Effect{Kind: EffectGet, Target: zoneTarget(rec)}, true
	case res.Err != nil:
		next, eff = fail(rec, "get", res.Err, now, cfg)
		return next, eff, true
	case obs.Node != nil:
		rec.Phase = PhaseCreating
		next, eff = advanceCreating(rec, obs, res, now, cfg)
		return next, eff, true
	}
	if to == rec.Node {
		to = "" // back home
	}
	rec.ZoneMoveNode, rec.ZoneMoveStockouts = to, rec.Stockouts
	return rec, Effect{}, false
}

// describeZoneMove is what a stockout record says of an accepted zones:
// fallback of rec (its stockout just counted).
func describeZoneMove(rec Recovery, f Fallback, cfg Config) string {
	at := zoneOf(zoneTarget(rec))
	head := "zones:" + strings.Join(f.Zones, ",")
	if to := zoneMoveNext(rec, cfg); to != "" {
		return fmt.Sprintf("%s: %d stockouts in %s: creating next in %s", head, zoneStockouts(rec), at, zoneOf(to))
	}
	if len(zoneCycle(cfg.StockoutSeed, rec.Node, f)) < 2 {
		return fmt.Sprintf("%s: no zone but %s listed: waiting in %s", head, at, at)
	}
	return fmt.Sprintf("%s: accepted: another zone after %d stockouts in %s (%d so far)", head, stockoutZoneAfter(cfg), at, zoneStockouts(rec))
}

// ZoneMoveLabel is the label a node created in another zone by a zones:
// fallback carries: the zone of the recovery that moved it (the home zone,
// whose ledger key holds that recovery). A decision about the moved node
// reads that recovery first (the handler's zoneMoveGuard); a node created where its
// recovery is keyed carries none.
const ZoneMoveLabel = "tpu-autoheal-moved-from"

// zoneMoveSpec labels spec (createSpec's copy) with the zone it moves from,
// or clears an earlier move's label when rec creates it where it is keyed.
func zoneMoveSpec(rec Recovery, spec *tpu.Node) *tpu.Node {
	if spec == nil || spec.Labels == nil {
		return spec
	}
	delete(spec.Labels, ZoneMoveLabel)
	if rec.ZoneMoveNode != "" {
		spec.Labels[ZoneMoveLabel] = zoneOf(rec.Node)
	}
	return spec
}

// zoneOf is a node's zone (from its full name).
func zoneOf(node string) string {
	_, zone := NodeProjectZone(node)
	return zone
}
