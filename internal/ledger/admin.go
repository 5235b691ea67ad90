package ledger

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// Admin is the ledger as `autoheal pause`, `resume`, `status` and `breaker`
// and replay use it: remediate.Ledger (the Store, the follower lease, the
// batched read of the sweep) plus the fleet-wide state a person manages.
// Memory and Firestore implement it.
type Admin interface {
	remediate.Ledger
	// SetPause records p (replacing a pause of the same scope and target);
	// from then on History returns it for the nodes it covers and Claim
	// refuses them with a *remediate.PausedError.
	SetPause(ctx context.Context, p remediate.Pause) error
	// ClearPause removes the pause of p's scope and target (Reason, By and
	// Since are ignored); existed is false when there was none.
	ClearPause(ctx context.Context, p remediate.Pause) (existed bool, err error)
	// Pauses lists every pause.
	Pauses(ctx context.Context) ([]remediate.Pause, error)
	// Holds lists every user hold with its expiry at now (the store's hold
	// TTL); expired ones are listed too, marked Expired.
	Holds(ctx context.Context, now time.Time) ([]HoldStatus, error)
	// ResetBreaker closes the zone's storm breaker: the starts counted so
	// far no longer count. Resetting a closed breaker is not an error.
	ResetBreaker(ctx context.Context, zone string) error
	// OpenBreakers lists the zones whose breaker is open at now under
	// cfg's BreakerLimit and BreakerWindow (Tripped: the trip was reported).
	OpenBreakers(ctx context.Context, now time.Time, cfg remediate.Config) ([]remediate.BreakerOpenError, error)
	// Histories is History (with no event id) for each of nodes, all of
	// project, in one read: Firestore answers a page of nodes with one
	// batched get of one small summary per node. One difference: the
	// Recovery of a finished (done or abandoned) recovery carries no Spec
	// (Decide reads the spec only of an unfinished recovery; History and
	// Claim return it in full).
	Histories(ctx context.Context, nodes []string, project string, now time.Time, window time.Duration) (map[string]remediate.History, error)
}

var errEmptyZone = errors.New("reset breaker: empty zone")

func holdStatus(h remediate.Hold, now time.Time, ttl time.Duration) HoldStatus {
	if ttl <= 0 {
		ttl = remediate.DefaultHoldTTL
	}
	exp := h.Since.Add(ttl)
	if h.Since.After(now.Add(ttl)) {
		exp = now // dated too far ahead: ignored already, and its Since+TTL may not even print
	}
	return HoldStatus{Hold: h, Expires: exp, Expired: holdExpired(h, now, ttl)}
}

func sortHolds(hs []HoldStatus) {
	sort.Slice(hs, func(i, j int) bool { return hs[i].Node < hs[j].Node })
}
