package main

// The CLI as a newcomer meets it: every flag does what it says or is not
// offered, mistakes are named with what was meant, outcomes and exit codes
// say what happened.

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

const maintenanceFleet = "demo/maintenance.json"

// TestSweepMaintenanceFlagActs: sweep --maintenance decides the notices as
// the function would; off leaves them alone.
func TestSweepMaintenanceFlagActs(t *testing.T) {
	for _, tt := range []struct {
		mode, want string
	}{
		{"prepare", `(?m)^-\s+us-east5-a/llm-v5p-32\s+-\s+\S+\s+prepare\s+notice sent to the guest`},
		{"early", `(?m)^-\s+us-east5-a/llm-v5p-32\s+-\s+\S+\s+prepare\s+notice sent to the guest`},
		{"off", `(?m)^-\s+us-east5-a/llm-v5p-32\s+-\s+-\s+record\s+READY HEALTHY: nothing to do`},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "after.json")
			r := runCLI(t, nil, "sweep", "--fleet", fleetWithoutModeLabel(t), "--fleet-out", out, "--projects", "acme-ml", "--zones", "us-east5-a", "--maintenance", tt.mode)
			if r.err != nil {
				t.Fatalf("sweep: %v\n%s", r.err, r.stderr)
			}
			if !regexp.MustCompile(tt.want).MatchString(r.stdout) {
				t.Errorf("sweep --maintenance %s does not match %s:\n%s", tt.mode, tt.want, r.stdout)
			}
			f, err := tpufake.ReadFleetFile(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range f.Nodes {
				if strings.HasSuffix(n.Name, "/llm-v5p-32") {
					_, sent := n.Metadata[remediate.NoticeMetadataKey]
					if sent != (tt.mode != "off") {
						t.Errorf("--maintenance %s: notice in the node's metadata = %t", tt.mode, sent)
					}
				}
			}
		})
	}
}

// fleetWithoutModeLabel is the demo's maintenance fleet without the node
// label tpu-autoheal-maintenance, which would override --maintenance.
func fleetWithoutModeLabel(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(maintenanceFleet)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(data), `"tpu-autoheal-maintenance": "early", `, "")
	if s == string(data) {
		t.Fatal("the maintenance fleet no longer carries the mode label: update the test")
	}
	p := filepath.Join(t.TempDir(), "fleet.json")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFlagsOfferedOnlyWhereTheyApply: a knob a command cannot use is not
// one of its flags, and naming it says so.
func TestFlagsOfferedOnlyWhereTheyApply(t *testing.T) {
	for _, args := range [][]string{
		{"pause", "--hold-ttl", "1h"},
		{"resume", "--hold-ttl", "1h"},
		{"breaker", "reset", "--hold-ttl", "1h"},
		{"sweep", "--event-ttl", "1h"},
		{"sweep", "--resume-watch", "1h"},
		{"sweep", "--hold-ttl", "1h"},
	} {
		r := runCLI(t, nil, args...)
		if code := exitCode(r.err, io.Discard); code != exitUsage || !strings.Contains(r.err.Error(), "flag provided but not defined: -"+strings.TrimPrefix(args[len(args)-2], "--")) {
			t.Errorf("autoheal %s: exit %d, %v; want exit 2, the flag not defined", strings.Join(args, " "), code, r.err)
		}
	}
	r := runCLI(t, nil, "status", "-h")
	if !strings.Contains(r.stderr, "-hold-ttl") {
		t.Errorf("status, which lists holds, lost --hold-ttl:\n%s", r.stderr)
	}
}

func TestUnknownFlagSuggestsTheNearest(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "--fromat", "json", "x"}, "did you mean --format?"},
		{[]string{"replay", "--fleet-ot", "f", "x"}, "did you mean --fleet-out?"},
		{[]string{"sweep", "--zone", "us-central2-b"}, "did you mean --zones?"},
		{[]string{"pause", "--resaon", "x"}, "did you mean --reason?"},
		{[]string{"report", "--from-log", "x"}, "did you mean --from-logging?"},
	} {
		r := runCLI(t, nil, tt.args...)
		if code := exitCode(r.err, io.Discard); code != exitUsage || !strings.Contains(r.err.Error(), tt.want) {
			t.Errorf("autoheal %s: exit %d, %v; want exit 2 and %q", strings.Join(tt.args, " "), code, r.err, tt.want)
		}
	}
	r := runCLI(t, nil, "replay", "--zzzzzzzz", "x")
	if r.err == nil || strings.Contains(r.err.Error(), "did you mean") {
		t.Errorf("a flag like no other got a suggestion: %v", r.err)
	}
}

