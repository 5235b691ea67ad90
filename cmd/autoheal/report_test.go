package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	logpb "cloud.google.com/go/logging/apiv2/loggingpb"
	"google.golang.org/genproto/googleapis/api/monitoredres"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tpu-autoheal/autoheal/internal/loggingfake"
)

// The hand-written night of internal/report (its tests work the figures out).
const (
	nightRecords = "../../internal/report/testdata/night.jsonl"
	nightGcloud  = "../../internal/report/testdata/night-gcloud.json"
	nightSummary = "  downtime:         1h36m in total; 29.25 chip-hours lost"
)

func TestReportReadsRecordFilesAndExports(t *testing.T) {
	gcloud, err := os.ReadFile(nightGcloud)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
	}{
		{"replay records file", "", []string{"report", nightRecords}},
		{"gcloud export on stdin", string(gcloud), []string{"report", "-"}},
		{"gcloud export file", "", []string{"report", nightGcloud}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, strings.NewReader(tc.stdin), tc.args...)
			if r.err != nil {
				t.Fatalf("report: %v\nstderr: %s", r.err, r.stderr)
			}
			for _, want := range []string{"Incidents: 6, from 2026-11-20 03:00:00 to 2026-11-20 06:00:02 UTC", nightSummary} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("output lacks %q:\n%s", want, r.stdout)
				}
			}
		})
	}
}

