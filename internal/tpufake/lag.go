package tpufake

import (
	"time"

	tpu "google.golang.org/api/tpu/v2"
)

// Read lag: a read after a write returns the old state for a while.
//
// With WithReadLag(d) every read (nodes.get, nodes.list, queuedResources.get)
// answers the fleet as it was d ago on the server's clock; a FailRule with
// Stale makes the reads it matches do so. Operations are read as they are:
// an operation's verdict is what lags behind the resource it changed, not
// the other way round.
//
// The server keeps the past states only while some lag can ask for them:
// from the first WithReadLag or Stale rule on, for as long as the longest
// lag, so a server without lag keeps no history at all.

// WithReadLag makes every read answer the state as it was d ago.
func WithReadLag(d time.Duration) Option {
	return func(s *Server) {
		s.readLag = d
		s.keepHistory(d)
	}
}

// history is the past states of one kind of resource, by name.
type history[T any] struct {
	past map[string][]version[T] // oldest first
}

// version is a state a resource had until a time; v nil: it did not exist.
type version[T any] struct {
	until time.Time
	v     *T
}

// maxVersions bounds the past states kept of one resource.
const maxVersions = 64

// record keeps cur (nil: absent) as the state name had until now.
func (h *history[T]) record(name string, cur *T, now time.Time, keep time.Duration) {
	if h.past == nil {
		h.past = map[string][]version[T]{}
	}
	vs := append(h.past[name], version[T]{until: now, v: clone(cur)})
	drop := 0
	for drop < len(vs) && (now.Sub(vs[drop].until) > keep || len(vs)-drop > maxVersions) {
		drop++
	}
	h.past[name] = vs[drop:]
}

// at is name's state at t given its current state cur: the first past
// state that still held at t, else cur.
func (h *history[T]) at(name string, cur *T, t time.Time) *T {
	for _, v := range h.past[name] {
		if v.until.After(t) {
			return v.v
		}
	}
	return cur
}

// keepHistory makes the server keep past states for at least d. Called
// with s.mu held or before the server starts.
func (s *Server) keepHistory(d time.Duration) {
	if d > s.historyKeep {
		s.historyKeep = d
	}
}

// touch keeps node name's current state (nil when absent) before a change.
// Called with s.mu held, before every change of s.nodes[name].
func (s *Server) touch(name string) {
	if s.historyKeep <= 0 {
		return
	}
	s.nodeHist.record(name, s.nodes[name], s.now(), s.historyKeep)
}

// touchQR is touch for a queued resource.
func (s *Server) touchQR(name string) {
	if s.historyKeep <= 0 {
		return
	}
	s.qrHist.record(name, s.qrs[name], s.now(), s.historyKeep)
}

// nodeAt is node name as a read at asOf sees it (zero: now), or nil.
// Called with s.mu held.
func (s *Server) nodeAt(name string, asOf time.Time) *tpu.Node {
	cur := s.nodes[name]
	if asOf.IsZero() || s.historyKeep <= 0 {
		return cur
	}
	return s.nodeHist.at(name, cur, asOf)
}

// qrAt is nodeAt for a queued resource.
func (s *Server) qrAt(name string, asOf time.Time) *tpu.QueuedResource {
	cur := s.qrs[name]
	if asOf.IsZero() || s.historyKeep <= 0 {
		return cur
	}
	return s.qrHist.at(name, cur, asOf)
}

// nodeNamesAt is every node name a read at asOf may see, in first-seen
// order. Called with s.mu held.
func (s *Server) nodeNamesAt(asOf time.Time) []string {
	if asOf.IsZero() || s.historyKeep <= 0 {
		return sortedKeys(s.order, s.nodes)
	}
	seen := make(map[string]bool, len(s.nodes)+len(s.nodeHist.past))
	for name := range s.nodes {
		seen[name] = true
	}
	for name := range s.nodeHist.past {
		seen[name] = true
	}
	return sortedKeys(s.order, seen)
}

// readTime is when a read of rt reads the fleet: the rule's Stale, else
// the server's read lag, before now; zero means now. Called with s.mu held.
func (s *Server) readTime(rpc string, fail *FailRule) time.Time {
	if !isRead(rpc) {
		return time.Time{}
	}
	lag := s.readLag
	if fail != nil && fail.Stale > 0 {
		lag = fail.Stale
	}
	if lag <= 0 {
		return time.Time{}
	}
	return s.now().Add(-lag)
}