// TestTypoZoneRefused: a zone that cannot exist, or that the ledger has
// never counted a start in, is refused before anything is written.
func TestTypoZoneRefused(t *testing.T) {
	m := ledger.NewMemory()
	opens := withLedger(t, m)
	now := time.Now().UTC()
	for _, n := range []string{"projects/proj-a/locations/us-central2-b/nodes/x", "projects/proj-a/locations/us-central2-b/nodes/y"} {
		if _, err := m.Claim(context.Background(), claimReq(n, now)); err != nil {
			t.Fatal(err)
		}
	}
	tight := remediate.DefaultConfig()
	tight.BreakerLimit = 2
	openZones := func() []string {
		open, err := m.OpenBreakers(context.Background(), time.Now().UTC(), tight)
		if err != nil {
			t.Fatal(err)
		}
		var zs []string
		for _, b := range open {
			zs = append(zs, b.Zone)
		}
		return zs
	}
	for _, tt := range []struct {
		args  []string
		want  string
		opens int
	}{
		{[]string{"breaker", "reset", "--zone", "us-central2-bb"}, `breaker reset --zone "us-central2-bb": not a zone id`, 0},
		{[]string{"pause", "--zone", "us-central2-bb", "--reason", "x", "--by", "a"}, `pause --zone "us-central2-bb": not a zone id`, 0},
		{[]string{"breaker", "reset", "--zone", "us-central2-c"}, "breaker reset --zone us-central2-c: the ledger counts no recreate or reset started in that zone (zones with starts: us-central2-b): nothing to reset", 1},
	} {
		*opens = 0
		_, err := runLedgerCmd(t, append(tt.args, "--ledger-project", "host-proj")...)
		if code := exitCode(err, io.Discard); code != exitUsage || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("autoheal %s: exit %d, %v; want exit 2 and %q", strings.Join(tt.args, " "), code, err, tt.want)
		}
		if *opens != tt.opens {
			t.Errorf("autoheal %s opened the ledger %d times, want %d", strings.Join(tt.args, " "), *opens, tt.opens)
		}
	}
	if zs := openZones(); len(zs) != 1 || zs[0] != "us-central2-b" {
		t.Errorf("open breakers after the refused resets: %v; want us-central2-b still open", zs)
	}
	pauses, _ := m.Pauses(context.Background())
	if len(pauses) != 0 {
		t.Errorf("a refused pause was written: %+v", pauses)
	}
	if _, err := runLedgerCmd(t, "breaker", "reset", "--zone", "us-central2-b", "--ledger-project", "host-proj"); err != nil {
		t.Fatalf("breaker reset of the zone with starts: %v", err)
	}
	if zs := openZones(); len(zs) != 0 {
		t.Errorf("open breakers after the reset: %v; want none", zs)
	}
}

