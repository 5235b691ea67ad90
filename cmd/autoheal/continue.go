package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// maxContinueRounds bounds how many times replay moves its clock to the next
// look and continues the recoveries its entries started: a recovery takes
// a handful of looks (delete, its operation, create, its operation, READY),
// more after failures, and every recovery is bounded by its own failure
// limit, so this bound is only a backstop.
const maxContinueRounds = 200

// replayClock is replay's (and sweep's) clock moved forward by the
// continuations: the recoveries started by the entries are finished on it,
// as the deployed function's sweeps finish them every minute. On the
// simulated fleet it jumps to each next look at once; with realWait (real
// TPU API, --apply) it waits for it, since the operations take real time
// (continueOnWall).
type replayClock struct {
	base     func() time.Time
	realWait bool
	stderr   io.Writer

	mu     sync.Mutex
	offset time.Duration
}

func (c *replayClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base().Add(c.offset)
}

// advanceTo moves the clock forward to t (never back).
func (c *replayClock) advanceTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := t.Sub(c.base().Add(c.offset)); d > 0 {
		c.offset += d
	}
}

// continueOptions say which recoveries a run continues on the wall clock
// and for how long.
type continueOptions struct {
	// follow says whether the run continues node's recovery (nil: every
	// unfinished recovery of the ledger, which is then the run's own
	// in-memory one).
	follow func(node string) bool
	// wait bounds the wall-clock continuation (--wait); 0: until each
	// recovery ends, at the latest when its own cap (RecoveryCap)
	// abandons it.
	wait time.Duration
	// stops says what an interrupt leaves ("" = each recovery stays where
	// it is, in the ledger).
	stops string
}

// Why a wall-clock continuation stopped with recoveries left.
const (
	stoppedInterrupted = "interrupted"
	stoppedWait        = "--wait"
	stoppedCap         = "past the recoveries' own cap"
)

// continueRecoveries finishes the recoveries the run started: on the
// simulated fleet with Handler.Drain on the run's clock (at once); against a
// real API (realWait) on the wall clock, each next look waited for, with a
// progress line per recovery, until each ended or o.wait passed or the run
// was interrupted. stopped says why it stopped with recoveries left ("" if
// none is, or on the virtual clock, whose leftovers after maxContinueRounds
// the outcomes report).
func continueRecoveries(ctx context.Context, h *remediate.Handler, clk *replayClock, o continueOptions) (stopped string, err error) {
	if !clk.realWait {
		if _, err := h.Drain(ctx, clk.advanceTo, maxContinueRounds); err != nil {
			return "", fmt.Errorf("continue recoveries: %w", err)
		}
		return "", nil
	}
	return continueOnWall(ctx, h, clk, o)
}

// capSlack is how long past a recovery's own cap the wall-clock
// continuation still waits for the look that abandons it.
const capSlack = time.Hour

