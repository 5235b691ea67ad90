package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// noticeFleet is the simulated Compute Engine of its testdata fleet with a
// maintenance notice, PENDING, on the TPU7x trainer-a (its window two hours
// from now). The caller closes it.
func noticeFleet(t *testing.T) *computefake.Server {
	t.Helper()
	f, err := computefake.ReadFleetFile("../../internal/computefake/testdata/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	srv := computefake.New(f)
	start := time.Now().Add(2 * time.Hour)
	if _, err := srv.ScheduleMaintenance(trainerA, computefake.Maintenance{WindowStart: start, WindowEnd: start.Add(2 * time.Hour)}); err != nil {
		srv.Close()
		t.Fatal(err)
	}
	return srv
}

// oneNodeTPU is a simulated TPU API of testdata/fleet.json's first node.
func oneNodeTPU(t *testing.T) *tpufake.Server {
	t.Helper()
	fleet, err := tpufake.ReadFleet(bytes.NewReader(oneNode(t)))
	if err != nil {
		t.Fatal(err)
	}
	srv := tpufake.New(fleet)
	t.Cleanup(srv.Close)
	return srv
}

// summaryOf is the summary object of JSON output.
func summaryOf(t *testing.T, stdout string) summary {
	t.Helper()
	for _, raw := range jsonObjects(t, stdout) {
		if kindOf(t, raw) == kindSummary {
			var s summary
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	t.Fatalf("no summary in\n%s", stdout)
	return summary{}
}

// checkInstanceSweep checks what the sweep of us-central1-c says of the
// testdata fleet's instances: trainer-a's notice is prepared (in a dry run:
// would be), alice's stop is held, the n2 VM is not a TPU VM (no line), the
// 4-VM MIG slice is one line, and the summary counts 8 slices of 11 opted-in
// TPU instances (none of them counted as nodes).
func checkInstanceSweep(t *testing.T, stdout string, dryRun bool) {
	t.Helper()
	got := byNode(t, stdout)
	tr := got[trainerA]
	wantAction, wantReason := "prepare", ""
	if dryRun {
		wantAction, wantReason = "skip", "would prepare"
	}
	if tr.Action != wantAction || !strings.Contains(tr.Reason, wantReason) {
		t.Errorf("trainer-a: %s (%s), want %s %q\n%s", tr.Action, tr.Reason, wantAction, wantReason, stdout)
	}
	if a := got["projects/acme-ml/zones/us-central1-c/instances/stopped-by-alice"].Action; a != "held" {
		t.Errorf("stopped-by-alice: action %q, want held", a)
	}
	if _, ok := got[web1]; ok {
		t.Errorf("web-1, an n2 VM, has a line:\n%s", stdout)
	}
	slice := 0
	for n := range got {
		if strings.Contains(n, "slice-mig") {
			slice++
		}
	}
	if slice != 1 {
		t.Errorf("%d lines about the 4-VM slice-mig, want 1 (one slice, decided once)\n%s", slice, stdout)
	}
	sum := summaryOf(t, stdout)
	note := strings.Join(sum.Notes, "\n")
	if !strings.Contains(note, "instance slices: 8 (acme-ml/us-central1-c 11 opted-in TPU instances)") {
		t.Errorf("summary notes %q, want instance slices: 8 (acme-ml/us-central1-c 11 opted-in TPU instances)", note)
	}
	if sum.Count != 0 {
		t.Errorf("summary counts %d nodes, want 0 (us-central1-c has none; slices are not nodes)", sum.Count)
	}
}

// sweep over Compute Engine TPU VMs, end to end through the CLI against a
// simulated Compute Engine at --compute-endpoint: with --apply the notice is
// prepared with exactly one instances.setMetadata on trainer-a; read-only
// nothing is written.
func TestSweepListsInstancesThroughComputeEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name    string
		apply   bool
		wantSet int
	}{
		{"with --apply", true, 1},
		{"read-only", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			csrv := noticeFleet(t)
			defer csrv.Close()
			tsrv := oneNodeTPU(t)
			args := []string{"sweep", "--tpu-endpoint", tsrv.URL(), "--compute-endpoint", csrv.URL(), "--projects", "acme-ml", "--zones", "us-central1-c", "--format", "json"}
			if tc.apply {
				args = append(args, "--apply")
			}
			r := runCLI(t, nil, args...)
			if r.err != nil {
				t.Fatalf("sweep: %v\nstderr:\n%s", r.err, r.stderr)
			}
			checkInstanceSweep(t, r.stdout, !tc.apply)
			if got := csrv.Count("instances.setMetadata", trainerA); got != tc.wantSet {
				t.Errorf("instances.setMetadata of trainer-a = %d, want %d", got, tc.wantSet)
			}
			if got := csrv.Count("instances.setMetadata", ""); got != tc.wantSet {
				t.Errorf("instances.setMetadata = %d, want %d", got, tc.wantSet)
			}
			for _, m := range []string{"instances.start", "instances.insert", "instanceGroupManagers.recreateInstances"} {
				if got := csrv.Count(m, ""); got != 0 {
					t.Errorf("%s calls = %d, want 0", m, got)
				}
			}
			if got := csrv.Count("instances.list", ""); got == 0 {
				t.Errorf("instances.list was not called")
			}
		})
	}
}

