package remediate

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/api/googleapi"
)

// TestCapacityRefusalsAreStockoutsAndQuotasAreNot: the wordings Google
// refuses a create with, as the TPU API (REST and finished operations) and
// Compute Engine give them, each with the kind and the scope it means.
func TestCapacityRefusalsAreStockoutsAndQuotasAreNot(t *testing.T) {
	for _, tt := range []struct {
		name  string
		err   error
		kind  Kind
		scope string
	}{
		{"code 8 no more capacity is a stockout",
			OperationError("op", 8, `There is no more capacity in the zone "us-central2-b"; you can try in another zone where Cloud TPU Nodes are offered`), KindStockout, "zone"},
		{"code 9 insufficient reserved capacity is a stockout",
			OperationError("op", 9, "Insufficient reserved capacity. Contact customer support to increase your reservation."), KindStockout, "zone"},
		{"code 9 other precondition stays permanent", OperationError("op", 9, "node is not in a state to be deleted"), KindPermanent, ""},
		{"REST 429 capacity is a stockout", &googleapi.Error{Code: 429, Message: "There is no more capacity in the zone"}, KindStockout, "zone"},
		{"code 8 quota in region is a region quota",
			OperationError("op", 8, "Quota 'TPUV4_CHIPS' exceeded. Limit: 64.0 in region us-central2."), KindQuota, "region"},
		{"code 8 quota in zone is a zone quota",
			OperationError("op", 8, "Quota 'TPUV4_PODSLICE_LITE' exceeded. Limit: 16.0 in zone us-west4-a."), KindQuota, "zone"},
		{"rate quota stays transient", &googleapi.Error{Code: 429, Message: "Quota exceeded for quota metric 'Requests' and limit 'Requests per minute'"}, KindTransient, ""},
		{"compute ZONE_RESOURCE_POOL_EXHAUSTED is a stockout",
			&googleapi.Error{Code: 503, Message: "The zone 'projects/p/zones/us-central1-a' does not have enough resources available to fulfill the request.",
				Errors: []googleapi.ErrorItem{{Reason: "ZONE_RESOURCE_POOL_EXHAUSTED"}}}, KindStockout, "zone"},
		{"compute ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS is a stockout",
			OperationError("op", 14, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: The zone does not have enough resources available to fulfill the request. '(resource type:compute)'."), KindStockout, "zone"},
		{"compute insufficientCapacity is a stockout", &googleapi.Error{Code: 503, Message: "insufficientCapacity"}, KindStockout, "zone"},
		{"unavailable without capacity wording stays transient", &googleapi.Error{Code: 503, Message: "backend unavailable"}, KindTransient, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := KindOf(FromAPI(tt.err))
			if got != tt.kind {
				t.Fatalf("KindOf(%v) = %s, want %s", tt.err, got, tt.kind)
			}
			if got == KindStockout || got == KindQuota {
				if s := QuotaScope(got, tt.err.Error()); s != tt.scope {
					t.Errorf("QuotaScope = %q, want %q", s, tt.scope)
				}
			}
		})
	}
	for code, want := range map[string]Kind{
		"ZONE_RESOURCE_POOL_EXHAUSTED": KindStockout, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS": KindStockout,
		"QUOTA_EXCEEDED": KindQuota, "RESOURCE_NOT_FOUND": KindNotFound, "INTERNAL_ERROR": KindTransient,
	} {
		if got := KindOfCompute(code, ""); got != want {
			t.Errorf("KindOfCompute(%s) = %s, want %s", code, got, want)
		}
	}
}

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
