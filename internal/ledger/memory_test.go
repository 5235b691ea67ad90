package ledger_test

import (
	"context"
	"fmt"
	"runtime"
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

func TestMemorySetDeferralWritesOnlyChanges(t *testing.T) {
	m := ledger.NewMemory()
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	d := remediate.Deferral{Node: "projects/p/locations/z/nodes/n", Project: "p", Since: t0, Due: t0.Add(5 * time.Minute), Reason: "in-flight cap"}
	for i := 0; i < 5; i++ {
		if err := m.SetDeferral(ctx, d); err != nil {
			t.Fatalf("SetDeferral: %v", err)
		}
	}
	if got, want := m.DeferralWrites(), 1; got != want {
		t.Errorf("writes after setting one deferral 5 times = %d; want %d", got, want)
	}
	d.Due = d.Due.Add(time.Minute)
	if err := m.SetDeferral(ctx, d); err != nil {
		t.Fatalf("SetDeferral: %v", err)
	}
	if got, want := m.DeferralWrites(), 2; got != want {
		t.Errorf("writes after moving the due time = %d; want %d", got, want)
	}
}

// BenchmarkMemoryRecovery is one recovery (History, Claim, five Updates to
// done) on a ledger that already saw n recoveries, a tenth of them
// unfinished: the per-recovery cost must not grow with n.
func BenchmarkMemoryRecovery(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("ledger=%d", n), func(b *testing.B) {
			m := ledger.NewMemory()
			ctx := context.Background()
			t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			cfg := remediate.DefaultConfig()
			cfg.MaxInFlight, cfg.BreakerLimit = n+b.N+1, n+b.N+1
			recover := func(i int, finish bool) {
				node := fmt.Sprintf("projects/p/locations/us-central2-b/nodes/n-%d", i)
				if _, err := m.History(ctx, node, "p", "", t0, cfg.Window); err != nil {
					b.Fatal(err)
				}
				r, err := m.Claim(ctx, remediate.ClaimRequest{Node: node, Project: "p", Zone: "us-central2-b", Holder: "h", Now: t0, Action: remediate.ActionRecreate, Config: cfg})
				if err != nil {
					b.Fatal(err)
				}
				if !finish {
					return
				}
				for _, p := range []remediate.Phase{remediate.PhaseSaved, remediate.PhaseDeleting, remediate.PhaseDeleted, remediate.PhaseCreating, remediate.PhaseDone} {
					r.Phase = p
					if err := m.Update(ctx, r); err != nil {
						b.Fatal(err)
					}
				}
			}
			for i := 0; i < n; i++ {
				recover(i, i%10 != 0)
			}
			runtime.GC() // the setup's garbage is not the recoveries' cost
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				recover(n+i, true)
			}
		})
	}
}

func TestMemoryForgetsExpiredMarksAsItGoes(t *testing.T) {
	now := time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC)
	m := ledger.NewMemory(ledger.WithClock(func() time.Time { return now }))
	ctx := context.Background()
	// 10,000 marks, each expired a second after it was made, the clock
	// moving a second per mark: at most the few latest are live.
	for i := range 10000 {
		if _, err := m.MarkEvent(ctx, fmt.Sprintf("e-%d", i), now.Add(time.Second)); err != nil {
			t.Fatalf("MarkEvent: %v", err)
		}
		now = now.Add(time.Second)
	}
	if got := m.ForgetEvents(func(string, time.Time) bool { return false }); got > 2*1024 {
		t.Errorf("marks held after 10,000 expired ones = %d, want at most %d (expired marks purged as it goes)", got, 2*1024)
	}
	// A live mark survives the purges.
	if first, _ := m.MarkEvent(ctx, "live", now.Add(time.Hour)); !first {
		t.Fatal("first mark of live is not first")
	}
	for i := range 5000 {
		m.MarkEvent(ctx, fmt.Sprintf("f-%d", i), now)
	}
	if first, _ := m.MarkEvent(ctx, "live", now.Add(time.Hour)); first {
		t.Error("live mark forgotten by a purge before it expired")
	}
}
