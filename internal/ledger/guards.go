package ledger

import (
	"fmt"
	"sort"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// This file holds the ledger's zone- and fleet-wide guards, pure like
// claim.go: the storm breaker (#9), pauses and the hold TTL (#12). Claim
// applies them around the per-node rules of claim(), inside the same atomic
// section.

// breakerState is the storm breaker of one zone: the start times of the
// recreates and resets claimed in the zone, oldest first, and until when the
// current trip was already reported.
type breakerState struct {
	Zone   string
	Starts []time.Time
	// TrippedUntil is the Until of the last refusal reported as Tripped: a
	// refusal before it belongs to the same trip. The breaker closes at the
	// latest then (the oldest counted start leaves the window), so the first
	// refusal at or after it is a new trip. Reset clears it.
	TrippedUntil time.Time
	// PauseSeq is bumped by every pause written for a zone of no known
	// project, so a claim that read no pause cannot commit past one (see
	// Firestore.SetPause).
	PauseSeq int64
}

// breakerLimits returns the breaker's limit and window, with the defaults
// for zero values.
func breakerLimits(cfg remediate.Config) (int, time.Duration) {
	limit, window := cfg.BreakerLimit, cfg.BreakerWindow
	if limit <= 0 {
		limit = remediate.DefaultBreakerLimit
	}
	if window <= 0 {
		window = remediate.DefaultBreakerWindow
	}
	return limit, window
}

// countsForBreaker reports whether a new claim for action starts a
// destructive recovery the breaker counts.
func countsForBreaker(a remediate.Action) bool {
	return a == remediate.ActionRecreate || a == remediate.ActionReset
}

// claimZone is the zone the breaker of req is counted in: req.Zone, else the
// zone in the node's name.
func claimZone(req remediate.ClaimRequest) string {
	if req.Zone != "" {
		return req.Zone
	}
	_, zone := remediate.NodeProjectZone(req.Node)
	return zone
}

// counted returns the starts within (now-window, ∞): a start after now
// (another claimant's clock ahead of ours) is counted too.
func (b breakerState) counted(now time.Time, window time.Duration) []time.Time {
	i := sort.Search(len(b.Starts), func(i int) bool { return b.Starts[i].After(now.Add(-window)) })
	return b.Starts[i:]
}

// breakerAdmit counts a new start at now in the zone's breaker, or refuses it
// when limit starts are already counted within the window. The returned
// state is the one to save: on success with the start added (and starts that
// left the window dropped), on a Tripped refusal with the trip marked, else
// unchanged (write reports whether anything must be saved).
func breakerAdmit(b breakerState, zone string, now time.Time, cfg remediate.Config) (next breakerState, write bool, open *remediate.BreakerOpenError) {
	limit, window := breakerLimits(cfg)
	b.Zone = zone
	starts := b.counted(now, window)
	if len(starts) >= limit {
		until := starts[len(starts)-limit].Add(window)
		open = &remediate.BreakerOpenError{
			Zone: zone, Started: len(starts), Limit: limit, Window: window, Until: until,
			Tripped: !now.Before(b.TrippedUntil),
		}
		if open.Tripped {
			b.Starts = append([]time.Time(nil), starts...)
			b.TrippedUntil = until
			return b, true, open
		}
		return b, false, open
	}
	// Appending in place is safe: the caller saves the result or drops it,
	// and the slots past len(starts) belong to no saved state.
	next = b
	if n := len(starts); n == 0 || !starts[n-1].After(now) {
		next.Starts = append(starts, now)
	} else {
		i := sort.Search(n, func(i int) bool { return starts[i].After(now) })
		next.Starts = make([]time.Time, 0, n+1)
		next.Starts = append(append(append(next.Starts, starts[:i]...), now), starts[i:]...)
	}
	return next, true, nil
}

// breakerOpen reports the breaker as an open-breaker error when it is open
// at now, for status; Tripped says whether the trip was reported.
func breakerOpen(b breakerState, now time.Time, cfg remediate.Config) *remediate.BreakerOpenError {
	limit, window := breakerLimits(cfg)
	starts := b.counted(now, window)
	if len(starts) < limit {
		return nil
	}
	until := starts[len(starts)-limit].Add(window)
	return &remediate.BreakerOpenError{
		Zone: b.Zone, Started: len(starts), Limit: limit, Window: window, Until: until,
		Tripped: now.Before(b.TrippedUntil),
	}
}

// pauseKey is the ledger key of a pause: one pause per scope and target.
func pauseKey(p remediate.Pause) string {
	switch p.Scope {
	case remediate.PauseNode:
		return "node:" + p.Node
	case remediate.PauseZone:
		return "zone:" + p.Zone + ":" + p.Project
	case remediate.PauseProject:
		return "project:" + p.Project
	}
	return ""
}

// pauseKeysFor lists the keys of every pause that could cover node,
// narrowest first: the node, its zone in its project, its zone in every
// project, its project.
func pauseKeysFor(node string) []string {
	project, zone := remediate.NodeProjectZone(node)
	keys := []string{pauseKey(remediate.Pause{Scope: remediate.PauseNode, Node: node})}
	if zone != "" {
		keys = append(keys,
			pauseKey(remediate.Pause{Scope: remediate.PauseZone, Zone: zone, Project: project}),
			pauseKey(remediate.Pause{Scope: remediate.PauseZone, Zone: zone}))
	}
	if project != "" {
		keys = append(keys, pauseKey(remediate.Pause{Scope: remediate.PauseProject, Project: project}))
	}
	return keys
}

// narrowestPause returns the first pause found under keys (narrowest first)
// that covers node, or nil.
func narrowestPause(node string, keys []string, lookup func(key string) (remediate.Pause, bool)) *remediate.Pause {
	for _, k := range keys {
		if p, ok := lookup(k); ok && p.Covers(node) {
			return &p
		}
	}
	return nil
}

// ValidatePause checks that p names exactly what its scope needs.
func ValidatePause(p remediate.Pause) error {
	switch p.Scope {
	case remediate.PauseNode:
		if pr, z := remediate.NodeProjectZone(p.Node); pr == "" || z == "" {
			return fmt.Errorf("pause: node %q is not projects/P/locations/Z/nodes/N", p.Node)
		}
	case remediate.PauseZone:
		if p.Zone == "" {
			return fmt.Errorf("pause: zone scope needs a zone")
		}
	case remediate.PauseProject:
		if p.Project == "" {
			return fmt.Errorf("pause: project scope needs a project")
		}
	default:
		return fmt.Errorf("pause: scope %q: want project, zone or node", p.Scope)
	}
	return nil
}

// holdExpired reports whether the hold is past its TTL at now: older than
// ttl, or dated more than ttl ahead of now (a forged or broken clock), so no
// entry can hold a node for ever.
func holdExpired(h remediate.Hold, now time.Time, ttl time.Duration) bool {
	if ttl <= 0 {
		ttl = remediate.DefaultHoldTTL
	}
	return !now.Before(h.Since.Add(ttl)) || h.Since.After(now.Add(ttl))
}

// HoldStatus is a hold as `autoheal status` lists it.
type HoldStatus struct {
	remediate.Hold
	Expires time.Time // when History stops returning it (now, for a hold dated more than the TTL ahead)
	Expired bool      // already ignored
}

// sameDeferral reports whether b would store nothing new over a.
func sameDeferral(a, b remediate.Deferral) bool {
	return a.Node == b.Node && a.Project == b.Project && a.Since.Equal(b.Since) && a.Due.Equal(b.Due) && a.Reason == b.Reason
}

// sortPauses orders pauses by scope key.
func sortPauses(ps []remediate.Pause) {
	sort.Slice(ps, func(i, j int) bool { return pauseKey(ps[i]) < pauseKey(ps[j]) })
}
