package computevm

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// Maintenance mode early on instances: once every instance of a slice
// holds the notice (prepare), each guest's autoheal/checkpoint is read
// (instances.getGuestAttributes, queryPath autoheal/); when every one
// reports this notice and every notice can be rescheduled, the maintenance
// is started now: one instances.performMaintenance per instance id and
// window (vmpolicy's early).

// checkpoints reads the guest's checkpoint report of every instance under a
// PENDING notice it already holds, in mode early, not yet maintained for
// that window, into observed[i].Checkpoint, and returns what was seen, for
// the record. A read that fails counts as no report (the look says so):
// getGuestAttributes allows 10 queries a minute per VM, so it is read only
// while a report can still change the decision: every instance of the
// slice RUNNING (else the decision is not about maintenance), and the
// notice not concluded late (late: the slice's CheckpointLate).
func (r *Recovery) checkpoints(ctx context.Context, members []member, observed []vmpolicy.Instance, late string) []string {
	for _, o := range observed {
		if !o.Found || o.Status != vmpolicy.StatusRunning {
			return nil
		}
	}
	var seen []string
	for i, o := range observed {
		if !o.Early || o.Maintenance == "" || o.Notified != o.Maintenance || o.Maintained == o.Maintenance || members[i].in == nil || o.Maintenance == late {
			continue
		}
		rep, ok, err := r.Compute.GuestCheckpoint(ctx, members[i].ref)
		switch {
		case err != nil:
			seen = append(seen, fmt.Sprintf("checkpoint of %s not read: %v", o.Name, err))
		case !ok:
			seen = append(seen, fmt.Sprintf("no checkpoint reported by %s", o.Name))
		default:
			observed[i].Checkpoint = rep.Notice
			seen = append(seen, fmt.Sprintf("%s reported checkpoint %s for the notice %s at %s", o.Name, rep.Checkpoint, rep.Notice, rep.Time))
		}
	}
	return seen
}

// keepLate keeps in the slice's state the notice dec concluded was not
// checkpointed in time, so that no later look starts it early.
func (r *Recovery) keepLate(ctx context.Context, key string, state *SliceState, dec vmpolicy.Decision) error {
	if dec.CheckpointLate == "" || dec.CheckpointLate == state.CheckpointLate {
		return nil
	}
	state.CheckpointLate = dec.CheckpointLate
	if err := r.Store.SetSlice(ctx, key, *state); err != nil {
		return fmt.Errorf("save the late checkpoint of %s: %w", key, err)
	}
	return nil
}

// maintain carries out a maintain decision: one performMaintenance per
// target, its request id derived from the instance's name, id and window,
// so two looks at once (two function instances) send one request, and the
// call kept in the slice's state stops any later one. No ledger claim: it
// is not a recovery (as prepare).
//
// Never twice for one window: a call answered, or whose answer was lost or
// was a server error, or whose operation ended in error (it may have taken
// effect) is kept as sent; only a refusal (4xx) leaves it to be tried
// again on a later look, except in a multi-host slice after another of its
// instances' call was accepted in the same look: Compute Engine maintains
// the slice as a whole, so the others' notices are no longer PENDING and
// their refusal is that maintenance, counted as sent.
func (r *Recovery) maintain(ctx context.Context, start time.Time, ev *events.Event, key string, dec vmpolicy.Decision, members []member, state SliceState) (remediate.Record, error) {
	byName := map[string]member{}
	for _, m := range members {
		byName[m.ref.String()] = m
	}
	var steps []remediate.Step
	var errs []string
	accepted, changed := false, false
	for _, t := range dec.Targets {
		m, ok := byName[t]
		if !ok || m.in == nil || m.in.ResourceStatus == nil || m.in.ResourceStatus.UpcomingMaintenance == nil {
			continue
		}
		window, end := m.in.ResourceStatus.UpcomingMaintenance.WindowStartTime, m.in.ResourceStatus.UpcomingMaintenance.WindowEndTime
		id := RequestID(fmt.Sprintf("%s|%d|performMaintenance|%s", t, m.in.Id, window))
		st := remediate.Step{Name: "perform-maintenance", Start: r.now()}
		op, err := r.Compute.PerformMaintenance(ctx, m.ref, id)
		sent := err == nil || ambiguous(err) || (accepted && len(members) > 1)
		if err == nil {
			accepted = true
			if done, oerr := r.Compute.GetOperation(ctx, m.ref.Project, m.ref.Zone, op); done && oerr != nil {
				err = oerr
			}
		}
		st.Operation, st.Duration = op, r.now().Sub(st.Start)
		if err != nil {
			st.Err = err.Error()
			errs = append(errs, st.Err)
		}
		steps = append(steps, st)
		if sent {
			state.Maintained = setPerInstance(state.Maintained, MaintenanceSent{Instance: t, ID: m.in.Id, Window: window, WindowEnd: end, At: r.now(), Operation: op})
			changed = true
		}
	}
	if changed {
		if err := r.Store.SetSlice(ctx, key, state); err != nil {
			return remediate.Record{}, fmt.Errorf("save the maintenance calls of %s: %w", key, err)
		}
	}
	var callErr error
	if len(errs) > 0 {
		callErr = fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	out := r.build(start, ev, key, members, remediate.ActionMaintain, dec.Reason+": "+strings.Join(dec.Targets, ", "), callErr)
	out.Steps = steps
	if callErr == nil {
		out.Phase = remediate.PhaseDone
	}
	r.write(ctx, &out)
	return out, nil
}
