package remediate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/startup"
)

// MaintenanceTPU is the part of the TPU API the Maintainer uses: nodes.get,
// nodes.patch (metadata only), nodes.getGuestAttributes (v2) and the
// performMaintenance calls (v2alpha1). tpuapi.Maintenance implements it.
type MaintenanceTPU interface {
	GetNode(ctx context.Context, name string) (*tpu.Node, error)
	// PatchNodeMetadata replaces the node's metadata with metadata
	// (updateMask=metadata: nothing else changes) and returns the operation.
	PatchNodeMetadata(ctx context.Context, name string, metadata map[string]string) (op string, err error)
	GetGuestAttributes(ctx context.Context, node, queryPath string) ([]GuestAttribute, error)
	PerformMaintenance(ctx context.Context, node string) (op string, err error)
	PerformMaintenanceQueuedResource(ctx context.Context, queuedResource string, nodes []string) (op string, err error)
}

// Maintainer acts on upcoming maintenance of opted-in READY nodes: it sends
// the notice (prepare) and, in mode early, starts the maintenance once every
// worker reported the checkpoint (maintain). It never waits for an
// operation: the record names it, and the node decision takes over if the
// node does not come back by itself.
type Maintainer struct {
	TPU      MaintenanceTPU
	Notices  NoticeStore
	Recorder Recorder // used by Handle; Observe only returns the record
	Config   Config
	Now      func() time.Time // required (New sets the engine's clock)
	// Accounts is the engine's service-account guard (Handler.Accounts):
	// the notice's metadata patch needs iam.serviceAccounts.actAs on the
	// node's account, as a create does, so the same accounts are allowed.
	// nil = not checked.
	Accounts *AccountGuard
}

// Observe decides about node's upcoming maintenance (as read by the caller)
// and acts. ok is false when there is nothing new to record: the node has no
// notice, or the notice's step was taken before. The error is an *ActError
// when acting failed, also in the record's Err: a transient one is for the
// caller to retry (the claim was released, so the retry takes it again); a
// permanent one keeps the claim (that step of that notice is not retried).
func (m *Maintainer) Observe(ctx context.Context, ev events.Event, node *tpu.Node, queuedResource string) (Record, bool, error) {
	now := m.Now()
	r := Record{Time: now, InsertID: ev.InsertID, EventTime: ev.Time, Node: ev.Node.Name(), Zone: ev.Node.Zone,
		Worker: ev.Worker, Method: ev.Method, Cause: ev.Cause, DryRun: m.Config.DryRun}
	if node != nil {
		r.Node = node.Name
		r.AcceleratorType = node.AcceleratorType
	}
	d := DecideMaintenance(MaintenanceObserved{Node: node}, now, m.Config)
	if d.Action == "" {
		return r, false, nil
	}
	if r.Cause == "" || r.Cause == events.CauseUnknown {
		r.Cause = events.CauseMaintenance
	}
	steps, err := m.noticeSteps(ctx, d.Key, node)
	if err != nil {
		return m.fail(r, ActionSkip, "notice ledger unavailable: maintenance not decided", &ActError{Step: "ledger", Node: r.Node, Transient: true, Err: err})
	}
	obs := MaintenanceObserved{Node: node, Steps: steps}
	d = DecideMaintenance(obs, now, m.Config)
	if d.ReadCheckpoints {
		attrs, err := maintCall(m, ctx, &r, "guest-attributes", func() (string, []GuestAttribute, error) {
			a, err := m.TPU.GetGuestAttributes(ctx, node.Name, CheckpointQueryPath)
			return "", a, err
		})
		if err != nil {
			return m.fail(r, ActionSkip, "could not read the guest's checkpoint reports", err)
		}
		obs.CheckpointsRead, obs.Checkpoints = true, attrs
		d = DecideMaintenance(obs, now, m.Config)
	}
	r.Action, r.Reason = d.Action, d.Reason
	r.Warnings = append(r.Warnings, d.Warnings...)
	if d.Step == "" {
		return r, false, nil
	}
	first, err := m.Notices.ClaimNotice(ctx, d.Key, d.Step, now)
	if err != nil {
		return m.fail(r, ActionSkip, "notice ledger unavailable: "+string(d.Action)+" not started", &ActError{Step: "ledger", Node: r.Node, Transient: true, Err: err})
	}
	if !first {
		return r, false, nil // taken meanwhile by another delivery or sweep
	}
	var actErr error
	switch d.Action {
	case ActionPrepare:
		actErr = m.prepare(ctx, node, d, &r)
	case ActionMaintain:
		actErr = m.maintain(ctx, node, queuedResource, &r)
	}
	if actErr != nil {
		var ae *ActError
		if errors.As(actErr, &ae) && !ae.Transient {
			// Refused for good (permission denied, no longer reschedulable):
			// the claim stays, so the notice is not retried every sweep; the
			// record carries the error for a person.
			r.Err = actErr.Error()
			return r, true, actErr
		}
		if err := m.Notices.ReleaseNotice(ctx, d.Key, d.Step); err != nil {
			actErr = errors.Join(actErr, fmt.Errorf("release notice claim: %w", err))
		}
		r.Err = actErr.Error()
		return r, true, &ActError{Step: string(d.Action), Node: r.Node, Transient: true, Err: actErr}
	}
	return r, true, nil
}

