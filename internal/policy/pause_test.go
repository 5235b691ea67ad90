package policy

import (
	"strings"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

func TestPausedNodeIsNeverMutated(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const name = "projects/proj-a/locations/us-central2-b/nodes/llm"
	node := func(state, health string) *tpu.Node {
		return &tpu.Node{Name: name, State: state, Health: health, Labels: map[string]string{"tpu-autoheal": "enabled"}}
	}
	ev := events.Event{Method: "tpu.nodes.terminate", InsertID: "i1", Node: events.NodeRef{Project: "proj-a", Zone: "us-central2-b", Node: "llm"}, Cause: events.CauseMaintenance}
	pause := &Pause{Scope: PauseProject, Project: "proj-a", Reason: "INC-42 region incident", By: "alice@example.com", Since: now.Add(-time.Hour)}
	for _, tc := range []struct {
		name       string
		obs        Observed
		wantAction Action // without the pause
	}{
		{"terminated node that would be recreated is skipped", Observed{Node: node("TERMINATED", "")}, ActionRecreate},
		{"healthy node is still recorded", Observed{Node: node("READY", "HEALTHY")}, ActionRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if got := Decide(ev, tc.obs, History{}, now, cfg); got.Action != tc.wantAction {
				t.Fatalf("unpaused Decide = %s (%s); want %s", got.Action, got.Reason, tc.wantAction)
			}
			got := Decide(ev, tc.obs, History{Pause: pause}, now, cfg)
			if tc.wantAction == ActionRecord {
				if got.Action != ActionRecord {
					t.Errorf("paused Decide = %s (%s); want record (nothing mutated)", got.Action, got.Reason)
				}
				return
			}
			if got.Action != ActionSkip || !strings.HasPrefix(got.Reason, "paused by alice@example.com: INC-42 region incident") {
				t.Errorf("paused Decide = %s %q; want skip with a reason starting \"paused by alice@example.com: INC-42 region incident\"", got.Action, got.Reason)
			}
			if got.Final || got.Due.IsZero() {
				t.Errorf("paused skip Final %t Due %v; want a later look (not final, Due set)", got.Final, got.Due)
			}
		})
	}
	for _, a := range []Action{ActionRecreate, ActionReset, ActionPrepare, ActionMaintain} {
		if got := pausedDecision(Decision{Action: a, Reason: "x"}, *pause, now); got.Action != ActionSkip {
			t.Errorf("pausedDecision(%s) = %s; want skip", a, got.Action)
		}
	}
}

func TestPauseCovers(t *testing.T) {
	const n = "projects/p/locations/z1/nodes/a"
	for _, tc := range []struct {
		p    Pause
		want bool
	}{
		{Pause{Scope: PauseProject, Project: "p"}, true},
		{Pause{Scope: PauseProject, Project: "q"}, false},
		{Pause{Scope: PauseZone, Zone: "z1"}, true},
		{Pause{Scope: PauseZone, Zone: "z1", Project: "q"}, false},
		{Pause{Scope: PauseZone, Zone: "z2"}, false},
		{Pause{Scope: PauseNode, Node: n}, true},
		{Pause{Scope: PauseNode, Node: n + "b"}, false},
	} {
		if got := tc.p.Covers(n); got != tc.want {
			t.Errorf("%+v.Covers(%s) = %t; want %t", tc.p, n, got, tc.want)
		}
	}
}
