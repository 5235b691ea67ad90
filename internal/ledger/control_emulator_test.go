//go:build emulator

package ledger_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
)

func TestFirestoreControl(t *testing.T) {
	prefix := fmt.Sprintf("control%d_", collectionSeq.Add(1))
	runControlContract(t, ledger.NewFirestore(newClient(t), ledger.WithPrefix(prefix), ledger.WithClock(func() time.Time { return t0 })))
}
