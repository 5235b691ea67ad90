package function_test

import (
	"context"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
)

// TestInstanceEntriesGoToTheInstancePath: a Compute Engine TPU VM's host
// error, pushed as the sink delivers it, makes the function start that VM
// (the instance path on); with the path off it is recorded and dropped.
func TestInstanceEntriesGoToTheInstancePath(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
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
			recs := &sliceRecorder{}
			opts := []function.Option{function.WithDiagnostics(&syncBuffer{}), function.WithTPU(tc),
				function.WithStore(ledger.NewMemory(ledger.WithClock(now))), function.WithRecorder(recs), function.WithClock(now)}
			if on {
				c, err := computevm.NewFromOptions(context.Background(), fake.ClientOptions()...)
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, function.WithCompute(c, nil))
			}
			fn, err := function.New(context.Background(), cfg, opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fn.Close() })
			if err := fn.HandleMessage(context.Background(), []byte(events.SweepMessage)); err != nil {
				t.Fatal(err)
			}
			entry, err := fake.HostError(computefake.InstanceName("acme-ml", "us-central1-c", "reserved-1"))
			if err != nil {
				t.Fatal(err)
			}
			clk = clk.Add(time.Second)
			if err := fn.HandleMessage(context.Background(), pushBody(entry.JSON())); err != nil {
				t.Fatal(err)
			}
			want := 0
			if on {
				want = 1
			}
			if got := fake.Count("instances.start", ""); got != want {
				t.Errorf("%d starts, want %d", got, want)
			}
			last := recs.records()[len(recs.records())-1]
			if on && last.Action != "start" || !on && last.Action != "skip" {
				t.Errorf("last record = %s %q", last.Action, last.Reason)
			}
		})
	}
}
