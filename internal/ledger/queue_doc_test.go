package ledger

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// A queued recovery's queue survives the Firestore document: a takeover
// follows the same queued resource, its requeues and its raised cap; a
// recovery with no queue reads back with none.
func TestQueueSurvivesTheDocument(t *testing.T) {
	q := &remediate.QueueState{Name: "projects/p/locations/z/queuedResources/n-autoheal-2-1", Op: "projects/p/locations/z/operations/operation-9",
		Tier: "spot", ValidFor: 12 * time.Hour, ValidUntil: time.Date(2026, 11, 20, 16, 0, 0, 0, time.UTC), Requeues: 1, Cap: 37 * time.Hour}
	for name, in := range map[string]*remediate.QueueState{"queued": q, "none": nil} {
		t.Run(name, func(t *testing.T) {
			doc, err := toDoc(nodeLedger{Latest: &remediate.Recovery{Node: "projects/p/locations/z/nodes/n", Phase: remediate.PhaseQueued, Queue: in}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := doc.recovery()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(in, got.Queue); diff != "" {
				t.Errorf("queue read back (-want +got):\n%s", diff)
			}
		})
	}
}
