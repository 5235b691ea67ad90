package function_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// TestAdminActivityIsRecordedNotActedOn: a person's DeleteNode entry (as the
// log sink routes it) is recorded as evidence and acknowledged; the node is
// not even read.
func TestAdminActivityIsRecordedNotActedOn(t *testing.T) {
	entry, err := os.ReadFile(filepath.Join("..", "testdata", "entries", "admin-delete-node.json"))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, time.Date(2026, 11, 20, 5, 11, 0, 0, time.UTC), nil)
	if err := h.fn.HandleMessage(context.Background(), pushBody(entry)); err != nil {
		t.Fatalf("HandleMessage = %v, want the delivery acknowledged", err)
	}
	recs := h.recs.records()
	if len(recs) != 1 || recs[0].Action != remediate.ActionSkip || recs[0].Node != node ||
		!strings.Contains(recs[0].Reason, "delete-node") || !strings.Contains(recs[0].Reason, "alice@acme.example") ||
		!strings.Contains(recs[0].Reason, "operation-1795669811402") {
		t.Fatalf("records = %+v, want one record of the evidence naming the change, the principal and the operation", recs)
	}
	for _, rpc := range []string{"nodes.get", "nodes.delete", "nodes.create"} {
		if got := h.tpu.Count(rpc, ""); got != 0 {
			t.Errorf("%s calls = %d, want 0", rpc, got)
		}
	}
}

// TestEntryOfAnotherLogIsRejected: a terminate entry written to a log other
// than the audit log (anyone who can write a log entry can write that one)
// is rejected with the field named, before the node is read.
func TestEntryOfAnotherLogIsRejected(t *testing.T) {
	forged := strings.Replace(string(readTestdata(t, "terminate-maintenance.json")),
		"cloudaudit.googleapis.com%2Fsystem_event", "cloudaudit.googleapis.com%2Fsystem_event_copy", 1)
	h := newHarness(t, eventTime.Add(time.Minute), nil)
	if err := h.fn.HandleMessage(context.Background(), pushBody([]byte(forged))); err != nil {
		t.Fatal(err)
	}
	recs := h.recs.records()
	if len(recs) != 1 || recs[0].Action != remediate.ActionReject || !strings.Contains(recs[0].Reason, "logName") {
		t.Fatalf("records = %+v, want one reject naming logName", recs)
	}
	if got := h.tpu.Count("nodes.get", ""); got != 0 {
		t.Errorf("nodes.get calls = %d, want 0", got)
	}
}