func TestVersionHelp(t *testing.T) {
	for _, h := range []string{"-h", "--help"} {
		r := runCLI(t, nil, "version", h)
		if r.err != nil && exitCode(r.err, io.Discard) != exitOK {
			t.Errorf("version %s: %v", h, r.err)
		}
		if !strings.Contains(r.stderr, "Usage: autoheal version") || !strings.Contains(r.stderr, "Exit codes") {
			t.Errorf("version %s printed no help:\n%s", h, r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("version %s printed the version too: %q", h, r.stdout)
		}
	}
	if r := runCLI(t, nil, "version", "extra"); exitCode(r.err, io.Discard) != exitUsage {
		t.Errorf("version extra: %v; want a usage error", r.err)
	}
}

// TestPauseByFallsBackInOrder: without --by, who pauses is the login name,
// else the gcloud account, else the host; the output says which.
func TestPauseByFallsBackInOrder(t *testing.T) {
	m := ledger.NewMemory()
	withLedger(t, m)
	old := whoSources
	t.Cleanup(func() { whoSources = old })
	set := func(login, gcloud, host string) {
		whoSources = []struct {
			name string
			find func() string
		}{
			{"the login name", func() string { return login }},
			{"the gcloud account", func() string { return gcloud }},
			{"the host name", func() string { return host }},
		}
	}
	for _, tt := range []struct {
		login, gcloud, host string
		by, from            string
	}{
		{"alice", "alice@acme.com", "ws-1", "alice", "the login name"},
		{"", "alice@acme.com", "ws-1", "alice@acme.com", "the gcloud account"},
		{"", "", "ws-1", "ws-1", "the host name"},
	} {
		set(tt.login, tt.gcloud, tt.host)
		out, err := runLedgerCmd(t, "pause", "--project", "proj-a", "--reason", "INC-1", "--ledger-project", "host-proj")
		if err != nil {
			t.Fatalf("pause with %s: %v", tt.from, err)
		}
		if want := "(by " + tt.by + " (no --by: " + tt.from + ") at "; !strings.Contains(out, want) {
			t.Errorf("pause output %q does not contain %q", out, want)
		}
		ps, _ := m.Pauses(context.Background())
		if len(ps) != 1 || ps[0].By != tt.by {
			t.Errorf("pause by = %+v; want %s", ps, tt.by)
		}
	}
	set("", "", "")
	_, err := runLedgerCmd(t, "pause", "--project", "proj-a", "--reason", "INC-1", "--ledger-project", "host-proj")
	if exitCode(err, io.Discard) != exitUsage || !strings.Contains(err.Error(), "--by WHO is required") {
		t.Errorf("pause with no one to name: %v; want a usage error asking for --by", err)
	}
	out, err := runLedgerCmd(t, "pause", "--project", "proj-a", "--reason", "INC-1", "--by", "bob", "--ledger-project", "host-proj")
	if err != nil || !strings.Contains(out, "(by bob at ") {
		t.Errorf("pause --by bob: %q, %v", out, err)
	}
}

func TestSecondPauseSaysWhatItReplaced(t *testing.T) {
	m := ledger.NewMemory()
	withLedger(t, m)
	if _, err := runLedgerCmd(t, "pause", "--zone", "us-central2-b", "--reason", "INC-1: first", "--by", "alice", "--ledger-project", "host-proj"); err != nil {
		t.Fatal(err)
	}
	out, err := runLedgerCmd(t, "pause", "--zone", "us-central2-b", "--reason", "INC-2: second", "--by", "bob", "--ledger-project", "host-proj")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`replaced the pause of the same scope by alice since \S+: INC-1: first`).MatchString(out) {
		t.Errorf("second pause does not say what it replaced:\n%s", out)
	}
	// A pause of another scope replaces nothing.
	out, err = runLedgerCmd(t, "pause", "--project", "proj-a", "--reason", "INC-3", "--by", "bob", "--ledger-project", "host-proj")
	if err != nil || strings.Contains(out, "replaced") {
		t.Errorf("a pause of another scope: %q, %v; want nothing replaced", out, err)
	}
}

// TestReadersTakePipesAndProcessSubstitution: a FILE that is a named pipe
// (what bash's <(cat file) gives) is read like stdin: replay decides it in
// time order as it does the file, report reads it.
func TestReadersTakePipesAndProcessSubstitution(t *testing.T) {
	fifo := func(t *testing.T, src string) string {
		t.Helper()
		p := filepath.Join(t.TempDir(), "fifo")
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			f.Write(data)
			f.Close()
		}()
		return p
	}
	want := runCLI(t, nil, "replay", "--format", "json", "--clock", "event", "--fleet", fleetFile, incidentFile)
	got := runCLI(t, nil, "replay", "--format", "json", "--clock", "event", "--fleet", fleetFile, fifo(t, incidentFile))
	if got.err != nil {
		t.Fatalf("replay FIFO: %v\n%s", got.err, got.stderr)
	}
	if w, g := comparableJSON(t, want.stdout), comparableJSON(t, got.stdout); w != g {
		t.Errorf("replay of a pipe differs from replay of the file:\nfile:\n%s\npipe:\n%s", w, g)
	}
	r := runCLI(t, nil, "report", fifo(t, "../../internal/report/testdata/night.jsonl"))
	if r.err != nil || !strings.Contains(r.stdout, "Incidents: 6") {
		t.Errorf("report FIFO: %v\n%s", r.err, r.stdout)
	}
}

