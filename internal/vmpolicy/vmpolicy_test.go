package vmpolicy_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

const (
	vmA = "projects/acme-ml/zones/us-central1-c/instances/trainer-a"
	vmB = "projects/acme-ml/zones/us-central1-c/instances/trainer-b"
	mig = "projects/acme-ml/zones/us-central1-c/instanceGroupManagers/slice-mig"
)

var t0 = time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func vm(name, status string, mods ...func(*vmpolicy.Instance)) vmpolicy.Instance {
	i := vmpolicy.Instance{Name: name, Found: true, ID: 7, Status: status, OptedIn: true, HasSpec: true}
	if status == vmpolicy.StatusTerminated {
		i.LastStop = t0
	}
	for _, m := range mods {
		m(&i)
	}
	return i
}

func gone(name string) vmpolicy.Instance {
	return vmpolicy.Instance{Name: name, OptedIn: true, HasSpec: true}
}

var (
	autoRestart = func(i *vmpolicy.Instance) { i.AutomaticRestart = true }
	inMIG       = func(i *vmpolicy.Instance) { i.MIG = mig }
	optedOut    = func(i *vmpolicy.Instance) { i.OptedIn = false }
	noSpec      = func(i *vmpolicy.Instance) { i.HasSpec = false }
	stoppedAt   = func(d time.Duration) func(*vmpolicy.Instance) {
		return func(i *vmpolicy.Instance) { i.LastStop = at(d) }
	}
)

func seenAt(i vmpolicy.Instance, d time.Duration) vmpolicy.Instance { i.Seen = at(d); return i }

func startedAt(d time.Duration) func(*vmpolicy.Instance) {
	return func(i *vmpolicy.Instance) { i.LastStart = at(d) }
}

func sys(name string, d time.Duration) vmpolicy.Evidence {
	return vmpolicy.Evidence{Instance: name, Kind: vmpolicy.EvidenceSystem, Method: "compute.instances.hostError", Time: at(d)}
}

func person(name string, d time.Duration) vmpolicy.Evidence {
	return vmpolicy.Evidence{Instance: name, Kind: vmpolicy.EvidencePerson, Method: "v1.compute.instances.stop", Time: at(d)}
}

