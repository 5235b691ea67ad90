package tpufake_test

import (
	"context"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// queueClock is a clock the queued resource tests move.
type queueClock struct{ t time.Time }

func (c *queueClock) now() time.Time { return c.t }

func queuedResource(parent, nodeID, validFor string) *tpu.QueuedResource {
	return &tpu.QueuedResource{
		Spot:           &tpu.Spot{},
		QueueingPolicy: &tpu.QueueingPolicy{ValidUntilDuration: validFor},
		Tpu: &tpu.Tpu{NodeSpec: []*tpu.NodeSpec{{Parent: parent, NodeId: nodeID, Node: &tpu.Node{
			AcceleratorType: "v5litepod-16", RuntimeVersion: "v2-alpha-tpuv5-lite", Labels: map[string]string{"tpu-autoheal-generation": "2"},
		}}}},
	}
}

// TestQueuedResourceWaitsForCapacityThenTurnsActive: a queued resource
// created while its zone is out of capacity (one FailRule, the outage of
// direct creates) waits WAITING_FOR_RESOURCES until the outage ends, then
// is ACTIVE with its node READY, owned by it, with the spec's labels.
func TestQueuedResourceWaitsForCapacityThenTurnsActive(t *testing.T) {
	clk := &queueClock{t: clock}
	s := tpufake.New(tpufake.Fleet{}, tpufake.WithClock(clk.now))
	t.Cleanup(s.Close)
	svc, err := s.Service(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s.Fail(tpufake.FailRule{RPC: "operation:nodes.create", Zone: "us-central2-b", Status: "RESOURCE_EXHAUSTED", Until: clock.Add(10 * time.Minute)})
	ctx := context.Background()
	if _, err := svc.Projects.Locations.QueuedResources.Create(zone, queuedResource(zone, "n1", "3600s")).QueuedResourceId("n1-q").Context(ctx).Do(); err != nil {
		t.Fatalf("create: %v", err)
	}
	state := func() string {
		t.Helper()
		q, err := svc.Projects.Locations.QueuedResources.Get(zone + "/queuedResources/n1-q").Context(ctx).Do()
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		return q.State.State
	}
	clk.t = clock.Add(9 * time.Minute)
	if got := state(); got != "WAITING_FOR_RESOURCES" {
		t.Fatalf("during the outage: %s, want WAITING_FOR_RESOURCES", got)
	}
	if _, err := svc.Projects.Locations.Nodes.Get(zone + "/nodes/n1").Context(ctx).Do(); err == nil {
		t.Fatalf("node exists during the outage")
	}
	clk.t = clock.Add(10 * time.Minute)
	if got := state(); got != "ACTIVE" {
		t.Fatalf("after the outage: %s, want ACTIVE", got)
	}
	n, err := svc.Projects.Locations.Nodes.Get(zone + "/nodes/n1").Context(ctx).Do()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	if n.State != "READY" || n.QueuedResource != zone+"/queuedResources/n1-q" || n.Labels["tpu-autoheal-generation"] != "2" {
		t.Errorf("node %s, queued resource %q, labels %v; want READY, owned by n1-q, with the spec's label", n.State, n.QueuedResource, n.Labels)
	}
}

// TestQueuedResourceFailsAtValidUntilAndIsDeleted: an outage longer than
// the queued resource's valid-until makes it FAILED (with the expiry in
// its error) and it stays FAILED; a delete removes it.
func TestQueuedResourceFailsAtValidUntilAndIsDeleted(t *testing.T) {
	clk := &queueClock{t: clock}
	s := tpufake.New(tpufake.Fleet{}, tpufake.WithClock(clk.now))
	t.Cleanup(s.Close)
	svc, err := s.Service(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s.Fail(tpufake.FailRule{RPC: "operation:nodes.create", Zone: "us-central2-b", Status: "RESOURCE_EXHAUSTED", Until: clock.Add(2 * time.Hour)})
	ctx := context.Background()
	name := zone + "/queuedResources/n1-q"
	if _, err := svc.Projects.Locations.QueuedResources.Create(zone, queuedResource(zone, "n1", "1800s")).QueuedResourceId("n1-q").Context(ctx).Do(); err != nil {
		t.Fatalf("create: %v", err)
	}
	clk.t = clock.Add(3 * time.Hour) // the capacity is back, but after the valid-until
	q, err := svc.Projects.Locations.QueuedResources.Get(name).Context(ctx).Do()
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if q.State.State != "FAILED" || q.State.FailedData == nil || q.State.FailedData.Error == nil {
		t.Fatalf("state %+v, want FAILED with an error", q.State)
	}
	op, err := svc.Projects.Locations.QueuedResources.Delete(name).Force(true).Context(ctx).Do()
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	if got := s.Fleet().QueuedResources; len(got) != 1 || got[0].State.State != "DELETING" {
		t.Fatalf("after the delete request: %+v, want it DELETING", got)
	}
	if done, err := svc.Projects.Locations.Operations.Get(op.Name).Context(ctx).Do(); err != nil || !done.Done || done.Error != nil {
		t.Fatalf("delete operation %+v, %v; want done without error", done, err)
	}
	if got := s.Fleet().QueuedResources; len(got) != 0 {
		t.Errorf("after the delete: %d queued resources, want none", len(got))
	}
	if got := s.Count("queuedResources.delete", name); got != 1 {
		t.Errorf("%d deletes counted, want 1", got)
	}
}
