package vmswarm

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
)

// The invariants, checked against the fake's own record of what changed
// and who changed it (computefake.Effects) and its request log: never
// against the Recovery's records.
//
//   - No opted-in VM lost: a VM the platform broke (host error,
//     preemption, terminate on host maintenance) is RUNNING at quiescence,
//     unless a person stopped, deleted or opted out a VM of its slice (the
//     slice is theirs then).
//   - One start or insert per incident: between two of the platform's
//     breaks of a slice, at most one start or insert of ours took effect on
//     each of its VMs, and at most one recreateInstances flagged it; none
//     before the slice's first break.
//   - A person's stop, delete or opt-out is never undone: no start, insert
//     or recreateInstances of ours takes effect on a VM whose newest change
//     (by the platform, a person or its MIG) is a person's stop, delete or
//     opt-out.
//   - A slice is acted on as a whole: every recreateInstances of the
//     multi-host slice's MIG names its four VMs.
//   - Never a stop or delete of ours; never a call that changes anything
//     on a VM that is not a TPU VM.
//   - Bounded calls: per VM, per delivery or sweep.
const (
	maxMutationsPerVM   = 30 // starts, inserts, setMetadata, recreateInstances naming the VM's MIG: per VM
	maxCallsPerDelivery = 120
)

var systemBreaks = map[string]bool{"hostError": true, "preempted": true, "terminateOnHostMaintenance": true}

func isPerson(by string) bool { return by == Alice || by == Bob }

// holds reports whether e is a person's stop, delete or opt-out.
func holds(e computefake.Effect) bool {
	if !isPerson(e.By) {
		return false
	}
	return e.What == "stop" || e.What == "delete" || e.What == "setLabels" && e.Labels["tpu-autoheal"] != "enabled"
}

// ours reports whether e is a start, insert or recreateInstances of ours.
func ours(e computefake.Effect) bool {
	return e.By == Us && (e.What == "start" || e.What == "insert" || e.What == "recreateInstances")
}

// timeline is what changed and who changed it, oldest first: the fake's
// effects, with Alice's stops, deletes and starts taken from its audit
// log instead (a person's stop of a VM already TERMINATED changes nothing
// but says the VM is to stay down: it holds the VM all the same, once its
// entry reached the function; Bob's, whose entries never do, hold it only
// by what they changed).
func (w *world) timeline() []computefake.Effect {
	var out []computefake.Effect
	for _, e := range w.fake.Effects() {
		if e.By != Alice || e.What == "setLabels" {
			out = append(out, e)
		}
	}
	for _, a := range w.fake.AuditEntries() {
		p := a.ProtoPayload
		what, ok := strings.CutPrefix(p.MethodName, "v1.compute.instances.")
		if p.AuthenticationInfo.PrincipalEmail != Alice || !ok || a.Operation == nil || !a.Operation.First || what == "setLabels" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, a.Timestamp)
		if err != nil {
			continue
		}
		out = append(out, computefake.Effect{Time: at, Instance: p.ResourceName, What: what, By: p.AuthenticationInfo.PrincipalEmail})
	}
	slices.SortStableFunc(out, func(a, b computefake.Effect) int { return a.Time.Compare(b.Time) })
	return out
}

// lost are the VMs broken by the platform and not RUNNING, whose slice no
// person holds.
func (w *world) lost() []string {
	effects := w.timeline()
	var out []string
	for _, vm := range TPUVMs {
		broken := slices.ContainsFunc(effects, func(e computefake.Effect) bool { return e.Instance == vm && systemBreaks[e.What] })
		if !broken || w.personHolds(effects, sliceOf(vm)) {
			continue
		}
		if in, ok := w.fake.Instance(vm); !ok || in.Status != "RUNNING" {
			status := "NOT FOUND"
			if ok {
				status = in.Status
			}
			out = append(out, fmt.Sprintf("%s lost: broken by the platform, %s at quiescence, and no person stopped, deleted or opted out its slice", short(vm), status))
		}
	}
	return out
}

// personHolds reports whether a person's stop, delete or opt-out of a VM
// of the slice is in effect: not followed by a person's start of it.
func (w *world) personHolds(effects []computefake.Effect, slice []string) bool {
	for _, vm := range slice {
		held := false
		for _, e := range effects {
			if e.Instance != vm || !isPerson(e.By) {
				continue
			}
			switch {
			case holds(e):
				held = true
			case e.What == "start" && held:
				held = false
			}
		}
		if held {
			return true
		}
	}
	return false
}

