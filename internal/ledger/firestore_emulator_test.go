//go:build emulator

package ledger_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/firestore"

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
