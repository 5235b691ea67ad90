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

// replayClock is replay's clock moved forward by the continuations: the
// recoveries started by the entries are finished on it, as the deployed
// function's sweeps finish them every minute.
type replayClock struct {
	base   func() time.Time
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

// continueRecoveries finishes the recoveries the replayed entries started
// (Handler.Drain on the replay clock) and says on stderr what is left.
func continueRecoveries(ctx context.Context, h *remediate.Handler, clk *replayClock, stderr io.Writer) error {
	left, err := h.Drain(ctx, clk.advanceTo, maxContinueRounds)
	if err != nil {
		return fmt.Errorf("continue recoveries: %w", err)
	}
	if left > 0 {
		fmt.Fprintf(stderr, "replay: %d recoveries still unfinished after %d continuation rounds\n", left, maxContinueRounds)
	}
	return nil
}
