package remediate

import (
	"context"
	"fmt"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/policy"
)

// The handler's part of the autoheal-stockout zones: fallback; the move
// itself is the policy's (internal/policy/zonemove.go).

// ZoneMoveLabel is policy.ZoneMoveLabel.
const ZoneMoveLabel = policy.ZoneMoveLabel

// zoneMoveGuard: a node a zones: fallback created is the moving
// recovery's, under the home zone's key, until that recovery ends. A
// claim of it under its own name (a sweep of its new zone seeing it still
// CREATING or booting past a grace, an event about it) is skipped while
// the home recovery is unfinished and points to it. One ledger read, only
// for a node that carries ZoneMoveLabel.
func (h *Handler) zoneMoveGuard(ctx context.Context, name string, obs Observed, d Decision, now time.Time) (Decision, error) {
	if !d.Claim || obs.Node == nil {
		return d, nil
	}
	from := obs.Node.Labels[ZoneMoveLabel]
	if from == "" || from == zoneOf(name) {
		return d, nil
	}
	home := policy.NodeInZone(name, from)
	_, project, _, _, _ := parseNodeName(name)
	hist, err := h.Store.History(ctx, home, project, "", now, h.Config.Window)
	if err != nil {
		return d, err
	}
	if r := hist.Recovery; r != nil && r.Unfinished() && r.ZoneMoveNode == name {
		return Decision{Action: ActionSkip, Reason: fmt.Sprintf("recovery in flight: %s gen %d (%s) moved it here from %s", home, r.Generation, r.Phase, from)}, nil
	}
	return d, nil
}

// zoneMoveHomes are the home names of the unfinished recoveries a zones:
// fallback moved to node: an admin-activity entry about the moved node (a
// person's delete of it) is their evidence, kept under the home key. Read
// only for an entry that no recovery of node's own name kept.
func (h *Handler) zoneMoveHomes(ctx context.Context, node string) ([]string, error) {
	recs, err := h.Store.Unfinished(ctx)
	if err != nil {
		return nil, err
	}
	var homes []string
	for _, r := range recs {
		if r.ZoneMoveNode == node {
			homes = append(homes, r.Node)
		}
	}
	return homes, nil
}

// zoneMoveResumeCheck checks the open incident of r's node (the home name:
// the incident is keyed as the recovery is) against node, where a zones:
// fallback moved it; moved is false when r's recovery did not move it.
func (h *Handler) zoneMoveResumeCheck(ctx context.Context, node *tpu.Node, r Record) (moved bool, err error) {
	if r.ZoneMovedTo == "" || node.Name != r.ZoneMovedTo {
		return false, nil
	}
	inc, ok, err := h.Resume.Store.OpenIncidentOf(ctx, r.Node)
	if err != nil || !ok {
		return ok, err
	}
	_, _, err = h.Resume.Check(ctx, node, inc)
	return true, err
}

// zoneMovedNode is, for an open incident whose node is NOT FOUND (notFound),
// the node where the recovery of that name moved it (a zones: fallback),
// read now; notFound when it did not move.
func (h *Handler) zoneMovedNode(ctx context.Context, name string, notFound error) (*tpu.Node, error) {
	_, project, _, _, err := parseNodeName(name)
	if err != nil {
		return nil, notFound
	}
	hist, err := h.Store.History(ctx, name, project, "", h.Now(), h.Config.Window)
	if err != nil {
		return nil, err
	}
	if hist.Recovery == nil || hist.Recovery.ZoneMoveNode == "" {
		return nil, notFound
	}
	return h.TPU.GetNode(ctx, hist.Recovery.ZoneMoveNode)
}
