package main

import (
	"context"
	"fmt"
	"io"
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
// TPU API, --apply) it waits for it, since the operations take real time.
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

// advance returns the function Handler.Drain calls to move to the next
// look: at once, or, with realWait, after waiting that long for real
// (cut short when ctx ends, after which Drain's next step sees ctx's error).
func (c *replayClock) advance(ctx context.Context) func(time.Time) {
	if !c.realWait {
		return c.advanceTo
	}
	return func(t time.Time) {
		d := t.Sub(c.now())
		if d <= 0 {
			return
		}
		if c.stderr != nil {
			fmt.Fprintf(c.stderr, "autoheal: waiting %s for the next look at an unfinished recovery (interrupt to stop: the recovery stays where it is)\n", shortDuration(d.Round(time.Second)))
		}
		if waitFor(ctx, d) {
			c.advanceTo(t) // a frozen base (--clock event) moves by the wait too
		}
	}
}

// continueRecoveries finishes the recoveries the run started
// (Handler.Drain on the run's clock). What is left unfinished after
// maxContinueRounds is the caller's to report (its outcome is unfinished).
func continueRecoveries(ctx context.Context, h *remediate.Handler, clk *replayClock) error {
	if _, err := h.Drain(ctx, clk.advance(ctx), maxContinueRounds); err != nil {
		return fmt.Errorf("continue recoveries: %w", err)
	}
	return nil
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
