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

// newInstanceFunction is a function with the instance path on, over the
// simulated Compute Engine of the Compute Engine fleet file (with opts),
// on the clock now; env (fleetEnv's, edited) is loaded with the instance
// fleet's project and zone.
func newInstanceFunction(t *testing.T, now func() time.Time, env map[string]string, opts ...computefake.Option) (*function.Function, *computefake.Server) {
	t.Helper()
	f, err := computefake.ReadFleetFile("../internal/computefake/testdata/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	fake := computefake.New(f, append([]computefake.Option{computefake.WithClock(now)}, opts...)...)
	t.Cleanup(fake.Close)
	_, tc := newFleetTPU(t)
	env["AUTOHEAL_PROJECTS"], env["AUTOHEAL_ZONES"] = "acme-ml", "us-central1-c"
	cfg, err := load(t, env)
	if err != nil {
		t.Fatal(err)
	}
	c, err := computevm.NewFromOptions(context.Background(), fake.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := function.New(context.Background(), cfg, function.WithDiagnostics(&syncBuffer{}), function.WithTPU(tc),
		function.WithStore(ledger.NewMemory(ledger.WithClock(now))), function.WithRecorder(&sliceRecorder{}), function.WithClock(now),
		function.WithCompute(c, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fn.Close() })
	return fn, fake
}

// TestRestartGraceSetAndUnset: a TPU VM with automaticRestart TERMINATED by
// a host error, which Compute Engine does not restart within the hour. Unset
// (5m), AUTOHEAL_RESTART_GRACE lets the sweep 7 minutes later start it; at
// 10m the same sweep defers, and only the sweep past 10 minutes starts it.
func TestRestartGraceSetAndUnset(t *testing.T) {
	for _, tt := range []struct {
		name            string
		grace           string // "": unset
		startsAt7, at11 int    // instances.start sent by then
	}{
		{"unset: the 5m default starts it at 7m", "", 1, 1},
		{"10m: deferred at 7m, started at 11m", "10m", 0, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)
			now := func() time.Time { return clk }
			env := fleetEnv()
			if tt.grace != "" {
				env["AUTOHEAL_RESTART_GRACE"] = tt.grace
			}
			fn, fake := newInstanceFunction(t, now, env, computefake.WithRestartDelay(time.Hour))

			vm := computefake.InstanceName("acme-ml", "us-central1-c", "trainer-a") // automaticRestart: true
			entry, err := fake.HostError(vm)
			if err != nil {
				t.Fatal(err)
			}
			start := clk
			if err := fn.HandleMessage(context.Background(), pushBody(entry.JSON())); err != nil {
				t.Fatal(err)
			}
			if got := fake.Count("instances.start", ""); got != 0 {
				t.Fatalf("%d starts right after the host error, want 0 (automaticRestart: deferred)", got)
			}
			for _, step := range []struct {
				at   time.Duration
				want int
			}{{7 * time.Minute, tt.startsAt7}, {11 * time.Minute, tt.at11}} {
				clk = start.Add(step.at)
				if err := fn.HandleMessage(context.Background(), []byte(events.SweepMessage)); err != nil {
					t.Fatal(err)
				}
				if got := fake.Count("instances.start", ""); got != step.want {
					t.Errorf("after the sweep at +%s: %d starts, want %d", step.at, got, step.want)
				}
			}
		})
	}
}
