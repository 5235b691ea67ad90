//go:build emulator

package ledger_test

import (
	"fmt"
	"testing"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

func TestFirestoreIncidentsMeetContract(t *testing.T) {
	c := newClient(t)
	runIncidentContract(t, func(*testing.T) remediate.IncidentStore {
		return ledger.NewFirestoreIncidents(c, ledger.WithPrefix(fmt.Sprintf("incidents%d_", collectionSeq.Add(1))))
	})
}