// continueOnWall is continueRecoveries against a real API. The ledger is
// read without ctx's cancellation, so that an interrupt still reports where
// each recovery is.
func continueOnWall(ctx context.Context, h *remediate.Handler, clk *replayClock, o continueOptions) (string, error) {
	follow := o.follow
	if follow == nil {
		follow = func(string) bool { return true }
	}
	var deadline time.Time
	if o.wait > 0 {
		deadline = clk.now().Add(o.wait)
	}
	bg := context.WithoutCancel(ctx)
	announced, idle := false, false
	for {
		recs, err := h.Store.Unfinished(bg)
		if err != nil {
			return "", fmt.Errorf("continue recoveries: %w", err)
		}
		var mine []remediate.Recovery
		for _, r := range recs {
			if follow(r.Node) {
				mine = append(mine, r)
			}
		}
		if len(mine) == 0 {
			return "", nil
		}
		now := clk.now()
		if !announced && clk.stderr != nil {
			bound := "until each ends (at the latest its own cap, " + shortDuration(remediate.MaxRecoveryAge) + ", abandons it)"
			if o.wait > 0 {
				bound = "for at most --wait " + shortDuration(o.wait)
			}
			stops := o.stops
			if stops == "" {
				stops = "each stays where it is, in the ledger"
			}
			fmt.Fprintf(clk.stderr, "autoheal: following %s on the wall clock %s; interrupt to stop (%s)\n",
				plural(len(mine), "recovery", "recoveries"), bound, stops)
			announced = true
		}
		var next, capEnd time.Time
		for _, r := range mine {
			at := lookAt(r)
			if next.IsZero() || at.Before(next) {
				next = at
			}
			if end := r.StartedAt.Add(remediate.RecoveryCap(r) + capSlack); !r.StartedAt.IsZero() && end.After(capEnd) {
				capEnd = end
			}
			if clk.stderr != nil {
				fmt.Fprintln(clk.stderr, progressLine(r, now, at))
			}
		}
		if ctx.Err() != nil {
			return stoppedInterrupted, nil
		}
		if next.Before(now) {
			next = now
		}
		if idle {
			// The last round advanced nothing that was due (a claim
			// refused, a lease held elsewhere): look again later, not in
			// a busy loop.
			next = latest(next, now.Add(lookAgainOf(h.Config)))
		}
		if !deadline.IsZero() && next.After(deadline) {
			return stoppedWait, nil
		}
		if !capEnd.IsZero() && now.After(capEnd) {
			return stoppedCap, nil
		}
		if d := next.Sub(now); d > 0 {
			if !waitFor(ctx, d) {
				return stoppedInterrupted, nil
			}
			clk.advanceTo(next) // a frozen base (--clock event) moves by the wait too
		}
		before := fingerprint(mine, follow)
		if _, err := h.ContinueNodes(ctx, follow); err != nil {
			if ctx.Err() != nil {
				return stoppedInterrupted, nil
			}
			return "", fmt.Errorf("continue recoveries: %w", err)
		}
		after, err := h.Store.Unfinished(bg)
		if err != nil {
			return "", fmt.Errorf("continue recoveries: %w", err)
		}
		idle = fingerprint(after, follow) == before
	}
}

// lookAt is when a recovery can be advanced next: its next look, or the end
// of a lease someone holds.
func lookAt(r remediate.Recovery) time.Time {
	return latest(r.NextLookAt, r.LeaseUntil)
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func lookAgainOf(cfg remediate.Config) time.Duration {
	if cfg.LookAgain > 0 {
		return cfg.LookAgain
	}
	return remediate.LookAgain
}

// fingerprint says what of the followed recoveries a round of
// continuation changes.
func fingerprint(recs []remediate.Recovery, follow func(string) bool) string {
	var b strings.Builder
	for _, r := range recs {
		if !follow(r.Node) {
			continue
		}
		fmt.Fprintf(&b, "%s|%s|%d|%d|%s|%s\n", r.Node, r.Phase, r.Attempts, r.Failures, r.NextLookAt.Format(time.RFC3339Nano), r.UpdatedAt.Format(time.RFC3339Nano))
	}
	return b.String()
}

// progressLine is one recovery's progress: node, action, phase, elapsed,
// next look. Never a spec, a metadata value or an API error's text.
func progressLine(r remediate.Recovery, now, next time.Time) string {
	elapsed := "just started"
	if !r.StartedAt.IsZero() {
		elapsed = shortDuration(now.Sub(r.StartedAt).Round(time.Second)) + " elapsed"
	}
	look := "next look now"
	if d := next.Sub(now).Round(time.Second); d > 0 {
		look = "next look in " + shortDuration(d)
	}
	return fmt.Sprintf("autoheal: %s: %s in phase %s, %s, %s", shortNode(r.Node), r.Action, r.Phase, elapsed, look)
}

// waitFor waits d, or until ctx ends; it reports whether d passed. Tests
// replace it, so that no test waits for real.
var waitFor = func(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
