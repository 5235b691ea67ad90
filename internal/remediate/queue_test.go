package remediate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// queueEnv is one spot node asking autoheal-stockout=value, terminated,
// in a zone that refuses creates for capacity until outageEnd (zero: for
// ever), on the virtual clock.
func queueEnv(t *testing.T, value string, outageEnd time.Time) (*env, string) {
	t.Helper()
	f, names := waveFleet(1)
	f.Nodes[0].Metadata[remediate.StockoutMetadataKey] = value
	f.Nodes[0].SchedulingConfig = &tpu.SchedulingConfig{Spot: true}
	e := newClockedEnv(t, f, tpufake.WithRequestLog(10000))
	e.fake.Fail(tpufake.FailRule{RPC: "operation:nodes.create", Zone: zone, Status: "RESOURCE_EXHAUSTED", Until: outageEnd})
	handleAll(t, e, names)
	return e, f.Nodes[0].Name
}

// queueRequests are the queued resource creates and deletes the fake saw:
// the created queued resources' names and bodies, the deleted names.
func queueRequests(t *testing.T, e *env) (created []string, bodies []*tpu.QueuedResource, deleted []string) {
	t.Helper()
	for _, r := range e.fake.Requests() {
		switch r.RPC {
		case "queuedResources.create":
			var q tpu.QueuedResource
			if err := json.Unmarshal(r.Body, &q); err != nil {
				t.Fatalf("queued resource create body: %v", err)
			}
			created, bodies = append(created, r.Name), append(bodies, &q)
		case "queuedResources.delete":
			deleted = append(deleted, r.Name)
		}
	}
	return created, bodies, deleted
}

func drainAll(t *testing.T, e *env, rounds int) {
	t.Helper()
	if left, err := e.h.Drain(context.Background(), e.clock.Set, rounds); err != nil || left != 0 {
		t.Fatalf("Drain = %d unfinished, %v; want all finished", left, err)
	}
}