func TestDecide(t *testing.T) {
	cfg := vmpolicy.DefaultConfig() // restart grace 5m, stuck grace 30m, slack 2m
	tests := []struct {
		name    string
		in      vmpolicy.Input
		action  vmpolicy.Action
		targets []string
	}{
		{"running instance is recorded", vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "RUNNING")}}, vmpolicy.ActionRecord, nil},
		{"running after a host error is recorded (it recovered by itself)",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "RUNNING")}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(time.Hour)}, vmpolicy.ActionRecord, nil},
		{"opted-out instance is recorded, never acted on",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", optedOut)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(time.Hour)}, vmpolicy.ActionRecord, nil},
		{"provisioning is deferred", vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "PROVISIONING")}, Since: t0, Now: at(time.Minute)}, vmpolicy.ActionDefer, nil},
		{"staging is deferred", vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "STAGING")}, Since: t0, Now: at(time.Minute)}, vmpolicy.ActionDefer, nil},
		{"repairing is deferred", vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "REPAIRING")}, Since: t0, Now: at(time.Minute)}, vmpolicy.ActionDefer, nil},
		{"stopping is deferred", vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "STOPPING")}, Since: t0, Now: at(time.Minute)}, vmpolicy.ActionDefer, nil},
		{"pending stop is deferred", vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "PENDING_STOP")}, Since: t0, Now: at(time.Minute)}, vmpolicy.ActionDefer, nil},
		{"suspending is deferred", vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "SUSPENDING")}, Since: t0, Now: at(time.Minute)}, vmpolicy.ActionDefer, nil},
		{"deprovisioning is deferred", vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "DEPROVISIONING")}, Since: t0, Now: at(time.Minute)}, vmpolicy.ActionDefer, nil},
		{"pending is deferred", vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "PENDING")}, Since: t0, Now: at(time.Minute)}, vmpolicy.ActionDefer, nil},
		{"standalone stuck in progress past the grace is recorded (no call fits)",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "STAGING")}, Since: t0, Now: at(time.Hour)}, vmpolicy.ActionRecord, nil},
		{"vanished after a system event newer than when it was last seen running is recreated",
			vmpolicy.Input{Slice: []vmpolicy.Instance{seenAt(gone(vmA), -time.Hour)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(time.Minute)}, vmpolicy.ActionRecreate, []string{vmA}},
		{"vanished, its only system event older than when it was last seen running: an old entry explains nothing",
			vmpolicy.Input{Slice: []vmpolicy.Instance{seenAt(gone(vmA), time.Hour)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(2 * time.Hour)}, vmpolicy.ActionRecord, nil},
		{"vanished, a system event just before it was seen (within the slack) still explains it",
			vmpolicy.Input{Slice: []vmpolicy.Instance{seenAt(gone(vmA), time.Minute)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(2 * time.Minute)}, vmpolicy.ActionRecreate, []string{vmA}},
		{"vanished, a person's delete after it was last seen though an older system event is newer: held",
			vmpolicy.Input{Slice: []vmpolicy.Instance{seenAt(gone(vmA), time.Hour)}, Evidence: []vmpolicy.Evidence{person(vmA, 2*time.Hour), sys(vmA, 3*time.Hour)}, Now: at(4 * time.Hour)}, vmpolicy.ActionHeld, nil},
		{"terminated, a person's stop after its last start, a system event after that: held",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", startedAt(-time.Hour), stoppedAt(time.Minute))}, Evidence: []vmpolicy.Evidence{person(vmA, -time.Minute), sys(vmA, time.Minute)}, Now: at(time.Hour)}, vmpolicy.ActionHeld, nil},
		{"terminated, a person's stop before its last start, then a host error: started",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", startedAt(-time.Hour))}, Evidence: []vmpolicy.Evidence{person(vmA, -2*time.Hour), sys(vmA, 0)}, Now: at(time.Minute)}, vmpolicy.ActionStart, []string{vmA}},
		{"vanished, its only system event older than its last start (as saved): an old entry explains nothing",
			vmpolicy.Input{Slice: []vmpolicy.Instance{func() vmpolicy.Instance { i := gone(vmA); i.LastStart = at(30 * time.Second); return i }()}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(time.Hour)}, vmpolicy.ActionRecord, nil},
		{"terminated by a host error is started",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED")}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(time.Minute)}, vmpolicy.ActionStart, []string{vmA}},
		{"terminated with automaticRestart is deferred within the restart grace",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", autoRestart)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(time.Minute)}, vmpolicy.ActionDefer, nil},
		{"terminated with automaticRestart is started after the restart grace",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", autoRestart)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(6 * time.Minute)}, vmpolicy.ActionStart, []string{vmA}},
		{"terminated is started once per incident",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED")}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)},
				Incident: vmpolicy.Incident{Action: vmpolicy.ActionStart, At: at(time.Minute)}, Now: at(2 * time.Minute)}, vmpolicy.ActionRecord, nil},
		{"a new host error after the last start is a new incident",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", stoppedAt(time.Hour))}, Evidence: []vmpolicy.Evidence{sys(vmA, 0), sys(vmA, time.Hour)},
				Incident: vmpolicy.Incident{Action: vmpolicy.ActionStart, At: at(time.Minute)}, Now: at(time.Hour + time.Minute)}, vmpolicy.ActionStart, []string{vmA}},
		{"terminated with no system event (guest shutdown) is held",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED")}, Now: at(time.Minute)}, vmpolicy.ActionHeld, nil},
		{"terminated after its last system event (stopped again since) is held",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", stoppedAt(time.Hour))}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(2 * time.Hour)}, vmpolicy.ActionHeld, nil},
		{"a person's stop is held",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED")}, Evidence: []vmpolicy.Evidence{person(vmA, 0)}, Now: at(time.Hour)}, vmpolicy.ActionHeld, nil},
		{"a person's stop after a host error is held",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED")}, Evidence: []vmpolicy.Evidence{sys(vmA, 0), person(vmA, time.Second)}, Now: at(time.Hour)}, vmpolicy.ActionHeld, nil},
		{"a person's delete is held",
			vmpolicy.Input{Slice: []vmpolicy.Instance{gone(vmA)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0), person(vmA, time.Minute)}, Now: at(time.Hour)}, vmpolicy.ActionHeld, nil},
		{"suspended is held", vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "SUSPENDED")}, Now: at(time.Hour)}, vmpolicy.ActionHeld, nil},
		{"not found after a preemption is recreated from the saved spec",
			vmpolicy.Input{Slice: []vmpolicy.Instance{gone(vmA)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(time.Minute)}, vmpolicy.ActionRecreate, []string{vmA}},
		{"not found is recreated once per incident",
			vmpolicy.Input{Slice: []vmpolicy.Instance{gone(vmA)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)},
				Incident: vmpolicy.Incident{Action: vmpolicy.ActionRecreate, At: at(time.Minute)}, Now: at(2 * time.Minute)}, vmpolicy.ActionRecord, nil},
		{"not found with no system event is recorded",
			vmpolicy.Input{Slice: []vmpolicy.Instance{gone(vmA)}, Now: at(time.Minute)}, vmpolicy.ActionRecord, nil},
		{"not found with no saved spec is recorded",
			vmpolicy.Input{Slice: []vmpolicy.Instance{func() vmpolicy.Instance { i := gone(vmA); noSpec(&i); return i }()}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(time.Minute)}, vmpolicy.ActionRecord, nil},
		{"MIG instance is recorded while the MIG repairs it",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(time.Minute)}, vmpolicy.ActionRecord, nil},
		{"MIG instance in progress is deferred within the stuck grace",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "PROVISIONING", inMIG)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(time.Minute)}, vmpolicy.ActionDefer, nil},
		{"MIG instance not running after the stuck grace is recreated by the MIG",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(31 * time.Minute)}, vmpolicy.ActionRecreateInstances, []string{vmA}},
		{"MIG instance stuck provisioning past the grace after a host error is recreated by the MIG",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "PROVISIONING", inMIG)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Since: t0, Now: at(31 * time.Minute)}, vmpolicy.ActionRecreateInstances, []string{vmA}},
		{"MIG instance stuck provisioning with no system event is recreated by the MIG (no person's stop leaves it there)",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "PROVISIONING", inMIG)}, Since: t0, Now: at(31 * time.Minute)}, vmpolicy.ActionRecreateInstances, []string{vmA}},
		{"MIG instance stuck repairing with no system event is recreated by the MIG",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "REPAIRING", inMIG)}, Since: t0, Now: at(31 * time.Minute)}, vmpolicy.ActionRecreateInstances, []string{vmA}},
		{"MIG instance stuck stopping with no system event (a person's stop on its way) is recorded, never recreated",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "STOPPING", inMIG)}, Since: t0, Now: at(31 * time.Minute)}, vmpolicy.ActionRecord, nil},
		{"MIG slice: one VM stuck provisioning and one terminated with no event of its own keeps the slice at record",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "PROVISIONING", inMIG), vm(vmB, "TERMINATED", inMIG)}, Since: t0, Now: at(31 * time.Minute)}, vmpolicy.ActionRecord, nil},
		{"MIG instance terminated with no system event (a stop with no audit entry) is recorded, never recreated",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG)}, Since: t0, Now: at(2 * time.Hour)}, vmpolicy.ActionRecord, nil},
		{"MIG instance stopped after its last system event (a stop with no audit entry) is recorded, never recreated",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG, stoppedAt(20*time.Minute))}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Since: at(20 * time.Minute), Now: at(2 * time.Hour)}, vmpolicy.ActionRecord, nil},
		{"MIG instance stopped within the slack of its system event is recreated",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG, stoppedAt(time.Minute))}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(time.Hour)}, vmpolicy.ActionRecreateInstances, []string{vmA}},
		{"MIG slice: VMs each stopped by their own system event are recreated whole",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG), vm(vmB, "TERMINATED", inMIG, stoppedAt(30*time.Second))}, Evidence: []vmpolicy.Evidence{sys(vmA, 0), sys(vmB, 30*time.Second)}, Now: at(time.Hour)},
			vmpolicy.ActionRecreateInstances, []string{vmA, vmB}},
		{"MIG slice: a VM stopped in the same second as another VM's host error, with no event of its own, keeps the slice at record",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG), vm(vmB, "TERMINATED", inMIG)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(time.Hour)},
			vmpolicy.ActionRecord, nil},
		{"MIG slice: a VM stopped long after another VM's host error (no audit entry) keeps the slice at record",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG), vm(vmB, "TERMINATED", inMIG, stoppedAt(20*time.Minute))}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(time.Hour)},
			vmpolicy.ActionRecord, nil},
		{"vanished MIG instance with a system event only from before it was last seen running is recorded",
			vmpolicy.Input{Slice: []vmpolicy.Instance{seenAt(func() vmpolicy.Instance { i := gone(vmA); inMIG(&i); return i }(), 10*time.Minute)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Since: at(10 * time.Minute), Now: at(2 * time.Hour)}, vmpolicy.ActionRecord, nil},
		{"vanished MIG instance with a system event after it was last seen running is recreated",
			vmpolicy.Input{Slice: []vmpolicy.Instance{seenAt(func() vmpolicy.Instance { i := gone(vmA); inMIG(&i); return i }(), 10*time.Minute)}, Evidence: []vmpolicy.Evidence{sys(vmA, 11*time.Minute)}, Now: at(2 * time.Hour)}, vmpolicy.ActionRecreateInstances, []string{vmA}},
		{"MIG recreateInstances is sent once per incident",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)},
				Incident: vmpolicy.Incident{Action: vmpolicy.ActionRecreateInstances, At: at(31 * time.Minute)}, Now: at(40 * time.Minute)}, vmpolicy.ActionRecord, nil},
		{"MIG slice: one VM's failure recreates the whole slice",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG), vm(vmB, "RUNNING", inMIG)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(31 * time.Minute)},
			vmpolicy.ActionRecreateInstances, []string{vmA, vmB}},
		{"MIG instance a person stopped is held",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG)}, Evidence: []vmpolicy.Evidence{person(vmA, 0)}, Now: at(time.Hour)}, vmpolicy.ActionHeld, nil},
		{"standalone slice: both VMs terminated by one host error are started together",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED"), vm(vmB, "TERMINATED")}, Evidence: []vmpolicy.Evidence{sys(vmA, 0), sys(vmB, 0)}, Now: at(time.Minute)},
			vmpolicy.ActionStart, []string{vmA, vmB}},
		{"standalone slice with one VM a person stopped is held whole",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED"), vm(vmB, "TERMINATED")}, Evidence: []vmpolicy.Evidence{sys(vmA, 0), person(vmB, time.Minute)}, Now: at(time.Hour)},
			vmpolicy.ActionHeld, nil},
		{"standalone slice with one VM unexplained is held whole, never acted on partially",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED"), vm(vmB, "TERMINATED")}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(time.Hour)},
			vmpolicy.ActionHeld, nil},
		{"no instance observed is recorded", vmpolicy.Input{Now: t0}, vmpolicy.ActionRecord, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := vmpolicy.Decide(tt.in, cfg)
			if got.Action != tt.action {
				t.Errorf("action = %s (%s), want %s", got.Action, got.Reason, tt.action)
			}
			if diff := cmp.Diff(tt.targets, got.Targets); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
			if got.Reason == "" {
				t.Error("no reason")
			}
			if got.Action.Mutates() != (len(got.Targets) > 0) {
				t.Errorf("%s with targets %v", got.Action, got.Targets)
			}
		})
	}
}

