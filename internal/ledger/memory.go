package ledger

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// Memory is a remediate.Store held in memory, for replay and tests. It is
// safe for concurrent use; every method is atomic. It returns copies: a spec
// handed to or returned by Memory is never shared with the caller.
type Memory struct {
	clock func() time.Time

	mu     sync.Mutex
	events map[string]time.Time // event id → expiry
	// purgeAt is the size of events at which MarkEvent next drops the
	// expired marks: twice the size left by the last purge, so the scan
	// costs O(1) amortized per mark and the map holds at most twice the
	// live marks.
	purgeAt   int
	nodes     map[string]*nodeLedger
	deferrals map[string]remediate.Deferral
	holds     map[string]remediate.Hold
	cursor    string
	pauses    map[string]remediate.Pause // by pauseKey
	breakers  map[string]*breakerState   // by zone
	gate      SweepGate                  // control.go
	nonces    map[string]time.Time       // control.go: nonce → expiry
	holdTTL   time.Duration
	// inFlight counts the unfinished recoveries per project, kept by
	// setNodeLocked so that History and Claim are O(1) in the number of
	// nodes the ledger ever saw.
	inFlight map[string]int
	// deferralWrites counts SetDeferral calls that changed something (a
	// test observes that unchanged deferrals are not rewritten).
	deferralWrites int

	follower memoryFollower // memory_follower.go
}

var _ remediate.Store = (*Memory)(nil)

// Option configures a store.
type Option func(*options)

type options struct {
	clock   func() time.Time
	prefix  string
	holdTTL time.Duration
}

// WithHoldTTL sets how long a user hold lasts (Config.HoldTTL,
// AUTOHEAL_HOLD_TTL; default remediate.DefaultHoldTTL): History ignores a
// hold older than that, or dated further than that ahead of its now.
func WithHoldTTL(ttl time.Duration) Option {
	return func(o *options) { o.holdTTL = ttl }
}

// WithClock sets the clock MarkEvent compares event expiries with (default
// time.Now). Replay against a simulated clock passes the same clock as the
// handler, else events marked with an expiry in the simulated past would be
// forgotten at once.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.clock = now }
}

// WithPrefix prefixes every Firestore collection name (test isolation, or
// several deployments sharing one database). Memory ignores it.
func WithPrefix(prefix string) Option {
	return func(o *options) { o.prefix = prefix }
}

