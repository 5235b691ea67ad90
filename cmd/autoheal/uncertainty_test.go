// Regression test of recovery under uncertainty through the CLI (see
// function/uncertainty_test.go for the others): `autoheal replay --apply`
// against a TPU API whose operations take real time (seconds, on the wall
// clock: operations are followed every --look-again 1s).
package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// TestUncertainReplayApplyNeverLeavesANodeDeleted: against a real (here:
// simulated on the wall clock) API, replay --apply finishes what it started:
// the node is READY again when it exits 0; if it cannot finish, it exits
// non-zero and says how to finish. A node left deleted with its spec only in
// a ledger that died with the process is lost.
func TestUncertainReplayApplyNeverLeavesANodeDeleted(t *testing.T) {
	fleet, err := tpufake.ReadFleetFile(fleetFile)
	if err != nil {
		t.Fatal(err)
	}
	// Operations take seconds here, as the real API's take minutes.
	srv := tpufake.New(fleet, tpufake.WithOperationDelay("delete", time.Second), tpufake.WithOperationDelay("create", 2*time.Second))
	t.Cleanup(srv.Close)
	entry, _ := json.Marshal(map[string]any{
		"protoPayload": map[string]any{
			"serviceName": "tpu.googleapis.com", "methodName": "tpu.nodes.terminate", "resourceName": podNode,
			"authenticationInfo": map[string]any{"principalEmail": "system@google.com"},
			"metadata":           map[string]any{"terminateReason": "Terminated due to a maintenance event"},
		},
		"insertId":  "replay-apply-1",
		"timestamp": time.Now().UTC().Add(-time.Minute).Format(time.RFC3339Nano),
		"logName":   "projects/acme-ml/logs/cloudaudit.googleapis.com%2Fsystem_event",
		"resource":  map[string]any{"type": "audited_resource", "labels": map[string]string{"project_id": "acme-ml"}},
	})
	file := filepath.Join(t.TempDir(), "entry.json")
	if err := os.WriteFile(file, entry, 0o644); err != nil {
		t.Fatal(err)
	}

	r := runCLI(t, nil, "replay", "--tpu-endpoint", srv.URL(), "--apply", "--look-again", "1s", file)

	var state string
	for _, n := range srv.Fleet().Nodes {
		if n.Name == podNode {
			state = n.State
		}
	}
	if srv.Count("nodes.delete", podNode) != 1 {
		t.Fatalf("%d deletes of %s, want 1 (replay --apply started its recovery)\n%s%s", srv.Count("nodes.delete", podNode), podNode, r.stdout, r.stderr)
	}
	switch {
	case state == "READY" && r.err == nil:
	case state == "READY":
		t.Errorf("node READY again, but replay failed: %v", r.err)
	case r.err == nil:
		t.Errorf("replay --apply exited 0 and left %s %s (deleted, its spec only in the run's memory)\nstdout:\n%s\nstderr:\n%s",
			podNode, orNotFound(state), r.stdout, r.stderr)
	case !strings.Contains(r.stderr, "replay --apply") || !strings.Contains(r.stderr, "--ledger"):
		t.Errorf("replay --apply left %s %s and exited with %v without saying how to finish (replay --apply again with the ledger)\nstderr:\n%s",
			podNode, orNotFound(state), r.err, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "python3 train.py") {
		t.Error("replay printed a metadata value")
	}
}

func orNotFound(state string) string {
	if state == "" {
		return "NOT_FOUND"
	}
	return state
}