// TestAMaintenanceIsNotStuckBeforeItsWindowEnds: a slice held down by a
// maintenance (one this project started, or a terminateOnHostMaintenance
// inside its notice's window) counts as stuck only after the window's end
// plus the stuck grace; the window found is handed back to be kept.
func TestAMaintenanceIsNotStuckBeforeItsWindowEnds(t *testing.T) {
	cfg := vmpolicy.DefaultConfig() // stuck grace 30m, slack 2m
	window := func(i *vmpolicy.Instance) { i.WindowStart, i.WindowEnd = t0, at(4*time.Hour) }
	maintained := func(i *vmpolicy.Instance) { i.MaintainedUntil = at(3 * time.Hour) }
	terminate := func(d time.Duration) vmpolicy.Evidence {
		e := sys(vmA, d)
		e.Method = vmpolicy.MethodTerminateOnHostMaintenance
		return e
	}
	tests := []struct {
		name   string
		in     vmpolicy.Input
		action vmpolicy.Action
		until  time.Time
	}{
		{"terminated by the maintenance inside its window: watched until the window's end",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG, window), vm(vmB, "TERMINATED", inMIG, window)}, Evidence: []vmpolicy.Evidence{terminate(0)}, Now: at(time.Hour)},
			vmpolicy.ActionRecord, at(4 * time.Hour)},
		{"terminated by the maintenance: stuck after the window's end plus the stuck grace",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG, window)}, Evidence: []vmpolicy.Evidence{terminate(0)}, Now: at(4*time.Hour + 31*time.Minute)},
			vmpolicy.ActionRecreateInstances, at(4 * time.Hour)},
		{"a terminate on host maintenance outside the notice's window is stuck after the grace",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG, window, stoppedAt(-time.Hour))}, Evidence: []vmpolicy.Evidence{terminate(-time.Hour)}, Now: at(-29 * time.Minute)},
			vmpolicy.ActionRecreateInstances, time.Time{}},
		{"a host error inside the notice's window is stuck after the grace",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG, window)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)}, Now: at(31 * time.Minute)},
			vmpolicy.ActionRecreateInstances, time.Time{}},
		{"the maintenance we started holds the slice until its window's end",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG, maintained)}, Evidence: []vmpolicy.Evidence{terminate(0)}, Now: at(time.Hour)},
			vmpolicy.ActionRecord, at(3 * time.Hour)},
		{"the maintenance we started: in progress is deferred until its window's end plus the grace",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "PROVISIONING", inMIG, maintained)}, Evidence: []vmpolicy.Evidence{terminate(0)}, Now: at(3*time.Hour + 29*time.Minute)},
			vmpolicy.ActionDefer, at(3 * time.Hour)},
		{"a window kept from an earlier look holds a VM the MIG made again (no notice on it)",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG)}, Evidence: []vmpolicy.Evidence{terminate(0)}, MaintenanceUntil: at(4 * time.Hour), Now: at(2 * time.Hour)},
			vmpolicy.ActionRecord, time.Time{}},
		{"a window kept from an earlier look: stuck after it plus the grace",
			vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG)}, Evidence: []vmpolicy.Evidence{terminate(0)}, MaintenanceUntil: at(4 * time.Hour), Now: at(4*time.Hour + 31*time.Minute)},
			vmpolicy.ActionRecreateInstances, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := vmpolicy.Decide(tt.in, cfg)
			if got.Action != tt.action {
				t.Errorf("action = %s (%s), want %s", got.Action, got.Reason, tt.action)
			}
			if !got.MaintenanceUntil.Equal(tt.until) {
				t.Errorf("MaintenanceUntil = %v, want %v", got.MaintenanceUntil, tt.until)
			}
		})
	}
}

