package remediate

import "context"

// ContinueNodes is Continue for the recoveries of the nodes take accepts:
// `autoheal replay --apply` over the deployed ledger advances the
// recoveries it started (or resumes), never the function's others.
func (h *Handler) ContinueNodes(ctx context.Context, take func(node string) bool) (advanced int, err error) {
	return h.continueDue(ctx, take, func(Record, bool) {})
}
