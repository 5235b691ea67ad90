package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
	"github.com/tpu-autoheal/autoheal/startup"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/replay")

const (
	fleetFile    = "../../testdata/fleet.json"
	incidentFile = "../../testdata/replay/incident.jsonl"
	incidentWant = "../../testdata/replay/incident.want.jsonl"
)

// Nodes of testdata/fleet.json the incident is about.
const (
	podNode        = "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128"
	spotNode       = "projects/acme-ml/locations/us-west4-a/nodes/spot-v5e-8-preempted"
	healthyNode    = "projects/acme-ml/locations/europe-west4-a/nodes/v3-8-exp"
	notOptedInNode = "projects/acme-ml/locations/us-central2-b/nodes/v4-32-not-opted-in"
)

// result is one in-process run of the command.
type result struct {
	err            error
	stdout, stderr string
}

func runCLI(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, stdin, &out, &errOut)
	return result{err: err, stdout: out.String(), stderr: errOut.String()}
}

// parseLines returns the decisions of JSON output (kind "decision"), in
// order; outcomes and the summary are left out (parseOutput has them).
func parseLines(t *testing.T, s string) []line {
	t.Helper()
	var ls []line
	for _, raw := range jsonObjects(t, s) {
		if kindOf(t, raw) != kindDecision {
			continue
		}
		var l line
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatalf("decode decision %s: %v", raw, err)
		}
		ls = append(ls, l)
	}
	return ls
}

// parseOutput returns the outcomes and the summary of JSON output.
func parseOutput(t *testing.T, s string) ([]outcome, summary) {
	t.Helper()
	var os []outcome
	var sum summary
	n := 0
	for _, raw := range jsonObjects(t, s) {
		switch kindOf(t, raw) {
		case kindOutcome:
			var o outcome
			if err := json.Unmarshal(raw, &o); err != nil {
				t.Fatalf("decode outcome %s: %v", raw, err)
			}
			os = append(os, o)
		case kindSummary:
			n++
			if err := json.Unmarshal(raw, &sum); err != nil {
				t.Fatalf("decode summary %s: %v", raw, err)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d summary objects in the output, want 1:\n%s", n, s)
	}
	return os, sum
}

func jsonObjects(t *testing.T, s string) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	dec := json.NewDecoder(strings.NewReader(s))
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("decode output object %d: %v\n%s", len(out)+1, err, s)
		}
		out = append(out, raw)
	}
	return out
}

func kindOf(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var k struct {
		Kind *string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &k); err != nil || k.Kind == nil {
		t.Fatalf("output object without a kind: %s", raw)
	}
	return *k.Kind
}

// comparable drops what differs between two runs of the same input: the
// time it took, and the input's name in a reject's place (FILE:LINE).
func comparable(ls []line) []line {
	out := make([]line, len(ls))
	for i, l := range ls {
		out[i] = comparableLine(l)
	}
	return out
}

func comparableLine(l line) line {
	l.DurationSeconds = 0
	if j := strings.LastIndex(l.At, ":"); j >= 0 {
		l.At = "INPUT" + l.At[j:]
	}
	return l
}

// comparableJSON is JSON output with its decisions made comparable; the
// outcomes and the summary are kept as printed.
func comparableJSON(t *testing.T, s string) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, raw := range jsonObjects(t, s) {
		if kindOf(t, raw) != kindDecision {
			b.Write(raw)
			b.WriteByte('\n')
			continue
		}
		var l line
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatal(err)
		}
		if err := enc.Encode(comparableLine(l)); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

func readFleet(t *testing.T, path string) map[string]*tpu.Node {
	t.Helper()
	f, err := tpufake.ReadFleetFile(path)
	if err != nil {
		t.Fatalf("read fleet %s: %v", path, err)
	}
	m := map[string]*tpu.Node{}
	for _, n := range f.Nodes {
		m[n.Name] = n
	}
	return m
}

// replayIncident replays the bundled incident against the bundled fleet
// with the event clock, so decisions are reproducible, and returns the
// output lines and the fleet after the run.
func replayIncident(t *testing.T, extra ...string) ([]line, map[string]*tpu.Node) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "fleet-after.json")
	args := append([]string{"replay", "--fleet", fleetFile, "--fleet-out", out, "--format", "json", "--clock", "event"}, extra...)
	r := runCLI(t, nil, append(args, incidentFile)...)
	if r.err != nil {
		t.Fatalf("replay: %v\nstderr: %s", r.err, r.stderr)
	}
	return parseLines(t, r.stdout), readFleet(t, out)
}