// TestQueueCreatesOneQueuedResourceAndRecoversWhenActive: a spot node
// asking autoheal-stockout=queue:1h whose recreate is refused for capacity
// (ten minutes of outage) becomes exactly one queued resource, in the spot
// tier, valid for 1h, with the saved spec under the node's own name (its
// metadata, the startup script, our generation label); it waits
// WAITING_FOR_RESOURCES, turns ACTIVE when the capacity returns, and the
// recovery ends recovered with the node READY and ours. The stockout's
// record says it was queued, where and until when.
func TestQueueCreatesOneQueuedResourceAndRecoversWhenActive(t *testing.T) {
	outage := start.Add(10 * time.Minute)
	e, node := queueEnv(t, "queue:1h", outage)
	drainAll(t, e, 500)

	created, bodies, deleted := queueRequests(t, e)
	if len(created) != 1 || len(deleted) != 0 {
		t.Fatalf("queued resources created %v, deleted %v; want exactly one created, none deleted", created, deleted)
	}
	wantQR := "projects/" + project + "/locations/" + zone + "/queuedResources/wave-00-autoheal-1-0"
	if created[0] != wantQR {
		t.Errorf("queued resource %s, want %s", created[0], wantQR)
	}
	q := bodies[0]
	if q.Spot == nil || q.Guaranteed != nil {
		t.Errorf("tier spot %v guaranteed %v, want spot for a spot node", q.Spot, q.Guaranteed)
	}
	if q.QueueingPolicy == nil || q.QueueingPolicy.ValidUntilDuration != "3600s" {
		t.Errorf("queueing policy %+v, want validUntilDuration 3600s", q.QueueingPolicy)
	}
	if len(q.Tpu.NodeSpec) != 1 {
		t.Fatalf("%d node specs, want 1", len(q.Tpu.NodeSpec))
	}
	ns := q.Tpu.NodeSpec[0]
	saved := fullNode("TERMINATED")
	if ns.Parent != "projects/"+project+"/locations/"+zone || ns.NodeId != "wave-00" {
		t.Errorf("node spec parent %s id %s, want the node's own", ns.Parent, ns.NodeId)
	}
	if ns.Node.AcceleratorType != saved.AcceleratorType || ns.Node.RuntimeVersion != saved.RuntimeVersion ||
		ns.Node.Metadata["autoheal-train-cmd"] != saved.Metadata["autoheal-train-cmd"] || ns.Node.Metadata["startup-script"] != script ||
		ns.Node.Labels["team"] != "llm" || ns.Node.Labels[remediate.GenerationLabel] != "1" {
		t.Errorf("node spec %+v, want the saved spec with the startup script and generation label 1", ns.Node)
	}
	if e.fake.Count("nodes.create", "") != 1 {
		t.Errorf("%d node creates, want only the refused one", e.fake.Count("nodes.create", ""))
	}

	f := e.fake.Fleet()
	if len(f.Nodes) != 1 || f.Nodes[0].State != "READY" || f.Nodes[0].QueuedResource != wantQR || f.Nodes[0].Labels[remediate.GenerationLabel] != "1" {
		t.Fatalf("fleet %+v, want the node READY, owned by %s, generation 1", f.Nodes[0], wantQR)
	}
	var refusal *remediate.Refusal
	var recovered bool
	for _, r := range e.records.list() {
		if r.Refusal != nil && refusal == nil {
			refusal = r.Refusal
		}
		if r.Node == node && r.Outcome == remediate.OutcomeRecovered {
			recovered = true
			if r.Time.Before(outage) {
				t.Errorf("recovered at %s, before the capacity returned at %s", r.Time, outage)
			}
		}
	}
	if !recovered {
		t.Errorf("no recovered record")
	}
	var failed int
	for _, r := range e.records.list() {
		if r.Outcome == remediate.OutcomeFailed {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("%d records of a failed attempt, want 1 (the stockout; the queue's looks are no failures)", failed)
	}
	if refusal == nil {
		t.Fatal("no stockout record")
	}
	var queuedAt time.Time
	for _, r := range e.fake.Requests() {
		if r.RPC == "queuedResources.create" {
			queuedAt = r.Time
		}
	}
	want := fmt.Sprintf("queue:1h: queued as %s (spot) in %s, valid until %s", wantQR, zone, queuedAt.Add(time.Hour).Format(time.RFC3339))
	if refusal.Kind != "stockout" || refusal.Fallback != want {
		t.Errorf("refusal %s / fallback %q, want a stockout with fallback %q", refusal.Kind, refusal.Fallback, want)
	}
}

// TestQueueThatFailsIsRequeuedAndItsFailedQueuedResourceDeleted: the
// outage (45 minutes) outlasts the first queued resource's valid-until
// (queue:30m): it turns FAILED, is deleted (it holds quota), and a second
// queued resource is created, which turns ACTIVE when the capacity
// returns: recovered, with no queued resource of ours left FAILED.
func TestQueueThatFailsIsRequeuedAndItsFailedQueuedResourceDeleted(t *testing.T) {
	e, _ := queueEnv(t, "queue:30m", start.Add(45*time.Minute))
	drainAll(t, e, 500)
	created, _, deleted := queueRequests(t, e)
	base := "projects/" + project + "/locations/" + zone + "/queuedResources/wave-00-autoheal-1-"
	if len(created) != 2 || created[0] != base+"0" || created[1] != base+"1" {
		t.Fatalf("queued resources created %v, want %s0 then %s1", created, base, base)
	}
	if len(deleted) != 1 || deleted[0] != created[0] {
		t.Fatalf("queued resources deleted %v, want the failed first one %s", deleted, created[0])
	}
	f := e.fake.Fleet()
	if len(f.QueuedResources) != 1 || f.QueuedResources[0].Name != created[1] || f.QueuedResources[0].State.State != "ACTIVE" {
		t.Errorf("queued resources left %+v, want only %s ACTIVE", f.QueuedResources, created[1])
	}
	if f.Nodes[0].State != "READY" || f.Nodes[0].QueuedResource != created[1] {
		t.Errorf("node %s owned by %q, want READY owned by %s", f.Nodes[0].State, f.Nodes[0].QueuedResource, created[1])
	}
	var recovered int
	for _, r := range e.records.list() {
		if r.Outcome == remediate.OutcomeRecovered {
			recovered++
		}
	}
	if recovered != 1 {
		t.Errorf("%d recovered records, want 1", recovered)
	}
}

// TestQueueIsAbandonedAfterMaxRequeuesWithItsQueuedResourceDeleted: an
// outage that never ends makes every queued resource FAIL: the first and
// AUTOHEAL_MAX_REQUEUES (2) more are created, each deleted once FAILED,
// and then the recovery is abandoned with an ERROR record naming the
// requeues and carrying the spec; no queued resource of ours is left.
func TestQueueIsAbandonedAfterMaxRequeuesWithItsQueuedResourceDeleted(t *testing.T) {
	e, node := queueEnv(t, "queue:20m", time.Time{})
	drainAll(t, e, 1000)
	created, _, deleted := queueRequests(t, e)
	if len(created) != 3 || len(deleted) != 3 {
		t.Fatalf("queued resources created %v, deleted %v; want 3 of each (the first, 2 requeues)", created, deleted)
	}
	for i := range created {
		if deleted[i] != created[i] {
			t.Errorf("delete %d of %s, want of %s", i, deleted[i], created[i])
		}
	}
	if f := e.fake.Fleet(); len(f.QueuedResources) != 0 || len(f.Nodes) != 0 {
		t.Errorf("left %d queued resources and %d nodes, want none", len(f.QueuedResources), len(f.Nodes))
	}
	var abandoned []remediate.Record
	for _, r := range e.records.list() {
		if r.Node == node && r.Outcome == remediate.OutcomeAbandoned {
			abandoned = append(abandoned, r)
		}
	}
	if len(abandoned) != 1 {
		t.Fatalf("%d abandoned records, want 1", len(abandoned))
	}
	a := abandoned[0]
	if a.Err == "" || a.Spec == nil || !strings.Contains(a.Err, "after 2 requeues (AUTOHEAL_MAX_REQUEUES=2)") || !strings.Contains(a.Err, "FAILED") ||
		!strings.Contains(a.Err, "its queued resource deleted") {
		t.Errorf("abandoned record err %q, spec %v; want an ERROR naming the FAILED queued resource, the requeues and its delete, with the spec", a.Err, a.Spec != nil)
	}
}

// TestQueueRequeuesFollowMaxRequeues: AUTOHEAL_MAX_REQUEUES=0 abandons
// after the first queued resource FAILED (deleted).
func TestQueueRequeuesFollowMaxRequeues(t *testing.T) {
	f, names := waveFleet(1)
	f.Nodes[0].Metadata[remediate.StockoutMetadataKey] = "queue:20m"
	e := newClockedEnv(t, f, tpufake.WithRequestLog(10000))
	e.h.Config.MaxRequeues = 0
	e.fake.Fail(tpufake.FailRule{RPC: "operation:nodes.create", Zone: zone, Status: "RESOURCE_EXHAUSTED"})
	handleAll(t, e, names)
	drainAll(t, e, 500)
	created, bodies, deleted := queueRequests(t, e)
	if len(created) != 1 || len(deleted) != 1 {
		t.Fatalf("created %v deleted %v, want one of each", created, deleted)
	}
	// fullNode is reserved: the guaranteed tier.
	if bodies[0].Guaranteed == nil || bodies[0].Spot != nil || bodies[0].Tpu.NodeSpec[0].Node.SchedulingConfig == nil || !bodies[0].Tpu.NodeSpec[0].Node.SchedulingConfig.Reserved {
		t.Errorf("tier of a reserved node: guaranteed %v spot %v node scheduling %+v; want guaranteed, reserved kept", bodies[0].Guaranteed, bodies[0].Spot, bodies[0].Tpu.NodeSpec[0].Node.SchedulingConfig)
	}
}

// TestQuotaIsNotAStockoutForTheQueue: a create refused for quota starts no
// queue, though the node asks for one: no queued resource is created, and
// the node is created again in its zone once the quota allows.
func TestQuotaIsNotAStockoutForTheQueue(t *testing.T) {
	f, names := waveFleet(1)
	f.Nodes[0].Metadata[remediate.StockoutMetadataKey] = "queue"
	e := newClockedEnv(t, f, tpufake.WithRequestLog(1000))
	e.fake.Fail(tpufake.FailRule{RPC: "operation:nodes.create", Status: "RESOURCE_EXHAUSTED", Times: 1,
		Message: "Quota 'TPUV4_CHIPS' exceeded. Limit: 64.0 in region us-central2."})
	handleAll(t, e, names)
	drainAll(t, e, 200)
	if created, _, _ := queueRequests(t, e); len(created) != 0 {
		t.Errorf("queued resources created %v for a quota, want none", created)
	}
	for _, r := range e.records.list() {
		if r.Refusal != nil && (r.Refusal.Kind != "quota" || r.Refusal.Fallback != "") {
			t.Errorf("refusal %+v, want a quota with no fallback", *r.Refusal)
		}
	}
	if n := e.fake.Fleet().Nodes[0]; n.State != "READY" || n.QueuedResource != "" {
		t.Errorf("node %s owned by %q, want READY, created directly", n.State, n.QueuedResource)
	}
}

// TestPauseHoldsOurMutationsNotGooglesQueue: a pause written while our
// queued resource waits holds every call of ours that mutates (none is
// sent while it stands), but not Google's queue: the queued resource turns
// ACTIVE and its node READY meanwhile; after resume the recovery ends
// recovered without another queued resource.
func TestPauseHoldsOurMutationsNotGooglesQueue(t *testing.T) {
	outage := start.Add(30 * time.Minute)
	e, node := queueEnv(t, "queue:2h", outage)
	// Run until the queued resource is there, then pause.
	for i := 0; i < 50 && len(e.fake.Fleet().QueuedResources) == 0; i++ {
		if _, err := e.h.Drain(context.Background(), e.clock.Set, 1); err != nil {
			t.Fatal(err)
		}
	}
	if len(e.fake.Fleet().QueuedResources) != 1 {
		t.Fatal("no queued resource before the pause")
	}
	p := remediate.Pause{Scope: remediate.PauseNode, Node: node, Reason: "incident", By: "alice", Since: e.clock.Now()}
	if err := e.store.SetPause(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	mutations := func() int {
		n := 0
		for _, rpc := range []string{"nodes.create", "nodes.delete", "queuedResources.create", "queuedResources.delete", "queuedResources.reset"} {
			n += e.fake.Count(rpc, "")
		}
		return n
	}
	before := mutations()
	// An hour of sweeps while paused: the capacity returns at 30 minutes.
	for e.clock.Now().Before(start.Add(90 * time.Minute)) {
		e.clock.Set(e.clock.Now().Add(time.Minute))
		if _, err := e.h.Sweep(context.Background(), remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := mutations(); got != before {
		t.Errorf("%d mutating calls while paused, want none", got-before)
	}
	f := e.fake.Fleet()
	if f.QueuedResources[0].State.State != "ACTIVE" || len(f.Nodes) != 1 || f.Nodes[0].State != "READY" {
		t.Fatalf("while paused: queued resource %s, nodes %d; want ACTIVE with its node READY (Google's queue goes on)", f.QueuedResources[0].State.State, len(f.Nodes))
	}
	var seen bool
	for _, r := range e.records.list() {
		if r.Node == node && strings.HasPrefix(r.Reason, "paused by alice") && strings.Contains(r.Reason, "READY") {
			seen = true
		}
	}
	if !seen {
		for _, r := range e.records.list() {
			t.Logf("%s %s %s %s", r.Time.Format(time.TimeOnly), r.Action, r.Outcome, r.Reason)
		}
		t.Error("no record of the paused node")
	}
	if _, err := e.store.ClearPause(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	drainAll(t, e, 100)
	if created, _, _ := queueRequests(t, e); len(created) != 1 {
		t.Errorf("queued resources created %v, want the one", created)
	}
	var recovered bool
	for _, r := range e.records.list() {
		recovered = recovered || (r.Node == node && r.Outcome == remediate.OutcomeRecovered)
	}
	if !recovered {
		t.Error("not recovered after resume")
	}
}

// TestQueueCreateWhoseAnswerIsLostMakesOneQueuedResource: the queued
// resource's create is carried out but its answer lost (500 after the
// effect, or the connection dropped): the recovery reads it back by its
// name and never sends a second create; it recovers when the capacity
// returns, with one queued resource.
func TestQueueCreateWhoseAnswerIsLostMakesOneQueuedResource(t *testing.T) {
	for name, rule := range map[string]tpufake.FailRule{
		"lost":    {RPC: "queuedResources.create", Lost: true, Times: 1},
		"dropped": {RPC: "queuedResources.create", Effect: tpufake.EffectNow, Drop: true, Times: 1},
	} {
		t.Run(name, func(t *testing.T) {
			f, names := waveFleet(1)
			f.Nodes[0].Metadata[remediate.StockoutMetadataKey] = "queue:1h"
			e := newClockedEnv(t, f, tpufake.WithRequestLog(10000))
			e.fake.Fail(tpufake.FailRule{RPC: "operation:nodes.create", Zone: zone, Status: "RESOURCE_EXHAUSTED", Until: start.Add(10 * time.Minute)})
			e.fake.Fail(rule)
			handleAll(t, e, names)
			drainAll(t, e, 500)
			created, _, _ := queueRequests(t, e)
			if len(created) != 1 {
				t.Errorf("queued resource creates %v, want exactly one", created)
			}
			var failedCall bool
			for _, r := range e.records.list() {
				for _, st := range r.Steps {
					failedCall = failedCall || (st.Name == string(remediate.EffectCreateQR) && st.Err != "")
				}
			}
			if !failedCall {
				t.Error("no create-queued-resource step failed: the answer was not lost")
			}
			fl := e.fake.Fleet()
			if len(fl.QueuedResources) != 1 || fl.Nodes[0].State != "READY" {
				t.Errorf("%d queued resources, node %s; want one, READY", len(fl.QueuedResources), fl.Nodes[0].State)
			}
		})
	}
}

// TestQueueFaults: the queue's calls failing as the real API may, each
// ending recovered with no queued resource of ours left but the ACTIVE
// one: a FAILED queued resource's delete whose answer is lost is not
// taken for a refusal (the queued resource is read: gone, so queued
// again); a queued resource create whose operation ended in error (the
// queued resource rolled back) is created again under the same name.
func TestQueueFaults(t *testing.T) {
	for _, tt := range []struct {
		name        string
		value       string
		outage      time.Duration
		rule        tpufake.FailRule
		wantCreates int
		wantDeletes int
		opts        []tpufake.Option
	}{
		// Its operation, which no one will poll, finishes by itself, as
		// the real one does.
		{"delete of the FAILED one, answer lost", "queue:30m", 45 * time.Minute,
			tpufake.FailRule{RPC: "queuedResources.delete", Lost: true, Times: 1}, 2, 1, []tpufake.Option{tpufake.WithOperationDelay("delete", time.Minute)}},
		{"create's operation ended in error", "queue:1h", 10 * time.Minute,
			tpufake.FailRule{RPC: "operation:queuedResources.create", Status: "INTERNAL", Times: 1}, 2, 0, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, names := waveFleet(1)
			f.Nodes[0].Metadata[remediate.StockoutMetadataKey] = tt.value
			e := newClockedEnv(t, f, append([]tpufake.Option{tpufake.WithRequestLog(10000)}, tt.opts...)...)
			e.fake.Fail(tpufake.FailRule{RPC: "operation:nodes.create", Zone: zone, Status: "RESOURCE_EXHAUSTED", Until: start.Add(tt.outage)})
			e.fake.Fail(tt.rule)
			handleAll(t, e, names)
			drainAll(t, e, 500)
			created, _, deleted := queueRequests(t, e)
			if len(created) != tt.wantCreates || len(deleted) != tt.wantDeletes {
				t.Errorf("created %v, deleted %v; want %d creates, %d deletes", created, deleted, tt.wantCreates, tt.wantDeletes)
			}
			fl := e.fake.Fleet()
			if len(fl.QueuedResources) != 1 || fl.QueuedResources[0].State.State != "ACTIVE" || fl.Nodes[0].State != "READY" {
				t.Errorf("queued resources %+v, node %s; want one ACTIVE, the node READY", fl.QueuedResources, fl.Nodes[0].State)
			}
		})
	}
}