func TestDecidePrepare(t *testing.T) {
	const w = "2026-11-27T04:00:00Z"
	pending := func(i *vmpolicy.Instance) { i.Maintenance = w }
	notified := func(i *vmpolicy.Instance) { i.Notified = w }
	off := func(i *vmpolicy.Instance) { i.NoPrepare = true }
	tests := []struct {
		name    string
		slice   []vmpolicy.Instance
		action  vmpolicy.Action
		targets []string
	}{
		{"a notice on a running VM is delivered", []vmpolicy.Instance{vm(vmA, "RUNNING", pending)}, vmpolicy.ActionPrepare, []string{vmA}},
		{"a delivered notice is recorded", []vmpolicy.Instance{vm(vmA, "RUNNING", pending, notified)}, vmpolicy.ActionRecord, nil},
		{"a slice's notice goes to every VM not holding it", []vmpolicy.Instance{vm(vmA, "RUNNING", pending, notified), vm(vmB, "RUNNING")}, vmpolicy.ActionPrepare, []string{vmB}},
		{"maintenance mode off records", []vmpolicy.Instance{vm(vmA, "RUNNING", pending, off)}, vmpolicy.ActionRecord, nil},
		{"a broken VM is recovered first, not prepared", []vmpolicy.Instance{vm(vmA, "STAGING", pending)}, vmpolicy.ActionDefer, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := vmpolicy.Decide(vmpolicy.Input{Slice: tt.slice, Since: t0, Now: at(time.Minute)}, vmpolicy.DefaultConfig())
			if got.Action != tt.action || !cmp.Equal(got.Targets, tt.targets) {
				t.Errorf("= %s %v (%s), want %s %v", got.Action, got.Targets, got.Reason, tt.action, tt.targets)
			}
		})
	}
}

