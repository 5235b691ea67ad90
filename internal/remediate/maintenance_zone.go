package remediate

import (
	"context"
	"fmt"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

// maintenanceHook runs the Maintainer (Handler.Maintenance) on a node the
// node decision only records (READY): its upcoming maintenance may ask for
// prepare or maintain. What the Maintainer did replaces the plain record.
// It reports whether it noted something, so that a sweep, which drops plain
// records, still writes this one (once: the caller writes it).
func (h *Handler) maintenanceHook(ctx context.Context, ev events.Event, obs Observed, r *Record) (noted bool, err error) {
	if h.Maintenance == nil || obs.Node == nil {
		return false, nil
	}
	qr := obs.Node.QueuedResource
	if obs.QueuedResource != nil && obs.QueuedResource.Name != "" {
		qr = obs.QueuedResource.Name
	}
	mr, ok, err := h.Maintenance.Observe(ctx, ev, obs.Node, qr)
	if !ok {
		return false, err
	}
	r.Action, r.Outcome = mr.Action, mr.Outcome
	r.Reason = mr.Reason
	r.Steps = append(r.Steps, mr.Steps...)
	r.Warnings = append(r.Warnings, mr.Warnings...)
	if r.Cause == "" || r.Cause == events.CauseUnknown {
		r.Cause = mr.Cause
	}
	// noted: the caller writes this record even in a sweep, which drops
	// plain records (a record-once observation is new).
	return true, err
}

// Bounds of one zone hint: the nodes it looks at, the pages it lists and
// how long it runs. A zone hint is a delivery Pub/Sub waits on: it must be
// answered well within the push subscription's deadline, or Pub/Sub
// delivers it again and a second look starts beside the first. The sweep
// sees whatever a zone hint left.
const (
	DefaultZoneHintNodes  = 500
	DefaultZoneHintPages  = 20
	DefaultZoneHintBudget = time.Minute
)

// HandleZoneHint handles a Compute Engine entry about a TPU worker VM
// (compute.instances.upcomingMaintenance, preempted, hostError,
// terminateOnHostMaintenance on t1v-n-…-w-N): the instance does not name its
// node, so the entry is only a hint to look now at every opted-in node of
// ev.Node.Project and ev.Node.Zone, as a sweep does (level-triggered: the
// nodes decide, the entry only says when to look). It lists at most
// DefaultZoneHintNodes nodes and writes one record for the entry, besides
// those of the nodes acted on. It returns an error only when the look was
// cut short by a transient failure (the caller retries the entry).
func (h *Handler) HandleZoneHint(ctx context.Context, ev events.Event) (SweepResult, error) {
	var res SweepResult
	r := h.newRecord(ev)
	r.Node = ""
	if ev.Node.Project == "" || ev.Node.Zone == "" {
		r.Action, r.Reason = ActionReject, "zone hint names no project and zone"
		_ = h.Recorder.Record(ctx, r)
		res.Records = append(res.Records, r)
		return res, nil
	}
	parent := ev.Node.Parent()
	token, looked := "", 0
	var lerr error
	budget := h.Config.ZoneHintBudget
	if budget <= 0 {
		budget = DefaultZoneHintBudget
	}
	start := h.Now()
	tokens := pageTokens{}
	tokens.seen(token)
	bounded := ""
	for looked < DefaultZoneHintNodes {
		if tokens.pages() > DefaultZoneHintPages || h.Now().Sub(start) >= budget || ctx.Err() != nil {
			bounded = fmt.Sprintf("bounded at %d pages or %s", DefaultZoneHintPages, budget)
			break
		}
		var nodes []*tpu.Node
		var next string
		lerr = h.call(ctx, &r, "list", "", func(ctx context.Context) (string, error) {
			var err error
			nodes, next, err = h.TPU.ListNodes(ctx, parent, token)
			return "", err
		})
		if lerr != nil {
			break
		}
		for _, n := range nodes {
			if n == nil || n.Labels[h.Config.LabelKey] != h.Config.LabelValue || looked >= DefaultZoneHintNodes {
				continue
			}
			looked++
			if rec, recorded := h.sweepNode(ctx, n.Name, n, "", true, nil); recorded {
				res.Records = append(res.Records, rec)
			}
		}
		if next == "" {
			res.Complete = true
			break
		}
		if tokens.seen(next) {
			res.Records = append(res.Records, h.pageLoopRecord(ctx, ev.Node.Zone, parent, next, tokens.pages()))
			bounded = "its page token came again"
			break
		}
		token = next
	}
	res.Nodes = looked
	instance := ev.Instance
	if instance == "" {
		instance = ev.ResourceLabels["instance_id"]
	}
	if ev.Worker != "" && ev.Instance == "" {
		instance = "worker " + ev.Worker
	}
	r.Action = ActionRecord
	r.Reason = fmt.Sprintf("zone hint (%s, %s): looked at %d opted-in nodes of %s", ev.Method, orUnspecified(instance), looked, parent)
	if !res.Complete && lerr == nil {
		if bounded == "" {
			bounded = fmt.Sprintf("bounded at %d", DefaultZoneHintNodes)
		}
		r.Reason += " (" + bounded + "; the sweep sees the rest)"
	}
	var err error
	if lerr != nil && !IsNotFound(lerr) {
		r.Action, r.Reason, r.Err = ActionSkip, "zone hint: cannot list "+parent+": its nodes were not looked at", lerr.Error()
		if IsTransient(lerr) {
			err = fmt.Errorf("zone hint %s: %w", parent, lerr)
		}
	}
	if rerr := h.Recorder.Record(ctx, r); rerr != nil && err == nil {
		err = &ActError{Step: "record", Node: parent, Transient: true, Err: rerr}
	}
	res.Records = append(res.Records, r)
	return res, err
}
