package tpuapi_test

import (
	"context"
	"testing"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
)

// TestQueuedResourceCreateAndDeleteThroughClient: the queue fallback's two
// calls through the v2 client and the simulated API: a queued resource
// created under its id, read back, a second create ALREADY_EXISTS, and a
// delete (with its nodes) that leaves it NOT FOUND; through the Router too.
func TestQueuedResourceCreateAndDeleteThroughClient(t *testing.T) {
	ctx := context.Background()
	_, c := start(t, "fleet.json")
	for _, tc := range []remediate.TPU{c, tpuapi.Router{V2: c}} {
		q := &tpu.QueuedResource{Spot: &tpu.Spot{}, QueueingPolicy: &tpu.QueueingPolicy{ValidUntilDuration: "3600s"},
			Tpu: &tpu.Tpu{NodeSpec: []*tpu.NodeSpec{{Parent: zone, NodeId: "queued-1", Node: &tpu.Node{AcceleratorType: "v4-8", RuntimeVersion: "tpu-ubuntu2204-base"}}}}}
		op, err := tc.CreateQueuedResource(ctx, zone, "queued-1-q", q)
		if err != nil {
			t.Fatalf("CreateQueuedResource: %v", err)
		}
		if err := waitOp(ctx, tc, op); err != nil {
			t.Fatalf("create operation: %v", err)
		}
		got, err := tc.GetQueuedResource(ctx, zone+"/queuedResources/queued-1-q")
		if err != nil || got.Spot == nil || got.Tpu.NodeSpec[0].NodeId != "queued-1" {
			t.Fatalf("GetQueuedResource = %+v, %v; want the spot queued resource created", got, err)
		}
		if _, err := tc.CreateQueuedResource(ctx, zone, "queued-1-q", q); !remediate.IsAlreadyExists(err) {
			t.Errorf("second create: %v, want ALREADY_EXISTS", err)
		}
		op, err = tc.DeleteQueuedResource(ctx, zone+"/queuedResources/queued-1-q")
		if err != nil {
			t.Fatalf("DeleteQueuedResource: %v", err)
		}
		if err := waitOp(ctx, tc, op); err != nil {
			t.Fatalf("delete operation: %v", err)
		}
		if _, err := tc.GetQueuedResource(ctx, zone+"/queuedResources/queued-1-q"); !remediate.IsNotFound(err) {
			t.Errorf("after the delete: %v, want NOT FOUND", err)
		}
		if _, err := tc.DeleteQueuedResource(ctx, zone+"/queuedResources/queued-1-q"); !remediate.IsNotFound(err) {
			t.Errorf("second delete: %v, want NOT FOUND", err)
		}
	}
}

// TestRESTConflictIsAlreadyExists: a REST 409 whose body says
// ALREADY_EXISTS is that kind (gax alone reads every 409 as ABORTED), for
// a node as for a queued resource: a create of ours that landed is read
// back, not retried as a transient failure.
func TestRESTConflictIsAlreadyExists(t *testing.T) {
	ctx := context.Background()
	_, c := start(t, "fleet.json")
	_, err := c.CreateNode(ctx, zone, "llm-v4-128", &tpu.Node{AcceleratorType: "v4-128", RuntimeVersion: "r"})
	if !remediate.IsAlreadyExists(err) {
		t.Errorf("create over an existing node: %v is %s, want already-exists", err, remediate.KindOf(err))
	}
}
