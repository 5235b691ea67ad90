//go:build emulator

package buildtest

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/emulator"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

func TestMain(m *testing.M) { os.Exit(emulator.Main(m, emulator.Firestore)) }

// freshTerminate is testdata/terminate-maintenance.json with its timestamp
// set to now, so the function does not skip it as stale.
func freshTerminate(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "terminate-maintenance.json"))
	if err != nil {
		t.Fatal(err)
	}
	var entry map[string]any
	if err := json.Unmarshal(b, &entry); err != nil {
		t.Fatal(err)
	}
	entry["timestamp"] = time.Now().UTC().Format(time.RFC3339Nano)
	entry["receiveTimestamp"] = entry["timestamp"]
	out, err := json.Marshal(entry)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBuiltFunctionServesACloudEvent builds the deployed source as the
// buildpack does, runs the binary as Cloud Run runs it (PORT,
// FUNCTION_TARGET, AUTOHEAL_* variables) against a simulated TPU control
// plane and the Firestore emulator, and sends it a messagePublished
// CloudEvent in binary content mode as Eventarc does.
func TestBuiltFunctionServesACloudEvent(t *testing.T) {
	firestoreHost := emulator.Require(t, emulator.Firestore)
	fleetFile, err := tpufake.ReadFleetFile(filepath.Join("testdata", "fleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	tpu := tpufake.New(fleetFile)
	defer tpu.Close()

	fn := startBuilt(t,
		"FIRESTORE_EMULATOR_HOST="+firestoreHost,
		"AUTOHEAL_PROJECT=acme-ops",
		"AUTOHEAL_PROJECTS=acme-ml",
		"AUTOHEAL_ZONES=us-central2-b",
		// A database of its own, so reruns against a reused emulator start clean.
		fmt.Sprintf("AUTOHEAL_FIRESTORE_DATABASE=buildtest-%d", time.Now().UnixNano()%1e9),
		"AUTOHEAL_RECORD_TO=stdout",
		"AUTOHEAL_TPU_ENDPOINT="+tpu.URL(),
	)
	stdout, stderr := fn.Stdout, fn.Stderr

	body, _ := json.Marshal(map[string]any{
		"message": map[string]any{
			"data":        base64.StdEncoding.EncodeToString(freshTerminate(t)),
			"messageId":   "4242",
			"publishTime": time.Now().UTC().Format(time.RFC3339Nano),
		},
		"subscription": "projects/acme-ops/subscriptions/eventarc-sub",
	})
	var resp *http.Response
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodPost, fn.URL, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("ce-id", "4242")
		req.Header.Set("ce-specversion", "1.0")
		req.Header.Set("ce-type", "google.cloud.pubsub.topic.v1.messagePublished")
		req.Header.Set("ce-source", "//pubsub.googleapis.com/projects/acme-ops/topics/tpu-autoheal")
		req.Header.Set("ce-time", time.Now().UTC().Format(time.RFC3339))
		resp, err = (&http.Client{Timeout: 2 * time.Minute}).Do(req)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // not listening yet
	}
	if err != nil {
		t.Fatalf("POST: %v\nstderr:\n%s", err, stderr.String())
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("status %d %s\nstderr:\n%s\nstdout:\n%s", resp.StatusCode, answer, stderr.String(), stdout.String())
	}

	node := "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128"
	if got := tpu.Count("nodes.delete", node); got != 1 {
		t.Errorf("nodes.delete of %s after the event: %d calls, want 1", node, got)
	}
	// parse reads the records the function wrote on stdout so far.
	parse := func() []map[string]any {
		var records []map[string]any
		sc := bufio.NewScanner(strings.NewReader(stdout.String()))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["action"] != nil {
				records = append(records, m)
			}
		}
		return records
	}
	for wait := time.Now().Add(10 * time.Second); len(parse()) == 0 && time.Now().Before(wait); {
		time.Sleep(20 * time.Millisecond)
	}
	first := parse()
	if len(first) != 1 {
		t.Fatalf("got %d records after the event, want 1:\n%s", len(first), stdout.String())
	}
	r := first[0]
	labels, _ := r["logging.googleapis.com/labels"].(map[string]any)
	if r["action"] != "recreate" || r["severity"] != "NOTICE" || labels["node"] != node || labels["app"] != "tpu-autoheal" {
		t.Errorf("record = %v, want a NOTICE recreate of %s labelled app=tpu-autoheal", r, node)
	}

	// The delivery started the recovery and returned; the sweeps Cloud
	// Scheduler sends finish it (each step looks again 30 s later, on the
	// wall clock here), until a record says the node is recovered.
	sweep, _ := json.Marshal(map[string]any{
		"message":      map[string]any{"data": base64.StdEncoding.EncodeToString([]byte(`{"autoheal":"sweep"}`)), "messageId": "4243"},
		"subscription": "projects/acme-ops/subscriptions/tpu-autoheal",
	})
	recovered := func() bool {
		for _, m := range parse() {
			if m["outcome"] == "recovered" && m["node"] == node {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(3 * time.Minute); !recovered(); {
		if time.Now().After(deadline) {
			t.Fatalf("no recovered record within 3 minutes of sweeps:\n%s", stdout.String())
		}
		resp, err := http.Post(fn.URL, "application/json", bytes.NewReader(sweep))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		time.Sleep(2 * time.Second)
	}
	if got := tpu.Count("nodes.delete", node); got != 1 {
		t.Errorf("nodes.delete of %s: %d calls, want 1", node, got)
	}
	if got := tpu.Count("nodes.create", node); got != 1 {
		t.Errorf("nodes.create of %s: %d calls, want 1", node, got)
	}
}
