package function_test

// Tests written for the survivors of the mutation check (docs/testing.md,
// "Mutation check"; bench/mutate): each fails with its mutation applied and
// passes without it.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// evidenceOutage fails KeepEvidence, as a Firestore outage would.
type evidenceOutage struct {
	remediate.Store
	calls int
}

func (s *evidenceOutage) KeepEvidence(context.Context, string, remediate.Evidence) (bool, error) {
	s.calls++
	return false, errors.New("firestore: unavailable")
}

// A person's DeleteNode entry that the ledger failed to keep is not
// acknowledged: the delivery fails so Pub/Sub redelivers it, or the
// evidence that the node was deleted by a person is lost and the recovery
// creates their node again (mutation F03).
func TestEvidenceTheLedgerFailedToKeepIsRedelivered(t *testing.T) {
	entry, err := os.ReadFile(filepath.Join("..", "testdata", "entries", "admin-delete-node.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, tc := newFleetTPU(t)
	cfg, err := load(t, fleetEnv())
	if err != nil {
		t.Fatal(err)
	}
	store := &evidenceOutage{Store: ledger.NewMemory()}
	fn, err := function.New(context.Background(), cfg,
		function.WithDiagnostics(&syncBuffer{}),
		function.WithTPU(tc),
		function.WithStore(store),
		function.WithRecorder(&sliceRecorder{}),
		function.WithClock(func() time.Time { return time.Date(2026, 11, 20, 5, 11, 0, 0, time.UTC) }),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fn.Close() })
	if err := fn.HandleMessage(context.Background(), pushBody(entry)); err == nil {
		t.Fatal("HandleMessage = nil with the ledger failing to keep the evidence; want an error (redelivered)")
	}
	if store.calls == 0 {
		t.Error("KeepEvidence was never called: the test did not reach the evidence path")
	}
}
