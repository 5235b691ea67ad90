//go:build emulator

package function_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/emulator"
)

// TestUncertainOverSizeSpecIsRefusedOnceAgainstFirestore: against the real
// ledger (the Firestore emulator), a spec over the 1 MiB document limit can
// never be saved: refused before any delete, one ERROR record, every
// delivery acknowledged (not redelivered by Pub/Sub forever), never retried.
//
//	go test -tags emulator ./function -run OverSize
func TestUncertainOverSizeSpecIsRefusedOnceAgainstFirestore(t *testing.T) {
	_, stop, err := emulator.StartFirestore(context.Background())
	if errors.Is(err, emulator.ErrNoGcloud) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	n := uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")
	n.Metadata["big"] = strings.Repeat("x", 1200<<10)
	w := newWorldLedger(t, false, uFleet(n), map[string]string{"AUTOHEAL_FIRESTORE_DATABASE": fmt.Sprintf("unc-%d", time.Now().UnixNano()%1e9)})
	if n, code := w.deliverAsPubSub(uEntry("terminate-1", uNode, uT0, "system@google.com", ""), 5); n > 1 {
		t.Errorf("%d deliveries (the last answered %d), want the first acknowledged: it can never succeed", n, code)
	}
	if nacked := w.sweeps(20); nacked > 0 { // past the lease: what a later sweep does with it
		t.Errorf("%d of 20 sweeps answered an error: a recovery that can never finish is retried", nacked)
	}
	if got := w.fake.Count("nodes.delete", uNode); got != 0 {
		t.Errorf("%d deletes of a node whose spec the ledger cannot hold, want 0", got)
	}
	if errs := w.errorRecords(uNode); errs != 1 {
		t.Errorf("%d ERROR records, want exactly 1 saying the spec is too large; records:%s", errs, w.history(uNode))
	}
}
