package function

import (
	"context"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

// handleInstance handles an entry about a Compute Engine instance that is
// not a Cloud TPU worker (events.KindInstance).
func (f *Function) handleInstance(ctx context.Context, ev events.Event) error {
	f.handler.Skip(ctx, ev, "instance event: the Compute Engine backend is not configured")
	return nil
}
