package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

const (
	trainerA = "projects/acme-ml/zones/us-central1-c/instances/trainer-a"
	web1     = "projects/acme-ml/zones/us-central1-c/instances/web-1"
)

// brokenInstances is the simulated Compute Engine of its testdata fleet
// (among them the TPU7x trainer-a, opted in, automaticRestart off so no
// restart grace applies, and the ordinary n2 VM web-1), both broken by a host
// error ten minutes ago (both TERMINATED), and the two real-shaped hostError
// entries as JSON Lines. The caller closes the server.
func brokenInstances(t *testing.T) (*computefake.Server, string) {
	t.Helper()
	f, err := computefake.ReadFleetFile("../../internal/computefake/testdata/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range f.Instances {
		if in.Name == "trainer-a" {
			off := false
			in.Scheduling.AutomaticRestart = &off
		}
	}
	at := time.Now().Add(-10 * time.Minute)
	srv := computefake.New(f, computefake.WithClock(func() time.Time { return at }))
	var entries []string
	for _, name := range []string{trainerA, web1} {
		e, err := srv.HostError(name)
		if err != nil {
			srv.Close()
			t.Fatal(err)
		}
		entries = append(entries, string(e.JSON()))
	}
	return srv, strings.Join(entries, "\n") + "\n"
}

// instanceReplayInputs writes a combined fleet file of brokenInstances'
// fleet as it is after the host errors (combinedFleet) and the hostError
// entries. It returns the fleet file and the entries file.
func instanceReplayInputs(t *testing.T) (fleetPath, entriesPath string) {
	t.Helper()
	srv, entries := brokenInstances(t)
	defer srv.Close()
	fleetPath = combinedFleet(t, srv)
	entriesPath = filepath.Join(t.TempDir(), "entries.jsonl")
	if err := os.WriteFile(entriesPath, []byte(entries), 0o600); err != nil {
		t.Fatal(err)
	}
	return fleetPath, entriesPath
}

// combinedFleet writes a fleet file {"nodes": [...], "instances": [...]}:
// the TPU fleet's first node beside srv's fleet as it is now. It returns its
// path.
func combinedFleet(t *testing.T, srv *computefake.Server) string {
	t.Helper()
	var buf bytes.Buffer
	if err := srv.Fleet().Write(&buf); err != nil {
		t.Fatal(err)
	}
	combined := map[string]json.RawMessage{}
	if bytes.HasPrefix(bytes.TrimSpace(buf.Bytes()), []byte("[")) {
		combined["instances"] = buf.Bytes()
	} else if err := json.Unmarshal(buf.Bytes(), &combined); err != nil {
		t.Fatal(err)
	}
	combined["nodes"] = oneNode(t)
	data, err := json.Marshal(combined)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "fleet.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// oneNode is the first node of testdata/fleet.json as a JSON array (the TPU
// fake refuses a fleet without nodes).
func oneNode(t *testing.T) json.RawMessage {
	t.Helper()
	data, err := os.ReadFile(fleetFile)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []json.RawMessage
	if err := json.Unmarshal(data, &nodes); err != nil || len(nodes) == 0 {
		t.Fatalf("%s: want a JSON array of nodes: %v", fleetFile, err)
	}
	out, _ := json.Marshal(nodes[:1])
	return out
}

// byNode indexes replay's decision lines by node.
func byNode(t *testing.T, stdout string) map[string]line {
	t.Helper()
	got := map[string]line{}
	for _, l := range parseLines(t, stdout) {
		got[l.Node] = l
	}
	return got
}

// checkInstanceLines checks the decisions about the two host errors: start
// for the opted-in TPU7x VM (in a dry run skip, saying it would start, as a
// node's would-be recreate is said), record for the ordinary VM, saying why.
func checkInstanceLines(t *testing.T, stdout string, dryRun bool) {
	t.Helper()
	got := byNode(t, stdout)
	tr := got[trainerA]
	wantAction, wantReason := "start", ""
	if dryRun {
		wantAction, wantReason = "skip", "dry run: would start"
	}
	if tr.Action != wantAction || tr.DryRun != dryRun || !strings.Contains(tr.Reason, wantReason) {
		t.Errorf("trainer-a: action %q dryRun %v (%s), want %s %q dryRun %v\n%s", tr.Action, tr.DryRun, tr.Reason, wantAction, wantReason, dryRun, stdout)
	}
	web := got[web1]
	if web.Action != "record" || !strings.Contains(web.Reason, "not an opted-in Compute Engine TPU VM") {
		t.Errorf("web-1: action %q reason %q, want record, not an opted-in Compute Engine TPU VM\n%s", web.Action, web.Reason, stdout)
	}
}

// Replay feeds compute.instances.* entries through the function's instance
// path against the simulated Compute Engine of a combined fleet file: a host
// error on the opted-in TPU7x VM decides start; the ordinary VM's is
// discarded, saying why.
func TestReplayDecidesInstanceEntries(t *testing.T) {
	fleet, entries := instanceReplayInputs(t)
	for _, tc := range []struct {
		name   string
		args   []string
		dryRun bool
	}{
		{"simulated Compute Engine", nil, false},
		{"dry run", []string{"--dry-run"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"replay", "--fleet", fleet, "--format", "json"}, tc.args...)
			r := runCLI(t, nil, append(args, entries)...)
			if r.err != nil {
				t.Fatalf("replay: %v\nstderr:\n%s", r.err, r.stderr)
			}
			checkInstanceLines(t, r.stdout, tc.dryRun)
		})
	}
}