// TestReportSaysWhichCommandReadsOtherInput: audit log entries and
// replay's JSON are not records; report says what they are and which
// command to run, and exits 3.
func TestReportSaysWhichCommandReadsOtherInput(t *testing.T) {
	replayJSON := filepath.Join(t.TempDir(), "decisions.jsonl")
	r := runCLI(t, nil, "replay", "--format", "json", "--clock", "event", "--fleet", fleetFile, incidentFile)
	if err := os.WriteFile(replayJSON, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ input, want string }{
		{"../../testdata/entries/terminate-maintenance.json", "the input holds 1 TPU audit log entry, not tpu-autoheal records (and no record); autoheal replay reads those: autoheal replay --clock event --fleet FLEET --records records.jsonl FILE"},
		{"../../testdata/entries/pubsub-push.json", "TPU audit log entry"},
		{replayJSON, "objects of autoheal replay --format json, not tpu-autoheal records (and no record); its decisions are not records: run autoheal replay --records records.jsonl"},
		{incidentFile, "object 12 (byte 8256) is not a record"},
	} {
		r := runCLI(t, nil, "report", tt.input)
		if code := exitCode(r.err, io.Discard); code != exitNoEntries || !strings.Contains(r.err.Error(), tt.want) {
			t.Errorf("report %s: exit %d, %v; want exit 3 and %q", filepath.Base(tt.input), code, r.err, tt.want)
		}
		if strings.Contains(r.stdout, "No incidents") {
			t.Errorf("report %s printed an empty report:\n%s", filepath.Base(tt.input), r.stdout)
		}
	}
}

// TestReportWarnsOfRecordsDecidedLongAfterTheirEvents: records of a
// replay at the wall clock count the replay's delay as downtime; report
// says so. replay --records decides at the event clock by itself.
func TestReportWarnsOfRecordsDecidedLongAfterTheirEvents(t *testing.T) {
	dir := t.TempDir()
	wall, event := filepath.Join(dir, "wall.jsonl"), filepath.Join(dir, "event.jsonl")
	if r := runCLI(t, nil, "replay", "--clock", "wall", "--fleet", fleetFile, "--records", wall, incidentFile); r.err != nil {
		t.Fatal(r.err)
	}
	if r := runCLI(t, nil, "replay", "--fleet", fleetFile, "--records", event, incidentFile); r.err != nil {
		t.Fatal(r.err)
	}
	r := runCLI(t, nil, "report", wall)
	if r.err != nil || !strings.Contains(r.stderr, "decided more than 1h after they happened (replayed at the wall clock?)") {
		t.Errorf("report of wall-clock records: %v; stderr:\n%s", r.err, r.stderr)
	}
	r = runCLI(t, nil, "report", event)
	if r.err != nil || r.stderr != "" {
		t.Errorf("report of replay --records (event clock by default): %v; stderr:\n%s", r.err, r.stderr)
	}
	if !strings.Contains(r.stdout, "downtime:         4m24s in total; 2.83 chip-hours lost") {
		t.Errorf("report of the incident at its own times:\n%s", r.stdout)
	}
}

