package computevm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// MaxNoticeWrites bounds the read-modify-write of one instance's notice
// within one look: a setMetadata refused because the metadata changed since
// it was read (412 conditionNotMet: someone else's write landed between our
// read and ours) is read again and sent again on top of what is there, at
// most this many sends in all; past it the notice is left to the next look
// (prepare is level-triggered: the instance does not hold it, so the next
// look writes it), with the refusals in the record.
const MaxNoticeWrites = 3

// upcoming is the instance's maintenance notice, nil when it has none (or
// is not found).
func upcoming(in *compute.Instance) *compute.UpcomingMaintenance {
	if in == nil || in.ResourceStatus == nil {
		return nil
	}
	return in.ResourceStatus.UpcomingMaintenance
}

// writeNotice writes the notice of in (the instance as read this look)
// into its metadata autoheal-maintenance, sent with the fingerprint of the
// metadata as read, so that another writer's keys are never overwritten
// with an older copy. Refused with 412 conditionNotMet, it reads the
// instance again and writes on top of that, up to MaxNoticeWrites sends;
// it stops early, with no error, when the instance read again has no
// maintenance notice any more or already holds it (another look of ours
// wrote it). Every send is a step; every read again is a "get" step.
func (r *Recovery) writeNotice(ctx context.Context, ref Ref, in *compute.Instance) ([]remediate.Step, error) {
	var steps []remediate.Step
	for sent := 1; ; sent++ {
		um := upcoming(in)
		notice := remediate.MaintenanceNotice{Notice: um.WindowStartTime, SentAt: r.now(), Status: um.MaintenanceStatus, Type: um.Type,
			WindowStart: um.WindowStartTime, WindowEnd: um.WindowEndTime, CanReschedule: um.CanReschedule}
		b, err := json.Marshal(notice)
		if err != nil {
			return steps, err
		}
		st := remediate.Step{Name: "set-metadata", Start: r.now()}
		op, err := r.Compute.SetMetadataKey(ctx, ref, in, remediate.NoticeMetadataKey, string(b))
		st.Operation, st.Duration = op, r.now().Sub(st.Start)
		if err != nil {
			st.Err = err.Error()
		}
		steps = append(steps, st)
		if err == nil || !metadataChanged(err) {
			return steps, err
		}
		if sent == MaxNoticeWrites {
			return steps, fmt.Errorf("notice not written to %s: its metadata changed under each of %d writes (another writer; each refused 412 conditionNotMet, no key of theirs overwritten); left to the next look: %w", ref, sent, err)
		}
		get := remediate.Step{Name: "get", Start: r.now()}
		again, err := r.Compute.GetInstance(ctx, ref)
		get.Duration = r.now().Sub(get.Start)
		if err != nil {
			get.Err = err.Error()
			return append(steps, get), fmt.Errorf("notice not written to %s: read again after its metadata changed: %w", ref, err)
		}
		steps = append(steps, get)
		next := upcoming(again)
		if next == nil || Observe(ref, again, nil).Notified == next.WindowStartTime {
			return steps, nil // nothing left to write: the next look decides on what it reads
		}
		in = again
	}
}

// metadataChanged reports whether err is Compute Engine's refusal of a
// write whose fingerprint is not the current one (412 conditionNotMet).
func metadataChanged(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == http.StatusPreconditionFailed
}