func TestReplayJSONMatchesGolden(t *testing.T) {
	out := filepath.Join(t.TempDir(), "fleet-after.json")
	r := runCLI(t, nil, "replay", "--fleet", fleetFile, "--fleet-out", out, "--format", "json", "--clock", "event", incidentFile)
	if r.err != nil {
		t.Fatalf("replay: %v\nstderr: %s", r.err, r.stderr)
	}
	got := comparableJSON(t, r.stdout)
	if *update {
		if err := os.WriteFile(incidentWant, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(incidentWant)
	if err != nil {
		t.Fatalf("read golden file (refresh with go test ./cmd/autoheal -update): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("replay --format json output differs from %s (-want +got; refresh with -update):\n%s", incidentWant, diff)
	}
}

func TestReplayPrintsOneLinePerEntryInInputOrder(t *testing.T) {
	lines, _ := replayIncident(t, "--order", "input")
	var got []string
	for _, l := range lines {
		got = append(got, l.InsertID+" "+l.Action)
	}
	want := []string{
		"inc-llm-w0 recreate", // first worker of the TERMINATED pod: one recreate
		"inc-llm-w1 skip",     // the other workers find its recovery in flight (its delete is running)
		"inc-llm-w2 skip",
		"inc-llm-w3 skip",
		"inc-llm-w0 skip",    // the same entry delivered again
		"inc-v3-ok record",   // READY and HEALTHY: it recovered by itself
		"inc-not-opted skip", // no opt-in label
		"inc-spot recreate",  // PREEMPTED spot node
		"inc-restart defer",  // REPAIRING: look again later
		"inc-user-stop skip", // a user's termination is never undone
		"inc-v5p-push defer", // Pub/Sub push body; READY but unhealthy, within grace
		" reject",            // truncated line
		"inc-create reject",  // foreign method
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("insertId and action per line (-want +got):\n%s", diff)
	}
	for _, l := range lines {
		if l.Action == string(remediate.ActionReject) && l.Reason == "" {
			t.Errorf("reject of %q has no reason", l.InsertID)
		}
	}
}

// recreatedSpec is what a recreated node must look like: the original spec,
// the configured startup script and the generation label; output-only
// fields are the control plane's.
func recreatedSpec(orig *tpu.Node, script string, generation string) *tpu.Node {
	n := *orig
	n.Labels = map[string]string{remediate.GenerationLabel: generation}
	for k, v := range orig.Labels {
		n.Labels[k] = v
	}
	n.Metadata = map[string]string{"startup-script": script}
	for k, v := range orig.Metadata {
		if k != "startup-script" {
			n.Metadata[k] = v
		}
	}
	return &n
}

func clearOutputOnly(n *tpu.Node) *tpu.Node {
	c := *n
	c.State, c.Health, c.HealthDescription, c.CreateTime, c.Id = "", "", "", "", 0
	c.NetworkEndpoints, c.Symptoms, c.ApiVersion, c.UpcomingMaintenance = nil, nil, "", nil
	return &c
}

func TestReplayRecreatesWithSameSpecAndLeavesOthersAlone(t *testing.T) {
	before := readFleet(t, fleetFile)
	_, after := replayIncident(t)
	if len(after) != len(before) {
		t.Fatalf("fleet after has %d nodes, want %d", len(after), len(before))
	}
	for name, orig := range before {
		got := after[name]
		if got == nil {
			t.Errorf("%s: missing from --fleet-out", name)
			continue
		}
		switch name {
		case podNode, spotNode:
			if got.State != "READY" {
				t.Errorf("%s: state %s after recreate, want READY", name, got.State)
			}
			want := clearOutputOnly(recreatedSpec(orig, startup.Script, "1"))
			if diff := cmp.Diff(want, clearOutputOnly(got)); diff != "" {
				t.Errorf("%s: recreated spec (-want +got):\n%s", name, diff)
			}
		default:
			// Not recreated: byte for byte what it was, the unlabelled
			// TERMINATED node and the user-stopped one included.
			if diff := cmp.Diff(orig, got); diff != "" {
				t.Errorf("%s: touched, but must not be (-before +after):\n%s", name, diff)
			}
		}
	}
}

func TestReplayUsesStartupScriptFlag(t *testing.T) {
	script := filepath.Join(t.TempDir(), "resume.sh")
	const body = "#!/bin/bash\necho custom resume\n"
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	_, after := replayIncident(t, "--startup-script", script)
	if got := after[podNode].Metadata["startup-script"]; got != body {
		t.Errorf("startup-script of recreated node = %q, want %q", got, body)
	}
}

func TestReplayDryRunMutatesNothing(t *testing.T) {
	before := readFleet(t, fleetFile)
	lines, after := replayIncident(t, "--dry-run")
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("--dry-run changed the fleet (-before +after):\n%s", diff)
	}
	for _, l := range lines {
		if l.Action == string(remediate.ActionRecreate) {
			t.Errorf("--dry-run printed action recreate for %s", l.InsertID)
		}
	}
}

func TestReplayProjectsAllowList(t *testing.T) {
	lines, _ := replayIncident(t, "--projects", "other-project")
	for _, l := range lines {
		if l.Action != string(remediate.ActionReject) {
			t.Errorf("%s: action %s, want reject (project not in --projects)", l.InsertID, l.Action)
		}
	}
}

func TestReplayReadsStdinLikeAFile(t *testing.T) {
	data, err := os.ReadFile(incidentFile)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, _ := replayIncident(t)
	r := runCLI(t, bytes.NewReader(data), "replay", "--fleet", fleetFile, "--format", "json", "--clock", "event", "-")
	if r.err != nil {
		t.Fatalf("replay -: %v\nstderr: %s", r.err, r.stderr)
	}
	if diff := cmp.Diff(comparable(fromFile), comparable(parseLines(t, r.stdout)), cmp.AllowUnexported(line{})); diff != "" {
		t.Errorf("stdin output differs from file output (-file +stdin):\n%s", diff)
	}
}

func TestReplayReadsEveryInputForm(t *testing.T) {
	// A gcloud logging read array, a Pub/Sub push body and CloudEvent data,
	// one after another: one line per entry, files in order.
	r := runCLI(t, nil, "replay", "--fleet", fleetFile, "--format", "json",
		"../../testdata/entries/gcloud-read.json", "../../testdata/entries/pubsub-push.json", "../../testdata/entries/cloudevent-data.json")
	if r.err != nil {
		t.Fatalf("replay: %v\nstderr: %s", r.err, r.stderr)
	}
	lines := parseLines(t, r.stdout)
	if len(lines) < 3 {
		t.Fatalf("got %d lines, want at least 3 (one per entry)", len(lines))
	}
	for _, l := range lines {
		if l.Action == string(remediate.ActionReject) {
			t.Errorf("%s rejected: %s", l.InsertID, l.Reason)
		}
		if l.Node == "" {
			t.Errorf("%s: no node", l.InsertID)
		}
	}
}

func TestReplayTextSummaryCounts(t *testing.T) {
	r := runCLI(t, nil, "replay", "--fleet", fleetFile, "--clock", "event", incidentFile)
	if r.err != nil {
		t.Fatalf("replay: %v\nstderr: %s", r.err, r.stderr)
	}
	for _, want := range []string{
		"\nentries read: 13\n",
		"\nactions: record 1, recreate 2, defer 2, skip 6, reject 2\n",
		"\nrejects: foreign-method 1, malformed-json 1\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("text output lacks %q:\n%s", strings.TrimSpace(want), r.stdout)
		}
	}
	// Header, 13 rows (each a time or "-" first), the spot node's
	// warning under its row, blank line, 4 summary lines.
	var rows, warnings int
	for _, ln := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		if n := utf8.RuneCountInString(ln); n > 120 {
			t.Errorf("line of %d columns, want at most 120: %q", n, ln)
		}
		switch {
		case strings.HasPrefix(ln, "2026-") || strings.HasPrefix(ln, "- "):
			rows++
		case strings.HasPrefix(ln, "    warning: "):
			warnings++
		}
	}
	if rows != 13 || warnings != 1 {
		t.Errorf("text output has %d rows and %d warnings, want 13 and 1:\n%s", rows, warnings, r.stdout)
	}
	if !strings.Contains(r.stdout, "\norder: oldest first") {
		t.Errorf("text output does not say the order used:\n%s", r.stdout)
	}
}

