package ledger

import (
	"testing"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// Where a zones: fallback moved a node survives the Firestore document: a
// takeover reads and creates the node where it went, not at home.
func TestZoneMoveSurvivesTheDocument(t *testing.T) {
	const moved = "projects/p/locations/us-central2-c/nodes/n"
	doc, err := toDoc(nodeLedger{Latest: &remediate.Recovery{Node: "projects/p/locations/us-central2-b/nodes/n", Stockouts: 4, ZoneMoveNode: moved, ZoneMoveStockouts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if f := doc.fields(); f["zoneMoveNode"] != moved || f["zoneMoveStockouts"] != 3 {
		t.Errorf("written zoneMoveNode %v, zoneMoveStockouts %v; want %s, 3", f["zoneMoveNode"], f["zoneMoveStockouts"], moved)
	}
	got, err := doc.recovery()
	if err != nil {
		t.Fatal(err)
	}
	if got.ZoneMoveNode != moved || got.ZoneMoveStockouts != 3 || got.Stockouts != 4 {
		t.Errorf("read back %q since %d (stockouts %d); want %s since 3 (4)", got.ZoneMoveNode, got.ZoneMoveStockouts, got.Stockouts, moved)
	}
}