// Handle is Observe, then the record written (when there is one).
func (m *Maintainer) Handle(ctx context.Context, ev events.Event, node *tpu.Node, queuedResource string) (Record, bool, error) {
	r, ok, err := m.Observe(ctx, ev, node, queuedResource)
	r.Elapsed = m.Now().Sub(r.Time)
	if ok && m.Recorder != nil {
		if rerr := m.Recorder.Record(ctx, r); rerr != nil && err == nil {
			err = &ActError{Step: "record", Node: r.Node, Transient: true, Err: rerr}
		}
	}
	return r, ok, err
}

// prepare writes the notice: a read-modify-write of the metadata (the patch
// has no fingerprint, so the node is read right before, and only metadata is
// sent, every other key as read).
func (m *Maintainer) prepare(ctx context.Context, listed *tpu.Node, d MaintenanceDecision, r *Record) error {
	fresh, err := maintCall(m, ctx, r, "get", func() (string, *tpu.Node, error) {
		n, err := m.TPU.GetNode(ctx, listed.Name)
		return "", n, err
	})
	if IsNotFound(err) {
		r.Action, r.Reason = ActionRecord, "node NOT FOUND right before the notice was sent: not prepared"
		return nil
	}
	if err != nil {
		return err
	}
	if again := DecideMaintenance(MaintenanceObserved{Node: fresh}, m.Now(), m.Config); again.Action != ActionPrepare || again.Key != d.Key {
		r.Action = ActionRecord
		r.Reason = "node changed right before the notice was sent (now: " + describe(fresh) + "): not prepared"
		return &ActError{Step: "get", Node: r.Node, Transient: true, Err: errors.New("node changed before the notice was sent; look again")}
	}
	// Checked on the node as read now, whose account the patch acts as.
	// A refusal keeps the notice's claim: recorded once, not every sweep.
	why, err := m.Accounts.check(ctx, fresh, "notice not sent (its metadata patch acts as the node's account)")
	if err != nil {
		return &ActError{Step: "service-account", Node: r.Node, Transient: true, Err: err}
	}
	if why != "" {
		r.Action, r.Reason, r.Severity = ActionSkip, why, SeverityWarning
		return nil
	}
	value, err := json.Marshal(d.Notice)
	if err != nil {
		return &ActError{Step: "patch", Node: r.Node, Err: err}
	}
	md := maps.Clone(fresh.Metadata)
	if md == nil {
		md = map[string]string{}
	}
	md[NoticeMetadataKey] = string(value)
	_, err = maintCall(m, ctx, r, "patch-metadata", func() (string, struct{}, error) {
		op, err := m.TPU.PatchNodeMetadata(ctx, fresh.Name, md)
		return op, struct{}{}, err
	})
	if err != nil {
		return err
	}
	r.Outcome = OutcomePrepared
	if w := notWatching(fresh, m.Config); w != "" {
		r.Warnings = append(r.Warnings, w)
	}
	return nil
}

