package computevm_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// checkpoint is what the startup script writes to guest attribute
// autoheal/checkpoint once the training checkpointed for the notice.
func checkpoint(t *testing.T, e *env, vm string, window time.Time) {
	t.Helper()
	b, _ := json.Marshal(remediate.CheckpointReport{Notice: window.Format(time.RFC3339), Checkpoint: "gs://bucket/run/step-100", Time: e.clock.now().Format(time.RFC3339)})
	if err := e.fake.SetGuestAttribute(vm, "autoheal", "checkpoint", string(b)); err != nil {
		t.Fatal(err)
	}
}

// maintenanceStarted reports whether the fake put the VM into maintenance:
// its notice is no longer PENDING, or it was terminated for it.
func maintenanceStarted(e *env, vm string) bool {
	in, ok := e.fake.Instance(vm)
	if !ok {
		return false
	}
	if in.Status == "TERMINATED" {
		return true
	}
	return in.ResourceStatus == nil || in.ResourceStatus.UpcomingMaintenance == nil || in.ResourceStatus.UpcomingMaintenance.MaintenanceStatus != "PENDING"
}

func earlyEnv(t *testing.T) *env {
	e := newEnv(t)
	e.rec.Config.MaintenanceMode = remediate.MaintenanceEarly
	return e
}

func TestEarlyStartsASingleHostVMsMaintenanceOnceAfterItsCheckpoint(t *testing.T) {
	e := earlyEnv(t)
	vm := name("trainer-a")
	window := epoch.Add(7 * 24 * time.Hour)
	if _, err := e.fake.ScheduleMaintenance(vm, computefake.Maintenance{WindowStart: window, WindowEnd: window.Add(4 * time.Hour), CanReschedule: true}); err != nil {
		t.Fatal(err)
	}
	if got := e.sweep(vm); got != remediate.ActionPrepare {
		t.Fatalf("first look: %s, want prepare", got)
	}
	e.clock.add(computefake.DefaultMetadataTime + time.Second)
	if got := e.sweep(vm); got != remediate.ActionRecord {
		t.Fatalf("before the checkpoint: %s, want record (waiting)", got)
	}
	if !strings.Contains(e.out.recs[len(e.out.recs)-1].Reason, "no checkpoint reported by") {
		t.Errorf("the record does not say what was seen: %q", e.out.recs[len(e.out.recs)-1].Reason)
	}
	if n := e.calls("instances.performMaintenance"); n != 0 {
		t.Fatalf("%d performMaintenance before the checkpoint", n)
	}
	// A checkpoint of another notice does not count.
	checkpoint(t, e, vm, window.Add(-24*time.Hour))
	if got := e.sweep(vm); got != remediate.ActionRecord {
		t.Fatalf("a checkpoint for another notice: %s, want record", got)
	}
	checkpoint(t, e, vm, window)
	if got := e.sweep(vm); got != remediate.ActionMaintain {
		t.Fatalf("after the checkpoint: %s, want maintain", got)
	}
	if !strings.Contains(e.out.recs[len(e.out.recs)-1].Reason, "gs://bucket/run/step-100") {
		t.Errorf("the record does not name the checkpoint: %q", e.out.recs[len(e.out.recs)-1].Reason)
	}
	for range 3 {
		e.sweep(vm)
	}
	if !maintenanceStarted(e, vm) {
		t.Errorf("the maintenance of %s was not started", vm)
	}
	if n := e.calls("instances.performMaintenance"); n != 1 {
		t.Errorf("%d performMaintenance calls, want 1", n)
	}
}

