package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/report"
)

// resumeFleet is a fleet of one terminated v4-128 (16 workers once
// recreated) whose guests report autoheal/resumed after the 03:44:36
// terminate of testdata/entries/terminate-maintenance.json: workers 0-14
// at 04:00, worker 15 at 04:02, all from the 03:30 checkpoint.
func resumeFleet(t *testing.T) string {
	t.Helper()
	var attrs []map[string]string
	for w := range 16 {
		at := "2026-11-20T04:00:00Z"
		if w == 15 {
			at = "2026-11-20T04:02:00Z"
		}
		attrs = append(attrs, map[string]string{"worker": fmt.Sprint(w), "namespace": "autoheal", "key": "resumed",
			"value": fmt.Sprintf(`{"time":%q,"checkpoint":"gs://acme-ckpt/llm/step-900","checkpointTime":"2026-11-20T03:30:00Z","attempt":1,"worker":%d}`, at, w)})
	}
	node := map[string]any{
		"name":            "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128",
		"acceleratorType": "v4-128", "state": "TERMINATED", "health": "UNHEALTHY_MAINTENANCE",
		"runtimeVersion":  "tpu-ubuntu2204-base",
		"networkConfig":   map[string]any{"network": "projects/acme-ml/global/networks/default"},
		"labels":          map[string]string{"tpu-autoheal": "enabled"},
		"guestAttributes": attrs,
	}
	b, err := json.Marshal([]any{node})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "fleet.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReplayWritesTheResumedRecordTheReportReads: replay against a fleet
// whose guests report writes one resumed record, and the report over the
// records replay wrote shows the incident resumed, with its figures.
func TestReplayWritesTheResumedRecordTheReportReads(t *testing.T) {
	recs := filepath.Join(t.TempDir(), "records.jsonl")
	r := runCLI(t, nil, "replay", "--fleet", resumeFleet(t), "--records", recs, "--clock", "event", "../../testdata/entries/terminate-maintenance.json")
	if r.err != nil {
		t.Fatalf("replay: %v\nstderr: %s", r.err, r.stderr)
	}
	b, err := os.ReadFile(recs)
	if err != nil {
		t.Fatal(err)
	}
	var resumed int
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec struct{ Action, Outcome, Reason string }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("record line %q: %v", l, err)
		}
		if rec.Action == "resumed" {
			resumed++
			if want := "training resumed on 16 of 16 workers 17m24s after the first event, from gs://acme-ckpt/llm/step-900 (progress lost 14m36s)"; rec.Reason != want || rec.Outcome != "resumed" {
				t.Errorf("resumed record = %s %q, want resumed %q", rec.Outcome, rec.Reason, want)
			}
		}
	}
	if resumed != 1 {
		t.Fatalf("%d resumed records, want 1:\n%s", resumed, b)
	}

	got, err := report.ReadAll(b)
	if err != nil {
		t.Fatal(err)
	}
	incs := report.Group(got)
	if len(incs) != 1 {
		t.Fatalf("%d incidents, want 1: %+v", len(incs), incs)
	}
	in := incs[0]
	first := time.Date(2026, 11, 20, 3, 44, 36, 265703305, time.UTC)
	wantResumed := time.Date(2026, 11, 20, 4, 2, 0, 0, time.UTC)
	wantLost := 14*time.Minute + 36*time.Second + 265703305*time.Nanosecond // 03:30 → the first event
	if !in.Start.Equal(first) || !in.Resumed.Equal(wantResumed) || !in.LostProgressKnown || in.LostProgress != wantLost ||
		in.Downtime != wantResumed.Sub(first) || in.Outcome != "recreated" || in.Chips != 64 {
		t.Errorf("incident = start %s resumed %s lost %s (%v) downtime %s outcome %q chips %d; want %s, %s, %s, %s, recreated, 64",
			in.Start, in.Resumed, in.LostProgress, in.LostProgressKnown, in.Downtime, in.Outcome, in.Chips, first, wantResumed, wantLost, wantResumed.Sub(first))
	}

	rep := runCLI(t, nil, "report", recs)
	if rep.err != nil {
		t.Fatalf("report: %v\nstderr: %s", rep.err, rep.stderr)
	}
	if want := "training resumed: 1 of 1 incidents; progress lost 14m36s"; !strings.Contains(rep.stdout, want) {
		t.Errorf("report lacks %q:\n%s", want, rep.stdout)
	}
}

// Without guest reports in the fleet, replay writes no resumed record.
func TestReplayWithoutGuestReportsWritesNoResumedRecord(t *testing.T) {
	recs := filepath.Join(t.TempDir(), "records.jsonl")
	r := runCLI(t, nil, "replay", "--fleet", fleetFile, "--records", recs, "--clock", "event", incidentFile)
	if r.err != nil {
		t.Fatalf("replay: %v\nstderr: %s", r.err, r.stderr)
	}
	b, err := os.ReadFile(recs)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `"action":"resumed"`); n != 0 {
		t.Errorf("%d resumed records, want none", n)
	}
}
