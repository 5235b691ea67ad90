package ledger_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/ledger/ledgertest"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

func TestMemoryMeetsStoreContract(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledger.Admin { return ledger.NewMemory() }, ledgertest.Options{Claimants: 64})
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

// A finished recovery's saved spec (which carries the node's startup script)
// is dropped once nothing can read it; what the guards and Decide read is
// kept. An abandoned recovery keeps its spec for the person who recreates
// the node by hand; an unfinished one keeps it to finish.
func TestMemoryKeepsASpecOnlyWhileSomethingReadsIt(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	node := "projects/p/locations/us-central2-b/nodes/n"
	spec := &tpu.Node{AcceleratorType: "v4-8", RuntimeVersion: "tpu-ubuntu2204-base",
		Metadata: map[string]string{"startup-script": strings.Repeat("#", 37000)}}
	for _, tc := range []struct {
		phase    remediate.Phase
		wantSpec bool
	}{
		{remediate.PhaseRecovered, false},
		{remediate.PhaseClosed, false},
		{remediate.PhaseDone, false},
		{remediate.PhaseAbandoned, true},
		{remediate.PhaseDeleting, true},
		{remediate.PhaseCreating, true},
	} {
		t.Run(string(tc.phase), func(t *testing.T) {
			m := ledger.NewMemory()
			ctx := context.Background()
			cfg := remediate.DefaultConfig()
			r, err := m.Claim(ctx, remediate.ClaimRequest{Node: node, Project: "p", Zone: "us-central2-b", Holder: "h", Now: t0, Action: remediate.ActionRecreate, Config: cfg})
			if err != nil {
				t.Fatalf("Claim: %v", err)
			}
			for _, p := range []remediate.Phase{remediate.PhaseDeleting, remediate.PhaseCreating, tc.phase} {
				r.Phase, r.Spec, r.UpdatedAt, r.LastError = p, spec, t0, "why "+string(p)
				if err := m.Update(ctx, r); err != nil {
					t.Fatalf("Update to %s: %v", p, err)
				}
			}
			h, err := m.History(ctx, node, "p", "", t0.Add(time.Minute), cfg.Window)
			if err != nil {
				t.Fatalf("History: %v", err)
			}
			got := h.Recovery
			if got == nil {
				t.Fatal("History lost the recovery")
			}
			if gotSpec := got.Spec != nil; gotSpec != tc.wantSpec {
				t.Errorf("spec kept = %t, want %t", gotSpec, tc.wantSpec)
			}
			if got.Phase != tc.phase || got.Generation != 1 || !got.StartedAt.Equal(t0) || got.LastError != "why "+string(tc.phase) {
				t.Errorf("recovery = phase %s gen %d started %s error %q; want %s gen 1 started %s error %q",
					got.Phase, got.Generation, got.StartedAt, got.LastError, tc.phase, t0, "why "+string(tc.phase))
			}
			if diff := cmp.Diff([]time.Time{t0}, h.Recreates); diff != "" {
				t.Errorf("recreates the window counts (-want +got):\n%s", diff)
			}
		})
	}
}
