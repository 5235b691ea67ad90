package computevm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// threeHostErrors gives reserved-1 (reservation-bound, no automatic
// restart) three host errors an hour apart, each recovered by one start.
func threeHostErrors(t *testing.T, e *env, vm string) {
	t.Helper()
	e.sweep(vm)
	for i := range 3 {
		entry, err := e.fake.HostError(vm)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.deliver(entry); got != "start" {
			t.Fatalf("host error %d: %s, want start", i+1, got)
		}
		e.clock.add(time.Hour)
		e.sweep(vm)
	}
}

func TestAHostWithThreeHostErrorsIsReportedFaultyOnceAndTheVMHeldUntilItRunsAgain(t *testing.T) {
	e := newEnv(t)
	e.rec.Policy.FaultyHosts = vmpolicy.FaultyHosts{Count: 3, Window: 7 * 24 * time.Hour}
	vm := name("reserved-1")
	threeHostErrors(t, e, vm)
	if got := e.calls("instances.reportHostAsFaulty"); got != 1 {
		t.Fatalf("%d reports after three host errors, want 1", got)
	}
	r := e.lastRecordOf(vm, "reportHostAsFaulty")
	if len(r.Steps) != 1 || r.Steps[0].Name != "reportHostAsFaulty" || r.Steps[0].Operation == "" || r.Err != "" {
		t.Errorf("report record = %+v: want one step with its operation", r)
	}
	body := requestBody(e, "instances.reportHostAsFaulty")
	for _, want := range []string{`"disruptionSchedule":"IMMEDIATE"`, `"behavior":"CHIP_ERROR"`} {
		if !contains(body, want) {
			t.Errorf("report body %s lacks %s", body, want)
		}
	}
	// Under repair (PENDING for days, a host error in between): held,
	// never started nor reported again.
	e.clock.add(time.Minute)
	if got := e.sweep(vm); got != remediate.ActionRecord {
		t.Errorf("while the report's operation runs (RUNNING): %s, want record (no second report)", got)
	}
	e.clock.add(computefake.DefaultReportFaultyTime)
	if got := e.sweep(vm); got != "held" {
		t.Errorf("under repair: %s, want held", got)
	}
	for range 4 {
		e.clock.add(12 * time.Hour)
		if got := e.sweep(vm); vmpolicy.Action(got).Mutates() {
			t.Errorf("under repair: %s, want nothing", got)
		}
	}
	e.clock.add(computefake.DefaultHostRepairTime) // repaired: RUNNING on the same host
	e.clock.add(time.Minute)
	if got := e.sweep(vm); got != remediate.ActionRecord {
		t.Errorf("running again after the repair: %s, want record", got)
	}
	if got, starts := e.calls("instances.reportHostAsFaulty"), e.calls("instances.start"); got != 1 || starts != 3 {
		t.Errorf("%d reports and %d starts, want 1 and 3 (the host errors' own)", got, starts)
	}
}

func TestFaultyHostsAreNotReportedByDefault(t *testing.T) {
	e := newEnv(t)
	vm := name("reserved-1")
	threeHostErrors(t, e, vm)
	e.clock.add(time.Hour)
	e.sweep(vm)
	if got := e.calls("instances.reportHostAsFaulty"); got != 0 {
		t.Errorf("%d reports with AUTOHEAL_REPORT_FAULTY_HOSTS unset, want 0", got)
	}
}

func (e *env) lastRecordOf(key string, action remediate.Action) remediate.Record {
	var r remediate.Record
	for _, x := range e.out.recs {
		if x.Node == key && x.Action == action {
			r = x
		}
	}
	return r
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
