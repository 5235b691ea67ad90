//go:build emulator

package function_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/emulator"
	"github.com/tpu-autoheal/autoheal/internal/events"
)

// TestInstancePathOnFirestoreAcrossFunctionInstances: the function builds
// its Firestore ledger and instance store itself (the emulator); a sweep by
// one function instance saves a Spot VM's spec, the VM is preempted and
// deleted, and a second function instance (nothing in memory) gets the
// preemption as a Pub/Sub push and inserts the VM from the saved spec; a
// third one's sweep and a redelivery insert nothing more.
//
//	go test -tags emulator ./function -run InstancePathOnFirestore
func TestInstancePathOnFirestoreAcrossFunctionInstances(t *testing.T) {
	_, stop, err := emulator.StartFirestore(context.Background())
	if errors.Is(err, emulator.ErrNoGcloud) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
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
	env["AUTOHEAL_FIRESTORE_DATABASE"] = fmt.Sprintf("compute-%d", time.Now().UnixNano()%1e9)
	env["AUTOHEAL_RECORD_TO"] = "stdout"
	cfg, err := load(t, env)
	if err != nil {
		t.Fatal(err)
	}
	instance := func() *function.Function {
		c, err := computevm.NewFromOptions(context.Background(), fake.ClientOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		fn, err := function.New(context.Background(), cfg, function.WithDiagnostics(&syncBuffer{}), function.WithTPU(tc),
			function.WithStdout(&syncBuffer{}), function.WithClock(now), function.WithCompute(c, nil))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fn.Close() })
		return fn
	}
	push := func(fn *function.Function, data []byte) {
		t.Helper()
		rec := httptest.NewRecorder()
		fn.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(pushBody(data))))
		if rec.Code != http.StatusOK && rec.Code != http.StatusNoContent {
			t.Fatalf("push answered %d: %s", rec.Code, rec.Body.String())
		}
	}
	vm := computefake.InstanceName("acme-ml", "us-central1-c", "spot-delete")
	push(instance(), []byte(events.SweepMessage))
	entry, err := fake.Preempt(vm)
	if err != nil {
		t.Fatal(err)
	}
	clk = clk.Add(time.Second)
	push(instance(), entry.JSON())
	if got := fake.Count("instances.insert", ""); got != 1 {
		t.Fatalf("%d inserts after the preemption, want 1 (from the spec saved by another instance)", got)
	}
	clk = clk.Add(computefake.DefaultInsertTime + time.Second)
	third := instance()
	push(third, entry.JSON())
	push(third, []byte(events.SweepMessage))
	if in, ok := fake.Instance(vm); !ok || in.Status != "RUNNING" {
		t.Errorf("after the insert: %v %+v", ok, in)
	}
	if got := fake.Count("instances.insert", ""); got != 1 {
		t.Errorf("%d inserts in all, want 1", got)
	}
}