func TestSweepRecreatesOptedInBrokenNodes(t *testing.T) {
	out := filepath.Join(t.TempDir(), "fleet-after.json")
	r := runCLI(t, nil, "sweep", "--fleet", fleetFile, "--fleet-out", out, "--format", "json",
		"--projects", "acme-ml", "--zones", "us-central2-b,us-west4-a,europe-west4-a,us-east5-a")
	if r.err != nil {
		t.Fatalf("sweep: %v\nstderr: %s", r.err, r.stderr)
	}
	got := map[string]string{}
	for _, l := range parseLines(t, r.stdout) {
		got[l.Node] = l.Action
	}
	for node, want := range map[string]string{podNode: "recreate", spotNode: "recreate", healthyNode: "record"} {
		if got[node] != want {
			t.Errorf("sweep action for %s = %q, want %q (all: %v)", node, got[node], want, got)
		}
	}
	after := readFleet(t, out)
	if diff := cmp.Diff(readFleet(t, fleetFile)[notOptedInNode], after[notOptedInNode]); diff != "" {
		t.Errorf("sweep touched the node that is not opted in (-before +after):\n%s", diff)
	}
}

// failReader fails the test if anything reads it: bad flags must be
// reported before any input is read.
type failReader struct{ t *testing.T }

func (r failReader) Read([]byte) (int, error) {
	r.t.Error("stdin was read although the command line is invalid")
	return 0, io.EOF
}

