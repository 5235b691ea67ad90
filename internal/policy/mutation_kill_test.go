package policy_test

// Tests written for the survivors of the mutation check (docs/testing.md,
// "Mutation check"; bench/mutate): each fails with its mutation applied and
// passes without it.

import (
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/policy"
)

var mkT0 = time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)

func mkNode(state, health string) *tpu.Node {
	return &tpu.Node{
		Name:   "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128",
		Id:     42,
		State:  state,
		Health: health,
		Labels: map[string]string{"tpu-autoheal": "enabled"},
	}
}

func mkSweep() events.Event {
	return events.Event{Node: events.NodeRef{Project: "acme-ml", Zone: "us-central2-b", Node: "llm-v4-128"}}
}

// An unhealthy node looked at again before its grace is up keeps the time
// its condition started: each look must not restart the grace, or a node
// looked at more often than the grace is deferred for ever (mutation P06).
func TestDeferralKeepsWhenTheConditionStarted(t *testing.T) {
	cfg := policy.DefaultConfig() // UnhealthyGrace 10 min
	since := mkT0
	hist := policy.History{Deferral: &policy.Deferral{
		Node: "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128", Project: "acme-ml",
		Since: since, Due: since.Add(cfg.UnhealthyGrace), Reason: "READY but TIMEOUT",
	}}
	obs := policy.Observed{Node: mkNode("READY", "TIMEOUT")}

	look := since.Add(4 * time.Minute)
	d := policy.Decide(mkSweep(), obs, hist, look, cfg)
	if d.Action != policy.ActionDefer {
		t.Fatalf("look at +4 min = %s %q, want defer (grace 10 min)", d.Action, d.Reason)
	}
	if d.Deferral == nil || !d.Deferral.Since.Equal(since) {
		t.Fatalf("deferral written at +4 min = %+v, want Since %s (when the condition started)", d.Deferral, since)
	}

	// The deferral as the ledger now holds it, looked at past the grace.
	hist.Deferral = d.Deferral
	d = policy.Decide(mkSweep(), obs, hist, since.Add(cfg.UnhealthyGrace+time.Minute), cfg)
	if d.Action != policy.ActionRecreate {
		t.Errorf("look at +11 min after a look at +4 min = %s %q, want recreate (unhealthy past the grace)", d.Action, d.Reason)
	}
}