// End to end through the CLI: replay --tpu-endpoint --compute-endpoint
// --apply against a simulated Compute Engine makes exactly one
// instances.start, of the opted-in VM, as the function does; without --apply
// it decides the same and calls nothing that changes an instance.
func TestReplayStartsInstanceThroughComputeEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name       string
		apply      bool
		wantStarts int
	}{
		{"with --apply", true, 1},
		{"read-only", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			csrv, entries := brokenInstances(t)
			defer csrv.Close()
			path := filepath.Join(t.TempDir(), "entries.jsonl")
			if err := os.WriteFile(path, []byte(entries), 0o600); err != nil {
				t.Fatal(err)
			}
			fleet, err := tpufake.ReadFleet(bytes.NewReader(oneNode(t)))
			if err != nil {
				t.Fatal(err)
			}
			tsrv := tpufake.New(fleet)
			defer tsrv.Close()
			args := []string{"replay", "--tpu-endpoint", tsrv.URL(), "--compute-endpoint", csrv.URL(), "--format", "json"}
			if tc.apply {
				args = append(args, "--apply")
			}
			r := runCLI(t, nil, append(args, path)...)
			if r.err != nil {
				t.Fatalf("replay: %v\nstderr:\n%s", r.err, r.stderr)
			}
			checkInstanceLines(t, r.stdout, !tc.apply)
			if got := csrv.Count("instances.start", ""); got != tc.wantStarts {
				t.Errorf("instances.start calls = %d, want %d\n%s", got, tc.wantStarts, r.stdout)
			}
			if got := csrv.Count("instances.start", trainerA); got != tc.wantStarts {
				t.Errorf("instances.start of trainer-a = %d, want %d", got, tc.wantStarts)
			}
			for _, m := range []string{"instances.insert", "instances.delete", "instances.stop"} {
				if got := csrv.Count(m, ""); got != 0 {
					t.Errorf("%s calls = %d, want 0", m, got)
				}
			}
		})
	}
}

// Without a Compute Engine to look at (a TPU-only fleet file), instance
// entries are skipped, saying what to give; the TPU-only fleet still loads.
func TestReplayWithoutComputeEngineSkipsInstanceEntries(t *testing.T) {
	_, entries := instanceReplayInputs(t)
	r := runCLI(t, nil, "replay", "--fleet", fleetFile, "--format", "json", entries)
	if r.err != nil {
		t.Fatalf("replay: %v\nstderr:\n%s", r.err, r.stderr)
	}
	ls := parseLines(t, r.stdout)
	if len(ls) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(ls), r.stdout)
	}
	for _, l := range ls {
		if l.Action != "skip" || !strings.Contains(l.Reason, "--compute-endpoint") {
			t.Errorf("%s: action %q reason %q, want skip naming --compute-endpoint", l.Node, l.Action, l.Reason)
		}
	}
}

// A combined fleet file whose instances are malformed is an error naming
// the field, not a TPU-only fleet with its instances silently dropped.
func TestReplayFleetWithBadInstancesIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.json")
	data := `{"nodes": ` + string(oneNode(t)) + `, "instances": [{"name": "vm-1", "zone": 7}]}`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, strings.NewReader(""), "replay", "--fleet", path, "-")
	if r.err == nil || !strings.Contains(r.err.Error(), "--fleet") || !strings.Contains(r.err.Error(), "instances[0]") {
		t.Errorf("err = %v, want one naming --fleet and instances[0]", r.err)
	}
	if code := exitCodeOf(r.err, nil); code != exitUsage {
		t.Errorf("exit %d, want %d (usage)", code, exitUsage)
	}
}

func TestReplayComputeEndpointFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"with --fleet", []string{"--fleet", fleetFile, "--compute-endpoint", "http://127.0.0.1:1"}, "--compute-endpoint and --fleet"},
		{"bad URL", []string{"--tpu-endpoint", "http://127.0.0.1:1", "--compute-endpoint", "ftp://x"}, "--compute-endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, nil, append(append([]string{"replay"}, tc.args...), "-")...)
			if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Errorf("err = %v, want one naming %q", r.err, tc.want)
			}
		})
	}
}
