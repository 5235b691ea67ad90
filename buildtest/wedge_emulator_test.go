//go:build emulator

package buildtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/emulator"
	"github.com/tpu-autoheal/autoheal/internal/loadtest"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// TestBuiltFunctionNeverWedges posts a Pub/Sub-like burst at the binary the
// buildpack would build: 2,000 posts, 32 at a time, three in four given up
// on by their client after 1–10 ms. The bodies are real deliveries — a
// terminate of a healthy opted-in node (TPU API and Firestore emulator
// behind it), malformed and oversized ones — so requests are cut off while
// the handler is mid-way through its calls. Every patient post is answered
// within 3 min and the function still answers afterwards. A wedged handler
// never answers; a slow one answers late: the bound is a wedge detector,
// not a latency target (the latency is benchmarked, docs/benchmarks.md), and
// it is set for a loaded 2-core machine: at a load average of 40 (CI beside
// eight builds) 16 of 2,000 posts took over 60 s, all the same node's
// incident bookkeeping contending on one Firestore document.
func TestBuiltFunctionNeverWedges(t *testing.T) {
	firestoreHost := emulator.Require(t, emulator.Firestore)
	fleet, err := tpufake.ReadFleetFile(filepath.Join("testdata", "fleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range fleet.Nodes {
		n.State, n.Health = "READY", "HEALTHY" // recovered by itself: every post only reads
	}
	tpu := tpufake.New(fleet)
	defer tpu.Close()

	fn := startBuilt(t,
		"FIRESTORE_EMULATOR_HOST="+firestoreHost,
		"AUTOHEAL_PROJECT=acme-ops",
		"AUTOHEAL_PROJECTS=acme-ml",
		fmt.Sprintf("AUTOHEAL_FIRESTORE_DATABASE=wedge-%d", time.Now().UnixNano()%1e9), // a database of its own
		"AUTOHEAL_RECORD_TO=stdout",
		"AUTOHEAL_TPU_ENDPOINT="+tpu.URL(),
	)
	stderr := fn.Stderr
	ctx := context.Background()

	push := func(data []byte) []byte {
		b, _ := json.Marshal(map[string]any{
			"message":      map[string]any{"data": base64.StdEncoding.EncodeToString(data), "messageId": "1", "publishTime": time.Now().UTC().Format(time.RFC3339Nano)},
			"subscription": "projects/acme-ops/subscriptions/tpu-autoheal",
		})
		return b
	}
	bodies := [][]byte{
		push(freshTerminate(t)),
		push([]byte(`{"protoPayload": {`)),
		push(bytes.Repeat([]byte(" "), 300<<10)),
		bytes.Repeat([]byte("x"), function.MaxBodyBytes+1),
	}
	url := fn.URL
	for deadline := time.Now().Add(30 * time.Second); ; {
		if err := loadtest.Sequential(ctx, url, bodies[1], 1, 2*time.Second); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("function not answering after 30s: %v\n%s", err, stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}

	const patience = 3 * time.Minute
	res := loadtest.Run(ctx, loadtest.Burst{URL: url, Bodies: bodies, Posts: 2000, Parallel: 32, Impatient: 0.75, Patience: patience})
	t.Logf("burst: %d posts, %d answered %v, %d given up on by their client", res.Posts, res.Answered, res.Statuses, res.GaveUp)
	if len(res.Unanswered) > 0 {
		t.Fatalf("%d posts unanswered within %s, e.g. %s\nstderr:\n%s", len(res.Unanswered), patience, res.Unanswered[0], stderr.String())
	}
	for code, n := range res.Statuses {
		if code != 204 {
			t.Errorf("%d posts answered %d, want 204", n, code)
		}
	}
	if err := loadtest.Sequential(ctx, url, bodies[0], 20, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := tpu.Count("nodes.delete", ""); got != 0 {
		t.Errorf("%d deletes of healthy nodes, want 0", got)
	}
}
