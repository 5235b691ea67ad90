package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
	"github.com/tpu-autoheal/autoheal/startup"
)

// incidentEntries returns the valid JSON objects of the bundled incident, in
// file order (oldest first), without the malformed line and the redelivered
// entry (an export has each entry once).
func incidentEntries(t *testing.T) []json.RawMessage {
	t.Helper()
	f, err := os.Open(incidentFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []json.RawMessage
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			InsertID string `json:"insertId"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || seen[e.InsertID] {
			continue // the malformed line, the redelivered entry
		}
		seen[e.InsertID] = true
		out = append(out, json.RawMessage(bytes.Clone(sc.Bytes())))
	}
	return out
}

// writeExport writes entries as `gcloud logging read --format=json` does: a
// pretty JSON array.
func writeExport(t *testing.T, entries []json.RawMessage) string {
	t.Helper()
	b, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "export.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func insertIDsAndActions(ls []line) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.InsertID+" "+l.Action)
	}
	return out
}

// The first four entries of the incident are the pod's four workers, in time
// order: worker 0's entry starts the pod's recreate, the others find its
// recovery in flight (decided backwards, worker 3's would start it).
var podInTimeOrder = []string{"inc-llm-w0 recreate", "inc-llm-w1 skip", "inc-llm-w2 skip", "inc-llm-w3 skip"}

func TestReplayDecidesANewestFirstExportOldestFirst(t *testing.T) {
	entries := incidentEntries(t)
	slices.Reverse(entries) // as gcloud logging read prints them
	export := writeExport(t, entries)

	r := runCLI(t, nil, "replay", "--fleet", fleetFile, "--format", "json", "--clock", "event", export)
	if r.err != nil {
		t.Fatalf("replay: %v\n%s", r.err, r.stderr)
	}
	lines := parseLines(t, r.stdout)
	if got := insertIDsAndActions(lines)[:4]; !cmp.Equal(got, podInTimeOrder) {
		t.Errorf("first decisions = %q, want %q (oldest first)", got, podInTimeOrder)
	}
	for i := 1; i < len(lines); i++ {
		if lines[i].Time < lines[i-1].Time {
			t.Errorf("output line %d (%s) is older than the line before it: not in decision order", i+1, lines[i].Time)
		}
	}

	text := runCLI(t, nil, "replay", "--fleet", fleetFile, "--clock", "event", export)
	if !strings.Contains(text.stdout, "order: oldest first (the input was newest first") {
		t.Errorf("text output does not say the input was reversed:\n%s", text.stdout)
	}

	// --order input decides as given: worker 3's entry now comes first
	// and recreates the pod.
	r = runCLI(t, nil, "replay", "--fleet", fleetFile, "--format", "json", "--clock", "event", "--order", "input", export)
	if r.err != nil {
		t.Fatalf("replay --order input: %v", r.err)
	}
	if got := insertIDsAndActions(parseLines(t, r.stdout))[:2]; !cmp.Equal(got, []string{"inc-create reject", "inc-v5p-push defer"}) {
		t.Errorf("--order input: first lines %q, want the newest entries first", got)
	}
}

func TestReplayOrderOnStdin(t *testing.T) {
	entries := incidentEntries(t)
	slices.Reverse(entries)
	b, _ := json.Marshal(entries)
	for _, tt := range []struct {
		order string
		want  []string
	}{
		{"desc", podInTimeOrder},
		{"auto", podInTimeOrder},
	} {
		t.Run(tt.order, func(t *testing.T) {
			r := runCLI(t, bytes.NewReader(b), "replay", "--fleet", fleetFile, "--format", "json", "--clock", "event", "--order", tt.order, "-")
			if r.err != nil {
				t.Fatalf("replay: %v\n%s", r.err, r.stderr)
			}
			if got := insertIDsAndActions(parseLines(t, r.stdout))[:4]; !cmp.Equal(got, tt.want) {
				t.Errorf("decisions = %q, want %q", got, tt.want)
			}
		})
	}
	// --order asc on a stream that is not: decided as given, and said.
	r := runCLI(t, bytes.NewReader(b), "replay", "--fleet", fleetFile, "--clock", "event", "--order", "asc", "-")
	if !strings.Contains(r.stderr, "older than the one before") || !strings.Contains(r.stdout, "--order asc") {
		t.Errorf("--order asc on a newest-first stream: no warning\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
	}
}

func TestReplayExitStatus(t *testing.T) {
	dir := t.TempDir()
	file := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	binary := make([]byte, 4096)
	for i := range binary {
		binary[i] = byte(i*131 + 7)
	}
	tests := []struct {
		name  string
		input string
		extra []string
		want  int
	}{
		{"empty gcloud export", file("empty.json", []byte("[]\n")), nil, exitOK},
		{"empty file", file("nothing.json", nil), nil, exitOK},
		{"garbage", file("garbage.txt", []byte("hello\nthis is not a log\n")), nil, exitNoEntries},
		{"binary", file("binary.bin", binary), nil, exitNoEntries},
		{"entries with a reject", incidentFile, nil, exitOK},
		{"entries with a reject, --strict", incidentFile, []string{"--strict"}, exitRejects},
		{"entries only of another project are read, not garbage", incidentFile, []string{"--projects", "other"}, exitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"replay", "--fleet", fleetFile, "--clock", "event"}, tt.extra...)
			r := runCLI(t, nil, append(args, tt.input)...)
			if got := exitCode(r.err, io.Discard); got != tt.want {
				t.Errorf("exit status %d (err %v), want %d\n%s", got, r.err, tt.want, r.stdout)
			}
		})
	}
}

func TestRejectNamesFileAndLine(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.jsonl")
	b := filepath.Join(dir, "b.jsonl")
	good := string(incidentEntries(t)[0])
	if err := os.WriteFile(a, []byte(good+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte(good+"\n\n{\"broken\": \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, order := range []string{"auto", "input"} {
		r := runCLI(t, nil, "replay", "--fleet", fleetFile, "--format", "json", "--order", order, a, b)
		var ats []string
		for _, l := range parseLines(t, r.stdout) {
			if l.Action == string(remediate.ActionReject) {
				ats = append(ats, l.At)
			}
		}
		if want := []string{b + ":3"}; !cmp.Equal(ats, want) {
			t.Errorf("--order %s: rejects at %q, want %q", order, ats, want)
		}
		text := runCLI(t, nil, "replay", "--fleet", fleetFile, "--order", order, a, b)
		if !strings.Contains(text.stdout, "b.jsonl:3: ") {
			t.Errorf("--order %s: text reject row does not name FILE:LINE:\n%s", order, text.stdout)
		}
	}
}

// TestReadOnlyAgainstAnEndpoint: without --fleet, replay and sweep read the
// control plane and change nothing unless --apply is given.
func TestReadOnlyAgainstAnEndpoint(t *testing.T) {
	mutations := func(srv *tpufake.Server) []string {
		var out []string
		for _, r := range srv.Requests() {
			if r.Method != "GET" {
				out = append(out, r.RPC+" "+r.Name)
			}
		}
		return out
	}
	commands := map[string][]string{
		"replay": {"replay", "--clock", "event", incidentFile},
		"sweep":  {"sweep", "--projects", "acme-ml", "--zones", "us-central2-b,us-west4-a"},
	}
	for name, args := range commands {
		t.Run(name, func(t *testing.T) {
			fleet, err := tpufake.ReadFleetFile(fleetFile)
			if err != nil {
				t.Fatal(err)
			}
			srv := tpufake.New(fleet)
			defer srv.Close()
			r := runCLI(t, nil, append([]string{args[0], "--tpu-endpoint", srv.URL()}, args[1:]...)...)
			if r.err != nil {
				t.Fatalf("%s: %v\n%s", name, r.err, r.stderr)
			}
			if m := mutations(srv); len(m) > 0 {
				t.Errorf("%s without --apply mutated: %q", name, m)
			}
			if !strings.Contains(r.stdout, "\nread-only: ") {
				t.Errorf("%s summary does not say it was read-only:\n%s", name, r.stdout)
			}

			// The same through AUTOHEAL_TPU_ENDPOINT, with --apply: it acts,
			// and finishes what it started (waiting for each next look as
			// for a real API; here the wait is skipped, the clock moved).
			t.Setenv("AUTOHEAL_TPU_ENDPOINT", srv.URL())
			waits := skipWaits(t)
			r = runCLI(t, nil, append([]string{args[0], "--apply"}, args[1:]...)...)
			if r.err != nil {
				t.Fatalf("%s --apply: %v\n%s", name, r.err, r.stderr)
			}
			m := mutations(srv)
			for _, verb := range []string{"nodes.delete", "nodes.create"} {
				if !slices.ContainsFunc(m, func(s string) bool { return strings.HasPrefix(s, verb) }) {
					t.Errorf("%s --apply made no %s: %q", name, verb, m)
				}
			}
			// sweep decides at the wall clock, so its first next look is
			// ahead and waited for; replay --clock event is already past
			// its entries' next looks when it finishes their recoveries.
			if name == "sweep" && *waits == 0 {
				t.Errorf("%s --apply did not wait for a next look against a real-API endpoint", name)
			}
			if !strings.Contains(r.stdout, "us-central2-b/llm-v4-128      recreate  recovered") {
				t.Errorf("%s --apply does not end with the recovery recovered:\n%s", name, r.stdout)
			}
			if strings.Contains(r.stdout, "read-only") {
				t.Errorf("%s --apply says read-only:\n%s", name, r.stdout)
			}
		})
	}
}

func TestReadOnlyTPURefusesMutations(t *testing.T) {
	ro := readOnlyTPU{}
	if _, err := ro.DeleteNode(t.Context(), "n"); !errors.Is(err, errReadOnly) {
		t.Errorf("DeleteNode = %v", err)
	}
	if _, err := ro.CreateNode(t.Context(), "p", "n", nil); !errors.Is(err, errReadOnly) {
		t.Errorf("CreateNode = %v", err)
	}
	if _, err := ro.ResetQueuedResource(t.Context(), "q"); !errors.Is(err, errReadOnly) {
		t.Errorf("ResetQueuedResource = %v", err)
	}
}

func TestApplyUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"replay", "--dry-run", "--apply", "-"},
		{"sweep", "--dry-run", "--apply", "--projects", "p", "--zones", "z"},
		{"replay", "--fleet", fleetFile, "--tpu-endpoint", "http://127.0.0.1:1", "-"},
		{"replay", "--tpu-endpoint", "not a url", "-"},
	} {
		r := runCLI(t, failReader{t}, args...)
		if got := exitCode(r.err, io.Discard); got != exitUsage {
			t.Errorf("%q: exit %d (err %v), want a usage error", args, got, r.err)
		}
	}
}

func TestReplayShowsWarnings(t *testing.T) {
	lines, _ := replayIncident(t)
	var warned []string
	for _, l := range lines {
		if len(l.Warnings) > 0 {
			warned = append(warned, l.InsertID)
		}
	}
	// The spot node's own startup script is replaced by the resume script.
	if !cmp.Equal(warned, []string{"inc-spot"}) {
		t.Errorf("lines with warnings: %q, want the spot node's recreate", warned)
	}
	r := runCLI(t, nil, "replay", "--fleet", fleetFile, "--clock", "event", incidentFile)
	if !strings.Contains(r.stdout, "\n    warning: the node's own startup-script") {
		t.Errorf("text output does not show the warning:\n%s", r.stdout)
	}
}

// TestTextRowsStreamAndFit: a row is written when its line is printed, not
// at the end, and no row is wider than 120 columns however long its fields.
func TestTextRowsStreamAndFit(t *testing.T) {
	var out bytes.Buffer
	p := newPrinter("text", &out, "entries read")
	long := strings.Repeat("very-long-reason ", 30)
	l := line{Time: "2026-11-20T03:44:36.1Z", Node: "projects/p/locations/us-central2-b/nodes/" + strings.Repeat("n", 60),
		Worker: "12", Cause: "maintenance", Action: "recreate", Reason: long, Warnings: []string{long}}
	if err := p.print(l); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "us-central2-b/nnn") {
		t.Fatalf("nothing written after the first row (buffered until the end?): %q", out.String())
	}
	if err := p.finish(p.tally.summary("entries")); err != nil {
		t.Fatal(err)
	}
	for _, ln := range strings.Split(out.String(), "\n") {
		if n := utf8.RuneCountInString(ln); n > textWidth {
			t.Errorf("line of %d columns: %q", n, ln)
		}
	}
	var js bytes.Buffer
	jp := newPrinter("json", &js, "")
	_ = jp.print(l)
	if !strings.Contains(js.String(), long) {
		t.Errorf("JSON output cut the reason")
	}
}

func TestSweepPrintsEveryNodeAndCountsNodes(t *testing.T) {
	r := runCLI(t, nil, "sweep", "--fleet", fleetFile, "--projects", "acme-ml", "--zones", "europe-west4-a")
	if r.err != nil {
		t.Fatalf("sweep: %v\n%s", r.err, r.stderr)
	}
	if !strings.Contains(r.stdout, "europe-west4-a/v3-8-exp") {
		t.Errorf("the healthy node has no line:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "\nnodes swept: 1\n") {
		t.Errorf("summary does not count one node:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "locations: acme-ml/europe-west4-a 1 node;") {
		t.Errorf("summary does not say what the zone held:\n%s", r.stdout)
	}
}

// TestSweepRefusesAZoneThatDoesNotExist: a typo in --zones is an error
// before any work (exit 2), offline when it cannot be a zone id, and
// against the control plane when it names no zone the fleet has; nothing
// is listed or changed.
func TestSweepRefusesAZoneThatDoesNotExist(t *testing.T) {
	for _, tt := range []struct{ zones, want string }{
		{"europe-west4-a,us-central2-bb", `sweep --zones "us-central2-bb": not a zone id`},
		{"europe-west4-a,nowhere-1a", `sweep --zones "nowhere-1a": not a zone id`},
		{"europe-west4-a,asia-east1-c", "--zones asia-east1-c: no such zone in the fleet file (its zones: europe-west4-a, us-central2-b, us-east5-a, us-west4-a)"},
	} {
		out := filepath.Join(t.TempDir(), "fleet-after.json")
		r := runCLI(t, nil, "sweep", "--fleet", fleetFile, "--fleet-out", out, "--projects", "acme-ml", "--zones", tt.zones)
		if code := exitCode(r.err, io.Discard); code != exitUsage || !strings.Contains(r.err.Error(), tt.want) {
			t.Errorf("sweep --zones %s: exit %d, %v; want exit 2 and %q", tt.zones, code, r.err, tt.want)
		}
		if r.stdout != "" {
			t.Errorf("sweep --zones %s printed decisions:\n%s", tt.zones, r.stdout)
		}
		if _, err := os.Stat(out); err == nil {
			b, _ := os.ReadFile(out)
			if len(b) > 0 {
				t.Errorf("sweep --zones %s wrote the fleet after a refused run", tt.zones)
			}
		}
	}
}

func TestFlagsAfterFiles(t *testing.T) {
	r := runCLI(t, nil, "replay", "--fleet", fleetFile, incidentFile, "--format", "json", "--clock", "event")
	if r.err != nil {
		t.Fatalf("replay FILE --format json: %v", r.err)
	}
	if ls := parseLines(t, r.stdout); len(ls) != 13 {
		t.Errorf("got %d JSON lines, want 13:\n%s", len(ls), r.stdout)
	}
	// After "--", a name starting with "-" is a file.
	r = runCLI(t, nil, "replay", "--fleet", fleetFile, "--", "--format")
	if r.err == nil || !strings.Contains(r.err.Error(), "--format") || exitCode(r.err, io.Discard) != exitUsage {
		t.Errorf("replay -- --format: %v, want the file --format reported missing", r.err)
	}
}

func TestCommandLineMessages(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a number as a duration says what is wanted", []string{"replay", "--cooldown", "5", "-"}, "want a duration such as 30m"},
		{"one logging flag: singular", []string{"replay", "--since", "2h", "-"}, "--since applies only to --from-logging"},
		{"two logging flags: plural", []string{"replay", "--since", "2h", "--until", "1h", "-"}, "--since, --until apply only to --from-logging"},
		{"bad --order", []string{"replay", "--order", "newest", "-"}, "--order"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, failReader{t}, tt.args...)
			if r.err == nil || !strings.Contains(r.err.Error(), tt.want) {
				t.Errorf("error %v, want it to say %q", r.err, tt.want)
			}
		})
	}
}

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
	}{
		{"2026-11-20T03:00:00Z", time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC)},
		{"2026-11-30", time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)},
		{"6h", time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)},
		{"7d", time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		got, err := parseWhen("since", tt.in, now)
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("parseWhen(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"yesterday", "7days", "-1d", "2026-13-01"} {
		if _, err := parseWhen("since", bad, now); err == nil {
			t.Errorf("parseWhen(%q) accepted", bad)
		}
	}
}

func TestHelpTexts(t *testing.T) {
	r := runCLI(t, nil, "serve", "-h")
	for _, ln := range strings.Split(r.stderr, "\n") {
		if n := strings.Count(ln, "default"); n > 1 {
			t.Errorf("serve -h line gives %d defaults: %q", n, ln)
		}
	}
	r = runCLI(t, nil, "simulate", "-h")
	if strings.Contains(r.stderr, "real TPU API") || strings.Contains(r.stderr, "Application Default Credentials") {
		t.Errorf("simulate -h speaks of the real API, which it never uses:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, "-fleet") {
		t.Errorf("simulate -h does not document --fleet:\n%s", r.stderr)
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 messages", 1: "1 message", 2: "2 messages"} {
		if got := plural(n, "message", "messages"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestVersion(t *testing.T) {
	defer func(f func() (*debug.BuildInfo, bool)) { readBuildInfo = f }(readBuildInfo)
	readBuildInfo = func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/tpu-autoheal/autoheal", Version: "v0.3.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0617171abc"}, {Key: "vcs.modified", Value: "true"}}}, true
	}
	r := runCLI(t, nil, "version")
	if want := "autoheal github.com/tpu-autoheal/autoheal v0.3.0 revision 0617171abc (modified) go1.26.0\n"; r.err != nil || r.stdout != want {
		t.Errorf("version = %q, %v; want %q", r.stdout, r.err, want)
	}
}

// TestReadOnlyTPUCoversEveryMutation walks remediate.TPU: every method that
// is not a known read must be overridden by readOnlyTPU (a method only
// promoted from the nil TPU inside panics here), so a mutating call added to
// the interface cannot slip through a read-only run.
func TestReadOnlyTPUCoversEveryMutation(t *testing.T) {
	reads := map[string]bool{"GetNode": true, "ListNodes": true, "GetOperation": true, "GetQueuedResource": true}
	typ := reflect.TypeOf((*remediate.TPU)(nil)).Elem()
	ro := reflect.ValueOf(readOnlyTPU{})
	for i := 0; i < typ.NumMethod(); i++ {
		m := typ.Method(i)
		if reads[m.Name] {
			continue
		}
		func() {
			defer func() {
				if recover() != nil {
					t.Errorf("remediate.TPU.%s is not a known read and readOnlyTPU does not refuse it: override it (or list it in reads)", m.Name)
				}
			}()
			fn := ro.MethodByName(m.Name)
			args := make([]reflect.Value, fn.Type().NumIn())
			for j := range args {
				args[j] = reflect.Zero(fn.Type().In(j))
			}
			args[0] = reflect.ValueOf(t.Context())
			out := fn.Call(args)
			if err, _ := out[len(out)-1].Interface().(error); !errors.Is(err, errReadOnly) {
				t.Errorf("readOnlyTPU.%s = %v, want errReadOnly", m.Name, err)
			}
		}()
	}
}

// TestNodesOwnStartupScriptIsKept is issue #12's first report, end to end: a
// node whose only metadata is its own startup-script comes back with it,
// without the resume script and without a warning; the same node carrying
// autoheal-train-cmd gets the resume script.
func TestNodesOwnStartupScriptIsKept(t *testing.T) {
	const own = "sudo -u alice /home/alice/start_training.sh"
	for _, tt := range []struct {
		name     string
		metadata map[string]string
		want     string
		warned   bool
	}{
		{"own script only: kept", map[string]string{"startup-script": own}, own, false},
		{"opted into the resume script: replaced, with a warning", map[string]string{"startup-script": own, "autoheal-train-cmd": "python3 train.py"}, startup.Script, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			fleet := filepath.Join(dir, "fleet.json")
			node := map[string]any{
				"name": podNode, "acceleratorType": "v4-128", "runtimeVersion": "tpu-ubuntu2204-base",
				"state": "TERMINATED", "labels": map[string]string{"tpu-autoheal": "enabled"}, "metadata": tt.metadata,
			}
			b, _ := json.Marshal(node)
			if err := os.WriteFile(fleet, b, 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "after.json")
			r := runCLI(t, nil, "replay", "--fleet", fleet, "--fleet-out", out, "--format", "json", "--clock", "event", "../../testdata/entries/terminate-maintenance.json")
			if r.err != nil {
				t.Fatalf("replay: %v\n%s", r.err, r.stderr)
			}
			lines := parseLines(t, r.stdout)
			if len(lines) != 1 || lines[0].Action != string(remediate.ActionRecreate) {
				t.Fatalf("lines = %+v, want one recreate", lines)
			}
			if got := readFleet(t, out)[podNode].Metadata["startup-script"]; got != tt.want {
				t.Errorf("startup-script after the recreate = %.60q, want %.60q", got, tt.want)
			}
			if got := len(lines[0].Warnings) > 0; got != tt.warned {
				t.Errorf("warnings %q, want some: %v", lines[0].Warnings, tt.warned)
			}
		})
	}
}

// skipWaits makes the waits for a real API's next look return at once (the
// run's clock still moves by them) and counts them.
func skipWaits(t *testing.T) *int {
	t.Helper()
	n := 0
	old := waitFor
	waitFor = func(context.Context, time.Duration) bool { n++; return true }
	t.Cleanup(func() { waitFor = old })
	return &n
}
