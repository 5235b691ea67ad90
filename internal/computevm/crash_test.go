package computevm_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// dyingStore is a store whose process dies right after saving an
// incident: the write is done, nothing after it happens.
type dyingStore struct {
	computevm.Store
	died bool
}

var errDied = errors.New("the process died")

func (s *dyingStore) SetSlice(ctx context.Context, key string, st computevm.SliceState) error {
	if s.died {
		return errDied
	}
	err := s.Store.SetSlice(ctx, key, st)
	if st.Incident.Action != "" {
		s.died = true
		return errDied
	}
	return err
}

// TestCrashAfterTheIncidentIsSavedStillStartsTheVM: the process dies right
// after it saved "start sent for this incident" and before the start went
// out. The next process must not take the incident for done: the start,
// saved with it as sent with its outcome unknown, is found not in effect,
// concluded lost, and sent, once (vmswarm seeds 93 and 135 of -kinds all).
func TestCrashAfterTheIncidentIsSavedStillStartsTheVM(t *testing.T) {
	e := newEnv(t)
	vm := name("reserved-1") // no automaticRestart, no MIG
	e.sweep(vm)
	entry, err := e.fake.HostError(vm)
	if err != nil {
		t.Fatal(err)
	}
	store := e.rec.Store
	dying := &dyingStore{Store: store}
	e.rec.Store = dying
	ev, err := events.Parse(entry.JSON(), events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.rec.HandleEvent(context.Background(), ev); !errors.Is(err, errDied) {
		t.Fatalf("HandleEvent = %v, want the process dead", err)
	}
	if got := e.calls("instances.start"); got != 0 {
		t.Fatalf("%d starts before the crash, want none (it died first)", got)
	}
	restartAndSweep(t, e, store)
	if got := e.calls("instances.start"); got != 1 {
		t.Errorf("%d starts after the crash, want 1", got)
	}
	if in, _ := e.fake.Instance(vm); in.Status != vmpolicy.StatusRunning {
		t.Errorf("%s is %s two hours after the crash, want RUNNING", vm, in.Status)
	}
}

// TestCrashAfterTheIncidentIsSavedStillRecreatesTheMIGsVM: as above for a
// stuck MIG's VM: the process dies right after it saved "recreateInstances
// sent for this incident", before the call. The next process must not read
// the incident as done for good (the slice would stay down until another
// system event): the call, saved with it as sent with its outcome unknown,
// is found not in effect, concluded lost, and sent, once.
func TestCrashAfterTheIncidentIsSavedStillRecreatesTheMIGsVM(t *testing.T) {
	e := newEnv(t)
	mig := computefake.MIGName(project, zone, "serve-mig")
	if err := e.fake.SetMIGStuck(mig, true); err != nil {
		t.Fatal(err)
	}
	vm := name("serve-mig-a1b2")
	e.sweep(vm)
	entry, err := e.fake.HostError(vm)
	if err != nil {
		t.Fatal(err)
	}
	e.deliver(entry)
	store := e.rec.Store
	e.rec.Store = &dyingStore{Store: store}
	e.clock.add(31 * time.Minute)
	if _, err := e.rec.Sweep(context.Background(), []string{project}, []string{zone}); !errors.Is(err, errDied) {
		t.Fatalf("Sweep = %v, want the process dead", err)
	}
	if got := e.calls("instanceGroupManagers.recreateInstances"); got != 0 {
		t.Fatalf("%d recreateInstances before the crash, want none (it died first)", got)
	}
	restartAndSweep(t, e, store)
	if got := e.calls("instanceGroupManagers.recreateInstances"); got != 1 {
		t.Errorf("%d recreateInstances after the crash, want 1", got)
	}
	if in, _ := e.fake.Instance(vm); in.Status != vmpolicy.StatusRunning {
		t.Errorf("%s is %s two hours after the crash, want RUNNING", vm, in.Status)
	}
}

// restartAndSweep is a new process (nothing in memory) over the same store
// and ledger, sweeping every 5 minutes for two hours.
func restartAndSweep(t *testing.T, e *env, store computevm.Store) {
	t.Helper()
	old := e.rec
	e.rec = &computevm.Recovery{Compute: old.Compute, Store: store, Ledger: old.Ledger, Recorder: old.Recorder,
		Config: old.Config, Policy: old.Policy, Holder: old.Holder, Now: old.Now, Sealer: old.Sealer}
	for range 24 {
		e.clock.add(5 * time.Minute)
		if _, err := e.rec.Sweep(context.Background(), []string{project}, []string{zone}); err != nil {
			t.Fatal(err)
		}
	}
}
