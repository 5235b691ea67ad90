package computefake

import (
	"time"

	compute "google.golang.org/api/compute/v1"
)

// Read lag: after a mutating call with a ReadLag rule, instances.get,
// instances.list and aggregatedList show the instance as it was before the
// call (or not at all, when it did not exist) until the lag has passed on the
// server's clock; then they show it as it is. A later write during the lag
// keeps the older view and extends the lag to the later end, as a replica
// that is behind stays behind.

// lag is the stale view of one instance.
type lag struct {
	before *compute.Instance // nil: the instance did not exist
	until  time.Time
}

// snapshot is a copy of the instance named key as it is now, nil if absent.
// Called with s.mu held.
func (s *Server) snapshot(key string) *compute.Instance {
	if in, ok := s.instances[key]; ok {
		return clone(in.res)
	}
	return nil
}

// startLag makes reads of key show before for d. Called with s.mu held.
func (s *Server) startLag(key string, before *compute.Instance, d time.Duration) {
	until := s.at().Add(d)
	if old, ok := s.lags[key]; ok && s.at().Before(old.until) {
		before = old.before
		if old.until.After(until) {
			until = old.until
		}
	}
	s.lags[key] = lag{before: before, until: until}
	s.remember(key)
}

// view is what a read of key sees now: the lagged view while a lag lasts,
// else the instance. Called with s.mu held.
func (s *Server) view(key string) (*compute.Instance, bool) {
	if l, ok := s.lags[key]; ok {
		if s.at().Before(l.until) {
			return l.before, l.before != nil
		}
		delete(s.lags, key)
	}
	in, ok := s.instances[key]
	if !ok {
		return nil, false
	}
	return in.res, true
}
