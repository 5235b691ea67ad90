package function_test

import (
	"context"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/seal"
)

// TestTheInstancePathSealsWithTheFunctionsSealer: the function hands its
// Sealer to the instance path, so a saved instance spec rewritten in the
// store is not inserted.
func TestTheInstancePathSealsWithTheFunctionsSealer(t *testing.T) {
	f, err := computefake.ReadFleetFile("../internal/computefake/testdata/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	clk := time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)
	now := func() time.Time { return clk }
	fake := computefake.New(f, computefake.WithClock(now))
	t.Cleanup(fake.Close)
	_, tc := newFleetTPU(t)
	env := fleetEnv()
	env["AUTOHEAL_PROJECTS"], env["AUTOHEAL_ZONES"] = "acme-ml", "us-central1-c"
	cfg, err := load(t, env)
	if err != nil {
		t.Fatal(err)
	}
	c, err := computevm.NewFromOptions(context.Background(), fake.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	store := computevm.NewMemory()
	fn, err := function.New(context.Background(), cfg, function.WithDiagnostics(&syncBuffer{}), function.WithTPU(tc),
		function.WithStore(ledger.NewMemory(ledger.WithClock(now))), function.WithRecorder(&sliceRecorder{}), function.WithClock(now),
		function.WithCompute(c, store), function.WithSealer(seal.RandomLocalKeys()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fn.Close() })
	if err := fn.HandleMessage(context.Background(), []byte(events.SweepMessage)); err != nil {
		t.Fatal(err)
	}
	vm := computefake.InstanceName("acme-ml", "us-central1-c", "spot-delete")
	if !store.Tamper(vm, func(in *compute.Instance) { in.ServiceAccounts[0].Email = "owner@acme-ml.iam.gserviceaccount.com" }) {
		t.Fatal("the sweep saved no spec of spot-delete")
	}
	entry, err := fake.Preempt(vm)
	if err != nil {
		t.Fatal(err)
	}
	clk = clk.Add(time.Second)
	if err := fn.HandleMessage(context.Background(), pushBody(entry.JSON())); err != nil {
		t.Fatal(err)
	}
	if got := fake.Count("instances.insert", ""); got != 0 {
		t.Errorf("%d inserts from a spec rewritten in the store, want 0", got)
	}
}
