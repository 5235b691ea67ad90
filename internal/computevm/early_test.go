package computevm_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
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

// noticeOn gives vm, and every VM of its slice, a PENDING maintenance
// notice a week ahead and returns its window start.
func noticeOn(t *testing.T, e *env, vm string, canReschedule bool) time.Time {
	t.Helper()
	window := epoch.Add(7 * 24 * time.Hour)
	if _, err := e.fake.ScheduleMaintenance(vm, computefake.Maintenance{WindowStart: window, WindowEnd: window.Add(4 * time.Hour), CanReschedule: canReschedule}); err != nil {
		t.Fatal(err)
	}
	return window
}

// prepared has a look deliver the notice to the slice key (prepare) and
// lets the setMetadata operations end; it returns when the notice was sent.
func prepared(t *testing.T, e *env, key string) time.Time {
	t.Helper()
	sent := e.clock.now()
	if got := e.sweep(key); got != remediate.ActionPrepare {
		t.Fatalf("first look: %s, want prepare", got)
	}
	e.clock.add(computefake.DefaultMetadataTime + time.Second)
	return sent
}

// lastReason is the reason of the newest record about the slice key.
func lastReason(e *env, key string) string {
	e.out.mu.Lock()
	defer e.out.mu.Unlock()
	for i := len(e.out.recs) - 1; i >= 0; i-- {
		if e.out.recs[i].Node == key {
			return e.out.recs[i].Reason
		}
	}
	return ""
}

