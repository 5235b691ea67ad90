//go:build emulator

package ledger_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/internal/emulator"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/ledger/ledgertest"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

func TestMain(m *testing.M) { os.Exit(emulator.Main(m, emulator.Firestore)) }

// The emulator accepts any project and database id.
const (
	testProject  = "autoheal-test"
	testDatabase = "tpu-autoheal"
)

var collectionSeq atomic.Int64

func newClient(t *testing.T) *firestore.Client {
	t.Helper()
	emulator.Require(t, emulator.Firestore)
	c, err := firestore.NewClientWithDatabase(context.Background(), testProject, testDatabase)
	if err != nil {
		t.Fatalf("firestore client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestFirestoreMeetsStoreContract(t *testing.T) {
	shared := newClient(t)
	var mu sync.Mutex
	prefixes := map[remediate.Store]string{}
	newStore := func(t *testing.T) remediate.Store {
		prefix := fmt.Sprintf("contract%d_", collectionSeq.Add(1))
		s := ledger.NewFirestore(shared, ledger.WithPrefix(prefix))
		mu.Lock()
		prefixes[s] = prefix
		mu.Unlock()
		return s
	}
	ledgertest.Run(t, newStore, ledgertest.Options{
		Claimants: 64,
		// Every claim of one zone commits the zone's breaker document:
		// racers serialize on it, so the emulator storm is smaller.
		StormClaims: 24,
		StormLimit:  6,
		// Each racer has its own client, as separate function instances do.
		NewClaimant: func(t *testing.T, base remediate.Store) remediate.Store {
			mu.Lock()
			prefix := prefixes[base]
			mu.Unlock()
			return ledger.NewFirestore(newClient(t), ledger.WithPrefix(prefix))
		},
	})
}

// A ledger written before per-node summaries existed: documents in their
// old shape and no summaries. The first Histories backfills them.
func TestFirestoreHistoriesBackfillsAnOldLedger(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	prefix := fmt.Sprintf("legacy%d_", collectionSeq.Add(1))
	const node = "projects/proj-a/locations/us-central2-b/nodes/old"
	key := "projects~proj-a~locations~us-central2-b~nodes~old"
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	spec := `{"acceleratorType":"v4-8","labels":{"tpu-autoheal":"enabled"}}`
	docs := map[string]map[string]any{
		"recoveries": {"node": node, "project": "proj-a", "action": "recreate", "phase": "deleted", "spec": spec,
			"generation": 2, "holder": "h", "leaseUntil": t0.Add(time.Minute), "leaseMillis": int64(60000), "attempts": 1,
			"startedAt": t0, "updatedAt": t0, "unfinished": true, "counted": true, "recreates": []time.Time{t0}},
		"deferrals": {"node": node, "project": "proj-a", "since": t0, "due": t0.Add(time.Hour), "reason": "old deferral"},
		"holds":     {"node": node, "project": "proj-a", "nodeId": int64(5), "since": t0, "eventId": "e", "reason": "old hold"},
	}
	for col, d := range docs {
		if _, err := c.Collection(prefix+col).Doc(key).Set(ctx, d); err != nil {
			t.Fatalf("write old %s: %v", col, err)
		}
	}
	s := ledger.NewFirestore(c, ledger.WithPrefix(prefix))
	got, err := s.Histories(ctx, []string{node}, "proj-a", t0.Add(time.Minute), 24*time.Hour)
	if err != nil {
		t.Fatalf("Histories: %v", err)
	}
	want, err := s.History(ctx, node, "proj-a", "", t0.Add(time.Minute), 24*time.Hour)
	if err != nil {
		t.Fatalf("History: %v", err)
	}
	if diff := cmp.Diff(want, got[node]); diff != "" {
		t.Errorf("Histories of an old ledger (-History +Histories):\n%s", diff)
	}
	if h := got[node]; h.Recovery == nil || h.Recovery.Spec == nil || h.Deferral == nil || h.Hold == nil || len(h.Recreates) != 1 {
		t.Errorf("Histories of an old ledger lost state: %+v", h)
	}
	snaps, err := c.Collection(prefix + ledger.CollectionSummaries).Doc(key).Get(ctx)
	if err != nil || !snaps.Exists() {
		t.Errorf("summary after backfill: %v; want it written", err)
	}
}

// BenchmarkFirestoreSweepRead reads the history of a page of 1,000 nodes
// (a tenth with a finished recovery, a tenth deferred) node by node with
// History, as the sweep did, and with one Histories call.
func BenchmarkFirestoreSweepRead(b *testing.B) {
	emulator.Require(b, emulator.Firestore)
	c, err := firestore.NewClientWithDatabase(context.Background(), testProject, testDatabase)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	s := ledger.NewFirestore(c, ledger.WithPrefix(fmt.Sprintf("bench%d_", collectionSeq.Add(1))))
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cfg := remediate.DefaultConfig()
	cfg.MaxInFlight, cfg.BreakerLimit = 0, 1<<30
	nodes := make([]string, 1000)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("projects/p/locations/us-central2-b/nodes/n-%04d", i)
		switch i % 10 {
		case 0:
			r, err := s.Claim(ctx, remediate.ClaimRequest{Node: nodes[i], Project: "p", Holder: "h", Now: t0, Action: remediate.ActionRecreate, Config: cfg})
			if err != nil {
				b.Fatal(err)
			}
			r.Phase = remediate.PhaseDone
			if err := s.Update(ctx, r); err != nil {
				b.Fatal(err)
			}
		case 1:
			if err := s.SetDeferral(ctx, remediate.Deferral{Node: nodes[i], Project: "p", Since: t0, Due: t0.Add(time.Hour)}); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := s.Histories(ctx, nodes[:1], "p", t0, time.Hour); err != nil { // backfill mark
		b.Fatal(err)
	}
	b.Run("History per node", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for _, n := range nodes {
				if _, err := s.History(ctx, n, "p", "", t0, time.Hour); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("Histories", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := s.Histories(ctx, nodes, "p", t0, time.Hour); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Recoveries written by older versions, as documents: phases of before
// Step, and no deleteSent field at all. Every read converts them to today's
// shape (legacy.go), so the state machine is handed only phases it writes.
func TestFirestoreReadsOldShapeRecoveriesInTodaysShape(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	spec := `{"acceleratorType":"v4-8","labels":{"tpu-autoheal":"enabled"}}`
	const op = "projects/proj-a/locations/us-central2-b/operations/operation-7"
	tests := []struct {
		name           string
		doc            map[string]any // beyond what every row has
		wantAction     remediate.Action
		wantPhase      remediate.Phase
		wantDeleteSent bool
	}{
		{"a recreate saved before deleteSent existed, with its delete's operation, is deleting with its delete sent",
			map[string]any{"action": "recreate", "phase": "saved", "deleteOp": op}, remediate.ActionRecreate, remediate.PhaseDeleting, true},
		{"a recreate creating before deleteSent existed has its delete sent",
			map[string]any{"action": "recreate", "phase": "creating", "createOp": op}, remediate.ActionRecreate, remediate.PhaseCreating, true},
		{"a recreate saved without a delete stays saved",
			map[string]any{"action": "recreate", "phase": "saved"}, remediate.ActionRecreate, remediate.PhaseSaved, false},
		{"a reset saved before Step as creating is resetting",
			map[string]any{"action": "reset", "phase": "creating", "createOp": op, "queuedResource": "projects/proj-a/locations/us-central2-b/queuedResources/qr"},
			remediate.ActionReset, remediate.PhaseResetting, false},
		{"a reset saved before Step as deleted is resetting",
			map[string]any{"action": "reset", "phase": "deleted", "queuedResource": "projects/proj-a/locations/us-central2-b/queuedResources/qr"},
			remediate.ActionReset, remediate.PhaseResetting, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := fmt.Sprintf("oldshape%d_", collectionSeq.Add(1))
			node := fmt.Sprintf("projects/proj-a/locations/us-central2-b/nodes/old-%d", i)
			doc := map[string]any{"node": node, "project": "proj-a", "spec": spec,
				"generation": 1, "holder": "gone", "leaseUntil": t0.Add(time.Minute), "leaseMillis": int64(60000), "attempts": 1,
				"startedAt": t0, "updatedAt": t0, "unfinished": true}
			for k, v := range tt.doc {
				doc[k] = v
			}
			if _, err := c.Collection(prefix+ledger.CollectionRecoveries).Doc(fmt.Sprintf("projects~proj-a~locations~us-central2-b~nodes~old-%d", i)).Set(ctx, doc); err != nil {
				t.Fatalf("write the old document: %v", err)
			}
			s := ledger.NewFirestore(c, ledger.WithPrefix(prefix))
			check := func(read string, got *remediate.Recovery) {
				t.Helper()
				if got == nil {
					t.Fatalf("%s: no recovery", read)
				}
				if got.Action != tt.wantAction || got.Phase != tt.wantPhase || got.DeleteSent != tt.wantDeleteSent {
					t.Errorf("%s: %s phase %s DeleteSent %v; want %s phase %s DeleteSent %v",
						read, got.Action, got.Phase, got.DeleteSent, tt.wantAction, tt.wantPhase, tt.wantDeleteSent)
				}
			}
			h, err := s.History(ctx, node, "proj-a", "", t0, 24*time.Hour)
			if err != nil {
				t.Fatalf("History: %v", err)
			}
			check("History", h.Recovery)
			un, err := s.Unfinished(ctx)
			if err != nil || len(un) != 1 {
				t.Fatalf("Unfinished = %d recoveries, %v; want 1", len(un), err)
			}
			check("Unfinished", &un[0])
			hs, err := s.Histories(ctx, []string{node}, "proj-a", t0, 24*time.Hour)
			if err != nil {
				t.Fatalf("Histories: %v", err)
			}
			check("Histories", hs[node].Recovery)
			r, err := s.Claim(ctx, remediate.ClaimRequest{Node: node, Project: "proj-a", Holder: "h2", Now: t0.Add(time.Hour),
				Action: tt.wantAction, Config: remediate.DefaultConfig()})
			if err != nil {
				t.Fatalf("takeover Claim: %v", err)
			}
			check("takeover claim", &r)
		})
	}
}
