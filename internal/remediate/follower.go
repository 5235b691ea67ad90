package remediate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"
)

// FollowerLease is the ledger's lease on following: at most one run (a
// follow kick, or a sweep's follow phase) follows the unfinished recoveries
// at a time, so that a wave's many kicks start one follower, not one per
// pod. A ledger may offer it (both ledger stores do), given as Deps.Lease;
// without it every run follows, as before kicks existed.
type FollowerLease interface {
	// TakeFollower takes the lease for holder until until, when it is free
	// (never taken, released, or expired at now) or already holder's. It is
	// a conditional write: of concurrent takers exactly one gets true.
	TakeFollower(ctx context.Context, holder string, now, until time.Time) (bool, error)
	// ReleaseFollower frees the lease if holder holds it (else nothing).
	ReleaseFollower(ctx context.Context, holder string) error
	// FollowerHeld reports whether someone's lease is live at now.
	FollowerHeld(ctx context.Context, now time.Time) (bool, error)
	// ClaimKick is asked by whoever would publish a follow kick: false
	// when the lease is live at now, or a kick noted less than pending
	// before now has not been answered yet (ClearKick); else it notes a
	// kick pending at now and returns true: the caller publishes. Of
	// concurrent callers at most one gets true.
	ClaimKick(ctx context.Context, now time.Time, pending time.Duration) (bool, error)
	// ClearKick forgets the pending kick: a follow run is answering it.
	ClearKick(ctx context.Context) error
}

// KickPending is how long a published kick keeps other deliveries from
// publishing another while no follow run has answered it: the time a kick
// may take to come back through Pub/Sub and a cold start. A kick that was
// lost costs at most this (or the wait for the minute sweep).
const KickPending = 30 * time.Second

// FollowResult is what a follow run did.
type FollowResult struct {
	Records []Record
	// Followed: the run took the follower lease (or the Store has none)
	// and followed; false when another follower held it, or nothing was
	// unfinished.
	Followed bool
	// Chain: the run ended its window while a recovery still has a look
	// due within the next window: the caller publishes one more follow kick
	// so that following goes on without waiting for the next sweep. Only a
	// lease holder chains.
	Chain bool
}

// Follow follows the unfinished recoveries for up to window on the wall
// clock, taking each one's next step when it is due, as a sweep's follow
// phase does but without listing nodes or looking at deferrals (deferrals
// wait minutes of grace; the minute sweep is soon enough for them). It is
// what a follow kick runs. It follows only under the follower lease; a run
// that cannot take it returns at once. The error says why it could not
// follow (the ledger failed); Records and Chain hold what it did anyway.
func (h *Handler) Follow(ctx context.Context, window time.Duration) (FollowResult, error) {
	var res FollowResult
	if window <= 0 {
		return res, nil
	}
	start := h.Now()
	over := func() bool { return ctx.Err() != nil }
	if lease := h.Lease; lease != nil {
		// First, before looking for anything to follow: a delivery that
		// saw this kick pending and did not publish saved its recovery
		// before it looked, so the look below sees that recovery.
		if err := lease.ClearKick(ctx); err != nil {
			h.Log.Warn("follow: clear the pending kick failed; deliveries kick again once it is stale", "error", err.Error())
		}
	}
	var mu sync.Mutex
	add := func(r Record, recorded bool) {
		if recorded {
			mu.Lock()
			res.Records = append(res.Records, r)
			mu.Unlock()
		}
	}
	followed, chain, err := h.followLeased(ctx, start, window, over, add)
	res.Followed, res.Chain = followed, chain
	return res, err
}

