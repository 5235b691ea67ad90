package remediate

import (
	"context"

	tpu "google.golang.org/api/tpu/v2"
)

// The Handler's two hooks into the ResumeWatcher (Handler.Resume). They
// never fail an event or a sweep: a check that could not be made is logged
// and made again by the next sweep, which looks at every open incident.

// resumeHook checks the node's open incident after r was written about it,
// when the node was last seen READY and HEALTHY and r says it is fine
// again: a recovery of ours ended (recovered), or nothing was needed (the
// node recovered by itself, or an unfinished recovery was closed because
// it did).
func (h *Handler) resumeHook(ctx context.Context, node *tpu.Node, r Record, err error) {
	if h.Resume == nil || err != nil || r.DryRun || node == nil || !healthy(node) {
		return
	}
	if r.Outcome != OutcomeRecovered && r.Action != ActionRecord {
		return
	}
	if moved, err := h.zoneMoveResumeCheck(ctx, node, r); moved || err != nil { // zonemove_handler.go
		if err != nil {
			h.Log.Warn("resume check failed; the next sweep checks again", "node", node.Name, "error", err.Error())
		}
		return
	}
	if _, _, err := h.Resume.CheckNode(ctx, node); err != nil {
		h.Log.Warn("resume check failed; the next sweep checks again", "node", node.Name, "error", err.Error())
	}
}

// checkOpenIncidents is the sweep's hook: every open incident is checked
// (its node read once), all of them within one CallTimeout, so a sweep
// with many open incidents still ends; the records written are added to
// res.
func (h *Handler) checkOpenIncidents(ctx context.Context, res *SweepResult) {
	if h.Resume == nil || ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, h.CallTimeout)
	defer cancel()
	get := func(ctx context.Context, name string) (*tpu.Node, error) {
		cctx, cancel := context.WithTimeout(ctx, h.CallTimeout)
		defer cancel()
		n, err := h.TPU.GetNode(cctx, name)
		if IsNotFound(err) {
			return h.zoneMovedNode(cctx, name, err) // zonemove_handler.go
		}
		return n, err
	}
	recs, err := h.Resume.CheckOpen(ctx, get)
	res.Records = append(res.Records, recs...)
	if err != nil {
		h.Log.Warn("resume check of open incidents failed; the next sweep checks again", "records", len(recs), "error", err.Error())
	}
}
