package policy

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"
)

// TestZoneCycleIsSeededPerNode: the zones a zones: fallback tries are the
// home zone, then the others in an order drawn from the seed and the
// node's name: the same for a seed, different across the nodes of a wave.
func TestZoneCycleIsSeededPerNode(t *testing.T) {
	f := Fallback{Mode: FallbackZones, Zones: []string{"us-central2-a", "us-central2-b", "us-central2-c"}}
	const home = "projects/p/locations/us-central2-b/nodes/wave-00"
	if got, want := strings.Join(zoneCycle(23, home, f), " "), "us-central2-b us-central2-a us-central2-c"; got != want {
		t.Errorf("zoneCycle(23, wave-00) = %s, want %s", got, want)
	}
	if got, want := strings.Join(zoneCycle(23, home, f), " "), strings.Join(zoneCycle(23, home, f), " "); got != want {
		t.Errorf("zoneCycle not deterministic: %s, then %s", got, want)
	}
	firsts := map[string]int{}
	for i := range 32 {
		c := zoneCycle(23, fmt.Sprintf("projects/p/locations/us-central2-b/nodes/wave-%02d", i), f)
		if len(c) != 3 || c[0] != "us-central2-b" {
			t.Fatalf("cycle %v, want the home zone first and each other zone once", c)
		}
		firsts[c[1]]++
	}
	// 32 nodes, two orders: a wave moves to both zones, not as one.
	if firsts["us-central2-a"] < 8 || firsts["us-central2-c"] < 8 {
		t.Errorf("first zones after home over 32 nodes: %v, want both at least 8", firsts)
	}
	t.Logf("first zones after home over 32 nodes (seed 23): %v", firsts)
}

