package remediate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

func sweptNode(id, state, health string) *tpu.Node {
	n := fullNode(state)
	n.Name = fmt.Sprintf("projects/%s/locations/%s/nodes/%s", project, zone, id)
	n.Health = health
	n.HealthDescription = ""
	return n
}

func TestSweepPagesThroughEveryOptedInNode(t *testing.T) {
	unlabelled := sweptNode("other", "TERMINATED", "")
	unlabelled.Labels = nil
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{
		sweptNode("a", "READY", "HEALTHY"),
		sweptNode("b", "TERMINATED", ""),
		unlabelled,
		sweptNode("c", "READY", "HEALTHY"),
		sweptNode("d", "PREEMPTED", ""),
	}}, tpufake.WithPageSize(2))
	res, err := e.h.Sweep(context.Background(), remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone}})
	if err != nil || !res.Complete {
		t.Fatalf("Sweep = %+v, %v; want complete", res, err)
	}
	if res.Nodes != 4 {
		t.Errorf("nodes looked at = %d, want 4 opted-in", res.Nodes)
	}
	if got := e.fake.Count("nodes.list", ""); got != 3 {
		t.Errorf("list calls = %d, want 3 pages", got)
	}
	records := len(res.Records)
	e.settle(t)
	var recreated []string
	for _, n := range e.fake.Fleet().Nodes {
		if n.Labels[remediate.GenerationLabel] == "1" && n.State == "READY" {
			recreated = append(recreated, n.Name[strings.LastIndex(n.Name, "/")+1:])
		}
	}
	if fmt.Sprint(recreated) != "[b d]" {
		t.Errorf("recreated = %v, want [b d] (healthy and unlabelled nodes untouched); records %+v", recreated, res.Records)
	}
	if got := e.fake.Count("nodes.delete", ""); got != 2 {
		t.Errorf("deletes = %d, want 2", got)
	}
	// Healthy nodes are looked at but not recorded.
	if records != 2 {
		t.Errorf("records = %d, want 2", records)
	}
}

func TestSweepStopsAtTheBudgetAndResumes(t *testing.T) {
	var nodes []*tpu.Node
	for i := range 6 {
		nodes = append(nodes, sweptNode(fmt.Sprintf("n%d", i), "READY", "TIMEOUT"))
	}
	e := newEnv(t, tpufake.Fleet{Nodes: nodes}, tpufake.WithPageSize(2))
	e.clock.tick = time.Second // every reading of the clock takes a second
	opts := remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone}, Budget: 12 * time.Second}
	ctx := context.Background()
	seen := map[string]int{}
	var sweeps int
	for sweeps = 1; sweeps < 10; sweeps++ {
		res, err := e.h.Sweep(ctx, opts)
		if err != nil {
			t.Fatalf("Sweep: %v", err)
		}
		for _, r := range res.Records {
			seen[r.Node]++
		}
		if res.Complete {
			break
		}
		if c, _ := e.store.SweepCursor(ctx); c == "" {
			t.Fatalf("incomplete sweep saved no cursor")
		}
	}
	if sweeps < 2 {
		t.Errorf("sweeps = %d, want the budget to cut the first one short", sweeps)
	}
	if len(seen) != 6 {
		t.Errorf("nodes deferred = %d (%v), want all 6 across the resumed sweeps", len(seen), seen)
	}
	if c, _ := e.store.SweepCursor(ctx); c != "" {
		t.Errorf("cursor after a complete sweep = %q, want empty", c)
	}
}

func TestSweepRecordsAMaintenanceEventInHealthDescriptionOnce(t *testing.T) {
	n := sweptNode("v3-8-exp", "READY", "HEALTHY")
	n.HealthDescription = "The TPU had a maintenance event at 2026-11-21T10:11:00Z"
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{n}})
	opts := remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone}}
	ctx := context.Background()
	res, err := e.h.Sweep(ctx, opts)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if len(res.Records) != 1 {
		t.Fatalf("records = %+v, want one", res.Records)
	}
	r := res.Records[0]
	wantID := "maintenance:" + n.Name + ":2026-11-21T10:11:00Z"
	if r.InsertID != wantID || r.Action != remediate.ActionRecord || !r.EventTime.Equal(time.Date(2026, 11, 21, 10, 11, 0, 0, time.UTC)) {
		t.Errorf("record = %s %s at %s, want record %s", r.InsertID, r.Action, r.EventTime, wantID)
	}
	e.clock.Advance(5 * time.Minute)
	res, _ = e.h.Sweep(ctx, opts)
	if len(res.Records) != 0 {
		t.Errorf("second sweep records = %+v, want none: the event was recorded already", res.Records)
	}
	n.HealthDescription = "The TPU had a maintenance event at 2026-11-22T01:00:00Z"
	e.fake.SetNode(n)
	res, _ = e.h.Sweep(ctx, opts)
	if len(res.Records) != 1 {
		t.Errorf("records after a new maintenance event = %d, want 1", len(res.Records))
	}
	wantCounts(t, e.fake, map[string]int{"nodes.delete": 0, "nodes.create": 0})
}

func TestSweepActsOnADeferralAfterTheGraceNotBefore(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{sweptNode(nodeID, "READY", "UNHEALTHY_TENSORFLOW")}})
	ctx := context.Background()
	rec, err := e.handleSettled(t, terminate("e1"))
	if err != nil || rec.Action != remediate.ActionDefer {
		t.Fatalf("Handle = %s %q, %v; want defer", rec.Action, rec.Reason, err)
	}
	opts := remediate.SweepOptions{Projects: []string{project}} // no zones: deferrals only
	e.clock.Advance(9 * time.Minute)
	res, err := e.h.Sweep(ctx, opts)
	if err != nil || len(res.Records) != 0 {
		t.Fatalf("Sweep before the grace = %+v, %v; want nothing due", res.Records, err)
	}
	if e.fake.Count("nodes.delete", "") != 0 {
		t.Fatal("deleted before the grace")
	}
	e.clock.Advance(2 * time.Minute)
	res, err = e.h.Sweep(ctx, opts)
	e.settle(t)
	if err != nil || len(res.Records) != 1 || res.Records[0].Action != remediate.ActionRecreate || res.Records[0].Phase != remediate.PhaseDeleting {
		t.Fatalf("Sweep after the grace = %+v, %v; want one recreate", res.Records, err)
	}
	if !strings.Contains(res.Records[0].Reason, "11m0s >= grace 10m0s") {
		t.Errorf("reason = %q, want the grace named", res.Records[0].Reason)
	}
	wantCounts(t, e.fake, map[string]int{"nodes.delete": 1, "nodes.create": 1})
	if due, _ := e.store.DueDeferrals(ctx, e.clock.Now().Add(time.Hour)); len(due) != 0 {
		t.Errorf("deferrals after the recreate = %+v, want none", due)
	}
}

func TestSweepStopsWhenItsContextIsDone(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{sweptNode("a", "TERMINATED", "")}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the function's deadline passed
	res, _ := e.h.Sweep(ctx, remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone}})
	if res.Complete || res.Nodes != 0 {
		t.Errorf("Sweep = %+v; want it stopped before any node", res)
	}
	if got := e.fake.Count("nodes.list", "") + e.fake.Count("nodes.delete", ""); got != 0 {
		t.Errorf("TPU calls after the context ended = %d, want 0", got)
	}
}