// sweep --fleet with a fleet file that holds instances sweeps its
// simulated Compute Engine too, and accepts the instances' zone.
func TestSweepListsFleetFileInstances(t *testing.T) {
	csrv := noticeFleet(t)
	path := combinedFleet(t, csrv)
	csrv.Close()
	r := runCLI(t, nil, "sweep", "--fleet", path, "--projects", "acme-ml", "--zones", "us-central1-c", "--format", "json")
	if r.err != nil {
		t.Fatalf("sweep: %v\nstderr:\n%s", r.err, r.stderr)
	}
	checkInstanceSweep(t, r.stdout, false)

	// The text table names a slice by zone and name, as it names nodes.
	r = runCLI(t, nil, "sweep", "--fleet", path, "--projects", "acme-ml", "--zones", "us-central1-c")
	if r.err != nil {
		t.Fatalf("sweep: %v\nstderr:\n%s", r.err, r.stderr)
	}
	var row string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.Contains(l, " us-central1-c/trainer-a ") {
			row = l
		}
	}
	if !strings.Contains(row, " prepare ") {
		t.Errorf("no text row \"us-central1-c/trainer-a ... prepare\" in\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "\ninstance slices: 8 (acme-ml/us-central1-c 11 opted-in TPU instances)\n") {
		t.Errorf("text summary lacks the instance slices line:\n%s", r.stdout)
	}

	// A zone neither its nodes nor its instances are in is still refused.
	r = runCLI(t, nil, "sweep", "--fleet", path, "--projects", "acme-ml", "--zones", "us-west9-z")
	if r.err == nil || !strings.Contains(r.err.Error(), "--zones us-west9-z") || !strings.Contains(r.err.Error(), "us-central1-c") {
		t.Errorf("err = %v, want --zones us-west9-z refused, naming the fleet's zones", r.err)
	}
}

// Without a Compute Engine (--tpu-endpoint alone; a TPU-only fleet file)
// sweep lists no instances and says nothing of them.
func TestSweepWithoutComputeEngineListsNoInstances(t *testing.T) {
	tsrv := oneNodeTPU(t)
	for _, args := range [][]string{
		{"--tpu-endpoint", tsrv.URL()},
		{"--fleet", fleetFile},
	} {
		r := runCLI(t, nil, append([]string{"sweep", "--projects", "acme-ml", "--zones", "us-central2-b", "--format", "json"}, args...)...)
		if r.err != nil {
			t.Fatalf("sweep %q: %v\nstderr:\n%s", args, r.err, r.stderr)
		}
		for n := range byNode(t, r.stdout) {
			if strings.Contains(n, "/instances/") {
				t.Errorf("sweep %q: a line about instance %s", args, n)
			}
		}
		if note := strings.Join(summaryOf(t, r.stdout).Notes, "\n"); strings.Contains(note, "instance slices") {
			t.Errorf("sweep %q: notes %q speak of instance slices", args, note)
		}
	}
}

// An instance zone that cannot be listed is a transient exit (1) naming
// it, as an unlisted node location is; the nodes are still swept.
func TestSweepInstanceZoneUnlistedExits1(t *testing.T) {
	csrv := noticeFleet(t)
	defer csrv.Close()
	csrv.Fail(computefake.FailRule{Method: "instances.list", Resource: "projects/acme-ml/zones/us-central1-c", Code: 403})
	tsrv := oneNodeTPU(t)
	r := runCLI(t, nil, "sweep", "--tpu-endpoint", tsrv.URL(), "--compute-endpoint", csrv.URL(), "--projects", "acme-ml", "--zones", "us-central1-c,us-central2-b", "--format", "json")
	if got := exitCodeOf(r.err, nil); got != exitTransient {
		t.Fatalf("exit %d (%v), want %d", got, r.err, exitTransient)
	}
	if r.err == nil || !strings.Contains(r.err.Error(), "instance zone(s) or slice(s) could not be read") || !strings.Contains(r.err.Error(), "us-central1-c") {
		t.Errorf("err = %v, want one saying the instances of us-central1-c could not be read", r.err)
	}
	sum := summaryOf(t, r.stdout)
	if note := strings.Join(sum.Notes, "\n"); !strings.Contains(note, "acme-ml/us-central1-c could not be listed") {
		t.Errorf("notes %q, want acme-ml/us-central1-c could not be listed", note)
	}
	if sum.Count != 1 {
		t.Errorf("%d nodes swept, want 1 (the node of us-central2-b)", sum.Count)
	}
}