func hostErrors(name string, ds ...time.Duration) []vmpolicy.Evidence {
	var out []vmpolicy.Evidence
	for _, d := range ds {
		out = append(out, sys(name, d))
	}
	return out
}

func TestDecideFaultyHosts(t *testing.T) {
	cfg := vmpolicy.DefaultConfig()
	cfg.FaultyHosts = vmpolicy.FaultyHosts{Count: 3, Window: 7 * 24 * time.Hour}
	day := 24 * time.Hour
	reservation := func(i *vmpolicy.Instance) { i.ReservationBound = true }
	reported := func(d time.Duration) func(*vmpolicy.Instance) {
		return func(i *vmpolicy.Instance) { i.FaultyReported = at(d) }
	}
	tests := []struct {
		name   string
		cfg    vmpolicy.Config
		in     vmpolicy.Input
		action vmpolicy.Action
	}{
		{"three host errors in a week on a reservation-bound VM: reported",
			cfg, vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "RUNNING", reservation)}, Evidence: hostErrors(vmA, 0, day, 2*day), Now: at(2*day + time.Hour)}, vmpolicy.ActionReportFaulty},
		{"off by default: recorded",
			vmpolicy.DefaultConfig(), vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "RUNNING", reservation)}, Evidence: hostErrors(vmA, 0, day, 2*day), Now: at(2*day + time.Hour)}, vmpolicy.ActionRecord},
		{"two host errors: recorded",
			cfg, vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "RUNNING", reservation)}, Evidence: hostErrors(vmA, day, 2*day), Now: at(2*day + time.Hour)}, vmpolicy.ActionRecord},
		{"three host errors, one older than the window: recorded",
			cfg, vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "RUNNING", reservation)}, Evidence: hostErrors(vmA, 0, 7*day, 8*day), Now: at(8*day + time.Hour)}, vmpolicy.ActionRecord},
		{"not reservation-bound: recorded",
			cfg, vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "RUNNING")}, Evidence: hostErrors(vmA, 0, day, 2*day), Now: at(2*day + time.Hour)}, vmpolicy.ActionRecord},
		{"reported already, no host error since: recorded, never a second report",
			cfg, vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "RUNNING", reservation, reported(2*day+time.Minute), startedAt(5*day))}, Evidence: hostErrors(vmA, 0, day, 2*day), Now: at(5*day + time.Hour)}, vmpolicy.ActionRecord},
		{"reported, now TERMINATED after a host error: held, never started",
			cfg, vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", reservation, reported(2*day), startedAt(-day), stoppedAt(2*day+time.Minute))}, Evidence: hostErrors(vmA, 0, day, 2*day, 2*day+time.Minute), Now: at(2*day + time.Hour)}, vmpolicy.ActionHeld},
		{"reported, vanished: held, never recreated",
			cfg, vmpolicy.Input{Slice: []vmpolicy.Instance{func() vmpolicy.Instance { i := gone(vmA); i.FaultyReported = at(2 * day); return i }()}, Evidence: hostErrors(vmA, 2*day+time.Minute), Now: at(2*day + time.Hour)}, vmpolicy.ActionHeld},
		{"reported, started after the repair, then TERMINATED by a host error: started",
			cfg, vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", reservation, reported(2*day), startedAt(5*day), stoppedAt(6*day))}, Evidence: hostErrors(vmA, 6*day), Now: at(6*day + time.Minute)}, vmpolicy.ActionStart},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := vmpolicy.Decide(tt.in, tt.cfg)
			if got.Action != tt.action {
				t.Errorf("action = %s (%s), want %s", got.Action, got.Reason, tt.action)
			}
		})
	}
}

