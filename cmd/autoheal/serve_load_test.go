package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/loadtest"
)

// pushOf wraps data in a Pub/Sub push body.
func pushOf(t *testing.T, data []byte) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"message":      map[string]any{"data": base64.StdEncoding.EncodeToString(data), "messageId": "1", "publishTime": "2026-11-20T03:44:38Z"},
		"subscription": "projects/acme-ml/subscriptions/s",
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestServeNeverWedgesUnderAPushBurst is the regression test of a wedge in
// the CloudEvent receive path (cloudevents/sdk-go #1224, #1332): 2,000
// posts, 32 at a time, three in four given up on by their client after
// 1–10 ms (as Pub/Sub gives up past its ack deadline), some given up on
// mid-body. Every post whose client waits must be answered within a
// generous 60 s, and the server must still answer sequential posts after.
// No entry reaches the ledger: malformed, foreign, stale and oversized
// bodies are each acknowledged with a record.
func TestServeNeverWedgesUnderAPushBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("a 2,000-post burst; skipped with -short")
	}
	url, stop := startServe(t)
	stale := []byte(`{"insertId":"old-1","timestamp":"2026-01-01T00:00:00Z","logName":"projects/acme-ml/logs/cloudaudit.googleapis.com%2Fsystem_event","resource":{"type":"tpu.googleapis.com/Node","labels":{"project_id":"acme-ml","zone":"us-central2-b","node_id":"n1"}},"protoPayload":{"@type":"type.googleapis.com/google.cloud.audit.AuditLog","serviceName":"tpu.googleapis.com","methodName":"tpu.nodes.terminate","resourceName":"projects/acme-ml/locations/us-central2-b/nodes/n1","metadata":{"terminateReason":"Maintenance"}}}`)
	bodies := [][]byte{
		pushOf(t, []byte("not json")),
		pushOf(t, bytes.ReplaceAll(stale, []byte("acme-ml"), []byte("evil-corp"))),
		pushOf(t, stale),
		pushOf(t, bytes.Repeat([]byte(" "), 300<<10)), // slow to send: often given up on mid-body
		bytes.Repeat([]byte("x"), 600<<10),            // over the body limit
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res := loadtest.Run(ctx, loadtest.Burst{
		URL: url + "/projects/acme-ml/topics/tpu-events", Bodies: bodies,
		Posts: 2000, Parallel: 32, Impatient: 0.75, Patience: 60 * time.Second,
	})
	t.Logf("burst: %d posts, %d answered %v, %d given up on by their client", res.Posts, res.Answered, res.Statuses, res.GaveUp)
	if len(res.Unanswered) > 0 {
		t.Fatalf("%d posts unanswered within 60s, e.g. %s", len(res.Unanswered), res.Unanswered[0])
	}
	for code, n := range res.Statuses {
		if code != 204 {
			t.Errorf("%d posts answered %d, want every answer 204 (acknowledged)", n, code)
		}
	}
	if res.Answered < 300 {
		t.Errorf("only %d posts answered: the burst did not exercise the server", res.Answered)
	}
	if err := loadtest.Sequential(ctx, url, bodies[0], 20, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Errorf("serve after the burst: %v", err)
	}
}