// followLeased is the follow phase of a sweep or a follow kick: when any
// recovery is unfinished, it takes the follower lease until start+window,
// follows, releases the lease, and then looks once more at the unfinished
// recoveries to say whether to chain. That last look comes after the
// release on purpose: a delivery saves its recovery before it reads the
// lease (KickWanted), so a delivery that saw the lease held — and did not
// kick — saved its recovery before this look, which therefore sees it and
// chains. Either the delivery kicks or the ending follower chains.
func (h *Handler) followLeased(ctx context.Context, start time.Time, window time.Duration, over func() bool, add func(Record, bool)) (followed, chain bool, err error) {
	recs, err := h.Store.Unfinished(ctx)
	if err != nil {
		return false, false, fmt.Errorf("follow: list unfinished recoveries: %w", err)
	}
	if len(recs) == 0 {
		// Nothing to follow: no lease written. A delivery that starts a
		// recovery now sees no lease and kicks.
		return false, false, nil
	}
	until := start.Add(window)
	lease := h.Lease
	leased := lease != nil
	holder := h.followerID()
	if leased {
		took, err := lease.TakeFollower(ctx, holder, h.Now(), until)
		if err != nil {
			return false, false, fmt.Errorf("follow: take the follower lease: %w", err)
		}
		if !took {
			return false, false, nil // another follower is at it
		}
	}
	looked := map[string]time.Time{}
	ferr := h.follow(ctx, until, over, add, looked)
	if leased {
		if err := lease.ReleaseFollower(context.WithoutCancel(ctx), holder); err != nil {
			// It expires at until by itself; until then deliveries do not
			// kick (the sweep follows their recoveries).
			h.Log.Warn("follow: release the follower lease failed; it expires by itself", "holder", holder, "until", until, "error", err.Error())
		}
	}
	if ferr != nil {
		return true, false, ferr
	}
	recs, err = h.Store.Unfinished(context.WithoutCancel(ctx))
	if err != nil {
		return true, false, fmt.Errorf("follow: list unfinished recoveries after following: %w", err)
	}
	return true, chainWanted(recs, looked, h.Now(), window), nil
}

// chainWanted reports whether a follower ending now should kick one more:
// some unfinished recovery has its next look due within the next window,
// and it is not one this follower looked at without moving it on (a pause,
// a guard, a ledger failure: those wait for the sweep, else a pause would
// chain kicks forever).
func chainWanted(recs []Recovery, looked map[string]time.Time, now time.Time, window time.Duration) bool {
	for _, rec := range recs {
		if last, ok := looked[rec.Node]; ok && !rec.NextLookAt.After(last) {
			continue
		}
		at := rec.NextLookAt
		if rec.LeaseUntil.After(at) {
			at = rec.LeaseUntil
		}
		if at.Before(now.Add(window)) {
			return true
		}
	}
	return false
}

// KickWanted reports whether a delivery whose record is r should publish a
// follow kick: it left a recovery unfinished with a next look (it issued a
// delete, reset or create and returned, or backed off), no follower holds
// the lease, and no kick is pending (FollowerLease.ClaimKick: one read, and
// one write by the delivery that kicks). A ledger that cannot say counts
// as "kick": a spare kick costs one short request, a missing one up to a
// minute.
//
// Why a skipped kick is safe: the delivery saved its recovery before this
// read. A live lease's holder looks at the unfinished recoveries after it
// releases the lease (followLeased), so it sees the recovery and chains; a
// pending kick's run clears the mark after this read and only then looks
// for recoveries to follow, so it sees it too. What it does not cover: the
// kick that was pending fails to publish (KickFailed clears the mark only
// for later deliveries), or its instance dies between the claim and the
// publish (the mark goes stale after KickPending); then the skipped
// delivery's recovery waits for the next delivery that kicks or the minute
// sweep, as before kicks existed.
func (h *Handler) KickWanted(ctx context.Context, r Record) bool {
	if !LeftForLater(r) {
		return false
	}
	return h.claimKick(ctx, r.Node)
}

// ChainWanted is KickWanted for a follower that ended with looks still due
// (FollowResult.Chain, SweepResult.Chain): false when a kick is already
// pending or a follower already holds the lease again.
func (h *Handler) ChainWanted(ctx context.Context) bool { return h.claimKick(ctx, "") }

func (h *Handler) claimKick(ctx context.Context, node string) bool {
	lease := h.Lease
	if lease == nil {
		return true
	}
	kick, err := lease.ClaimKick(ctx, h.Now(), KickPending)
	if err != nil {
		h.Log.Warn("follow: read the follower lease failed; kicking anyway", "node", node, "error", err.Error())
		return true
	}
	return kick
}

// KickFailed forgets the pending kick a failed publish noted, so the next
// delivery kicks again rather than wait for it to go stale.
func (h *Handler) KickFailed(ctx context.Context) {
	if lease := h.Lease; lease != nil {
		if err := lease.ClearKick(ctx); err != nil {
			h.Log.Warn("follow: clear the pending kick failed", "error", err.Error())
		}
	}
}

// LeftForLater reports whether r is the record of a recreate or reset step
// that left its recovery unfinished: a later look is to continue it.
func LeftForLater(r Record) bool {
	return (r.Action == ActionRecreate || r.Action == ActionReset) && !r.DryRun && r.Phase != "" && !r.Phase.Terminal()
}

// followerID names one follow run in the follower lease: the handler's
// holder and a random suffix, so two runs of one instance are two holders.
func (h *Handler) followerID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return h.Holder + "/follow-" + hex.EncodeToString(b)
}
