package remediate_test

import (
	"context"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// A failed create (stockout) is seen failed by its recovery, however many
// other operations finished meanwhile: the simulated API keeps every
// operation of the last hour beyond its retention (once it forgot by count
// alone, and a replayed wave's recoveries polled NOT_FOUND, found no node
// and created again at once, with no failure counted and no back-off).
func TestFailedCreateIsSeenWhateverOtherOperationsFinished(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: start}
	other := sweptNode("other", "READY", "HEALTHY")
	fake := tpufake.New(tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED"), other}},
		tpufake.WithClock(clk.Now), tpufake.WithOperationPolls(0), tpufake.WithOperationRetention(1),
		tpufake.WithOperationDelay("create", time.Minute))
	t.Cleanup(fake.Close)
	fake.Fail(tpufake.FailRule{RPC: "operation:nodes.create", Status: "RESOURCE_EXHAUSTED"})
	svc, _ := fake.Service(ctx)
	store := ledger.NewMemory(ledger.WithClock(clk.Now))
	cfg := remediate.DefaultConfig()
	cfg.StartupScript = script
	h := remediate.Filled(&remediate.Handler{TPU: tpuapi.New(svc), Store: store, Lease: store, Histories: store, Recorder: &records{}, Config: cfg, Now: clk.Now, Holder: "test"})
	if _, err := h.Handle(ctx, terminate("e1")); err != nil {
		t.Fatal(err)
	}
	clk.Advance(31 * time.Second)
	if _, err := h.Continue(ctx); err != nil {
		t.Fatal(err)
	}
	if n := fake.Count("nodes.create", nodeName); n != 1 {
		t.Fatalf("creates after the delivery = %d, want 1", n)
	}
	clk.Advance(2 * time.Minute)
	// Another operation finishes after ours (any other recovery's delete).
	if _, err := svc.Projects.Locations.Nodes.Delete(other.Name).Do(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Continue(ctx); err != nil {
		t.Fatal(err)
	}
	recs, _ := store.Unfinished(ctx)
	var rec remediate.Recovery
	for _, r := range recs {
		if r.Node == nodeName {
			rec = r
		}
	}
	if rec.Phase != remediate.PhaseDeleted || fake.Count("nodes.create", nodeName) != 1 || rec.NextLookAt.Sub(clk.Now()) < 50*time.Second {
		t.Errorf("after the failed create: phase %s, next look in %v, %d creates; want phase deleted, 1 create and the stockout back-off (at least a minute)",
			rec.Phase, rec.NextLookAt.Sub(clk.Now()), fake.Count("nodes.create", nodeName))
	}
}
