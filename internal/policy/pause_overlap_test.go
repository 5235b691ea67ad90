package policy

import (
	"testing"
	"time"
)

// Overlapping pauses count each paused moment once, whichever is cleared
// first. Hand-computed: the recovery started at t0; a zone pause from
// t0+10m, a node pause from t0+20m; cleared at t0+40m and t0+60m. The
// recovery was paused from t0+10m to t0+60m: 50 minutes.
func TestClearedPauseTimeCountsOverlapsOnce(t *testing.T) {
	rec := Recovery{Node: nodeName, StartedAt: t0}
	zone := Pause{Scope: PauseZone, Project: "acme-ml", Zone: "us-central2-b", Since: t0.Add(10 * time.Minute)}
	node := Pause{Scope: PauseNode, Node: nodeName, Since: t0.Add(20 * time.Minute)}
	other := Pause{Scope: PauseNode, Node: nodeName + "-other", Since: t0}
	if !zone.Covers(nodeName) || !node.Covers(nodeName) || other.Covers(nodeName) {
		t.Fatal("test pauses do not cover what the test says")
	}
	for _, tc := range []struct {
		name        string
		first, then Pause
		want1       time.Duration // added when first is cleared at t0+40m, then standing
	}{
		{"zone cleared first", zone, node, 10 * time.Minute},                     // t0+10m .. t0+20m (node's span counts later)
		{"node cleared first", node, zone, 0},                                    // all of it inside the zone pause
		{"another node's pause does not overlap", zone, other, 30 * time.Minute}, // t0+10m .. t0+40m
	} {
		t.Run(tc.name, func(t *testing.T) {
			got1 := ClearedPauseTime(tc.first, []Pause{tc.then}, rec, t0.Add(40*time.Minute))
			if got1 != tc.want1 {
				t.Errorf("first clear adds %v, want %v", got1, tc.want1)
			}
		})
	}
	total := ClearedPauseTime(zone, []Pause{node}, rec, t0.Add(40*time.Minute)) + ClearedPauseTime(node, nil, rec, t0.Add(60*time.Minute))
	if want := 50 * time.Minute; total != want {
		t.Errorf("zone then node: paused %v, want %v", total, want)
	}
	total = ClearedPauseTime(node, []Pause{zone}, rec, t0.Add(40*time.Minute)) + ClearedPauseTime(zone, nil, rec, t0.Add(60*time.Minute))
	if want := 50 * time.Minute; total != want {
		t.Errorf("node then zone: paused %v, want %v", total, want)
	}
}
