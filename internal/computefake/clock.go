package computefake

import (
	"container/heap"
	"time"
)

// Everything that happens later in the simulated Compute Engine (an
// operation ending, an instance reaching RUNNING, a MIG repairing, a
// maintenance window opening, a call that failed taking effect after all) is
// a timer on the server's clock. Timers run in tick, first thing on every
// request and in every helper, in the order of their time and then of their
// scheduling: a fake driven by a virtual clock and one caller does the same
// things in the same order on every run.

// timer is one thing to do at a time.
type timer struct {
	at  time.Time
	seq int
	fn  func()
}

// timerHeap is a min-heap of timers by (at, seq).
type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(*timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return t
}

// after schedules fn d after now (s.at: inside a timer, after the timer's
// own time, so chains of events keep their spacing however late the clock
// was read); d <= 0 runs it in this tick. Called with s.mu held.
func (s *Server) after(d time.Duration, fn func()) {
	s.timerSeq++
	heap.Push(&s.timers, &timer{at: s.at().Add(d), seq: s.timerSeq, fn: fn})
}

// tick runs every timer whose time has come, oldest first, including timers
// those timers schedule for a time already past. Called with s.mu held.
func (s *Server) tick() {
	now := s.now()
	for len(s.timers) > 0 && !s.timers[0].at.After(now) {
		t := heap.Pop(&s.timers).(*timer)
		s.clockAt = t.at
		t.fn()
	}
	s.clockAt = time.Time{}
}

// at is the time the fake records for what happens now: a timer's own time
// while it runs (an instance that reached RUNNING at 04:03 says 04:03 even
// when nobody looked until 04:10), else the clock's.
func (s *Server) at() time.Time {
	if !s.clockAt.IsZero() {
		return s.clockAt
	}
	return s.now()
}

// stamp formats t as Compute Engine's RFC 3339 timestamps with milliseconds
// and a numeric offset. The real API writes Pacific time (…-07:00); the fake
// writes UTC (…+00:00): parse them, never compare the strings.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000-07:00") }
