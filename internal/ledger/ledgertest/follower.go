package ledgertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

func mustTake(t *testing.T, l remediate.FollowerLease, holder string, now, until time.Time) bool {
	t.Helper()
	ok, err := l.TakeFollower(context.Background(), holder, now, until)
	if err != nil {
		t.Fatalf("TakeFollower(%s): %v", holder, err)
	}
	return ok
}

func mustHeld(t *testing.T, l remediate.FollowerLease, now time.Time) bool {
	t.Helper()
	held, err := l.FollowerHeld(context.Background(), now)
	if err != nil {
		t.Fatalf("FollowerHeld: %v", err)
	}
	return held
}

// runFollower is the follower lease's contract: at most one follower at a
// time, until its lease ends or it releases it.
func runFollower(t *testing.T, newStore NewStore, opts Options) {
	ctx := context.Background()
	until := t0.Add(50 * time.Second)

	t.Run("follower lease: free at first, then held by its taker until released", func(t *testing.T) {
		l := newStore(t)
		if mustHeld(t, l, t0) {
			t.Fatal("a fresh store's follower lease is held")
		}
		if !mustTake(t, l, "a", t0, until) {
			t.Fatal("TakeFollower of a free lease = false")
		}
		if !mustHeld(t, l, t0.Add(time.Second)) {
			t.Error("FollowerHeld after a take = false")
		}
		if mustTake(t, l, "b", t0.Add(time.Second), t0.Add(time.Minute)) {
			t.Error("a second holder took a live lease")
		}
		if !mustTake(t, l, "a", t0.Add(2*time.Second), until) {
			t.Error("the holder could not take its own lease again")
		}
		if err := l.ReleaseFollower(ctx, "b"); err != nil {
			t.Fatalf("ReleaseFollower by a non-holder: %v", err)
		}
		if !mustHeld(t, l, t0.Add(3*time.Second)) {
			t.Error("a release by someone who does not hold the lease freed it")
		}
		if err := l.ReleaseFollower(ctx, "a"); err != nil {
			t.Fatalf("ReleaseFollower: %v", err)
		}
		if mustHeld(t, l, t0.Add(4*time.Second)) {
			t.Error("FollowerHeld after the holder released = true")
		}
		if !mustTake(t, l, "b", t0.Add(4*time.Second), t0.Add(time.Minute)) {
			t.Error("a released lease could not be taken")
		}
	})

	t.Run("follower lease: an expired lease is free", func(t *testing.T) {
		l := newStore(t)
		if !mustTake(t, l, "a", t0, until) {
			t.Fatal("TakeFollower of a free lease = false")
		}
		if mustHeld(t, l, until) {
			t.Error("FollowerHeld at the lease's end = true")
		}
		if !mustTake(t, l, "b", until, until.Add(50*time.Second)) {
			t.Error("an expired lease could not be taken")
		}
		if err := l.ReleaseFollower(ctx, "a"); err != nil {
			t.Fatalf("ReleaseFollower by the old holder: %v", err)
		}
		if !mustHeld(t, l, until.Add(time.Second)) {
			t.Error("the old holder's release freed the new holder's lease")
		}
	})

	t.Run("pending kick: one at a time, none while the lease is held, cleared by a follow run, stale after its time", func(t *testing.T) {
		l := newStore(t)
		claim := func(now time.Time) bool {
			t.Helper()
			ok, err := l.ClaimKick(ctx, now, 30*time.Second)
			if err != nil {
				t.Fatalf("ClaimKick: %v", err)
			}
			return ok
		}
		if !claim(t0) {
			t.Fatal("ClaimKick on a fresh store = false")
		}
		if claim(t0.Add(time.Second)) {
			t.Error("a second ClaimKick while a kick is pending = true")
		}
		if !claim(t0.Add(30 * time.Second)) {
			t.Error("ClaimKick once the pending kick is stale = false")
		}
		if err := l.ClearKick(ctx); err != nil {
			t.Fatalf("ClearKick: %v", err)
		}
		if !mustTake(t, l, "a", t0.Add(31*time.Second), until.Add(time.Minute)) {
			t.Fatal("TakeFollower after ClearKick = false (ClearKick must leave the lease alone)")
		}
		if claim(t0.Add(32 * time.Second)) {
			t.Error("ClaimKick while a follower holds the lease = true")
		}
		if err := l.ReleaseFollower(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if !claim(t0.Add(33 * time.Second)) {
			t.Error("ClaimKick after the follower released (no kick pending) = false")
		}
		if err := l.ClearKick(ctx); err != nil {
			t.Fatalf("ClearKick: %v", err)
		}
		if !claim(t0.Add(34 * time.Second)) {
			t.Error("ClaimKick after ClearKick = false")
		}
	})

	t.Run("pending kick: of many concurrent claimants at most one publishes", func(t *testing.T) {
		n := min(opts.Claimants, 16)
		wins, errs := raceFollower(t, newStore(t), n, opts, func(l remediate.FollowerLease, _ int) (bool, error) {
			return l.ClaimKick(ctx, t0, 30*time.Second)
		})
		if wins != 1 || len(errs) != 0 {
			t.Errorf("%d concurrent ClaimKick: %d published, errors %v; want exactly 1 and no errors", n, wins, errs)
		}
	})

	t.Run("follower lease: of many concurrent takers exactly one wins", func(t *testing.T) {
		n := min(opts.Claimants, 16)
		wins, errs := raceFollower(t, newStore(t), n, opts, func(l remediate.FollowerLease, i int) (bool, error) {
			return l.TakeFollower(ctx, fmt.Sprint("follower-", i), t0, until)
		})
		if wins != 1 || len(errs) != 0 {
			t.Errorf("%d concurrent takers: %d won, errors %v; want exactly 1 winner and no errors", n, wins, errs)
		}
	})
}

// raceFollower runs try on n claimants of s at once (each its own client
// when opts.NewClaimant says how) and counts the true answers and errors.
func raceFollower(t *testing.T, s ledger.Admin, n int, opts Options, try func(remediate.FollowerLease, int) (bool, error)) (wins int, errs []error) {
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	start := make(chan struct{})
	for i := range n {
		store := s
		if opts.NewClaimant != nil {
			store = opts.NewClaimant(t, s)
		}
		l := store
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, err := try(l, i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if ok {
				wins++
			}
		}()
	}
	close(start)
	wg.Wait()
	return wins, errs
}
