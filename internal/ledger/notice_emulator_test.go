//go:build emulator

package ledger_test

import (
	"fmt"
	"testing"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

func TestFirestoreNoticesMeetContract(t *testing.T) {
	client := newClient(t)
	runNoticeContract(t, func(t *testing.T) remediate.NoticeStore {
		return ledger.NewFirestoreNotices(client, ledger.WithPrefix(fmt.Sprintf("notices%d_", collectionSeq.Add(1))))
	})
}