func buildOptions(opts []Option) options {
	o := options{clock: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	if o.clock == nil {
		o.clock = time.Now
	}
	if o.holdTTL <= 0 {
		o.holdTTL = remediate.DefaultHoldTTL
	}
	return o
}

// NewMemory returns an empty in-memory store.
func NewMemory(opts ...Option) *Memory {
	o := buildOptions(opts)
	return &Memory{
		clock:     o.clock,
		events:    map[string]time.Time{},
		nodes:     map[string]*nodeLedger{},
		deferrals: map[string]remediate.Deferral{},
		holds:     map[string]remediate.Hold{},
		pauses:    map[string]remediate.Pause{},
		breakers:  map[string]*breakerState{},
		inFlight:  map[string]int{},
		holdTTL:   o.holdTTL,
	}
}

// setNodeLocked stores the node's next ledger and keeps the per-project
// in-flight counts in step.
func (m *Memory) setNodeLocked(node string, next *nodeLedger) {
	if old := m.nodes[node]; old != nil && old.Latest != nil && old.Latest.Unfinished() {
		m.inFlight[old.Latest.Project]--
		if m.inFlight[old.Latest.Project] == 0 {
			delete(m.inFlight, old.Latest.Project)
		}
	}
	if next.Latest != nil && next.Latest.Unfinished() {
		m.inFlight[next.Latest.Project]++
	}
	compactFinished(next)
	m.nodes[node] = next
}

// compactFinished drops the saved spec of a recovery that ended on its own
// terms (recovered, closed, or a legacy done): nothing reads it any more —
// Decide judges a node by its saved spec only while the recovery is
// unfinished, and Histories leaves it out — and a spec carries the node's
// startup script (tens of KB), so a long replay would keep one per node it
// ever recovered. An abandoned recovery keeps its spec: a person recreates
// the node from it (`autoheal status --node N --spec`). What the guards read
// (phase, generation, timestamps, the recreate times) is kept.
func compactFinished(n *nodeLedger) {
	if n.Latest == nil || n.Latest.Spec == nil {
		return
	}
	switch n.Latest.Phase {
	case remediate.PhaseRecovered, remediate.PhaseClosed, remediate.PhaseDone:
		r := *n.Latest
		r.Spec = nil
		n.Latest = &r
	}
}

// MarkEvent implements remediate.Store. A mark whose expiry has passed (by the
// store's clock) counts as absent.
func (m *Memory) MarkEvent(ctx context.Context, id string, expire time.Time) (bool, error) {
	if id == "" {
		return false, fmt.Errorf("mark event: empty id")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock()
	if exp, ok := m.events[id]; ok && exp.After(now) {
		return false, nil
	}
	m.events[id] = expire
	if len(m.events) >= max(m.purgeAt, minPurge) {
		m.forgetEventsLocked(func(_ string, exp time.Time) bool { return !exp.After(now) })
	}
	return true, nil
}

// minPurge is the number of marks below which MarkEvent never purges.
const minPurge = 1024

// ForgetEvents drops the marks for which forget says so (an expired mark
// counts as absent anyway; replay also drops marks no later entry can
// repeat). It returns how many marks are left.
func (m *Memory) ForgetEvents(forget func(id string, expire time.Time) bool) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.forgetEventsLocked(forget)
}

// forgetEventsLocked is ForgetEvents with m.mu held.
func (m *Memory) forgetEventsLocked(forget func(id string, expire time.Time) bool) int {
	for id, exp := range m.events {
		if forget(id, exp) {
			delete(m.events, id)
		}
	}
	if len(m.events) == 0 {
		// A Go map never shrinks its buckets: start a fresh one.
		m.events = map[string]time.Time{}
	}
	m.purgeAt = 2 * len(m.events)
	return len(m.events)
}

// History implements remediate.Store.
func (m *Memory) History(ctx context.Context, node, project, eventID string, now time.Time, window time.Duration) (remediate.History, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var h remediate.History
	if eventID != "" {
		if exp, ok := m.events[eventID]; ok && exp.After(now) {
			h.EventSeen = true
		}
	}
	if n := m.nodes[node]; n != nil {
		if n.Latest != nil {
			r := upgradeRecovery(cloneRecovery(*n.Latest)) // legacy.go
			h.Recovery = &r
		}
		h.Recreates = recreatesWithin(n.Recreates, now, window)
	}
	h.InFlight = m.inFlightLocked(project, node)
	if d, ok := m.deferrals[node]; ok {
		h.Deferral = &d
	}
	if hd, ok := m.holds[node]; ok && !holdExpired(hd, now, m.holdTTL) {
		h.Hold = &hd
	}
	h.Pause = m.pauseLocked(node)
	return h, nil
}

// inFlightLocked counts the unfinished recoveries in project of nodes other
// than node, in O(1).
func (m *Memory) inFlightLocked(project, node string) int {
	c := m.inFlight[project]
	if n := m.nodes[node]; n != nil && n.Latest != nil && n.Latest.Project == project && n.Latest.Unfinished() {
		c--
	}
	return c
}

func (m *Memory) pauseLocked(node string) *remediate.Pause {
	return narrowestPause(node, pauseKeysFor(node), func(k string) (remediate.Pause, bool) {
		p, ok := m.pauses[k]
		return p, ok
	})
}

// Claim implements remediate.Store.
func (m *Memory) Claim(ctx context.Context, req remediate.ClaimRequest) (remediate.Recovery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var cur nodeLedger
	if n := m.nodes[req.Node]; n != nil {
		cur = *n
	}
	var b breakerState
	zone := claimZone(req)
	if p := m.breakers[zone]; p != nil {
		b = *p
	}
	next, nb, writeBreaker, rec, err := claimGuarded(cur, m.inFlightLocked(req.Project, req.Node), m.pauseLocked(req.Node), b, req)
	if writeBreaker {
		m.breakers[zone] = &nb
	}
	if err != nil {
		return remediate.Recovery{}, err
	}
	m.setNodeLocked(req.Node, &next)
	return rec, nil
}

// Update implements remediate.Store.
func (m *Memory) Update(ctx context.Context, rec remediate.Recovery) error {
	if err := checkSpecSize(rec); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var cur nodeLedger
	if n := m.nodes[rec.Node]; n != nil {
		cur = *n
		cur.Recreates = append([]time.Time(nil), n.Recreates...)
	}
	next, err := update(cur, rec)
	if err != nil {
		return err
	}
	m.setNodeLocked(rec.Node, &next)
	return nil
}

// Unfinished implements remediate.Store; recoveries are sorted by node name.
func (m *Memory) Unfinished(ctx context.Context) ([]remediate.Recovery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []remediate.Recovery
	for _, n := range m.nodes {
		if n.Latest != nil && n.Latest.Unfinished() {
			out = append(out, upgradeRecovery(cloneRecovery(*n.Latest))) // legacy.go
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

// SetDeferral implements remediate.Store.
func (m *Memory) SetDeferral(ctx context.Context, d remediate.Deferral) error {
	if d.Node == "" {
		return fmt.Errorf("set deferral: empty node")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.deferrals[d.Node]; ok && sameDeferral(old, d) {
		return nil
	}
	m.deferrals[d.Node] = d
	m.deferralWrites++
	return nil
}

// ClearDeferral implements remediate.Store; clearing an absent deferral is
// not an error.
func (m *Memory) ClearDeferral(ctx context.Context, node string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.deferrals, node)
	return nil
}

// SetHold implements remediate.Store.
func (m *Memory) SetHold(ctx context.Context, h remediate.Hold) error {
	if h.Node == "" {
		return fmt.Errorf("set hold: empty node")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.holds[h.Node] = h
	return nil
}

// ClearHold implements remediate.Store; clearing an absent hold is not an
// error.
func (m *Memory) ClearHold(ctx context.Context, node string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.holds, node)
	return nil
}

// DueDeferrals implements remediate.Store; deferrals are sorted by due time,
// then node name.
func (m *Memory) DueDeferrals(ctx context.Context, now time.Time) ([]remediate.Deferral, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []remediate.Deferral
	for _, d := range m.deferrals {
		if !d.Due.After(now) {
			out = append(out, d)
		}
	}
	sortDeferrals(out)
	return out, nil
}

func sortDeferrals(ds []remediate.Deferral) {
	sort.Slice(ds, func(i, j int) bool {
		if !ds[i].Due.Equal(ds[j].Due) {
			return ds[i].Due.Before(ds[j].Due)
		}
		return ds[i].Node < ds[j].Node
	})
}

// SweepCursor implements remediate.Store.
func (m *Memory) SweepCursor(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cursor, nil
}

// KeepEvidence implements remediate.Store.
func (m *Memory) KeepEvidence(ctx context.Context, node string, e remediate.Evidence) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.nodes[node]
	if cur == nil {
		return false, nil
	}
	next, kept := keepEvidence(*cur, e)
	if kept {
		m.setNodeLocked(node, &next)
	}
	return kept, nil
}

// SetSweepCursor implements remediate.Store.
func (m *Memory) SetSweepCursor(ctx context.Context, cursor string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cursor = cursor
	return nil
}