// notWatching says why nothing may be watching for the notice on node: its
// startup script is not tpu-autoheal's resume script.
func notWatching(node *tpu.Node, cfg Config) string {
	if _, ok := node.Metadata[ResumeOptInKey]; ok {
		return ""
	}
	if s := node.Metadata[StartupScriptKey]; s == startup.Script || (cfg.StartupScript != "" && s == cfg.StartupScript) {
		return ""
	}
	return fmt.Sprintf("node's startup-script is not tpu-autoheal's resume script (no metadata %s): nothing may be watching for the notice; see the README's notice contract", ResumeOptInKey)
}

// maintain starts the maintenance now: performMaintenance, or, for a node
// owned by a queued resource, performMaintenanceQueuedResource on it.
func (m *Maintainer) maintain(ctx context.Context, node *tpu.Node, queuedResource string, r *Record) error {
	if queuedResource == "" {
		queuedResource = node.QueuedResource
	}
	_, err := maintCall(m, ctx, r, "perform-maintenance", func() (string, struct{}, error) {
		var op string
		var err error
		if queuedResource != "" {
			op, err = m.TPU.PerformMaintenanceQueuedResource(ctx, queuedResource, []string{node.Name})
		} else {
			op, err = m.TPU.PerformMaintenance(ctx, node.Name)
		}
		return op, struct{}{}, err
	})
	if err != nil {
		return err
	}
	if queuedResource != "" {
		r.Reason += " (through queued resource " + queuedResource + ")"
	}
	r.Outcome = OutcomeMaintained
	return nil
}

// maintCall runs one TPU call as a recorded step, once: a transient
// failure is retried by the next delivery or sweep (the claim released).
func maintCall[T any](m *Maintainer, ctx context.Context, r *Record, step string, f func() (string, T, error)) (T, error) {
	s := Step{Name: step, Start: m.Now()}
	op, v, err := f()
	s.Operation, s.Duration = op, m.Now().Sub(s.Start) // on the Maintainer's clock, as Start is (see Handler.call)
	if err != nil {
		s.Err = err.Error()
	}
	r.Steps = append(r.Steps, s)
	if err != nil {
		return v, &ActError{Step: step, Node: r.Node, Transient: IsTransient(err) || ctx.Err() != nil, Err: err}
	}
	return v, nil
}

// fail ends Observe on a failure before acting: the record says so.
func (m *Maintainer) fail(r Record, action Action, reason string, err error) (Record, bool, error) {
	r.Action, r.Reason, r.Err = action, reason, err.Error()
	return r, true, err
}

// noticeSteps are the steps claimed for the notice key names: those under
// the key (node id and window), and those claimed under the old key (node
// name and window, NodeID 0) while this node existed, that is at or after
// its createTime: a claim older than the node was made for the node it
// replaced, and must not keep the replacement from its own notice. A node
// whose createTime cannot be read honours every old claim (the old
// behaviour: at worst a replacement misses its notice, never a node gets
// a second one).
func (m *Maintainer) noticeSteps(ctx context.Context, key NoticeKey, node *tpu.Node) (map[string]time.Time, error) {
	steps, err := m.Notices.NoticeSteps(ctx, key)
	if err != nil || key.NodeID == 0 {
		return steps, err
	}
	old, err := m.Notices.NoticeSteps(ctx, key.ByName())
	if err != nil {
		return nil, err
	}
	created, cerr := time.Parse(time.RFC3339Nano, node.CreateTime)
	for step, at := range old {
		if _, ok := steps[step]; ok {
			continue
		}
		if cerr != nil || !at.Before(created) {
			if steps == nil {
				steps = map[string]time.Time{}
			}
			steps[step] = at
		}
	}
	return steps, nil
}