func TestParseFaultyHosts(t *testing.T) {
	for in, want := range map[string]vmpolicy.FaultyHosts{
		"": {}, "false": {}, "off": {}, "true": vmpolicy.DefaultFaultyHosts, "on": vmpolicy.DefaultFaultyHosts,
		"3/7d": {Count: 3, Window: 7 * 24 * time.Hour}, "2/36h": {Count: 2, Window: 36 * time.Hour},
	} {
		got, err := vmpolicy.ParseFaultyHosts(in)
		if err != nil || got != want {
			t.Errorf("ParseFaultyHosts(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"3", "0/7d", "x/7d", "3/0d", "3/xd", "3/-1h", "yes"} {
		if _, err := vmpolicy.ParseFaultyHosts(in); err == nil {
			t.Errorf("ParseFaultyHosts(%q): no error", in)
		}
	}
}

// The report reads a record decision as "the slice is healthy again" only
// when Decide made it about a slice whose every instance is RUNNING.
func TestSaysRunningOnlyOfARunningSlice(t *testing.T) {
	const w = "2026-11-27T04:00:00Z"
	pending := func(i *vmpolicy.Instance) { i.Maintenance = w }
	notified := func(i *vmpolicy.Instance) { i.Notified = w }
	early := func(i *vmpolicy.Instance) { i.Early, i.CanReschedule = true, true }
	tests := []struct {
		name string
		in   vmpolicy.Input
		want bool
	}{
		{"every instance running", vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "RUNNING"), vm(vmB, "RUNNING")}}, true},
		{"running with a delivered notice", vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "RUNNING", pending, notified)}}, true},
		{"running, waiting for the checkpoint", vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "RUNNING", pending, notified, early)}}, true},
		{"the MIG repairs a broken VM", vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "RUNNING", inMIG), vm(vmB, "TERMINATED", inMIG)},
			Evidence: []vmpolicy.Evidence{sys(vmB, 0)}, Now: at(time.Minute)}, false},
		{"recreateInstances already sent", vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED", inMIG)}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)},
			Incident: vmpolicy.Incident{Action: vmpolicy.ActionRecreateInstances, At: at(31 * time.Minute)}, Now: at(32 * time.Minute)}, false},
		{"start already sent", vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "TERMINATED")}, Evidence: []vmpolicy.Evidence{sys(vmA, 0)},
			Incident: vmpolicy.Incident{Action: vmpolicy.ActionStart, At: at(time.Minute)}, Now: at(2 * time.Minute)}, false},
		{"not opted in", vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "RUNNING", optedOut)}}, false},
		{"vanished with no system event", vmpolicy.Input{Slice: []vmpolicy.Instance{gone(vmA)}, Now: at(time.Minute)}, false},
		{"still provisioning past the stuck grace", vmpolicy.Input{Slice: []vmpolicy.Instance{vm(vmA, "PROVISIONING")}, Since: t0, Now: at(time.Hour)}, false},
		{"no instance observed", vmpolicy.Input{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := vmpolicy.Decide(tt.in, vmpolicy.DefaultConfig())
			if d.Action != vmpolicy.ActionRecord && d.Action != vmpolicy.ActionPrepare && d.Action != vmpolicy.ActionMaintain {
				t.Fatalf("Decide = %s (%s): the row does not test a record decision", d.Action, d.Reason)
			}
			if got := vmpolicy.SaysRunning(d.Reason); got != tt.want {
				t.Errorf("SaysRunning(%q) = %v, want %v", d.Reason, got, tt.want)
			}
		})
	}
}
