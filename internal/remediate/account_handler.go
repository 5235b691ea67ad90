package remediate

import (
	"context"
	"errors"
	"fmt"

	tpu "google.golang.org/api/tpu/v2"
)

// errRefusedBefore: the service-account guard refused this node, in this
// state and for this reason, before, and said so in a record then. A sweep
// does not record it again (process, sweepNode): a node that stays refused
// would otherwise add a skip record, and a skip to the metric alerted on,
// every sweep of every minute. An event's delivery is recorded (once: its
// id is marked).
var errRefusedBefore = errors.New("refused as before by the service-account guard")

// accountRefused finishes r, a skip the service-account guard gave node
// (r.Reason says why), before anything is claimed or deleted: the first
// refusal of the node (by id), in its state, for that reason, is a WARNING
// record, since the node stays down until a person grants the account or
// recreates the node; the same refusal again within AUTOHEAL_EVENT_TTL is
// errRefusedBefore. A new node id, state or reason is a new refusal. When
// the mark cannot be written the refusal is recorded (said again rather
// than lost).
func (h *Handler) accountRefused(ctx context.Context, node *tpu.Node, r *Record) error {
	id := fmt.Sprintf("account:%s:%d:%s:%s", node.Name, node.Id, node.State, r.Reason)
	first, err := h.Store.MarkEvent(ctx, id, r.Time.Add(h.eventTTL()))
	if err != nil {
		r.Severity = SeverityWarning
		r.Warnings = append(r.Warnings, "mark service-account refusal (it is recorded again next time): "+err.Error())
		return nil
	}
	if first {
		r.Severity = SeverityWarning
		return nil
	}
	r.Reason += " (refused so before, in the same state: recorded then)"
	return errRefusedBefore
}
