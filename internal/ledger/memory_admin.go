package ledger

import (
	"context"
	"sort"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

var _ Admin = (*Memory)(nil)

// SetPause implements Admin.
func (m *Memory) SetPause(ctx context.Context, p remediate.Pause) error {
	if err := ValidatePause(p); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pauses[pauseKey(p)] = p
	return nil
}

// ClearPause implements Admin.
func (m *Memory) ClearPause(ctx context.Context, p remediate.Pause) (bool, error) {
	if err := ValidatePause(p); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := pauseKey(p)
	stored, ok := m.pauses[k]
	if ok {
		// The time it held recoveries back does not count toward their
		// age bound (remediate.RecoveryAge), counted once where pauses
		// overlap.
		now := m.clock()
		var standing []remediate.Pause
		for pk, q := range m.pauses {
			if pk != k {
				standing = append(standing, q)
			}
		}
		for _, n := range m.nodes {
			if r := n.Latest; r != nil && r.Unfinished() && stored.Covers(r.Node) {
				r.Paused += remediate.ClearedPauseTime(stored, standing, *r, now)
			}
		}
	}
	delete(m.pauses, k)
	return ok, nil
}

// Pauses implements Admin.
func (m *Memory) Pauses(ctx context.Context) ([]remediate.Pause, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]remediate.Pause, 0, len(m.pauses))
	for _, p := range m.pauses {
		out = append(out, p)
	}
	sortPauses(out)
	return out, nil
}

// Holds implements Admin.
func (m *Memory) Holds(ctx context.Context, now time.Time) ([]HoldStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]HoldStatus, 0, len(m.holds))
	for _, h := range m.holds {
		out = append(out, holdStatus(h, now, m.holdTTL))
	}
	sortHolds(out)
	return out, nil
}

// ResetBreaker implements Admin.
func (m *Memory) ResetBreaker(ctx context.Context, zone string) error {
	if zone == "" {
		return errEmptyZone
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.breakers[zone]; b != nil {
		b.Starts, b.TrippedUntil = nil, time.Time{}
	}
	return nil
}

// OpenBreakers implements Admin.
func (m *Memory) OpenBreakers(ctx context.Context, now time.Time, cfg remediate.Config) ([]remediate.BreakerOpenError, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []remediate.BreakerOpenError
	for _, b := range m.breakers {
		if o := breakerOpen(*b, now, cfg); o != nil {
			out = append(out, *o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Zone < out[j].Zone })
	return out, nil
}

// Histories implements Admin: History of each node, without an event id
// (and, as Admin says, without the spec of a finished recovery).
func (m *Memory) Histories(ctx context.Context, nodes []string, project string, now time.Time, window time.Duration) (map[string]remediate.History, error) {
	out := make(map[string]remediate.History, len(nodes))
	for _, n := range nodes {
		h, err := m.History(ctx, n, project, "", now, window)
		if err != nil {
			return nil, err
		}
		if h.Recovery != nil && !h.Recovery.Unfinished() {
			h.Recovery.Spec = nil // as Firestore's summaries
		}
		out[n] = h
	}
	return out, nil
}
