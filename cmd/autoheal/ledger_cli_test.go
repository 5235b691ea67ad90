package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

const (
	cliNode  = "projects/proj-a/locations/us-central2-b/nodes/llm-a"
	cliNodeB = "projects/proj-a/locations/us-central2-b/nodes/llm-b"
)

// withLedger makes the ledger commands use store, and counts the opens.
func withLedger(t *testing.T, store ledger.Admin) *int {
	t.Helper()
	opens := 0
	old := openLedger
	openLedger = func(ctx context.Context, project, database string, opts ...ledger.Option) (ledger.Admin, func() error, error) {
		opens++
		if project != "host-proj" || database != "tpu-autoheal" {
			t.Errorf("ledger opened in project %q database %q; want host-proj tpu-autoheal", project, database)
		}
		return store, func() error { return nil }, nil
	}
	t.Cleanup(func() { openLedger = old })
	withInstanceSlices(t, computevm.NewMemory())
	return &opens
}

// withInstanceSlices makes status read the instance slices of store.
func withInstanceSlices(t *testing.T, store instanceSlices) {
	t.Helper()
	old := openInstanceSlices
	openInstanceSlices = func(ctx context.Context, project, database string) (instanceSlices, func() error, error) {
		if project != "host-proj" || database != "tpu-autoheal" {
			t.Errorf("instance slices opened in project %q database %q; want host-proj tpu-autoheal", project, database)
		}
		return store, func() error { return nil }, nil
	}
	t.Cleanup(func() { openInstanceSlices = old })
}

func runLedgerCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return out.String(), err
}

func claimReq(node string, now time.Time) remediate.ClaimRequest {
	project, zone := remediate.NodeProjectZone(node)
	cfg := remediate.DefaultConfig()
	cfg.MaxInFlight = 0
	return remediate.ClaimRequest{Node: node, Project: project, Zone: zone, Holder: "test", Now: now, Action: remediate.ActionRecreate, Config: cfg}
}

