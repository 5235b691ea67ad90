package vmswarm

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
)

var (
	seedFlag  = flag.Uint64("seed", 0, "run only this seed (0: seeds -seeds-from .. -seeds-from + -seeds - 1)")
	seedsFlag = flag.Int("seeds", unitSeeds, "how many seeds TestVMSwarm runs")
	fromFlag  = flag.Uint64("seeds-from", 1, "the first seed TestVMSwarm runs")
	kindsFlag = flag.String("kinds", "default", "fault kinds to draw: all, default (Enabled), or a comma-separated list")
	verbose   = flag.Bool("vmswarm.v", false, "print every seed's plan and result")
)

// unitSeeds is how many seeds the unit run (go test ./...) draws; the
// emulator build (scripts/test.sh's second go test of every package) draws
// longSeeds more (long_test.go).
const unitSeeds = 40

// longSeeds is how many seeds the emulator build runs (long_test.go).
const longSeeds = 500

const fleetFile = "../computefake/testdata/fleet.json"

func options(t *testing.T, kinds string) Options {
	t.Helper()
	f, err := computefake.ReadFleetFile(fleetFile)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := ParseKinds(kinds)
	if err != nil {
		t.Fatal(err)
	}
	return Options{Fleet: f, Kinds: ks}
}

// TestVMSwarm is the seeded, randomized simulation of the Compute Engine
// backend: each seed draws a schedule and faults (plan.go), drives the
// audit entries and sweeps through computevm.Recovery to quiescence, and
// checks the invariants against the fake's own record (check.go). A
// failing seed prints its plan and replays exactly with -seed N.
//
//	go test ./internal/vmswarm -run TestVMSwarm -seeds 5000
//	go test ./internal/vmswarm -run TestVMSwarm -seed 1234 -vmswarm.v
func TestVMSwarm(t *testing.T) {
	n, from := *seedsFlag, *fromFlag
	if longBuild && !flagSet("seeds") {
		n, from = longSeeds, unitSeeds+1 // the unit run ran the first ones
	}
	var seeds []uint64
	if *seedFlag != 0 {
		seeds = append(seeds, *seedFlag)
	} else {
		for i := range n {
			seeds = append(seeds, from+uint64(i))
		}
	}
	opts := options(t, *kindsFlag)
	runSeeds(t, seeds, runtime.GOMAXPROCS(0), func(seed uint64) Result { return Run(context.Background(), seed, opts) })
}

// longBuild is true under the emulator tag (long_test.go).
var longBuild = false

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
		mu                         sync.Mutex
		failed                     []Result
		calls, maxCalls, faults    int
		planned, crashes, maxFault int
		longest                    uint64
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
				faults += res.Faults
				planned += res.Plan.Faults()
				crashes += res.Crashes
				maxFault = max(maxFault, res.Faults+res.Plan.Faults())
				if res.Calls > maxCalls {
					maxCalls, longest = res.Calls, seed
				}
				if len(res.Violations) > 0 {
					failed = append(failed, res)
				}
				mu.Unlock()
				if *verbose {
					t.Logf("%s\n  => %d calls (%d with a fault), %d deliveries, %d sweeps, %d crashes, %v simulated, violations: %v",
						res.Plan, res.Calls, res.Faults, res.Deliveries, res.Sweeps, res.Crashes, res.Took, res.Violations)
				}
			}
		}()
	}
	for _, s := range seeds {
		next <- s
	}
	close(next)
	wg.Wait()
	n := float64(len(seeds))
	t.Logf("%d seeds in %v: faults per seed %.1f (%.1f on calls, %.1f events and crashes; max %d), %.1f crashes per seed, Compute Engine calls per seed %.1f (longest run: seed %d, %d calls), %d seeds broke an invariant",
		len(seeds), time.Since(start).Round(time.Millisecond), float64(faults+planned)/n, float64(faults)/n, float64(planned)/n, maxFault,
		float64(crashes)/n, float64(calls)/n, longest, maxCalls, len(failed))
	for i, res := range failed {
		if i == 10 {
			t.Errorf("... and %d more failing seeds", len(failed)-10)
			break
		}
		t.Errorf("%s\n  violations:\n    %s\n  replay: go test ./internal/vmswarm -run 'TestVMSwarm$' -seed %d -kinds %q%s",
			res.Plan, strings.Join(res.Violations, "\n    "), res.Plan.Seed, kindList(res.Plan.Kinds), res.Trace)
	}
}

// TestPlanIsDeterministic: a seed draws the same plan every time, so a
// failing seed replays.
func TestPlanIsDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		if a, b := NewPlan(seed, AllKinds).String(), NewPlan(seed, AllKinds).String(); a != b {
			t.Fatalf("seed %d drew two plans:\n%s\n%s", seed, a, b)
		}
	}
}

// TestRunIsDeterministic: a seed's run makes the same calls and ends the
// same way every time.
func TestRunIsDeterministic(t *testing.T) {
	opts := options(t, "all")
	for seed := uint64(1); seed <= 5; seed++ {
		a, b := Run(context.Background(), seed, opts), Run(context.Background(), seed, opts)
		ka := fmt.Sprint(a.Calls, a.Faults, a.Deliveries, a.Sweeps, a.Crashes, a.Took, a.Violations)
		kb := fmt.Sprint(b.Calls, b.Faults, b.Deliveries, b.Sweeps, b.Crashes, b.Took, b.Violations)
		if ka != kb {
			t.Errorf("seed %d ran two ways:\n  %s\n  %s\n%s", seed, ka, kb, a.Plan)
		}
	}
}

func kindList(ks []Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ",")
}

func TestParseKinds(t *testing.T) {
	got, err := ParseKinds("all")
	if err != nil || len(got) != len(AllKinds) {
		t.Errorf("ParseKinds(all) = %v, %v", got, err)
	}
	if _, err := ParseKinds("unaudit"); err == nil || !strings.Contains(err.Error(), "unaudit") {
		t.Errorf("ParseKinds(unaudit) = %v, want an error naming it", err)
	}
}