// check adds every broken invariant to the result.
func (w *world) check() {
	v := func(format string, args ...any) {
		w.res.Violations = append(w.res.Violations, fmt.Sprintf(format, args...))
	}
	w.res.Violations = append(w.res.Violations, w.lost()...)
	effects := w.timeline()
	for _, vm := range TPUVMs {
		slice := sliceOf(vm)
		// Per incident of the slice: the starts and inserts, and the
		// recreateInstances, of ours that took effect on vm.
		incident, acted, flagged := 0, 0, 0
		// newest is vm's newest change that decides whether it is a
		// person's: by the platform, a person, or its MIG.
		var newest *computefake.Effect
		for i, e := range effects {
			if slices.Contains(slice, e.Instance) && systemBreaks[e.What] && (i == 0 || !sameBreak(effects[i-1], e, slice)) {
				incident++
				acted, flagged = 0, 0
			}
			if e.Instance != vm {
				continue
			}
			if ours(e) {
				if newest != nil && holds(*newest) {
					v("%s: our %s at +%v undid %s's %s at +%v", short(vm), e.What, e.Time.Sub(t0), newest.By, newest.What, newest.Time.Sub(t0))
				}
				if incident == 0 {
					v("%s: our %s at +%v before the platform ever broke its slice", short(vm), e.What, e.Time.Sub(t0))
				}
				if e.What == "recreateInstances" {
					if flagged++; flagged == 2 {
						v("%s: flagged for recreation twice in one incident (the second at +%v)", short(vm), e.Time.Sub(t0))
					}
				} else if acted++; acted == 2 {
					v("%s: started or inserted twice in one incident (the second, %s, at +%v)", short(vm), e.What, e.Time.Sub(t0))
				}
			}
			if e.By == Us && (e.What == "stop" || e.What == "delete") {
				v("%s: a %s of ours at +%v", short(vm), e.What, e.Time.Sub(t0))
			}
			if systemBreaks[e.What] || isPerson(e.By) || e.What == "recreate" || e.What == "restart" {
				newest = &effects[i]
			}
		}
		if m := w.count(mutatingMethods, vm); m > maxMutationsPerVM {
			v("%s: %d calls that change it, want at most %d", short(vm), m, maxMutationsPerVM)
		}
	}
	if m := w.count(mutatingMethods, NotTPU); m > 0 {
		v("%s (not a TPU VM): %d calls that change it", short(NotTPU), m)
	}
	sliceMIG := computefake.MIGName(Project, ZoneC, "slice-mig")
	for _, r := range w.fake.Requests() {
		if r.Method != "instanceGroupManagers.recreateInstances" || r.Resource != sliceMIG {
			continue
		}
		for _, vm := range SliceMIG {
			if !strings.Contains(string(r.Body), "/"+short(vm)+`"`) {
				v("recreateInstances at +%v lacks %s: the slice acted on partially (%s)", r.Time.Sub(t0), short(vm), r.Body)
			}
		}
	}
	if w.maxPerDelivery > maxCallsPerDelivery {
		v("one delivery or sweep made %d calls, want at most %d", w.maxPerDelivery, maxCallsPerDelivery)
	}
	if len(w.res.Violations) > 0 {
		w.res.Trace = w.trace(effects)
	}
}

// sameBreak reports whether b is a's break of another VM of the same slice
// at the same moment (a host error that took the slice down together).
func sameBreak(a, b computefake.Effect, slice []string) bool {
	return systemBreaks[a.What] && a.What == b.What && a.Time.Equal(b.Time) && slices.Contains(slice, a.Instance)
}

// trace is the schedule as it happened, the effects and the records.
func (w *world) trace(effects []computefake.Effect) string {
	var b strings.Builder
	b.WriteString("\n  schedule:")
	for _, l := range w.happened {
		fmt.Fprintf(&b, "\n    %s", l)
	}
	b.WriteString("\n  effects (people's stops, deletes and starts as audited):")
	for _, e := range effects {
		fmt.Fprintf(&b, "\n    +%-8v %-26s %-18s by %s", e.Time.Sub(t0), e.What, short(e.Instance), e.By)
	}
	b.WriteString("\n  records (a slice's repeated ones left out):")
	last := map[string]string{}
	for _, r := range w.out.all() {
		if r.Action == "record" && strings.Contains(r.Reason, "not an opted-in") || last[r.Node] == string(r.Action)+r.Reason+r.Err {
			continue
		}
		last[r.Node] = string(r.Action) + r.Reason + r.Err
		fmt.Fprintf(&b, "\n    +%-8v %-18s %-8s %s", r.Time.Sub(t0), short(r.Node), r.Action, r.Reason)
		if r.Err != "" {
			fmt.Fprintf(&b, " [error: %s]", r.Err)
		}
	}
	return b.String()
}
