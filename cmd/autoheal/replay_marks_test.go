package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

func TestMarkWindowForgetsMarksNoLaterEntryCanRepeat(t *testing.T) {
	// The wall clock: marks never expire during the run, as in replay's
	// default --clock=wall.
	store := ledger.NewMemory()
	w := &markWindow{store: store}
	ctx := context.Background()
	t0 := time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC)
	key := func(i int) string {
		return remediate.EventKey(events.Event{InsertID: fmt.Sprintf("e-%d", i), Time: t0.Add(time.Duration(i) * time.Second), LogName: "projects/p/logs/x"})
	}
	const n = 50000
	for i := range n {
		w.seen(t0.Add(time.Duration(i) * time.Second))
		if _, err := store.MarkEvent(ctx, key(i), time.Now().Add(time.Hour)); err != nil {
			t.Fatalf("MarkEvent: %v", err)
		}
	}
	left := store.ForgetEvents(func(string, time.Time) bool { return false })
	if max := 2*minMarkPurge + int(markSlack/time.Second); left > max {
		t.Errorf("marks held after %d entries a second apart = %d, want at most %d", n, left, max)
	}
	// The latest entries are still recognised as duplicates.
	if first, _ := store.MarkEvent(ctx, key(n-1), time.Now().Add(time.Hour)); first {
		t.Error("the mark of the newest entry was forgotten")
	}
	if first, _ := store.MarkEvent(ctx, key(n-int(markSlack/time.Second)+1), time.Now().Add(time.Hour)); first {
		t.Error("a mark within the slack was forgotten")
	}
}

func TestEventKeyTimeIsTheEntryTimestamp(t *testing.T) {
	ts := time.Date(2026, 11, 20, 3, 4, 5, 600, time.UTC)
	got, ok := remediate.EventKeyTime(remediate.EventKey(events.Event{InsertID: "a|b", Time: ts, LogName: "projects/p/logs/x"}))
	if !ok || !got.Equal(ts) {
		t.Errorf("EventKeyTime = %v, %v; want %v", got, ok, ts)
	}
	if _, ok := remediate.EventKeyTime("maintenance:projects/p/locations/z/nodes/n:2026-11-20T03:00:00Z"); ok {
		t.Error("EventKeyTime of a synthetic maintenance id: ok, want not an entry key")
	}
}
