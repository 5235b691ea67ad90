//go:build emulator

package computevm_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/emulator"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

func TestMain(m *testing.M) { os.Exit(emulator.Main(m, emulator.Firestore)) }

var prefixSeq atomic.Int64

// onFirestore puts the env's instance store and ledger in the Firestore
// emulator, each test in collections of its own.
func onFirestore(t *testing.T, e *env) {
	t.Helper()
	emulator.Require(t, emulator.Firestore)
	c, err := firestore.NewClientWithDatabase(context.Background(), "autoheal-test", "tpu-autoheal")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	prefix := fmt.Sprintf("computevm-%d-%d-", time.Now().UnixNano(), prefixSeq.Add(1))
	e.rec.Store = computevm.NewFirestore(c, prefix)
	e.rec.Ledger = ledger.NewFirestore(c, ledger.WithClock(e.clock.now), ledger.WithPrefix(prefix))
}

func TestOnFirestorePreemptedSpotVMIsInsertedOnceFromTheSavedSpec(t *testing.T) {
	e := newEnv(t)
	onFirestore(t, e)
	vm := name("spot-delete")
	e.sweep(vm)
	entry, err := e.fake.Preempt(vm)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.deliver(entry); got != "recreate" {
		t.Fatalf("preempted and deleted: %s, want recreate", got)
	}
	if got := e.deliver(entry); got == "recreate" {
		t.Errorf("redelivery: %s, want no second insert", got)
	}
	e.sweep(vm) // PROVISIONING: in progress
	e.clock.add(computefake.DefaultInsertTime + time.Second)
	e.sweep(vm)
	if got := e.calls("instances.insert"); got != 1 || mutations(e) != 1 {
		t.Errorf("%d inserts, %d mutations, want 1 and 1", got, mutations(e))
	}
}

func TestOnFirestorePersonsStopIsHeld(t *testing.T) {
	e := newEnv(t)
	onFirestore(t, e)
	vm := name("reserved-1")
	entries, err := e.fake.PersonStop(vm, "alice@acme.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		e.deliver(en)
	}
	e.clock.add(time.Hour)
	if got := e.sweep(vm); got != remediate.Action(vmpolicy.ActionHeld) || mutations(e) != 0 {
		t.Errorf("after a person's stop: %s, %d mutations", got, mutations(e))
	}
}

func TestOnFirestoreACheckpointConcludedLateStaysLate(t *testing.T) {
	e := earlyEnv(t)
	onFirestore(t, e)
	silentGuest(t, e)
}
