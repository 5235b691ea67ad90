package remediate

import (
	"context"
	"fmt"
	"strings"
)

// queueEffect makes the queue fallback's calls (queue.go): create our
// queued resource, or delete it.
func (h *Handler) queueEffect(ctx context.Context, eff Effect, r *Record) StepResult {
	res := StepResult{Effect: eff.Kind}
	switch eff.Kind {
	case EffectCreateQR:
		r.Spec = eff.Spec
		r.Warnings = append(r.Warnings, eff.Warnings...)
		parent, id, ok := strings.Cut(eff.Target, "/queuedResources/")
		if !ok || eff.QueuedResource == nil {
			res.Err = &Error{Kind: KindPermanent, Err: fmt.Errorf("queued resource %q: want projects/P/locations/Z/queuedResources/Q and its body", eff.Target)}
			break
		}
		res.Err = h.call(ctx, r, string(eff.Kind), "", func(ctx context.Context) (string, error) {
			op, err := h.TPU.CreateQueuedResource(ctx, parent, id, eff.QueuedResource)
			res.Operation = op
			return op, err
		})
	case EffectDeleteQR:
		res.Err = h.call(ctx, r, string(eff.Kind), "", func(ctx context.Context) (string, error) {
			op, err := h.TPU.DeleteQueuedResource(ctx, eff.Target)
			res.Operation = op
			return op, err
		})
	}
	return res
}
