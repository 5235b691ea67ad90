package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
)

// instanceReplayInputs writes a fleet file of the simulated Compute Engine's
// testdata fleet (among them the TPU7x trainer-a, opted in, automaticRestart
// off so no restart grace applies, and the ordinary n2 VM web-1), breaks both with a host error on the
// simulated Compute Engine, and writes the fleet as it is then (both
// TERMINATED) and the two real-shaped hostError entries. It returns the
// fleet file and the entries file.
func instanceReplayInputs(t *testing.T) (fleetPath, entriesPath string) {
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
	defer srv.Close()
	var entries []string
	for _, name := range []string{"projects/acme-ml/zones/us-central1-c/instances/trainer-a", "projects/acme-ml/zones/us-central1-c/instances/web-1"} {
		e, err := srv.HostError(name)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, string(e.JSON()))
	}
	dir := t.TempDir()
	fleetPath, entriesPath = filepath.Join(dir, "fleet.json"), filepath.Join(dir, "entries.jsonl")
	out, err := os.Create(fleetPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Fleet().Write(out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(entriesPath, []byte(strings.Join(entries, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return fleetPath, entriesPath
}

// Replay feeds compute.instances.* entries through the function's instance
// path: a host error on the opted-in TPU7x VM decides start; the ordinary
// VM's is discarded, saying why.
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
			got := map[string]line{}
			for _, l := range parseLines(t, r.stdout) {
				got[l.Node] = l
			}
			tr := got["projects/acme-ml/zones/us-central1-c/instances/trainer-a"]
			if tr.Action != "start" || tr.DryRun != tc.dryRun {
				t.Errorf("trainer-a: action %q dryRun %v (%s), want start dryRun %v\n%s", tr.Action, tr.DryRun, tr.Reason, tc.dryRun, r.stdout)
			}
			var web line
			for n, l := range got {
				if strings.HasSuffix(n, "/instances/web-1") {
					web = l
				}
			}
			if web.Action != "record" || !strings.Contains(web.Reason, "not an opted-in Compute Engine TPU VM") {
				t.Errorf("web-1: action %q reason %q, want record, not an opted-in Compute Engine TPU VM\n%s", web.Action, web.Reason, r.stdout)
			}
		})
	}
}

// Without a Compute Engine to look at, instance entries are skipped,
// saying what to give.
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
