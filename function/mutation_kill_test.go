package function_test

// Tests written for the survivors of the mutation check (docs/testing.md,
// "Mutation check"; bench/mutate): each fails with its mutation applied and
// passes without it.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// evidenceOutage fails KeepEvidence, as a Firestore outage would.
type evidenceOutage struct {
	function.Ledger
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
	store := &evidenceOutage{Ledger: ledger.NewMemory()}
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

// followSpy counts the follows the function starts: a follow run first
// clears the pending kick (remediate.Handler.Follow).
type followSpy struct {
	*ledger.Memory
	mu      sync.Mutex
	follows int
}

func (s *followSpy) ClearKick(ctx context.Context) error {
	s.mu.Lock()
	s.follows++
	s.mu.Unlock()
	return s.Memory.ClearKick(ctx)
}

func (s *followSpy) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.follows
}

// A follow message whose nonce the function never issued, or already took,
// is acknowledged and not acted on: anyone who can publish to the topic
// cannot make the function follow (mutation F02: it was counted as ignored
// and followed anyway).
func TestAFollowWithAnUnknownOrUsedNonceStartsNoFollow(t *testing.T) {
	store := &followSpy{Memory: ledger.NewMemory()}
	fn, _, _, _ := kickFunction(t, &fakeKicker{}, store, nil, map[string]string{"AUTOHEAL_SWEEP_FOLLOW": "2s"})
	ctx := context.Background()
	if err := fn.HandleMessage(ctx, pushBody([]byte(events.FollowKick(ledger.NewNonce())))); err != nil {
		t.Fatal(err)
	}
	if n := store.count(); n != 0 {
		t.Errorf("follows after a kick with an unknown nonce = %d, want 0", n)
	}
	nonce := ledger.NewNonce()
	if err := store.IssueNonce(ctx, nonce, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	kick := pushBody([]byte(events.FollowKick(nonce)))
	if err := fn.HandleMessage(ctx, kick); err != nil {
		t.Fatal(err)
	}
	if n := store.count(); n != 1 {
		t.Fatalf("follows after a kick with an issued nonce = %d, want 1", n)
	}
	if err := fn.HandleMessage(ctx, kick); err != nil {
		t.Fatal(err)
	}
	if n := store.count(); n != 1 {
		t.Errorf("follows after the same kick again (nonce used) = %d, want still 1", n)
	}
}
