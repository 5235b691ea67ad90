package tpufake

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"
)

// The outcomes a caller cannot see.
//
// A real control plane answers a mutating call with an error and carries it
// out anyway, now or later; it loses the answer of a call it carried out;
// it ends an operation in error after the operation took effect, or leaves
// the resource half-way. A FailRule says which of these a call meets:
//
//   - on a request (nodes.create, nodes.delete, queuedResources.reset,
//     nodes.performMaintenance, queuedResources.performMaintenanceQueuedResource,
//     nodes.patch): Effect EffectNow carries the call out and then answers the
//     rule's error (500 INTERNAL when it gives none), or hangs (Hang), or drops
//     the connection (Drop); EffectLater answers the error and carries the call
//     out EffectDelay later on the server's clock; EffectAfterDeadline, with
//     Hang, carries it out when the caller gives up waiting;
//   - on an operation ("operation:"+RPC): the operation ends with the rule's
//     error and, with EffectNow, after its effect took place (the node is
//     deleted, created READY, reset, out of maintenance); with EffectLater the
//     resource stays half-way (DELETING, CREATING, in maintenance) and the
//     effect lands EffectDelay later; with EffectStuck it stays half-way until
//     something else moves it. EffectNone (the default) is a clean failure: a
//     delete leaves the node in its state before, a create removes the node.
//
// Deferred effects run in time order on the first request (or Fleet, AuditLog,
// Act) at or after their time, before that request is served: a caller sees
// them exactly when the server's clock says they landed.

// Effect is what a failed call does to the fleet anyway.
type Effect int

// Effects (see the comment above).
const (
	EffectNone          Effect = iota // nothing: a clean failure
	EffectNow                         // carried out before the failure is answered
	EffectLater                       // carried out EffectDelay after the request
	EffectAfterDeadline               // request with Hang: carried out once the caller gives up
	EffectStuck                       // operation: the resource stays half-way
)

var effectNames = [...]string{"none", "now", "later", "after-deadline", "stuck"}

func (e Effect) String() string {
	if e >= 0 && int(e) < len(effectNames) {
		return effectNames[e]
	}
	return "effect(?)"
}

// effect is the rule's Effect, Lost and Malformed meaning EffectNow.
func (f *FailRule) effect() Effect {
	if f.Effect == EffectNone && (f.Lost || f.Malformed) {
		return EffectNow
	}
	return f.Effect
}

// pending is a deferred effect: a call carried out late, an operation's
// effect landing late, or a person's act at its time.
type pending struct {
	at  time.Time
	seq int
	run func() // takes s.mu itself
}

// deferAt queues run for the first request at or after at. Called with s.mu
// held.
func (s *Server) deferAt(at time.Time, run func()) {
	s.pendSeq++
	s.pend = append(s.pend, pending{at: at, seq: s.pendSeq, run: run})
}

// runDue runs the deferred effects whose time has come, oldest first (then
// in the order they were queued), each outside the lock, after the timed
// operations that finished before it: a late delete lands on the fleet as
// it was at its time. An effect may queue another; one that is already due
// runs in the same call.
func (s *Server) runDue() {
	for {
		s.mu.Lock()
		now := s.now()
		best := -1
		for i, p := range s.pend {
			if p.at.After(now) {
				continue
			}
			if best < 0 || p.at.Before(s.pend[best].at) || p.at.Equal(s.pend[best].at) && p.seq < s.pend[best].seq {
				best = i
			}
		}
		if best < 0 {
			s.mu.Unlock()
			return
		}
		p := s.pend[best]
		s.pend = slices.Delete(s.pend, best, best+1)
		s.tickUntil(p.at)
		s.mu.Unlock()
		p.run()
	}
}

// deferCall carries the request out d after now (EffectLater on a request).
// Called without s.mu.
func (s *Server) deferCall(d time.Duration, r *http.Request, rt route, body []byte) {
	req := r.Clone(context.Background())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deferAt(s.now().Add(d), func() { _, _ = s.dispatch(req, rt, body) })
}

// drop closes the connection under w without an answer.
func drop(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	// No hijacking (HTTP/2): the closest is an aborted handler.
	panic(http.ErrAbortHandler)
}

// isRead reports whether rpc reads the fleet (and so may read it late).
func isRead(rpc string) bool {
	switch rpc {
	case "nodes.get", "nodes.list", "queuedResources.get":
		return true
	}
	return false
}

// WaitIdle returns once no request is being served: a hung request whose
// caller gave up has then carried out its EffectAfterDeadline, a dropped
// one its effect. Tests call it after a call that failed on their side to
// know the server is done with it.
func (s *Server) WaitIdle() { s.busy.wait() }

// inFlight counts requests being served.
type inFlight struct {
	mu   sync.Mutex
	cond *sync.Cond
	n    int
}

func (f *inFlight) enter() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

func (f *inFlight) leave() {
	f.mu.Lock()
	f.n--
	if f.n == 0 && f.cond != nil {
		f.cond.Broadcast()
	}
	f.mu.Unlock()
}

func (f *inFlight) wait() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cond == nil {
		f.cond = sync.NewCond(&f.mu)
	}
	for f.n > 0 {
		f.cond.Wait()
	}
}
