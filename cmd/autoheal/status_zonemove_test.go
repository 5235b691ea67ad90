package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// TestStatusSaysWhereAZoneMoveSentTheNode: a recovery an autoheal-stockout
// zones: fallback moved is listed under its home zone's name, and status
// (text and JSON, the list and --node) names the node where it went.
func TestStatusSaysWhereAZoneMoveSentTheNode(t *testing.T) {
	m := ledger.NewMemory()
	withLedger(t, m)
	ctx := context.Background()
	rec, err := m.Claim(ctx, claimReq(cliNode, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	const moved = "projects/proj-a/locations/us-central2-c/nodes/llm-a"
	rec.Phase, rec.DeleteSent, rec.Stockouts, rec.ZoneMoveNode, rec.ZoneMoveStockouts = remediate.PhaseCreating, true, 3, moved, 3
	if err := m.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rep := statusJSON(t)
	if len(rep.Unfinished) != 1 || rep.Unfinished[0].Node != cliNode || rep.Unfinished[0].ZoneMovedTo != moved {
		t.Errorf("unfinished %+v, want %s moved to %s", rep.Unfinished, cliNode, moved)
	}
	text, err := runLedgerCmd(t, "status", "--ledger-project", "host-proj")
	if want := cliNode + "  recreate gen 1 creating"; err != nil || !strings.Contains(text, want) || !strings.Contains(text, ", moved to "+moved) {
		t.Errorf("status = %q, %v; want %q and \", moved to %s\"", text, err, want, moved)
	}
	node, err := runLedgerCmd(t, "status", "--node", cliNode, "--ledger-project", "host-proj")
	if err != nil || !strings.Contains(node, "spec saved: false, moved to "+moved) {
		t.Errorf("status --node = %q, %v; want it to say moved to %s", node, err, moved)
	}
}

// statusJSON runs autoheal status --format json on the test's ledger.
func statusJSON(t *testing.T) statusReport {
	t.Helper()
	out, err := runLedgerCmd(t, "status", "--format", "json", "--ledger-project", "host-proj")
	if err != nil {
		t.Fatal(err)
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("status JSON: %v\n%s", err, out)
	}
	return rep
}
