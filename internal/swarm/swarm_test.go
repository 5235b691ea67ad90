package swarm

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/function"
)

var (
	seedFlag  = flag.Uint64("seed", 0, "run only this seed (0: seeds 1..-seeds)")
	seedsFlag = flag.Int("seeds", 1000, "how many seeds TestSwarm runs")
	fromFlag  = flag.Uint64("seeds-from", 1, "the first seed TestSwarm runs")
	kindsFlag = flag.String("kinds", "default", "fault kinds to draw from: all, default (Enabled), or a comma-separated list")
	verbose   = flag.Bool("swarm.v", false, "print every seed's plan and result")
)

// TestMain quiets the engine's diagnostics of last resort (slog's default
// logger: a resume check failing on an injected fault), thousands a run.
func TestMain(m *testing.M) {
	flag.Parse()
	if !*verbose {
		slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	os.Exit(m.Run())
}

// loadConfig is the function's configuration of every run.
func loadConfig(t *testing.T) function.Config {
	t.Helper()
	for k, v := range BaseEnv {
		t.Setenv(k, v)
	}
	cfg, err := function.LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestSwarm is the seeded, randomized simulation: each seed draws a fault
// mix and a schedule (plan.go), drives terminate entries, audit entries
// and sweeps through the function on a virtual clock until quiescence, and
// checks the invariants (check.go). A failing seed prints its plan and
// replays exactly with -seed N. The unit run does 1000 seeds;
// scripts/test.sh 2000 more (-seeds 2000 -seeds-from 1001).
//
//	go test ./internal/swarm -run TestSwarm -seeds 5000
//	go test ./internal/swarm -run TestSwarm -seed 1234 -kinds all
func TestSwarm(t *testing.T) {
	kinds, err := ParseKinds(*kindsFlag)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Config: loadConfig(t), Kinds: kinds}
	n := *seedsFlag
	if emulatorBuild && !flagSet("seeds") {
		n = emulatorBuildSeeds // the unit run ran the full count already
	}
	seeds := make([]uint64, 0, n)
	if *seedFlag != 0 {
		seeds = append(seeds, *seedFlag)
	} else {
		for i := range n {
			seeds = append(seeds, *fromFlag+uint64(i))
		}
	}
	runSeeds(t, seeds, runtime.GOMAXPROCS(0), func(seed uint64) Result { return Run(context.Background(), seed, opts) })
}

// emulatorBuild is true under the emulator tag, whose run of every package
// follows the unit run: TestSwarm then runs emulatorBuildSeeds seeds
// unless -seeds says otherwise, and TestSwarmFirestore its own.
var emulatorBuild = false

const emulatorBuildSeeds = 200

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// runSeeds runs every seed, workers at a time, and reports the failing
// ones (each with its plan, its violations and its trace) and the totals.
func runSeeds(t *testing.T, seeds []uint64, workers int, run func(uint64) Result) {
	t.Helper()
	start := time.Now()
	var (
		mu                          sync.Mutex
		failed                      []Result
		calls, maxCalls, faults     int
		maxFaults, sweeps, maxSweep int
		longest                     uint64
	)
	next := make(chan uint64)
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range next {
				res := run(seed)
				mu.Lock()
				calls += res.Calls
				faults += res.Plan.Faults()
				sweeps += res.Sweeps
				maxFaults = max(maxFaults, res.Plan.Faults())
				maxSweep = max(maxSweep, res.Sweeps)
				if res.Calls > maxCalls {
					maxCalls, longest = res.Calls, seed
				}
				if len(res.Violations) > 0 {
					failed = append(failed, res)
				}
				mu.Unlock()
				if *verbose {
					t.Logf("%s\n  => %d calls, %d sweeps, %v simulated, violations: %v", res.Plan, res.Calls, res.Sweeps, res.Took, res.Violations)
				}
			}
		}()
	}
	for _, s := range seeds {
		next <- s
	}
	close(next)
	wg.Wait()
	n := len(seeds)
	t.Logf("%d seeds in %v: faults per seed %.1f (max %d), TPU calls per seed %.1f (longest run: seed %d, %d calls), sweeps per seed %.1f (max %d), %d seeds broke an invariant",
		n, time.Since(start).Round(time.Millisecond), float64(faults)/float64(n), maxFaults,
		float64(calls)/float64(n), longest, maxCalls, float64(sweeps)/float64(n), maxSweep, len(failed))
	for i, res := range failed {
		if i == 10 {
			t.Errorf("... and %d more failing seeds", len(failed)-10)
			break
		}
		t.Errorf("%s\n  violations:\n    %s\n  replay: go test ./internal/swarm -run TestSwarm -seed %d -kinds %s\n  records and calls:%s",
			res.Plan, strings.Join(res.Violations, "\n    "), res.Plan.Seed, kindList(res.Plan.Kinds), res.Trace)
	}
}

func kindList(ks []Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ",")
}

// TestPlanIsDeterministic: a seed draws the same plan every time, so a
// failing seed replays.
func TestPlanIsDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		a, b := NewPlan(seed, AllKinds).String(), NewPlan(seed, AllKinds).String()
		if a != b {
			t.Fatalf("seed %d drew two plans:\n%s\n%s", seed, a, b)
		}
	}
}

// TestRunIsDeterministic: a seed's run makes the same calls and writes the
// same records every time.
func TestRunIsDeterministic(t *testing.T) {
	// Every kind but the endless listing, which spends the call budget of
	// every sweep (slow, and as deterministic as the rest).
	kinds := slices.DeleteFunc(slices.Clone(AllKinds), func(k Kind) bool { return k == PageLoop })
	opts := Options{Config: loadConfig(t), Kinds: kinds}
	for seed := uint64(1); seed <= 30; seed++ {
		a, b := Run(context.Background(), seed, opts), Run(context.Background(), seed, opts)
		ka := fmt.Sprint(a.Calls, a.Deliveries, a.Sweeps, a.Took, a.Violations)
		kb := fmt.Sprint(b.Calls, b.Deliveries, b.Sweeps, b.Took, b.Violations)
		if ka != kb {
			t.Errorf("seed %d ran two ways:\n  %s\n  %s\n%s", seed, ka, kb, a.Plan)
		}
	}
}

func TestParseKinds(t *testing.T) {
	got, err := ParseKinds("default,lag")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(Enabled) && len(got) != len(Enabled)+1 {
		t.Errorf("ParseKinds(default,lag) = %v", got)
	}
	if _, err := ParseKinds("lagg"); err == nil || !strings.Contains(err.Error(), "lagg") {
		t.Errorf("ParseKinds(lagg) = %v, want an error naming it", err)
	}
}

// TestSwarmMovesNodesBetweenZones: the default kinds' seeds do move nodes
// with a zones: fallback and do refuse some (another region, a zone not
// watched, a pinned spec), so the zones checks look at real moves.
func TestSwarmMovesNodesBetweenZones(t *testing.T) {
	opts := Options{Config: loadConfig(t)}
	moved, refused := 0, 0
	for seed := uint64(1); seed <= 40; seed++ {
		res := Run(context.Background(), seed, opts)
		if len(res.Violations) > 0 {
			t.Errorf("seed %d: %v", seed, res.Violations)
		}
		moved += res.Moved
		refused += res.ZoneRefused
	}
	if moved == 0 || refused == 0 {
		t.Errorf("seeds 1-40: %d nodes moved, %d zones: refusals recorded; want some of each", moved, refused)
	}
	t.Logf("seeds 1-40: %d nodes moved to another zone, %d zones: refusals", moved, refused)
}
