package remediate

import (
	"context"
	"strings"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

// Evidence handles an admin-activity event: who created or deleted a node,
// or deleted a queued resource. It is never acted on by itself: when the
// node (or a node of the queued resource) has an unfinished recovery, the
// entry is kept in that recovery's ledger as evidence for its next look;
// either way it is recorded (a skip) and acknowledged. A ledger failure is
// returned (transient: the delivery is retried) only when the entry may be
// a recovery's evidence.
func (h *Handler) Evidence(ctx context.Context, ev events.Event) (Record, error) {
	note := events.EvidenceNote(ev)
	e := EvidenceOf(ev)
	nodes := []string{ev.Node.Name()}
	if e.QueuedResource != "" {
		recs, err := h.Store.Unfinished(ctx)
		if err != nil {
			return Record{}, &ActError{Step: "evidence", Node: e.QueuedResource, Transient: true, Err: err}
		}
		nodes = nodes[:0]
		for _, r := range recs {
			if r.QueuedResource == e.QueuedResource {
				nodes = append(nodes, r.Node)
			}
		}
	}
	var kept []string
	for _, n := range nodes {
		if n == "" {
			continue
		}
		ok, err := h.Store.KeepEvidence(ctx, n, e)
		if err != nil {
			return Record{}, &ActError{Step: "evidence", Node: n, Transient: true, Err: err}
		}
		if ok {
			kept = append(kept, n)
		}
	}
	if len(kept) > 0 {
		note += "; kept in the ledger for the unfinished recovery of " + strings.Join(kept, ", ")
	}
	r := h.newRecord(ev)
	if len(kept) == 1 {
		r.Node = kept[0]
	}
	r.Action, r.Reason = ActionSkip, note
	_ = h.Recorder.Record(ctx, r)
	return r, nil
}