func TestBadCommandLinesFailBeforeReadingInput(t *testing.T) {
	dir := t.TempDir()
	badFleet := filepath.Join(dir, "bad-fleet.json")
	if err := os.WriteFile(badFleet, []byte(`[{"name": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string // the message must name the flag or file
	}{
		{"no command", nil, "missing command"},
		{"unknown command", []string{"rewind"}, `unknown command "rewind"`},
		{"unknown flag", []string{"replay", "--bogus", "-"}, "-bogus"},
		{"bad format", []string{"replay", "--format", "xml", "-"}, "--format"},
		{"bad clock", []string{"replay", "--clock", "sundial", "-"}, "--clock"},
		{"bad selector", []string{"replay", "--label-selector", "no-equals-sign", "-"}, "--label-selector"},
		{"bad duration", []string{"replay", "--cooldown", "soon", "-"}, "-cooldown"},
		{"negative grace", []string{"replay", "--stuck-grace", "-1m", "-"}, "--stuck-grace"},
		{"zero cap", []string{"replay", "--max-recreates", "0", "-"}, "--max-recreates"},
		{"no input", []string{"replay", "--fleet", fleetFile}, "no input"},
		{"stdin twice", []string{"replay", "-", "-"}, "stdin"},
		{"missing input file", []string{"replay", "--fleet", fleetFile, "-", filepath.Join(dir, "nope.jsonl")}, "nope.jsonl"},
		{"input is a directory", []string{"replay", "--fleet", fleetFile, "-", dir}, dir},
		{"missing fleet", []string{"replay", "--fleet", filepath.Join(dir, "nofleet.json"), "-"}, "--fleet"},
		{"malformed fleet", []string{"replay", "--fleet", badFleet, "-"}, "--fleet"},
		{"fleet-out in missing dir", []string{"replay", "--fleet", fleetFile, "--fleet-out", filepath.Join(dir, "no", "out.json"), "-"}, "--fleet-out"},
		{"fleet-out without fleet", []string{"replay", "--fleet-out", filepath.Join(dir, "out.json"), "-"}, "--fleet-out"},
		{"missing startup script", []string{"replay", "--fleet", fleetFile, "--startup-script", filepath.Join(dir, "none.sh"), "-"}, "--startup-script"},
		{"from-logging without project", []string{"replay", "--from-logging"}, "--project"},
		{"from-logging with files", []string{"replay", "--from-logging", "--project", "p", "x.json"}, "--from-logging"},
		{"logging flag without from-logging", []string{"replay", "--since", "2h", "-"}, "--since"},
		{"bad since", []string{"replay", "--from-logging", "--project", "p", "--since", "yesterday"}, "--since"},
		{"sweep without projects", []string{"sweep", "--fleet", fleetFile, "--zones", "z"}, "--projects"},
		{"sweep without zones", []string{"sweep", "--fleet", fleetFile, "--projects", "p"}, "--zones"},
		{"publish without topic", []string{"publish", "-"}, "--topic"},
		{"publish bad topic", []string{"publish", "--topic", "my-topic", "-"}, "--topic"},
		{"publish missing file", []string{"publish", "--topic", "projects/p/topics/t", filepath.Join(dir, "nope.json")}, "nope.json"},
		{"serve bad port", []string{"serve", "--port", "70000"}, "--port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), tt.args, failReader{t}, &out, &errOut)
			var u *usageError
			if !errors.As(err, &u) {
				t.Fatalf("run(%q) = %v, want a usage error", tt.args, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name %q", err, tt.want)
			}
			if out.Len() != 0 {
				t.Errorf("printed to stdout although nothing was processed: %q", out.String())
			}
			if got := exitCode(err, io.Discard); got != exitUsage {
				t.Errorf("exit code %d, want %d", got, exitUsage)
			}
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	r := runCLI(t, nil, "replay", "-h")
	if got := exitCode(r.err, io.Discard); got != exitOK {
		t.Errorf("replay -h: exit code %d (err %v), want 0", got, r.err)
	}
	if !strings.Contains(r.stderr, "--clock=event") || !strings.Contains(r.stderr, "-fleet-out") {
		t.Errorf("replay -h does not document the clock and the flags:\n%s", r.stderr)
	}
}

func TestPublishMessageIsTheUnwrappedLogEntry(t *testing.T) {
	push, err := os.ReadFile("../../testdata/entries/pubsub-push.json")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := os.ReadFile("../../testdata/entries/terminate-maintenance.json")
	if err != nil {
		t.Fatal(err)
	}
	src, err := openInputs([]string{"-"}, io.MultiReader(bytes.NewReader(push), strings.NewReader("\n"), bytes.NewReader(plain), strings.NewReader("\nnot json\n")), events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var msgs [][]byte
	var warns []string
	for {
		it, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		m, w := messageOf(it.Item)
		if m != nil {
			msgs = append(msgs, m.Data)
			if it.Index == 0 && m.Attributes["logging.googleapis.com/timestamp"] == "" {
				t.Errorf("push body's attributes not kept: %v", m.Attributes)
			}
		}
		warns = append(warns, w)
	}
	if len(msgs) != 3 {
		t.Fatalf("got %d messages, want 3", len(msgs))
	}
	for i, m := range msgs[:2] {
		var e struct {
			ProtoPayload struct{ MethodName string } `json:"protoPayload"`
			Message      any                         `json:"message"`
		}
		if err := json.Unmarshal(m, &e); err != nil || e.ProtoPayload.MethodName == "" || e.Message != nil {
			t.Errorf("message %d is not a bare LogEntry (err %v): %.200s", i, err, m)
		}
	}
	if warns[0] != "" || warns[1] != "" || warns[2] == "" {
		t.Errorf("warnings = %q, want only the malformed entry warned about", warns)
	}
}

func TestReplayRecordsOneRecordPerEntry(t *testing.T) {
	recs := filepath.Join(t.TempDir(), "records.jsonl")
	r := runCLI(t, nil, "replay", "--fleet", fleetFile, "--records", recs, incidentFile)
	if r.err != nil {
		t.Fatalf("replay: %v\nstderr: %s", r.err, r.stderr)
	}
	b, err := os.ReadFile(recs)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec struct{ Action string }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("record line %q: %v", l, err)
		}
		actions = append(actions, rec.Action)
	}
	// One per entry, then one per later look of the two recreates
	// (continuations: the delete's operation and create, the create's
	// operation and READY).
	if len(actions) != 13+4 {
		t.Errorf("%d records, want 17 (one per entry, two looks per recreate): %v", len(actions), actions)
	}
}

func TestReplayReportsEntriesThatStillFailTransiently(t *testing.T) {
	fleet, err := tpufake.ReadFleetFile(fleetFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := tpufake.New(fleet)
	defer srv.Close()
	srv.Fail(tpufake.FailRule{RPC: "nodes.get", Name: healthyNode, Code: 503, Status: "UNAVAILABLE"})
	svc, err := srv.Service(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := tpuapi.New(svc)
	mem := ledger.NewMemory()
	h, err := remediate.New(remediate.Deps{TPU: c, Recorder: discardRecorder{}}.WithLedger(mem), remediate.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}

	f, err := os.Open(incidentFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	src, err := openInputs([]string{"-"}, f, events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p := newPrinter("json", &out, "entries read")
	st, err := replayAll(context.Background(), h, nil, src, p, func(time.Time) {}, func(string) bool { return true })
	if err != nil || st.failed != 1 || st.total != 13 {
		t.Errorf("replayAll = %+v, %v; want 1 of 13 entries failed and no error (the exit code says it: TestExitCodes)", st, err)
	}
	for _, l := range parseLines(t, out.String()) {
		if got, want := l.Action == actionError, l.Node == healthyNode; got != want {
			t.Errorf("%s on %s: action %s", l.InsertID, l.Node, l.Action)
		}
	}
	// No retry inside the request: the entry is reported for a replay.
	if got := srv.Count("nodes.get", healthyNode); got != 1 {
		t.Errorf("nodes.get of the failing node: %d calls, want 1 (not retried in process)", got)
	}
}
