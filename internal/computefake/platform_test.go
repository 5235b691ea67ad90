package computefake_test

import (
	"encoding/json"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/events"
)

func TestHostErrorWithAutomaticRestart(t *testing.T) {
	f := start(t, fleetFile)
	entry, err := f.HostError(name("trainer-a"))
	if err != nil {
		t.Fatal(err)
	}
	if entry.ProtoPayload.MethodName != "compute.instances.hostError" || entry.ProtoPayload.AuthenticationInfo.PrincipalEmail != "system@google.com" ||
		entry.ProtoPayload.ResourceName != name("trainer-a") || entry.Resource.Labels["instance_id"] != "4521879902345678101" {
		t.Errorf("entry = %+v", entry)
	}
	in := f.get(t, "trainer-a")
	if in.Status != "TERMINATED" || in.LastStopTimestamp != "2026-11-20T04:00:00.000+00:00" {
		t.Fatalf("after the host error: %s since %q", in.Status, in.LastStopTimestamp)
	}
	f.clock.add(time.Minute) // the restart delay
	if got := f.status(t, "trainer-a"); got != "PROVISIONING" {
		t.Fatalf("after the restart delay: %s", got)
	}
	f.clock.add(30 * time.Second)
	in = f.get(t, "trainer-a")
	if in.Status != "RUNNING" || in.LastStartTimestamp != "2026-11-20T04:01:30.000+00:00" || in.Id != 4521879902345678101 {
		t.Errorf("after the restart: %s since %q, id %d (same VM)", in.Status, in.LastStartTimestamp, in.Id)
	}
	methods := entryMethods(f.AuditEntries())
	if want := []string{"compute.instances.hostError", "compute.instances.automaticRestart"}; !slices.Equal(methods, want) {
		t.Errorf("audit entries = %v, want %v", methods, want)
	}
}

func entryMethods(es []computefake.LogEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.ProtoPayload.MethodName)
	}
	return out
}

func TestHostErrorWithoutRestartStaysTerminated(t *testing.T) {
	f := start(t, fleetFile)
	if _, err := f.HostError(name("reserved-1")); err != nil { // automaticRestart false, no MIG
		t.Fatal(err)
	}
	f.clock.add(24 * time.Hour)
	if got := f.status(t, "reserved-1"); got != "TERMINATED" {
		t.Errorf("a day after the host error: %s", got)
	}
	if _, err := f.HostError(name("reserved-1")); err == nil {
		t.Error("HostError of a TERMINATED instance succeeded")
	}
}

func TestHostErrorRestartsAResourcePolicySliceTogether(t *testing.T) {
	f := start(t, fleetFile)
	wp := func(w string) string { return computefake.InstanceName(project, "us-east5-a", w) }
	if _, err := f.HostError(wp("wp-1")); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"wp-0", "wp-1"} {
		if in, _ := f.Instance(wp(w)); in.Status != "TERMINATED" {
			t.Errorf("%s after its slice's host error: %s, want TERMINATED with it", w, in.Status)
		}
	}
	f.clock.add(90 * time.Second)
	for _, w := range []string{"wp-0", "wp-1"} {
		if in, _ := f.Instance(wp(w)); in.Status != "RUNNING" {
			t.Errorf("%s after the restart: %s", w, in.Status)
		}
	}
}

func TestSpotPreemptionWithStopAndWithDelete(t *testing.T) {
	f := start(t, fleetFile)
	entry, err := f.Preempt(name("spot-stop"))
	if err != nil {
		t.Fatal(err)
	}
	if entry.ProtoPayload.MethodName != "compute.instances.preempted" {
		t.Errorf("method = %s", entry.ProtoPayload.MethodName)
	}
	if _, err := f.Preempt(name("spot-delete")); err != nil {
		t.Fatal(err)
	}
	f.clock.add(time.Hour) // Compute Engine brings neither back
	if got := f.get(t, "spot-stop"); got.Status != "TERMINATED" || got.LastStopTimestamp == "" {
		t.Errorf("spot-stop an hour after preemption: %s since %q", got.Status, got.LastStopTimestamp)
	}
	_, err = f.svc.Instances.Get(project, zone, "spot-delete").Do()
	apiErr(t, err, 404, "notFound")
	if _, err := f.Preempt(name("trainer-a")); err == nil {
		t.Error("Preempt of a standard VM succeeded")
	}
}

