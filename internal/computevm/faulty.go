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

// reportFaulty carries out a reportHostAsFaulty decision
// (AUTOHEAL_REPORT_FAULTY_HOSTS): one instances.reportHostAsFaulty per
// target, then the report kept in the slice's state, which holds the VM
// (never started nor recreated while the host is repaired, for days) until
// it was started after the report, and from which its host errors are
// counted again.
//
// No ledger claim: the host errors that call for a report are the ones the
// starts before it were claimed for, so the window cap and the cooldown
// would refuse it. A report is once per host error count instead: its
// request id is derived from the newest host error counted, so two looks
// at once (two function instances) send one request, and the saved
// report stops any later one.
func (r *Recovery) reportFaulty(ctx context.Context, start time.Time, ev *events.Event, key string, dec vmpolicy.Decision, members []member, evidence []vmpolicy.Evidence, state SliceState) (remediate.Record, error) {
	var newest time.Time
	for _, e := range evidence {
		if e.Kind == vmpolicy.EvidenceSystem && e.Method == vmpolicy.MethodHostError && e.Time.After(newest) {
			newest = e.Time
		}
	}
	steps, _, unknown, callErr := r.act(ctx, dec, key, members, "host errors until "+newest.UTC().Format(time.RFC3339Nano))
	now := r.now()
	// Once: a report sent, or whose answer was lost or whose operation
	// ended in error (it may have taken effect), holds the VM and resets
	// its count; only a refusal (4xx) leaves it to be tried again.
	var reported []string
	for i, t := range dec.Targets {
		if i < len(steps) && (steps[i].Err == "" || steps[i].Operation != "" || ambiguousStep(unknown, t)) {
			state.Faulty = setPerInstance(state.Faulty, FaultyReport{Instance: t, At: now, Operation: steps[i].Operation})
			reported = append(reported, t)
		}
	}
	if len(reported) > 0 {
		if err := r.Store.SetSlice(ctx, key, state); err != nil {
			return remediate.Record{}, fmt.Errorf("save the faulty-host reports of %s: %w", key, err)
		}
	}
	out := r.build(start, ev, key, members, remediate.Action(dec.Action), dec.Reason+": "+strings.Join(dec.Targets, ", "), callErr)
	out.Steps = steps
	if callErr == nil {
		out.Phase = remediate.PhaseDone
	}
	r.write(ctx, &out)
	return out, nil
}
