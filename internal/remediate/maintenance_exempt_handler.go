package remediate

import (
	"context"

	tpu "google.golang.org/api/tpu/v2"
)

// ourMaintenance reads from the notice ledger whether tpu-autoheal started
// node's maintenance itself (the maintain step of the notice in its
// metadata, or of its upcomingMaintenance); nil when it did not, when there
// is no Maintainer, or when the node is healthy (nothing to exempt). A
// failed read is nil too: the exemption for ONGOING still applies, and the
// hard cap bounds the rest.
func (h *Handler) ourMaintenance(ctx context.Context, node *tpu.Node) *OurMaintenance {
	if h.Maintenance == nil || h.Maintenance.Notices == nil || node == nil || healthy(node) {
		return nil
	}
	var ws, we string
	if sent := SentNotice(node); sent != nil && sent.Notice != "" {
		ws, we = sent.Notice, sent.WindowEnd
	} else if um := node.UpcomingMaintenance; um != nil && um.WindowStartTime != "" {
		ws, we = um.WindowStartTime, um.WindowEndTime
	} else {
		return nil
	}
	steps, err := h.Maintenance.noticeSteps(ctx, NoticeKey{Node: node.Name, NodeID: node.Id, WindowStart: ws}, node)
	if err != nil {
		h.log().Warn("maintenance: notice ledger unavailable; only ONGOING exempts the node", "node", node.Name, "error", err.Error())
		return nil
	}
	at, ok := steps[NoticeStepMaintain]
	if !ok {
		return nil
	}
	return &OurMaintenance{Started: at, WindowStart: ws, WindowEnd: we}
}