func TestPersonStopAndDeleteWriteAdminActivity(t *testing.T) {
	f := start(t, fleetFile)
	entries, err := f.PersonStop(name("trainer-a"), "alice@acme.example")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("PersonStop returned %d entries", len(entries))
	}
	first, last := entries[0], entries[1]
	p := first.ProtoPayload
	if p.MethodName != "v1.compute.instances.stop" || p.AuthenticationInfo.PrincipalEmail != "alice@acme.example" ||
		!strings.HasSuffix(first.LogName, "cloudaudit.googleapis.com%2Factivity") || !first.Operation.First ||
		p.Response["operationType"] != "stop" || p.Response["user"] != "alice@acme.example" || p.Response["name"] != first.Operation.ID {
		t.Errorf("first entry = %+v", first)
	}
	if !last.Operation.Last || last.Operation.ID != first.Operation.ID || last.Timestamp != "2026-11-20T04:01:00Z" {
		t.Errorf("last entry = %+v, want the same operation, stamped when it ends", last)
	}
	f.clock.add(time.Minute)
	if got := f.status(t, "trainer-a"); got != "TERMINATED" {
		t.Errorf("after the person's stop: %s", got)
	}
	all := f.AuditEntries()
	if diff := cmp.Diff(entries, all); diff != "" {
		t.Errorf("AuditEntries differ from what PersonStop returned (-returned +recorded):\n%s", diff)
	}
	// The operation is an ordinary one, its user the person.
	op, err := f.svc.ZoneOperations.Get(project, zone, first.Operation.ID).Do()
	if err != nil || op.User != "alice@acme.example" || op.Status != "DONE" {
		t.Errorf("the person's operation = %+v, %v", op, err)
	}
	del, err := f.PersonDelete(name("web-1"), "bob@acme.example")
	if err != nil || del[0].ProtoPayload.MethodName != "v1.compute.instances.delete" {
		t.Fatalf("PersonDelete = %+v, %v", del, err)
	}
	if _, err := f.PersonStop(name("web-1"), "system@google.com"); err == nil {
		t.Error("PersonStop as the system principal succeeded")
	}
}

func TestAPICallsWriteAdminActivityAsTheCaller(t *testing.T) {
	f := start(t, fleetFile, computefake.WithCaller("autoheal@acme-ml.iam.gserviceaccount.com"), computefake.WithOperationDelay("start", 0))
	if _, err := f.svc.Instances.Start(project, zone, "stopped-by-alice").Do(); err != nil {
		t.Fatal(err)
	}
	es := f.AuditEntries()
	if len(es) != 2 || es[0].ProtoPayload.MethodName != "v1.compute.instances.start" ||
		es[0].ProtoPayload.AuthenticationInfo.PrincipalEmail != "autoheal@acme-ml.iam.gserviceaccount.com" || !es[1].Operation.Last {
		t.Errorf("entries of one start = %+v", es)
	}
}

// keyPaths lists the object key paths of a JSON value (arrays flattened).
func keyPaths(v any, prefix string, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			p := prefix + "." + k
			out[p] = true
			keyPaths(child, p, out)
		}
	case []any:
		for _, child := range x {
			keyPaths(child, prefix, out)
		}
	}
}

