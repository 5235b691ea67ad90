package computevm_test

import (
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// TestAnOldHostErrorReplayedAfterAPersonActedDoesNothing: a host error is
// recovered (one start), a person then stops or deletes the VM and that
// entry never reaches the function; the old host error, redelivered, and
// every later sweep do nothing: the system event is older than the VM's
// last start (stop) or than when it was last seen running (delete).
func TestAnOldHostErrorReplayedAfterAPersonActedDoesNothing(t *testing.T) {
	for _, what := range []string{"stop", "delete"} {
		t.Run(what, func(t *testing.T) {
			e := newEnv(t)
			vm := name("reserved-1") // automaticRestart false, no MIG
			e.sweep(vm)
			old, err := e.fake.HostError(vm)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.deliver(old); got != "start" {
				t.Fatalf("host error: %s, want start", got)
			}
			e.clock.add(computefake.DefaultStartTime + time.Minute)
			e.sweep(vm) // RUNNING again: its spec saved with the new start
			e.clock.add(time.Hour)
			var lost []computefake.LogEntry // the person's entries, never delivered
			if what == "stop" {
				lost, err = e.fake.PersonStop(vm, "alice@acme.example")
			} else {
				lost, err = e.fake.PersonDelete(vm, "alice@acme.example")
			}
			if err != nil || len(lost) == 0 {
				t.Fatal(lost, err)
			}
			e.clock.add(5 * time.Minute)
			if got := e.deliver(old); vmpolicy.Action(got).Mutates() {
				t.Errorf("the old host error redelivered after a person's %s: %s, want nothing", what, got)
			}
			for range 3 {
				e.clock.add(10 * time.Minute)
				if got := e.sweep(vm); vmpolicy.Action(got).Mutates() {
					t.Errorf("swept after a person's %s: %s, want nothing", what, got)
				}
			}
			if got := e.calls("instances.start") + e.calls("instances.insert"); got != 1 {
				t.Errorf("%d starts and inserts, want 1 (the first host error's start)", got)
			}
		})
	}
}

// TestAnInsertWhoseAnswerIsLostButLandsIsNotSentAgain: the insert's
// answer is lost and the VM appears only 8 minutes later; with a short
// cooldown, every look in between finds it NOT FOUND, and still no second
// insert is sent: the call's outcome is unknown until it is seen.
func TestAnInsertWhoseAnswerIsLostButLandsIsNotSentAgain(t *testing.T) {
	e := newEnv(t)
	e.rec.Config.Cooldown = time.Minute // the guard that would otherwise hide a second insert
	vm := name("spot-delete")
	e.sweep(vm)
	e.fake.Fail(computefake.FailRule{Method: "instances.insert", Lost: true, Applied: true, AppliedAfter: 8 * time.Minute, Times: 1})
	entry, err := e.fake.Preempt(vm)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.deliver(entry); got != "recreate" {
		t.Fatalf("preempted and deleted: %s, want recreate", got)
	}
	for range 5 {
		e.clock.add(2 * time.Minute)
		if got := e.sweep(vm); got == "recreate" {
			t.Errorf("at %s, the first insert's outcome unknown: recreate again", e.clock.now().Sub(epoch))
		}
	}
	e.clock.add(computefake.DefaultInsertTime + time.Minute)
	if got := e.sweep(vm); got != remediate.ActionRecord {
		t.Errorf("after the insert landed: %s, want record", got)
	}
	if got := e.calls("instances.insert"); got != 1 {
		t.Errorf("%d inserts, want exactly 1", got)
	}
	if in, ok := e.fake.Instance(vm); !ok || in.Status != "RUNNING" {
		t.Errorf("after the insert: %v %+v", ok, in)
	}
}

// TestAnInsertWhoseAnswerIsUnclearAndDidNotLandIsSentAgainAfterTheWait: a
// 503 to an insert that did nothing holds the slice for UnknownWait and two
// reads, then the insert is sent again, once.
func TestAnInsertWhoseAnswerIsUnclearAndDidNotLandIsSentAgainAfterTheWait(t *testing.T) {
	e := newEnv(t)
	e.rec.Config.Cooldown = time.Minute
	vm := name("spot-delete")
	e.sweep(vm)
	e.fake.Fail(computefake.FailRule{Method: "instances.insert", Code: 503, Times: 1})
	entry, err := e.fake.Preempt(vm)
	if err != nil {
		t.Fatal(err)
	}
	e.deliver(entry)
	for range 4 {
		e.clock.add(2 * time.Minute)
		if got := e.sweep(vm); got != remediate.ActionDefer {
			t.Errorf("at %s, within the wait: %s, want defer", e.clock.now().Sub(epoch), got)
		}
	}
	e.clock.add(2 * time.Minute) // 10 minutes, 5 reads: concluded lost
	if got := e.sweep(vm); got != "recreate" {
		t.Errorf("after the wait: %s, want recreate", got)
	}
	e.clock.add(computefake.DefaultInsertTime + time.Minute)
	e.sweep(vm)
	if got := e.calls("instances.insert"); got != 2 {
		t.Errorf("%d inserts, want 2 (the unclear one, then one more)", got)
	}
	if in, ok := e.fake.Instance(vm); !ok || in.Status != "RUNNING" {
		t.Errorf("after the second insert: %v %+v", ok, in)
	}
}

func TestAStartWhoseAnswerIsLostButTakesEffectIsNotSentAgain(t *testing.T) {
	e := newEnv(t)
	e.rec.Config.Cooldown = time.Minute
	vm := name("reserved-1")
	e.sweep(vm)
	e.fake.Fail(computefake.FailRule{Method: "instances.start", Lost: true, Applied: true, AppliedAfter: 6 * time.Minute, Times: 1})
	entry, err := e.fake.HostError(vm)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.deliver(entry); got != "start" {
		t.Fatalf("host error: %s, want start", got)
	}
	for range 5 {
		e.clock.add(2 * time.Minute)
		e.sweep(vm)
	}
	if got := e.calls("instances.start"); got != 1 {
		t.Errorf("%d starts, want exactly 1", got)
	}
	if in, _ := e.fake.Instance(vm); in.Status != "RUNNING" {
		t.Errorf("after the start took effect: %s", in.Status)
	}
}

// TestAMIGVMsHostErrorIsKeptWhenItsReadAnswersNotFound: the MIG's VM reads
// NOT FOUND once (a lagging or faulty read; a MIG's VM has no saved spec),
// just as its host error is delivered: the entry is kept as evidence, not
// dropped as "not ours", so the MIG, stuck, is asked to recreate the VM
// past the stuck grace (computevm's chaos seed 1 without the keep).
func TestAMIGVMsHostErrorIsKeptWhenItsReadAnswersNotFound(t *testing.T) {
	e := newEnv(t)
	mig := computefake.MIGName(project, zone, "serve-mig")
	if err := e.fake.SetMIGStuck(mig, true); err != nil {
		t.Fatal(err)
	}
	vm := name("serve-mig-a1b2")
	entry, err := e.fake.HostError(vm)
	if err != nil {
		t.Fatal(err)
	}
	e.fake.Fail(computefake.FailRule{Method: "instances.get", Resource: vm, Code: 404, Times: 1})
	if got := e.deliver(entry); got != remediate.ActionRecord {
		t.Fatalf("host error read NOT FOUND: %s, want record", got)
	}
	e.clock.add(31 * time.Minute)
	if got := e.sweep(vm); got != "recreateInstances" {
		t.Errorf("past the stuck grace: %s (%s), want recreateInstances", got, e.lastRecord(vm).Reason)
	}
}

// TestAMIGVMStoppedWithNoEntryIsNeverRecreated: a person stops a VM of a
// stuck MIG after an old host error was recovered, and their audit entry
// never comes; past the stuck grace, and long after, nothing is sent: no
// system event is newer than the VM's last stop.
func TestAMIGVMStoppedWithNoEntryIsNeverRecreated(t *testing.T) {
	e := newEnv(t)
	mig := computefake.MIGName(project, zone, "slice-mig")
	vm := name("slice-mig-w1")
	old, err := e.fake.HostError(vm)
	if err != nil {
		t.Fatal(err)
	}
	e.deliver(old)
	for range 12 { // the MIG repairs the slice
		e.clock.add(5 * time.Minute)
		e.sweep(mig)
	}
	if in, _ := e.fake.Instance(vm); in.Status != "RUNNING" {
		t.Fatalf("after the MIG's repair: %s", in.Status)
	}
	if err := e.fake.SetMIGStuck(mig, true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fake.PersonStop(vm, "bob@acme.example"); err != nil { // entries never delivered
		t.Fatal(err)
	}
	for range 12 {
		e.clock.add(10 * time.Minute)
		if got := e.sweep(mig); vmpolicy.Action(got).Mutates() {
			t.Errorf("at %s after a stop with no entry: %s (%s)", e.clock.now().Sub(epoch), got, e.lastRecord(mig).Reason)
		}
	}
	if got := e.calls("instanceGroupManagers.recreateInstances"); got != 0 {
		t.Errorf("%d recreateInstances, want 0", got)
	}
	if in, _ := e.fake.Instance(vm); in.Status != "TERMINATED" {
		t.Errorf("the VM Bob stopped is %s", in.Status)
	}
}