func TestEarlyNeverStartsANoticeThatCannotBeRescheduled(t *testing.T) {
	e := earlyEnv(t)
	vm := name("trainer-a")
	window := epoch.Add(7 * 24 * time.Hour)
	if _, err := e.fake.ScheduleMaintenance(vm, computefake.Maintenance{WindowStart: window, WindowEnd: window.Add(4 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	e.sweep(vm)
	e.clock.add(computefake.DefaultMetadataTime + time.Second)
	checkpoint(t, e, vm, window)
	if got := e.sweep(vm); got != remediate.ActionRecord {
		t.Fatalf("canReschedule false: %s, want record", got)
	}
	if n := e.calls("instances.performMaintenance"); n != 0 {
		t.Errorf("%d performMaintenance for a notice that cannot be rescheduled", n)
	}
}

func TestModePrepareNeverStartsMaintenance(t *testing.T) {
	e := newEnv(t) // prepare, the default
	vm := name("trainer-a")
	window := epoch.Add(7 * 24 * time.Hour)
	if _, err := e.fake.ScheduleMaintenance(vm, computefake.Maintenance{WindowStart: window, WindowEnd: window.Add(4 * time.Hour), CanReschedule: true}); err != nil {
		t.Fatal(err)
	}
	e.sweep(vm)
	e.clock.add(computefake.DefaultMetadataTime + time.Second)
	checkpoint(t, e, vm, window)
	e.sweep(vm)
	if n := e.calls("instances.performMaintenance") + e.calls("instances.getGuestAttributes"); n != 0 {
		t.Errorf("%d performMaintenance/getGuestAttributes calls in mode prepare", n)
	}
}

func TestALostPerformMaintenanceAnswerIsNeverSentAgainForTheWindow(t *testing.T) {
	e := earlyEnv(t)
	vm := name("trainer-a")
	window := epoch.Add(7 * 24 * time.Hour)
	if _, err := e.fake.ScheduleMaintenance(vm, computefake.Maintenance{WindowStart: window, WindowEnd: window.Add(4 * time.Hour), CanReschedule: true}); err != nil {
		t.Fatal(err)
	}
	e.sweep(vm)
	e.clock.add(computefake.DefaultMetadataTime + time.Second)
	checkpoint(t, e, vm, window)
	e.fake.Fail(computefake.FailRule{Method: "instances.performMaintenance", Code: 503, Reason: "backendError", Message: "server error"}) // not applied: the notice stays PENDING
	if got := e.sweep(vm); got != remediate.ActionMaintain {
		t.Fatalf("after the checkpoint: %s, want maintain", got)
	}
	for range 3 {
		e.clock.add(time.Minute)
		e.sweep(vm)
	}
	if n := e.calls("instances.performMaintenance"); n != 1 {
		t.Errorf("%d performMaintenance calls after a lost answer, want 1 (never twice for one window)", n)
	}
}

func TestEarlyOnTheFourVMSliceIsAllOrNothing(t *testing.T) {
	e := earlyEnv(t)
	mig := computefake.MIGName(project, zone, "slice-mig")
	window := epoch.Add(7 * 24 * time.Hour)
	if _, err := e.fake.ScheduleMaintenance(name("slice-mig-w0"), computefake.Maintenance{WindowStart: window, WindowEnd: window.Add(4 * time.Hour), CanReschedule: true}); err != nil {
		t.Fatal(err)
	}
	if got := e.sweep(mig); got != remediate.ActionPrepare {
		t.Fatalf("first look: %s, want prepare", got)
	}
	e.clock.add(computefake.DefaultMetadataTime + time.Second)
	for _, w := range []string{"w0", "w1", "w2"} {
		checkpoint(t, e, name("slice-mig-"+w), window)
	}
	if got := e.sweep(mig); got != remediate.ActionRecord {
		t.Fatalf("three of four checkpoints: %s, want record", got)
	}
	if n := e.calls("instances.performMaintenance"); n != 0 {
		t.Fatalf("%d performMaintenance with a checkpoint missing", n)
	}
	checkpoint(t, e, name("slice-mig-w3"), window)
	if got := e.sweep(mig); got != remediate.ActionMaintain {
		t.Fatalf("all four checkpoints: %s, want maintain", got)
	}
	calls := e.calls("instances.performMaintenance")
	for range 3 {
		e.clock.add(time.Minute)
		e.sweep(mig)
	}
	if n := e.calls("instances.performMaintenance"); n != calls || n < 1 || n > 4 {
		t.Errorf("performMaintenance calls %d then %d: want at most one per VM, none after the first look", calls, n)
	}
	for _, w := range []string{"w0", "w1", "w2", "w3"} {
		if !maintenanceStarted(e, name("slice-mig-"+w)) {
			t.Errorf("the maintenance of slice-mig-%s was not started", w)
		}
	}
}
