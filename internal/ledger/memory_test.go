package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/ledger/ledgertest"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

func TestMemoryMeetsStoreContract(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) remediate.Store { return ledger.NewMemory() }, ledgertest.Options{Claimants: 64})
}

func TestMemoryMarkEventExpiresByItsClock(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	m := ledger.NewMemory(ledger.WithClock(func() time.Time { return now }))
	ctx := context.Background()
	mark := func() bool {
		t.Helper()
		first, err := m.MarkEvent(ctx, "insert-1", now.Add(time.Hour))
		if err != nil {
			t.Fatalf("MarkEvent: %v", err)
		}
		return first
	}
	// Marked with an expiry in the simulated future, which is the wall-clock past.
	if got := []bool{mark(), mark()}; !got[0] || got[1] {
		t.Errorf("MarkEvent at a simulated time = %v; want [true false]", got)
	}
	now = now.Add(time.Hour)
	if !mark() {
		t.Error("MarkEvent once the simulated clock passed the expiry: first = false; want true")
	}
}