func shape(t *testing.T, data []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	keyPaths(v, "", set)
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestSystemEventsAreShapedLikeTheRealOnes compares each system event's
// fields with the project's real-shaped entries and feeds it to the events
// parser, for an instance named like a TPU node's VM (the parser's zone
// hints): what the backend reads from the fake is what it reads from Cloud
// Logging.
func TestSystemEventsAreShapedLikeTheRealOnes(t *testing.T) {
	f := start(t, fleetFile)
	vm := name("t1v-n-8d2e1f3a-w-0")
	base := f.get(t, "spot-stop") // a Spot TPU7x VM, guest attributes on
	base.Name, base.SelfLink, base.Id = "t1v-n-8d2e1f3a-w-0", "", 0
	if err := f.SetInstance(base); err != nil {
		t.Fatal(err)
	}
	notices, err := f.ScheduleMaintenance(vm, computefake.Maintenance{
		WindowStart: epoch.Add(7 * 24 * time.Hour), WindowEnd: epoch.Add(7*24*time.Hour + 4*time.Hour), CanReschedule: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	preempted, err := f.Preempt(vm)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetInstance(base); err != nil {
		t.Fatal(err)
	}
	base.Scheduling.ProvisioningModel, base.Scheduling.InstanceTerminationAction = "STANDARD", ""
	if err := f.SetInstance(base); err != nil {
		t.Fatal(err)
	}
	hostError, err := f.HostError(vm)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		entry     computefake.LogEntry
		fixture   string
		wantCause events.Cause
	}{
		{hostError, "compute-host-error.json", events.CauseHardware},
		{preempted, "compute-preempted.json", events.CausePreemption},
		{notices[0], "compute-upcoming-maintenance.json", events.CauseMaintenance},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			real, err := os.ReadFile("../../testdata/entries/" + tt.fixture)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(shape(t, real), shape(t, tt.entry.JSON())); diff != "" {
				t.Errorf("fields differ from the real-shaped entry (-real +fake):\n%s", diff)
			}
			ev, err := events.Parse(tt.entry.JSON(), events.Options{})
			if err != nil {
				t.Fatalf("events.Parse: %v", err)
			}
			if ev.Kind != events.KindZoneHint || ev.Instance != "t1v-n-8d2e1f3a-w-0" || ev.Cause != tt.wantCause || ev.Node.Zone != zone {
				t.Errorf("parsed = %+v", ev)
			}
		})
	}
	ev, _ := events.Parse(notices[0].JSON(), events.Options{})
	if m := ev.Maintenance; m == nil || !m.CanReschedule || m.Status != "PENDING" || !m.WindowStart.Equal(epoch.Add(7*24*time.Hour)) {
		t.Errorf("parsed notice = %+v", ev.Maintenance)
	}
}

