package remediate

import (
	"fmt"
	"testing"
	"time"
)

// TestStockoutDelayIsSeededAndWithinItsWindow: the delay of the nth
// stockout is in its window, the same for the same seed, node and n, and
// differs between nodes and seeds; windows double up to the lease.
func TestStockoutDelayIsSeededAndWithinItsWindow(t *testing.T) {
	cfg := DefaultConfig()
	cfg.StockoutSeed = 7
	for n, want := range map[int]time.Duration{1: 2 * time.Minute, 2: 4 * time.Minute, 3: 8 * time.Minute, 4: 15 * time.Minute, 9: 15 * time.Minute} {
		if _, hi := StockoutWindow(cfg, n); hi != want {
			t.Errorf("window %d ends at %s, want %s", n, hi, want)
		}
	}
	seen := map[time.Duration]bool{}
	for i := range 100 {
		node := fmt.Sprintf("projects/p/locations/z/nodes/n%d", i)
		d := StockoutDelay(cfg, node, 1)
		if lo, hi := StockoutWindow(cfg, 1); d < lo || d >= hi {
			t.Fatalf("delay %s outside [%s, %s)", d, lo, hi)
		}
		if d != StockoutDelay(cfg, node, 1) {
			t.Fatal("same seed, node and stockout give another delay")
		}
		seen[d] = true
	}
	if len(seen) < 95 {
		t.Errorf("%d distinct delays of 100 nodes: in lockstep", len(seen))
	}
	other := cfg
	other.StockoutSeed = 8
	if StockoutDelay(cfg, "n", 1) == StockoutDelay(other, "n", 1) {
		t.Error("another seed gives the same delay")
	}
}