func TestEarlyStartsASingleHostVMsMaintenanceOnceAfterItsCheckpoint(t *testing.T) {
	e := earlyEnv(t)
	vm := name("trainer-a")
	window := noticeOn(t, e, vm, true)
	prepared(t, e, vm)
	if got := e.sweep(vm); got != remediate.ActionRecord {
		t.Fatalf("before the checkpoint: %s, want record (waiting)", got)
	}
	if !strings.Contains(lastReason(e, vm), "no checkpoint reported by") {
		t.Errorf("the record does not say what was seen: %q", lastReason(e, vm))
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
	if !strings.Contains(lastReason(e, vm), "gs://bucket/run/step-100") {
		t.Errorf("the record does not name the checkpoint: %q", lastReason(e, vm))
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
	window := noticeOn(t, e, vm, false)
	prepared(t, e, vm)
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
	window := noticeOn(t, e, vm, true)
	prepared(t, e, vm)
	checkpoint(t, e, vm, window)
	e.sweep(vm)
	if n := e.calls("instances.performMaintenance") + e.calls("instances.getGuestAttributes"); n != 0 {
		t.Errorf("%d performMaintenance/getGuestAttributes calls in mode prepare", n)
	}
}

func TestALostPerformMaintenanceAnswerIsNeverSentAgainForTheWindow(t *testing.T) {
	e := earlyEnv(t)
	vm := name("trainer-a")
	window := noticeOn(t, e, vm, true)
	prepared(t, e, vm)
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
	window := noticeOn(t, e, name("slice-mig-w0"), true)
	prepared(t, e, mig)
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

// The checkpoint timeout (AUTOHEAL_CHECKPOINT_TIMEOUT), as for nodes: a
// guest that has not reported its checkpoint that long after the notice
// was sent leaves the maintenance to Compute Engine; no later report starts
// it early.

func TestACheckpointNotReportedInTimeIsNeverStartedEarly(t *testing.T) {
	for _, c := range []struct {
		name    string
		timeout time.Duration // vmpolicy.Config.CheckpointTimeout; 0: DefaultConfig's
		want    time.Duration
	}{
		{"default 30m", 0, 30 * time.Minute},
		{"configured 5m", 5 * time.Minute, 5 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := earlyEnv(t)
			if c.timeout != 0 {
				e.rec.Policy.CheckpointTimeout = c.timeout
			}
			vm := name("trainer-a")
			window := noticeOn(t, e, vm, true)
			sent := prepared(t, e, vm)
			e.clock.add(sent.Add(c.want - time.Second).Sub(e.clock.now()))
			if got := e.sweep(vm); got != remediate.ActionRecord || !strings.Contains(lastReason(e, vm), "waiting for the checkpoint of "+vm) {
				t.Fatalf("a second before the timeout: %s %q, want record waiting", got, lastReason(e, vm))
			}
			e.clock.add(time.Second)
			if got := e.sweep(vm); got != remediate.ActionRecord || !strings.Contains(lastReason(e, vm), "checkpoint not reported by "+vm+" within "+c.want.String()) {
				t.Fatalf("at the timeout: %s %q, want record: not reported within %s", got, lastReason(e, vm), c.want)
			}
			reads := e.calls("instances.getGuestAttributes")
			checkpoint(t, e, vm, window) // too late
			for range 3 {
				e.clock.add(time.Minute)
				if got := e.sweep(vm); got != remediate.ActionRecord || !strings.Contains(lastReason(e, vm), "not reported in time") {
					t.Errorf("after the timeout, the checkpoint reported: %s %q, want record: not reported in time", got, lastReason(e, vm))
				}
			}
			if n := e.calls("instances.performMaintenance"); n != 0 {
				t.Errorf("%d performMaintenance after the checkpoint timeout", n)
			}
			if n := e.calls("instances.getGuestAttributes"); n != reads {
				t.Errorf("%d getGuestAttributes after the timeout was concluded, want none", n-reads)
			}
			if maintenanceStarted(e, vm) {
				t.Errorf("the maintenance of %s was started: Compute Engine starts it in its window", vm)
			}
		})
	}
}

// silentGuest runs the timeout on the 4-VM slice whose w3 never reports
// in time, on e's store.
func silentGuest(t *testing.T, e *env) {
	t.Helper()
	mig := computefake.MIGName(project, zone, "slice-mig")
	window := noticeOn(t, e, name("slice-mig-w0"), true)
	sent := prepared(t, e, mig)
	for _, w := range []string{"w0", "w1", "w2"} {
		checkpoint(t, e, name("slice-mig-"+w), window)
	}
	e.clock.add(sent.Add(vmpolicy.DefaultCheckpointTimeout).Sub(e.clock.now()))
	silent := name("slice-mig-w3")
	if got := e.sweep(mig); got != remediate.ActionRecord || !strings.Contains(lastReason(e, mig), "checkpoint not reported by "+silent+" within 30m0s") {
		t.Fatalf("at the timeout: %s %q, want record naming %s", got, lastReason(e, mig), silent)
	}
	checkpoint(t, e, silent, window)
	for range 3 {
		e.clock.add(time.Minute)
		if got := e.sweep(mig); got != remediate.ActionRecord {
			t.Errorf("every checkpoint reported after the timeout: %s, want record", got)
		}
	}
	if n := e.calls("instances.performMaintenance"); n != 0 {
		t.Errorf("%d performMaintenance on the slice after the checkpoint timeout", n)
	}
	for _, w := range []string{"w0", "w1", "w2", "w3"} {
		if maintenanceStarted(e, name("slice-mig-"+w)) {
			t.Errorf("the maintenance of slice-mig-%s was started", w)
		}
	}
}

func TestASliceWithOneSilentGuestIsLeftToComputeEngineAfterTheTimeout(t *testing.T) {
	silentGuest(t, earlyEnv(t))
}

func TestALateLookThatFindsEveryCheckpointStillStartsIt(t *testing.T) {
	// As for nodes: only a look that finds a checkpoint missing past the
	// timeout concludes it late.
	e := earlyEnv(t)
	vm := name("trainer-a")
	window := noticeOn(t, e, vm, true)
	prepared(t, e, vm)
	e.clock.add(10 * time.Minute)
	checkpoint(t, e, vm, window)
	e.clock.add(time.Hour) // no look in between
	if got := e.sweep(vm); got != remediate.ActionMaintain {
		t.Fatalf("every checkpoint reported within the timeout, seen after it: %s %q, want maintain", got, lastReason(e, vm))
	}
	if n := e.calls("instances.performMaintenance"); n != 1 {
		t.Errorf("%d performMaintenance, want 1", n)
	}
}

func TestANoticeWithoutSentAtIsDeliveredAgain(t *testing.T) {
	// Its timeout could not run: prepare writes ours over it.
	e := earlyEnv(t)
	vm := name("trainer-a")
	window := noticeOn(t, e, vm, true)
	in, _ := e.fake.Instance(vm)
	b, _ := json.Marshal(map[string]string{"notice": window.Format(time.RFC3339)})
	v := string(b)
	in.Metadata.Items = append(in.Metadata.Items, &compute.MetadataItems{Key: remediate.NoticeMetadataKey, Value: &v})
	if err := e.fake.SetInstance(in); err != nil {
		t.Fatal(err)
	}
	prepared(t, e, vm)
	in, _ = e.fake.Instance(vm)
	var got remediate.MaintenanceNotice
	for _, it := range in.Metadata.Items {
		if it.Key == remediate.NoticeMetadataKey {
			json.Unmarshal([]byte(*it.Value), &got)
		}
	}
	if got.SentAt.IsZero() || got.Notice != window.Format(time.RFC3339) {
		t.Errorf("the notice after prepare %+v, want ours with sentAt", got)
	}
}

// TestASliceInMaintenanceIsNotStuckUntilItsWindowEnds: the 4-VM slice's
// MIG does not repair a VM the maintenance holds down, and the
// maintenance here lasts 3 hours: whether this project started it (mode
// early's performMaintenance) or the platform did in the notice's window
// (its terminateOnHostMaintenance entries delivered), no look sends
// recreateInstances during it, past the stuck grace (30 minutes); when the
// maintenance ends and the MIG repairs the slice, nothing was sent at all.
func TestASliceInMaintenanceIsNotStuckUntilItsWindowEnds(t *testing.T) {
	for _, started := range []string{"by us (early)", "by the platform in its window"} {
		t.Run(started, func(t *testing.T) {
			e := newEnv(t, computefake.WithOperationDelay("performMaintenance", 3*time.Hour))
			mig := computefake.MIGName(project, zone, "slice-mig")
			window := epoch.Add(10 * time.Minute)
			if started == "by us (early)" {
				e.rec.Config.MaintenanceMode = remediate.MaintenanceEarly
				window = noticeOn(t, e, name("slice-mig-w0"), true)
			} else if _, err := e.fake.ScheduleMaintenance(name("slice-mig-w0"), computefake.Maintenance{WindowStart: window, WindowEnd: window.Add(4 * time.Hour)}); err != nil {
				t.Fatal(err)
			}
			prepared(t, e, mig)
			if started == "by us (early)" {
				for _, w := range []string{"w0", "w1", "w2", "w3"} {
					checkpoint(t, e, name("slice-mig-"+w), window)
				}
				if got := e.sweep(mig); got != remediate.ActionMaintain {
					t.Fatalf("every checkpoint reported: %s, want maintain", got)
				}
			}
			delivered := 0
			deliverNew := func() { // the system events, as the sink brings them
				entries := e.fake.AuditEntries()
				for _, en := range entries[delivered:] {
					if en.ProtoPayload.AuthenticationInfo.PrincipalEmail == computefake.SystemPrincipal {
						e.deliver(en)
					}
				}
				delivered = len(entries)
			}
			var down bool
			for range 3 * 12 { // 3 hours, a look every 5 minutes
				e.clock.add(5 * time.Minute)
				deliverNew()
				if in, _ := e.fake.Instance(name("slice-mig-w2")); in.Status == "TERMINATED" {
					down = true
				}
				if got := e.sweep(mig); got == "recreateInstances" {
					t.Fatalf("at +%s, in the maintenance: recreateInstances (%s)", e.clock.now().Sub(epoch), lastReason(e, mig))
				}
			}
			if !down {
				t.Fatal("the maintenance never stopped the slice: the test tests nothing")
			}
			for range 12 { // the maintenance ends; the MIG repairs what stayed down
				e.clock.add(5 * time.Minute)
				deliverNew()
				e.sweep(mig)
			}
			if n := e.calls("instanceGroupManagers.recreateInstances"); n != 0 {
				t.Errorf("%d recreateInstances for a slice in maintenance, want 0", n)
			}
			for _, w := range []string{"w0", "w1", "w2", "w3"} {
				if in, ok := e.fake.Instance(name("slice-mig-" + w)); !ok || in.Status != "RUNNING" {
					t.Errorf("slice-mig-%s after the maintenance: %v %s", w, ok, in.Status)
				}
			}
		})
	}
}