// TestReadOnlySummaryCountsWhatWouldHappen: against a real-API endpoint
// without --apply, the recreates are dry-run skips, counted as what they
// would have been.
func TestReadOnlySummaryCountsWhatWouldHappen(t *testing.T) {
	fleet, err := tpufake.ReadFleetFile(fleetFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := tpufake.New(fleet)
	defer srv.Close()
	r := runCLI(t, nil, "replay", "--tpu-endpoint", srv.URL(), "--clock", "event", incidentFile)
	if r.err != nil {
		t.Fatalf("replay: %v\n%s", r.err, r.stderr)
	}
	// Workers 1-3 of llm-v4-128 would recreate it too: nothing is claimed
	// in a dry run, so no recovery is in flight to skip them.
	if !strings.Contains(r.stdout, "\nactions: record 1, would recreate 5, defer 2, skip 3, reject 2\n") {
		t.Errorf("summary does not count the would-recreates apart:\n%s", r.stdout)
	}
	r = runCLI(t, nil, "replay", "--tpu-endpoint", srv.URL(), "--clock", "event", "--format", "json", incidentFile)
	_, sum := parseOutput(t, r.stdout)
	if sum.WouldActions["recreate"] != 5 || sum.Actions["skip"] != 3 || !sum.ReadOnly || sum.Recoveries.Started != 0 {
		t.Errorf("JSON summary = %+v; want wouldActions recreate 5, skip 3, read-only, no recovery started", sum)
	}
}

// TestZoneHintPreparesAreRowsOfTheirOwn: a Compute Engine entry about a
// TPU worker VM makes the function look at the zone's nodes; each node's
// decision is its own row, counted under its action.
func TestZoneHintPreparesAreRowsOfTheirOwn(t *testing.T) {
	data, err := os.ReadFile(maintenanceFleet)
	if err != nil {
		t.Fatal(err)
	}
	fleet := filepath.Join(t.TempDir(), "fleet.json")
	if err := os.WriteFile(fleet, []byte(strings.ReplaceAll(string(data), "us-east5-a", "us-central2-b")), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "replay", "--clock", "event", "--fleet", fleet, "../../testdata/entries/compute-upcoming-maintenance.json")
	if r.err != nil {
		t.Fatalf("replay: %v\n%s", r.err, r.stderr)
	}
	for _, re := range []string{
		`(?m)^2026-11-20T03:00:00Z  us-central2-b/llm-v5p-32 .* prepare   notice sent to the guest`,
		`(?m)^2026-11-20T03:00:00Z  -  .* 0   maintenance  record    zone hint \(compute\.instances\.upcomingMai`,
		`(?m)^entries read: 1$`,
		`(?m)^actions: record 1, prepare 1$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("zone hint output does not match %s:\n%s", re, r.stdout)
		}
	}
}

// TestExitCodes: one table for every command, and its precedence.
func TestExitCodes(t *testing.T) {
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "no-such-credentials.json"))
	t.Setenv("PUBSUB_EMULATOR_HOST", "")
	failing, err := tpufake.ReadFleetFile(fleetFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := tpufake.New(failing)
	defer srv.Close()
	srv.Fail(tpufake.FailRule{RPC: "nodes.get", Name: healthyNode, Code: 503, Status: "UNAVAILABLE"})
	garbage := filepath.Join(t.TempDir(), "garbage.txt")
	if err := os.WriteFile(garbage, []byte("hello\nnot a log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A second recreate in us-central2-b trips a breaker of 1: v4-16-repairing
	// is recreated at once with --stuck-grace 0.
	trip := []string{"--breaker", "1/1h", "--stuck-grace", "0s"}
	for _, tt := range []struct {
		name string
		args []string
		want int
	}{
		{"done", []string{"replay", "--fleet", fleetFile, incidentFile}, exitOK},
		{"bad flag", []string{"replay", "--bogus", incidentFile}, exitUsage},
		{"unreadable file", []string{"replay", "--fleet", fleetFile, "no-such-file.json"}, exitUsage},
		{"replay without credentials", []string{"replay", incidentFile}, exitUsage},
		{"sweep without credentials", []string{"sweep", "--projects", "acme-ml", "--zones", "us-central2-b"}, exitUsage},
		{"publish without credentials", []string{"publish", "--topic", "projects/p/topics/t", incidentFile}, exitUsage},
		{"no entry in the bytes", []string{"replay", "--fleet", fleetFile, garbage}, exitNoEntries},
		{"transient failure", []string{"replay", "--tpu-endpoint", srv.URL(), incidentFile}, exitTransient},
		{"breaker trip needs a person", append([]string{"replay", "--fleet", fleetFile}, append(trip, incidentFile)...), exitNeedsPerson},
		{"sweep breaker trip", append([]string{"sweep", "--fleet", fleetFile, "--projects", "acme-ml", "--zones", "us-central2-b"}, trip...), exitNeedsPerson},
		{"--strict rejects", []string{"replay", "--fleet", fleetFile, "--strict", incidentFile}, exitRejects},
		{"a trip outranks --strict rejects", append([]string{"replay", "--fleet", fleetFile, "--strict"}, append(trip, incidentFile)...), exitNeedsPerson},
		{"no entry outranks --strict", []string{"replay", "--fleet", fleetFile, "--strict", garbage}, exitNoEntries},
		{"usage outranks everything", []string{"replay", "--fleet", fleetFile, "--strict", "--clock", "sideways", garbage}, exitUsage},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, nil, tt.args...)
			if got := exitCode(r.err, io.Discard); got != tt.want {
				t.Errorf("autoheal %s: exit %d (%v), want %d\n%s", strings.Join(tt.args, " "), got, r.err, tt.want, r.stdout)
			}
			if tt.want == exitUsage && strings.Contains(r.stdout, "TIME ") {
				t.Errorf("a usage or setup error after work began:\n%s", r.stdout)
			}
			if tt.want != exitUsage && strings.HasPrefix(tt.args[0], "replay") {
				// The JSON summary says the same code.
				js := runCLI(t, nil, append([]string{tt.args[0], "--format", "json"}, tt.args[1:]...)...)
				if _, sum := parseOutput(t, js.stdout); sum.ExitCode != tt.want {
					t.Errorf("JSON summary exitCode %d, want %d", sum.ExitCode, tt.want)
				}
			}
		})
	}
}

func TestExitPrecedence(t *testing.T) {
	all := map[int]string{exitUsage: "u", exitNoEntries: "n", exitTransient: "t", exitNeedsPerson: "p", exitRejects: "r"}
	for _, want := range []int{exitUsage, exitNoEntries, exitTransient, exitNeedsPerson, exitRejects} {
		if got := exitCodeOf(firstExit(all), nil); got != want {
			t.Errorf("with %v: exit %d, want %d", all, got, want)
		}
		delete(all, want)
	}
	if err := firstExit(all); err != nil {
		t.Errorf("nothing applies: %v, want nil (exit 0)", err)
	}
}

// TestJSONHasOneNamingStyle: every key of every JSON output is camelCase,
// and no list is null.
func TestJSONHasOneNamingStyle(t *testing.T) {
	m := ledger.NewMemory()
	withLedger(t, m)
	if _, err := runLedgerCmd(t, "pause", "--project", "proj-a", "--reason", "INC-1", "--by", "a", "--ledger-project", "host-proj"); err != nil {
		t.Fatal(err)
	}
	empty, err := runLedgerCmd(t, "status", "--format", "json", "--ledger-project", "host-proj")
	if err != nil {
		t.Fatal(err)
	}
	camel := regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if !camel.MatchString(k) && !strings.HasSuffix(path, ".actions") && !strings.HasSuffix(path, ".rejects") && !strings.HasSuffix(path, ".wouldActions") {
					t.Errorf("%s: key %q is not camelCase", path, k)
				}
				walk(path+"."+k, e)
			}
		case []any:
			for _, e := range x {
				walk(path+"[]", e)
			}
		case nil:
			if strings.HasSuffix(path, "s") && !strings.HasSuffix(path, "Seconds") && !strings.HasSuffix(path, "progress") {
				t.Errorf("%s is null; a list is [] when empty", path)
			}
		}
	}
	var v any
	if err := json.Unmarshal([]byte(empty), &v); err != nil {
		t.Fatal(err)
	}
	walk("status", v)
	for _, k := range []string{"holds", "openBreakers", "unfinished"} {
		if l, ok := v.(map[string]any)[k].([]any); !ok || len(l) != 0 {
			t.Errorf("status %s = %v; want []", k, v.(map[string]any)[k])
		}
	}
	r := runCLI(t, nil, "replay", "--format", "json", "--fleet", fleetFile, incidentFile)
	for i, raw := range jsonObjects(t, r.stdout) {
		var o any
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatal(err)
		}
		walk("replay["+string(rune('0'+i%10))+"]", o)
	}
}
