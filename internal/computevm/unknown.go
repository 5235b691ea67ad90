package computevm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/api/googleapi"

	"github.com/tpu-autoheal/autoheal/internal/failure"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// An ambiguous answer is not a no (STYLE 14). A start or insert whose
// answer was lost (a broken connection, a deadline) or was a server error
// may have taken effect, now or later: it is kept in the slice's state as
// sent, outcome unknown (UnknownCall), and no other start or insert is sent
// for the slice until it is seen in effect (insert: the instance exists;
// start: it is no longer TERMINATED) or concluded not to be: only after
// UnknownReads looks that found it not in effect, the last at least
// UnknownWait after the call (never from one read). A call concluded
// lost is sent again by the next decision, under a new claim.

// UnknownCall is a start or insert sent whose outcome is unknown.
type UnknownCall struct {
	Instance  string // projects/P/zones/Z/instances/I
	Action    vmpolicy.Action
	RequestID string
	At        time.Time // when it was sent
	// Reads counts the looks since that found it not in effect.
	Reads int
}

// UnknownWait and UnknownReads bound how long a call whose outcome is
// unknown holds the slice: both must be reached before it is concluded
// lost. UnknownWait is well within the 60 minutes Compute Engine
// remembers a requestId.
const (
	UnknownWait  = 10 * time.Minute
	UnknownReads = 2
)

// ambiguous reports whether a failed call may have taken effect: no answer
// (a transport error, a deadline, a body that could not be read) or a
// server error. A 4xx answer is a refusal: nothing happened.
func ambiguous(err error) bool {
	var g *googleapi.Error
	if errors.As(err, &g) {
		return g.Code >= 500
	}
	return failure.IsTransient(err)
}

// inEffect reports whether what c asked for is seen in m as just read.
func inEffect(c UnknownCall, m member) bool {
	switch c.Action {
	case vmpolicy.ActionRecreate:
		return m.in != nil
	case vmpolicy.ActionStart:
		// Only a read that found it: a listing that missed the
		// instance, or a lagged NOT FOUND, says nothing of the start.
		return m.in != nil && m.in.Status != vmpolicy.StatusTerminated
	case vmpolicy.ActionRecreateInstances:
		// The MIG is at it (deleting or making it again), or it was made
		// again since the call, or it runs: in effect. Still down as made
		// before the call, with the MIG doing nothing with it: not (yet).
		if m.in == nil || m.in.Status == vmpolicy.StatusRunning || (m.action != "" && m.action != "NONE") {
			return true
		}
		made, err := time.Parse(time.RFC3339Nano, m.in.CreationTimestamp)
		return err == nil && !made.Before(c.At.Add(-time.Minute))
	}
	return true
}

// resolveUnknown looks at the slice's calls of unknown outcome with the
// members just read: those in effect are dropped, the others counted,
// and those concluded lost dropped. It returns the state (saved when
// changed) and the calls still unknown.
func (r *Recovery) resolveUnknown(ctx context.Context, key string, state SliceState, members []member, now time.Time) (SliceState, []UnknownCall, error) {
	if len(state.Unknown) == 0 {
		return state, nil, nil
	}
	byName := map[string]member{}
	for _, m := range members {
		byName[m.ref.String()] = m
	}
	var waiting []UnknownCall
	for _, c := range state.Unknown {
		m, ok := byName[c.Instance]
		if !ok || inEffect(c, m) {
			continue // in effect (or no longer part of the slice)
		}
		c.Reads++
		if c.Reads >= UnknownReads && now.Sub(c.At) >= UnknownWait {
			// Concluded lost: the next decision may send it again. An
			// incident saved with it as sent (a process that died before
			// the call, or before its answer) is reopened with it.
			if state.Incident.Action == c.Action && !state.Incident.At.After(c.At.Add(time.Second)) {
				state.Incident = vmpolicy.Incident{}
			}
			continue
		}
		waiting = append(waiting, c)
	}
	state.Unknown = waiting
	if err := r.Store.SetSlice(ctx, key, state); err != nil {
		return state, nil, fmt.Errorf("save the unknown calls of %s: %w", key, err)
	}
	return state, waiting, nil
}

// ambiguousStep reports whether the call about target is among unknown.
func ambiguousStep(unknown []UnknownCall, target string) bool {
	for _, c := range unknown {
		if c.Instance == target {
			return true
		}
	}
	return false
}

// waitingReason is the defer reason while calls of unknown outcome hold a
// slice that dec would act on.
func waitingReason(dec vmpolicy.Decision, waiting []UnknownCall) string {
	var parts []string
	for _, c := range waiting {
		parts = append(parts, fmt.Sprintf("%s of %s sent at %s, outcome unknown (read %d times since)", c.Action, c.Instance, c.At.UTC().Format(time.RFC3339), c.Reads))
	}
	due := waiting[0].At.Add(UnknownWait)
	return fmt.Sprintf("would %s: %s; not sent again before %s and %d reads that do not find it in effect", dec.Action, strings.Join(parts, "; "), due.UTC().Format(time.RFC3339), UnknownReads)
}

// intentOf is the starts or inserts dec is about to send, as sent with
// their outcome unknown (saved with the incident before the calls).
//
// A MIG's recreateInstances is one call for the slice: it is saved as one
// unknown call per target, each with the call's request id, so a process
// that dies before the call leaves the slice's instances to be found not
// recreated, and the incident reopened, never a slice held down for good
// by an incident whose call was never made.
func intentOf(dec vmpolicy.Decision, key, incident string, now time.Time) []UnknownCall {
	var out []UnknownCall
	switch dec.Action {
	case vmpolicy.ActionStart, vmpolicy.ActionRecreate:
		for _, t := range dec.Targets {
			out = append(out, UnknownCall{Instance: t, Action: dec.Action, RequestID: requestIDOf(dec.Action, t, incident), At: now})
		}
	case vmpolicy.ActionRecreateInstances:
		id := recreateInstancesID(key, incident)
		for _, t := range dec.Targets {
			out = append(out, UnknownCall{Instance: t, Action: dec.Action, RequestID: id, At: now})
		}
	}
	return out
}

// recreateInstancesID is the requestId of a slice's recreateInstances in
// an incident.
func recreateInstancesID(key, incident string) string {
	return RequestID(key + "|recreateInstances|" + incident)
}

// requestIDOf is the requestId of the start or insert of target in an
// incident: a call repeated within one claim is one request.
func requestIDOf(action vmpolicy.Action, target, incident string) string {
	verb := "start"
	if action == vmpolicy.ActionRecreate {
		verb = "insert"
	}
	return RequestID(target + "|" + verb + "|" + incident)
}

// withoutCalls is calls less those in drop (by request id).
func withoutCalls(calls, drop []UnknownCall) []UnknownCall {
	if len(drop) == 0 {
		return calls
	}
	var out []UnknownCall
	for _, c := range calls {
		if !slices.ContainsFunc(drop, func(d UnknownCall) bool { return d.RequestID == c.RequestID && d.Instance == c.Instance }) {
			out = append(out, c)
		}
	}
	return out
}