func TestPauseStopsClaimsUntilResume(t *testing.T) {
	m := ledger.NewMemory()
	withLedger(t, m)
	ctx := context.Background()
	out, err := runLedgerCmd(t, "pause", "--project", "proj-a", "--reason", "INC-7 zone outage", "--by", "alice", "--ledger-project", "host-proj")
	if err != nil {
		t.Fatalf("pause: %v", err)
	}
	if !strings.Contains(out, "paused project proj-a: INC-7 zone outage (by alice") {
		t.Errorf("pause output = %q; want it to say what was paused and why", out)
	}
	h, err := m.History(ctx, cliNode, "proj-a", "", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if h.Pause == nil || h.Pause.Scope != remediate.PauseProject || h.Pause.By != "alice" || h.Pause.Reason != "INC-7 zone outage" {
		t.Fatalf("History.Pause after autoheal pause = %+v; want alice's project pause", h.Pause)
	}
	if _, err := m.Claim(ctx, claimReq(cliNode, time.Now())); !errors.Is(err, remediate.ErrPaused) {
		t.Errorf("Claim while paused: %v; want ErrPaused", err)
	}
	out, err = runLedgerCmd(t, "status", "--ledger-project", "host-proj")
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if !strings.Contains(out, "pauses: 1\n  project proj-a  by alice since") {
		t.Errorf("status output lacks the pause:\n%s", out)
	}
	out, err = runLedgerCmd(t, "resume", "--project", "proj-a", "--ledger-project", "host-proj")
	if err != nil || !strings.Contains(out, "resumed project proj-a") {
		t.Fatalf("resume = %q, %v; want resumed", out, err)
	}
	if _, err := m.Claim(ctx, claimReq(cliNode, time.Now())); err != nil {
		t.Errorf("Claim after resume: %v; want success", err)
	}
	out, err = runLedgerCmd(t, "resume", "--project", "proj-a", "--ledger-project", "host-proj")
	if err != nil || !strings.Contains(out, "no pause of project proj-a") {
		t.Errorf("second resume = %q, %v; want a note that there was nothing to resume", out, err)
	}
}

func TestPauseScopes(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want remediate.Pause
	}{
		{"node alone", []string{"--node", cliNode}, remediate.Pause{Scope: remediate.PauseNode, Node: cliNode}},
		{"node with agreeing project and zone", []string{"--node", cliNode, "--project", "proj-a", "--zone", "us-central2-b"}, remediate.Pause{Scope: remediate.PauseNode, Node: cliNode}},
		{"zone of every project", []string{"--zone", "us-central2-b"}, remediate.Pause{Scope: remediate.PauseZone, Zone: "us-central2-b"}},
		{"zone of one project", []string{"--zone", "us-central2-b", "--project", "proj-a"}, remediate.Pause{Scope: remediate.PauseZone, Zone: "us-central2-b", Project: "proj-a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := ledger.NewMemory()
			withLedger(t, m)
			args := append([]string{"pause", "--reason", "r", "--by", "bob", "--ledger-project", "host-proj"}, tc.args...)
			if _, err := runLedgerCmd(t, args...); err != nil {
				t.Fatalf("pause: %v", err)
			}
			got, err := m.Pauses(context.Background())
			if err != nil || len(got) != 1 {
				t.Fatalf("Pauses = %v, %v; want one", got, err)
			}
			got[0].Reason, got[0].By, got[0].Since = "", "", time.Time{}
			if diff := cmp.Diff(tc.want, got[0]); diff != "" {
				t.Errorf("pause written (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLedgerCommandUsageErrorsTouchNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"pause with no scope", []string{"pause", "--reason", "r", "--ledger-project", "host-proj"}, "say what"},
		{"pause with no reason", []string{"pause", "--project", "p", "--ledger-project", "host-proj"}, "--reason is required"},
		{"pause of a node in another zone", []string{"pause", "--node", cliNode, "--zone", "europe-west4-a", "--reason", "r", "--ledger-project", "host-proj"}, "--zone europe-west4-a disagrees with --node"},
		{"pause of a node in another project", []string{"pause", "--node", cliNode, "--project", "proj-b", "--reason", "r", "--ledger-project", "host-proj"}, "--project proj-b disagrees with --node"},
		{"pause of a short node name", []string{"pause", "--node", "llm-a", "--reason", "r", "--ledger-project", "host-proj"}, "want projects/P/locations/Z/nodes/N"},
		{"pause of a zone given as a path", []string{"pause", "--zone", "projects/p/locations/z", "--reason", "r", "--ledger-project", "host-proj"}, "bare zone id"},
		{"pause without the ledger project", []string{"pause", "--project", "p", "--reason", "r", "--by", "x"}, "--ledger-project is required"},
		{"resume with no scope", []string{"resume", "--ledger-project", "host-proj"}, "say what"},
		{"status --spec without --node", []string{"status", "--spec", "--ledger-project", "host-proj"}, "--spec needs --node"},
		{"status with a bad breaker", []string{"status", "--breaker", "48", "--ledger-project", "host-proj"}, "LIMIT/WINDOW"},
		{"breaker without subcommand", []string{"breaker", "--zone", "z"}, "missing subcommand"},
		{"breaker with an unknown subcommand", []string{"breaker", "open", "--zone", "z"}, "unknown subcommand"},
		{"breaker reset without zone", []string{"breaker", "reset", "--ledger-project", "host-proj"}, "--zone Z is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opens := withLedger(t, ledger.NewMemory())
			_, err := runLedgerCmd(t, tc.args...)
			var u *usageError
			if !errors.As(err, &u) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v; want a usage error containing %q", err, tc.want)
			}
			if *opens != 0 {
				t.Errorf("the ledger was opened %d times for a bad command line; want 0", *opens)
			}
		})
	}
}

func TestStatusListsHoldsBreakersAndUnfinished(t *testing.T) {
	m := ledger.NewMemory()
	withLedger(t, m)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	fresh := remediate.Hold{Node: cliNode, Project: "proj-a", NodeID: 1, Since: now.Add(-time.Hour), EventID: "e1", Reason: "terminated by a user"}
	forged := remediate.Hold{Node: cliNodeB, Project: "proj-a", NodeID: 2, Since: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), EventID: "e2", Reason: "terminated by a user"}
	for _, h := range []remediate.Hold{fresh, forged} {
		if err := m.SetHold(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	// Two starts in zone europe-west4-a with a limit of 2 open its breaker.
	for _, n := range []string{"projects/proj-a/locations/europe-west4-a/nodes/x", "projects/proj-a/locations/europe-west4-a/nodes/y"} {
		r, err := m.Claim(ctx, claimReq(n, now))
		if err != nil {
			t.Fatal(err)
		}
		r.Phase, r.LastError = remediate.PhaseFailed, "create: RESOURCE_EXHAUSTED"
		if err := m.Update(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	before := time.Now()
	out, err := runLedgerCmd(t, "status", "--format", "json", "--breaker", "2/1h", "--ledger-project", "host-proj")
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	after := time.Now()
	var rep statusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("status JSON: %v\n%s", err, out)
	}
	if len(rep.Holds) != 2 {
		t.Fatalf("holds = %+v; want 2", rep.Holds)
	}
	// A hold dated 9999 is listed as expired now.
	if e := rep.Holds[1].Expires; e.Before(before) || e.After(after) {
		t.Errorf("expiry of the forged hold = %v; want the time of the status call", e)
	}
	wantHolds := []statusHold{
		{Node: cliNode, NodeID: 1, Since: fresh.Since, Expires: fresh.Since.Add(remediate.DefaultHoldTTL), EventID: "e1", Reason: fresh.Reason},
		{Node: cliNodeB, NodeID: 2, Since: forged.Since, Expires: rep.Holds[1].Expires, Expired: true, EventID: "e2", Reason: forged.Reason},
	}
	if diff := cmp.Diff(wantHolds, rep.Holds); diff != "" {
		t.Errorf("holds (-want +got):\n%s", diff)
	}
	wantBreakers := []statusBreaker{{Zone: "europe-west4-a", Started: 2, Limit: 2, Window: "1h", Until: now.Add(time.Hour)}}
	if diff := cmp.Diff(wantBreakers, rep.OpenBreakers); diff != "" {
		t.Errorf("open breakers (-want +got):\n%s", diff)
	}
	if len(rep.Unfinished) != 2 || rep.Unfinished[0].Phase != "failed" || rep.Unfinished[0].LastError != "create: RESOURCE_EXHAUSTED" {
		t.Errorf("unfinished = %+v; want the two failed recoveries", rep.Unfinished)
	}
	// With the default breaker (48/1h) the zone is not open.
	out, err = runLedgerCmd(t, "status", "--ledger-project", "host-proj")
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	for _, want := range []string{"open breakers: 0", "holds: 2", "EXPIRED ", "unfinished recoveries: 2", "RESOURCE_EXHAUSTED"} {
		if !strings.Contains(out, want) {
			t.Errorf("status text lacks %q:\n%s", want, out)
		}
	}
}

func TestBreakerResetClosesAnOpenBreaker(t *testing.T) {
	m := ledger.NewMemory()
	withLedger(t, m)
	ctx := context.Background()
	now := time.Now()
	req := func(n string) remediate.ClaimRequest {
		r := claimReq(n, now)
		r.Config.BreakerLimit = 1
		return r
	}
	if _, err := m.Claim(ctx, req(cliNode)); err != nil {
		t.Fatal(err)
	}
	var open *remediate.BreakerOpenError
	if _, err := m.Claim(ctx, req(cliNodeB)); !errors.As(err, &open) {
		t.Fatalf("second claim with limit 1: %v; want the breaker open", err)
	}
	out, err := runLedgerCmd(t, "breaker", "reset", "--zone", "us-central2-b", "--ledger-project", "host-proj")
	if err != nil || !strings.Contains(out, "breaker of zone us-central2-b reset") {
		t.Fatalf("breaker reset = %q, %v", out, err)
	}
	if _, err := m.Claim(ctx, req(cliNodeB)); err != nil {
		t.Errorf("claim after breaker reset: %v; want success", err)
	}
}

func TestStatusNodeSpecPrintsTheSavedSpec(t *testing.T) {
	m := ledger.NewMemory()
	withLedger(t, m)
	ctx := context.Background()
	spec := &tpu.Node{
		AcceleratorType: "v5p-128", RuntimeVersion: "v2-alpha-tpuv5",
		Labels:   map[string]string{"tpu-autoheal": "enabled"},
		Metadata: map[string]string{"startup-script": "#!/bin/bash\necho resume"},
	}
	r, err := m.Claim(ctx, claimReq(cliNode, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	r.Phase, r.Spec = remediate.PhaseSaved, spec
	if err := m.Update(ctx, r); err != nil {
		t.Fatal(err)
	}
	out, err := runLedgerCmd(t, "status", "--node", cliNode, "--spec", "--ledger-project", "host-proj")
	if err != nil {
		t.Fatalf("status --spec: %v", err)
	}
	var got tpu.Node
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("status --spec output is not a node's JSON: %v\n%s", err, out)
	}
	if diff := cmp.Diff(spec, &got); diff != "" {
		t.Errorf("printed spec (-saved +printed):\n%s", diff)
	}
	if _, err := runLedgerCmd(t, "status", "--node", cliNodeB, "--spec", "--ledger-project", "host-proj"); err == nil || !strings.Contains(err.Error(), "no saved spec") {
		t.Errorf("status --spec of a node with no saved spec: %v; want an error saying so", err)
	}
	out, err = runLedgerCmd(t, "status", "--node", cliNode, "--ledger-project", "host-proj")
	if err != nil || !strings.Contains(out, "recovery: recreate gen 1 saved") {
		t.Errorf("status --node = %q, %v; want the recovery", out, err)
	}
}

// A node a pause leaves deleted (its recovery sent the delete) is what a
// person must see first: status lists it first and marks it.
func TestStatusListsPausedDeletedNodesFirst(t *testing.T) {
	m := ledger.NewMemory()
	withLedger(t, m)
	ctx := context.Background()
	now := time.Now()
	// llm-a sorts first but is only claimed; llm-b sent its delete.
	if _, err := m.Claim(ctx, claimReq(cliNode, now)); err != nil {
		t.Fatal(err)
	}
	rec, err := m.Claim(ctx, claimReq(cliNodeB, now))
	if err != nil {
		t.Fatal(err)
	}
	rec.Phase, rec.DeleteSent = remediate.PhaseDeleting, true
	if err := m.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := runLedgerCmd(t, "pause", "--project", "proj-a", "--reason", "INC-9", "--by", "alice", "--ledger-project", "host-proj"); err != nil {
		t.Fatal(err)
	}
	rep := statusJSON(t)
	var got []string
	for _, r := range rep.Unfinished {
		got = append(got, fmt.Sprintf("%s %v", r.Node, r.DeletedWhilePaused))
	}
	want := []string{cliNodeB + " true", cliNode + " false"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unfinished (-want +got):\n%s", diff)
	}
	text, err := runLedgerCmd(t, "status", "--ledger-project", "host-proj")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "DELETED WHILE PAUSED") {
		t.Errorf("status text does not mark the paused, deleted node:\n%s", text)
	}
}