// TestAdvanceZoneMove: the zones: fallback's steps in the state machine,
// row by row. No create goes to another zone before the zone the refused
// create went to reads NOT FOUND; a create without a verdict is polled,
// never left behind.
func TestAdvanceZoneMove(t *testing.T) {
	now := time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)
	cfg := DefaultConfig()
	cfg.Zones = []string{"us-central2-a", "us-central2-b", "us-central2-c"}
	cfg.StockoutSeed = 23
	const home = "projects/p/locations/us-central2-b/nodes/wave-00"
	const c = "projects/p/locations/us-central2-c/nodes/wave-00"
	const a = "projects/p/locations/us-central2-a/nodes/wave-00"
	const op = "projects/p/locations/us-central2-b/operations/op-1"
	spec := &tpu.Node{AcceleratorType: "v4-8", RuntimeVersion: "r", Labels: map[string]string{"tpu-autoheal": "enabled"},
		Metadata: map[string]string{StockoutMetadataKey: "zones:us-central2-a,us-central2-c"}}
	rec := func(p Phase, stockouts int, mod ...func(*Recovery)) Recovery {
		r := Recovery{Node: home, Action: ActionRecreate, Phase: p, Generation: 1, StartedAt: now.Add(-time.Hour),
			Spec: spec, NodeID: 7, DeleteSent: true, DeleteAnswered: true, Stockouts: stockouts}
		for _, m := range mod {
			m(&r)
		}
		return r
	}
	at := func(node string, since int) func(*Recovery) {
		return func(r *Recovery) { r.ZoneMoveNode, r.ZoneMoveStockouts = node, since }
	}
	ours := func(name, state string) *tpu.Node {
		return &tpu.Node{Name: name, Id: 9, State: state, Labels: map[string]string{"tpu-autoheal": "enabled", GenerationLabel: "1"}}
	}
	stockout := &Error{Kind: KindStockout, Err: fmt.Errorf(`create operation %s: There is no more capacity in the zone "us-central2-b"`, op)}
	for _, tt := range []struct {
		name       string
		rec        Recovery
		obs        Observation
		res        StepResult
		wantEffect EffectKind
		wantTarget string
		wantPhase  Phase
		wantMoved  string // Recovery.ZoneMoveNode after
		wantSince  int    // Recovery.ZoneMoveStockouts after
	}{
		{"fewer than K stockouts: created at home", rec(PhaseDeleted, 2), Observation{}, StepResult{},
			EffectCreate, home, PhaseCreating, "", 0},
		{"K stockouts: the zone the refused create went to is read first", rec(PhaseDeleted, 3), Observation{}, StepResult{},
			EffectGet, home, PhaseDeleted, "", 0},
		{"read NOT FOUND there: created in the next zone of its order", rec(PhaseDeleted, 3), Observation{}, StepResult{Effect: EffectGet},
			EffectCreate, a, PhaseCreating, a, 3},
		{"our node there after all: never a second one elsewhere", rec(PhaseDeleted, 3), Observation{Node: ours(home, "CREATING")}, StepResult{Effect: EffectGet},
			EffectNone, "", PhaseCreating, "", 0},
		{"someone's node there: closed, nothing created", rec(PhaseDeleted, 3),
			Observation{Node: &tpu.Node{Name: home, Id: 11, State: "READY", Health: "HEALTHY"}}, StepResult{Effect: EffectGet},
			EffectNone, "", PhaseClosed, "", 0},
		{"the read failed: no move, backs off", rec(PhaseDeleted, 3), Observation{}, StepResult{Effect: EffectGet, Err: &Error{Kind: KindTransient, Err: fmt.Errorf("unavailable")}},
			EffectNone, "", PhaseDeleted, "", 0},
		{"a create without a verdict is polled, not moved away from", rec(PhaseCreating, 3, func(r *Recovery) { r.CreateOp = op }), Observation{}, StepResult{},
			EffectPoll, op, PhaseCreating, "", 0},
		{"moved: K stockouts in the second zone: the third is next", rec(PhaseDeleted, 6, at(a, 3)), Observation{}, StepResult{Effect: EffectGet},
			EffectCreate, c, PhaseCreating, c, 6},
		{"after the last zone: home again", rec(PhaseDeleted, 9, at(c, 6)), Observation{}, StepResult{Effect: EffectGet},
			EffectCreate, home, PhaseCreating, "", 9},
		{"moved: the created node is read where it went", rec(PhaseCreated, 3, at(c, 3)), Observation{}, StepResult{},
			EffectGet, c, PhaseCreated, c, 3},
		{"moved: READY there is recovered", rec(PhaseCreated, 3, at(c, 3)), Observation{Node: func() *tpu.Node { n := ours(c, "READY"); n.Health = "HEALTHY"; return n }()}, StepResult{Effect: EffectGet},
			EffectNone, "", PhaseRecovered, c, 3},
		{"a reset never moves", rec(PhaseDeleted, 3, func(r *Recovery) { r.Action = ActionReset; r.QueuedResource = "qr" }), Observation{}, StepResult{Effect: EffectGet},
			EffectGetQR, "qr", PhaseResetting, "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, eff := Advance(tt.rec, tt.obs, tt.res, now, cfg)
			if eff.Kind != tt.wantEffect || eff.Target != tt.wantTarget || got.Phase != tt.wantPhase ||
				got.ZoneMoveNode != tt.wantMoved || got.ZoneMoveStockouts != tt.wantSince {
				t.Errorf("Advance = effect %q %q, phase %s, moved %q since %d; want %q %q, %s, %q since %d (last error %q)",
					eff.Kind, eff.Target, got.Phase, got.ZoneMoveNode, got.ZoneMoveStockouts,
					tt.wantEffect, tt.wantTarget, tt.wantPhase, tt.wantMoved, tt.wantSince, got.LastError)
			}
		})
	}

	// The stockout that makes K is looked at again at once (LookAgain,
	// 30 s: the move), the one before it after its back-off (the second:
	// drawn from [2 min, 4 min)).
	for _, tt := range []struct {
		stockouts int
		lo, hi    time.Duration
	}{{1, 2 * time.Minute, 4 * time.Minute}, {2, 30 * time.Second, 30*time.Second + 1}} {
		r := rec(PhaseCreating, tt.stockouts, func(r *Recovery) { r.CreateOp = op })
		got, _ := Advance(r, Observation{}, StepResult{Effect: EffectPoll, Done: true, Err: stockout}, now, cfg)
		if d := got.NextLookAt.Sub(now); got.Stockouts != tt.stockouts+1 || d < tt.lo || d >= tt.hi || got.Phase != PhaseDeleted {
			t.Errorf("stockout %d: next look after %s (stockouts %d, phase %s), want in [%s, %s), deleted", tt.stockouts+1, d, got.Stockouts, got.Phase, tt.lo, tt.hi)
		}
	}
	if got := slices.Index(zoneCycle(23, home, Fallback{Mode: FallbackZones, Zones: []string{"us-central2-a", "us-central2-c"}}), "us-central2-a"); got != 1 {
		t.Errorf("us-central2-a at %d of wave-00's cycle, want 1 (the rows above assume it)", got)
	}
}