func TestMaintenanceWindowStartsByItselfAndTerminatesATPUVM(t *testing.T) {
	f := start(t, fleetFile)
	start := epoch.Add(time.Hour)
	if _, err := f.ScheduleMaintenance(name("reserved-1"), computefake.Maintenance{WindowStart: start, WindowEnd: start.Add(4 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	um := f.get(t, "reserved-1").ResourceStatus.UpcomingMaintenance
	if um.MaintenanceStatus != "PENDING" || um.WindowStartTime != "2026-11-20T05:00:00Z" || um.CanReschedule {
		t.Fatalf("notice = %+v", um)
	}
	_, err := f.svc.Instances.PerformMaintenance(project, zone, "reserved-1").Do()
	apiErr(t, err, 400, "invalid") // canReschedule false
	f.clock.add(time.Hour)
	in := f.get(t, "reserved-1")
	if in.Status != "TERMINATED" || in.ResourceStatus.UpcomingMaintenance.MaintenanceStatus != "ONGOING" {
		t.Fatalf("at the window's start: %s, notice %+v", in.Status, in.ResourceStatus.UpcomingMaintenance)
	}
	f.clock.add(20 * time.Minute)
	in = f.get(t, "reserved-1")
	if in.Status != "TERMINATED" || in.ResourceStatus != nil && in.ResourceStatus.UpcomingMaintenance != nil {
		t.Errorf("after the maintenance, automaticRestart off: %s, notice %+v", in.Status, in.ResourceStatus)
	}
	if got := entryMethods(f.AuditEntries()); !slices.Equal(got, []string{"compute.instances.upcomingMaintenance", "compute.instances.terminateOnHostMaintenance"}) {
		t.Errorf("entries = %v", got)
	}
}

func TestPerformMaintenanceOfOneSliceVMMaintainsTheSlice(t *testing.T) {
	f := start(t, fleetFile)
	w := func(i int) string { return "slice-mig-w" + string(rune('0'+i)) }
	notices, err := f.ScheduleMaintenance(name(w(1)), computefake.Maintenance{WindowStart: epoch.Add(48 * time.Hour), WindowEnd: epoch.Add(52 * time.Hour), CanReschedule: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(notices) != 4 {
		t.Fatalf("a slice's notice reached %d VMs, want 4", len(notices))
	}
	op, err := f.svc.Instances.PerformMaintenance(project, zone, w(0)).Do()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if um := f.get(t, w(i)).ResourceStatus.UpcomingMaintenance; um.MaintenanceStatus != "ONGOING" {
			t.Errorf("%s after performMaintenance of w0: %s", w(i), um.MaintenanceStatus)
		}
	}
	_, err = f.svc.Instances.PerformMaintenance(project, zone, w(2)).Do()
	apiErr(t, err, 400, "invalid") // no longer PENDING
	f.clock.add(20 * time.Minute)
	if f.op(t, op).Status != "DONE" {
		t.Error("performMaintenance not DONE when the maintenance ended")
	}
	// The slice's VMs had automaticRestart off: they stay TERMINATED and
	// their MIG repairs them.
	f.clock.add(2 * time.Minute)
	for w, s := range f.managed(t, "slice-mig") {
		if !strings.HasSuffix(s, "/RECREATING") {
			t.Errorf("%s after the maintenance + repair delay: %s", w, s)
		}
	}
	// Notices were per instance: a recreated VM has none.
	f.clock.add(time.Hour)
	if rs := f.get(t, w(3)).ResourceStatus; rs != nil && rs.UpcomingMaintenance != nil {
		t.Errorf("recreated VM carries the old notice: %+v", rs.UpcomingMaintenance)
	}
}

func TestReportHostAsFaulty(t *testing.T) {
	f := start(t, fleetFile)
	req := &compute.InstancesReportHostAsFaultyRequest{
		DisruptionSchedule: "IMMEDIATE",
		FaultReasons:       []*compute.InstancesReportHostAsFaultyRequestFaultReason{{Behavior: "CHIP_ERROR", Description: "3 host errors in 7 days"}},
	}
	_, err := f.svc.Instances.ReportHostAsFaulty(project, zone, "trainer-a", req).Do()
	apiErr(t, err, 400, "invalid") // not reservation-bound
	op, err := f.svc.Instances.ReportHostAsFaulty(project, zone, "reserved-1", req).Do()
	if err != nil {
		t.Fatal(err)
	}
	f.clock.add(11 * time.Minute)
	if got := f.op(t, op); got.Status != "DONE" || got.Error != nil || got.OperationType != "reportHostAsFaulty" {
		t.Fatalf("report operation = %+v", got)
	}
	if got := f.status(t, "reserved-1"); got != "PENDING" {
		t.Fatalf("after the report: %s, want powered off (PENDING) for the repair", got)
	}
	_, err = f.svc.Instances.Start(project, zone, "reserved-1").Do()
	apiErr(t, err, 400, "resourceNotReady")
	f.clock.add(72*time.Hour + 30*time.Second)
	if got := f.status(t, "reserved-1"); got != "RUNNING" {
		t.Errorf("after the host repair: %s", got)
	}
	bad := &compute.InstancesReportHostAsFaultyRequest{DisruptionSchedule: "LATER"}
	_, err = f.svc.Instances.ReportHostAsFaulty(project, zone, "reserved-1", bad).Do()
	apiErr(t, err, 400, "invalid")
}

func TestReportHostAsFaultyFailsWhenTheVMIsDeleted(t *testing.T) {
	f := start(t, fleetFile, computefake.WithOperationDelay("delete", 0))
	op, err := f.svc.Instances.ReportHostAsFaulty(project, zone, "reserved-1", &compute.InstancesReportHostAsFaultyRequest{DisruptionSchedule: "IMMEDIATE"}).Do()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Instances.Delete(project, zone, "reserved-1").Do(); err != nil {
		t.Fatal(err)
	}
	f.clock.add(11 * time.Minute)
	if got := f.op(t, op); got.Error == nil || got.Error.Errors[0].Code != "RESOURCE_NOT_FOUND" {
		t.Errorf("report of a deleted VM = %+v, want its operation failed", got)
	}
}