func TestReportFormatsAndHTML(t *testing.T) {
	page := filepath.Join(t.TempDir(), "night.html")
	r := runCLI(t, nil, "report", "--format", "json", "--html", page, nightRecords)
	if r.err != nil {
		t.Fatalf("report: %v\nstderr: %s", r.err, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d JSON lines, want 6:\n%s", len(lines), r.stdout)
	}
	var first struct {
		Node          string  `json:"node"`
		Outcome       string  `json:"outcome"`
		ChipHoursLost float64 `json:"chipHoursLost"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first.Outcome != "recreated" || first.ChipHoursLost != 19.2 || !strings.HasSuffix(first.Node, "/llm-v4-128") {
		t.Errorf("first incident = %+v, want llm-v4-128 recreated, 19.2 chip-hours", first)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(html), `<g class="timeline-row"`); n != 6 {
		t.Errorf("page has %d timeline rows, want 6", n)
	}

	r = runCLI(t, nil, "report", "--format", "csv", nightRecords)
	if r.err != nil {
		t.Fatalf("report --format csv: %v", r.err)
	}
	if !strings.HasPrefix(r.stdout, "node,zone,acceleratorType,chips,cause,start,detected,") || strings.Count(r.stdout, "\n") != 7 {
		t.Errorf("csv output:\n%s", r.stdout)
	}
}

func TestReportUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"report"}, "no input"},
		{[]string{"report", "--format", "xml", nightRecords}, `--format "xml"`},
		{[]string{"report", "--since", "2h", nightRecords}, "only apply to --from-logging"},
		{[]string{"report", "--from-logging"}, "needs --project"},
		{[]string{"report", "--from-logging", "--project", "p", nightRecords}, "give no FILE"},
		{[]string{"report", "--from-logging", "--project", "p", "--since", "soon"}, `--since "soon"`},
		{[]string{"report", "no-such-file.jsonl"}, "no-such-file.jsonl"},
	} {
		r := runCLI(t, nil, tc.args...)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) || exitCode(r.err, &strings.Builder{}) != exitUsage {
			t.Errorf("%v: err %v, want a usage error containing %q", tc.args, r.err, tc.want)
		}
	}
	r := runCLI(t, strings.NewReader(`{"action":"record","node":"n","timestamp":"later"}`), "report", "-")
	if r.err == nil || !strings.Contains(r.err.Error(), `timestamp "later"`) {
		t.Errorf("bad record: err %v, want it named", r.err)
	}
}

// seedNightRecords serves the night's records from a fake Cloud Logging,
// in log tpu-autoheal with labels.app tpu-autoheal, and points the CLI at it.
func seedNightRecords(t *testing.T) *loggingfake.Server {
	t.Helper()
	srv, err := loggingfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	loggingClientOptions = srv.ClientOptions()
	t.Cleanup(func() { loggingClientOptions = nil })

	var export []map[string]any
	b, err := os.ReadFile(nightGcloud)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &export); err != nil {
		t.Fatal(err)
	}
	var entries []*logpb.LogEntry
	for _, e := range export {
		ts, err := time.Parse(time.RFC3339, e["timestamp"].(string))
		if err != nil {
			t.Fatal(err)
		}
		p, err := structpb.NewStruct(e["jsonPayload"].(map[string]any))
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, &logpb.LogEntry{
			LogName: "projects/acme-ml/logs/tpu-autoheal", InsertId: e["insertId"].(string),
			Timestamp: timestamppb.New(ts), ReceiveTimestamp: timestamppb.New(ts),
			Resource: &monitoredres.MonitoredResource{Type: "cloud_run_revision", Labels: map[string]string{"project_id": "acme-ml"}},
			Labels:   map[string]string{"app": "tpu-autoheal"},
			Payload:  &logpb.LogEntry_JsonPayload{JsonPayload: p},
		})
	}
	srv.Seed(entries...)
	return srv
}

func TestReportFromLoggingReadsTheRecordsLog(t *testing.T) {
	srv := seedNightRecords(t)
	r := runCLI(t, nil, "report", "--from-logging", "--project", "acme-ml", "--since", "2026-11-19T00:00:00Z", "--until", "2026-11-21T00:00:00Z")
	if r.err != nil {
		t.Fatalf("report --from-logging: %v\nstderr: %s", r.err, r.stderr)
	}
	if !strings.Contains(r.stdout, nightSummary) {
		t.Errorf("output lacks %q:\n%s", nightSummary, r.stdout)
	}
	if !strings.Contains(r.stderr, "read 18 entries from Cloud Logging") {
		t.Errorf("no progress line on stderr:\n%s", r.stderr)
	}
	lists := srv.Lists()
	want := `(logName="projects/acme-ml/logs/tpu-autoheal" OR logName="projects/acme-ml/logs/run.googleapis.com%2Fstdout") AND labels.app="tpu-autoheal" AND jsonPayload.action:*`
	if len(lists) == 0 || !strings.HasPrefix(lists[0].Filter, want+" AND timestamp") {
		t.Errorf("ListLogEntries requests %v, want the records filter", lists)
	}
}

// Another instance's records: --record-log and --app-label (its
// AUTOHEAL_RECORD_LOG and AUTOHEAL_APP_LABEL) select them, and the records
// of the default instance are not read.
func TestReportFromLoggingSelectsTheInstance(t *testing.T) {
	srv := seedNightRecords(t)
	r := runCLI(t, nil, "report", "--from-logging", "--project", "acme-ml", "--record-log", "autoheal-b", "--app-label", "autoheal-b",
		"--since", "2026-11-19T00:00:00Z", "--until", "2026-11-21T00:00:00Z")
	if r.err != nil || strings.Contains(r.stdout, nightSummary) || !strings.Contains(r.stderr, "read 0 entries from Cloud Logging") {
		t.Errorf("report of instance autoheal-b: err %v, stdout:\n%s\nstderr:\n%s\nwant no record read (they are tpu-autoheal's)", r.err, r.stdout, r.stderr)
	}
	lists := srv.Lists()
	want := `(logName="projects/acme-ml/logs/autoheal-b" OR logName="projects/acme-ml/logs/run.googleapis.com%2Fstdout") AND labels.app="autoheal-b" AND jsonPayload.action:*`
	if len(lists) == 0 || !strings.HasPrefix(lists[0].Filter, want+" AND timestamp") {
		t.Errorf("ListLogEntries requests %v, want filter %s", lists, want)
	}
	r = runCLI(t, nil, "report", "--record-log", "x", nightRecords)
	if r.err == nil || !strings.Contains(r.err.Error(), "only apply to --from-logging") {
		t.Errorf("--record-log without --from-logging: err %v", r.err)
	}
}

func TestDemoEndsWithItsReport(t *testing.T) {
	r := runCLI(t, nil, "demo", "--clock", "event")
	if r.err != nil {
		t.Fatalf("demo: %v\nstderr: %s", r.err, r.stderr)
	}
	i := strings.Index(r.stdout, "What did it cost")
	if i < 0 || !strings.Contains(r.stdout[i:], "Incidents: 7") ||
		!strings.Contains(r.stdout[i:], "by outcome:       open 2, recreated 2, recovered by itself 1, skipped: not opted in 1, skipped: terminated by a user 1") {
		t.Errorf("demo does not end with the report of its 7 incidents:\n%s", r.stdout)
	}
}
