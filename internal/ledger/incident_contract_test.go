package ledger_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// runIncidentContract checks an IncidentStore: the first event wins, one
// open incident per node, MarkHealthy only once, closing ends it and a new
// one can then be opened.
func runIncidentContract(t *testing.T, newStore func(t *testing.T) remediate.IncidentStore) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC)
	const a, b = "projects/p/locations/z/nodes/a", "projects/p/locations/z/nodes/b"
	first := remediate.Incident{Node: a, Project: "p", Zone: "z", Cause: "maintenance", InsertID: "e1",
		FirstEvent: t0, OpenedAt: t0.Add(time.Second), AcceleratorType: "v4-8", Chips: 4}

	t.Run("first event wins while open", func(t *testing.T) {
		s := newStore(t)
		got, opened, err := s.OpenIncident(ctx, first)
		if err != nil || !opened {
			t.Fatalf("OpenIncident = %v, %v; want opened", opened, err)
		}
		if diff := cmp.Diff(first, got); diff != "" {
			t.Errorf("opened (-want +got):\n%s", diff)
		}
		later := first
		later.InsertID, later.FirstEvent = "e2", t0.Add(time.Minute)
		got, opened, err = s.OpenIncident(ctx, later)
		if err != nil || opened {
			t.Fatalf("second OpenIncident = %v, %v; want the open one", opened, err)
		}
		if diff := cmp.Diff(first, got); diff != "" {
			t.Errorf("second open returned (-want +got):\n%s", diff)
		}
		cur, ok, err := s.OpenIncidentOf(ctx, a)
		if err != nil || !ok {
			t.Fatalf("OpenIncidentOf = %v, %v", ok, err)
		}
		if diff := cmp.Diff(first, cur); diff != "" {
			t.Errorf("OpenIncidentOf (-want +got):\n%s", diff)
		}
		if _, ok, err := s.OpenIncidentOf(ctx, b); err != nil || ok {
			t.Errorf("OpenIncidentOf(unknown) = %v, %v; want none", ok, err)
		}
	})

	t.Run("healthy once, closed, then a new incident", func(t *testing.T) {
		s := newStore(t)
		if _, _, err := s.OpenIncident(ctx, first); err != nil {
			t.Fatal(err)
		}
		other := first
		other.Node = b
		if _, _, err := s.OpenIncident(ctx, other); err != nil {
			t.Fatal(err)
		}
		healthy := t0.Add(10 * time.Minute)
		if err := s.MarkHealthy(ctx, a, healthy); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkHealthy(ctx, a, healthy.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		open, err := s.OpenIncidents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wantA := first
		wantA.HealthyAt = healthy
		if diff := cmp.Diff([]remediate.Incident{wantA, other}, open); diff != "" {
			t.Errorf("OpenIncidents (-want +got):\n%s", diff)
		}
		if err := s.CloseIncident(ctx, a, healthy.Add(time.Minute), "resumed"); err != nil {
			t.Fatal(err)
		}
		if err := s.CloseIncident(ctx, a, healthy.Add(2*time.Minute), "again"); err != nil {
			t.Fatalf("closing a closed incident: %v", err)
		}
		if err := s.CloseIncident(ctx, "projects/p/locations/z/nodes/none", healthy, "none"); err != nil {
			t.Fatalf("closing no incident: %v", err)
		}
		if _, ok, _ := s.OpenIncidentOf(ctx, a); ok {
			t.Errorf("closed incident still open")
		}
		if err := s.MarkHealthy(ctx, a, healthy); err != nil {
			t.Fatalf("MarkHealthy of a closed incident: %v", err)
		}
		open, err = s.OpenIncidents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]remediate.Incident{other}, open); diff != "" {
			t.Errorf("OpenIncidents after close (-want +got):\n%s", diff)
		}
		late := first
		late.InsertID, late.FirstEvent = "e1-w7", t0.Add(30*time.Second) // delivered after the close
		if _, opened, err := s.OpenIncident(ctx, late); err != nil || opened {
			t.Errorf("OpenIncident of an event before the close = %v, %v; want no new incident", opened, err)
		}
		next := first
		next.InsertID, next.FirstEvent = "e9", t0.Add(24*time.Hour)
		got, opened, err := s.OpenIncident(ctx, next)
		if err != nil || !opened {
			t.Fatalf("OpenIncident after close = %v, %v; want opened", opened, err)
		}
		if diff := cmp.Diff(next, got); diff != "" {
			t.Errorf("new incident (-want +got):\n%s", diff)
		}
	})

	t.Run("concurrent opens keep one", func(t *testing.T) {
		s := newStore(t)
		var wg sync.WaitGroup
		var mu sync.Mutex
		opened := 0
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				inc := first
				inc.FirstEvent = t0.Add(time.Duration(i) * time.Second)
				_, ok, err := s.OpenIncident(ctx, inc)
				if err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					opened++
					mu.Unlock()
				}
			}(i)
		}
		wg.Wait()
		if opened != 1 {
			t.Errorf("%d concurrent opens succeeded, want 1", opened)
		}
	})

	t.Run("empty node is an error", func(t *testing.T) {
		if _, _, err := newStore(t).OpenIncident(ctx, remediate.Incident{}); err == nil {
			t.Error("OpenIncident(no node) succeeded")
		}
	})
}

func TestMemoryIncidentsMeetContract(t *testing.T) {
	runIncidentContract(t, func(*testing.T) remediate.IncidentStore { return ledger.NewMemoryIncidents() })
}
