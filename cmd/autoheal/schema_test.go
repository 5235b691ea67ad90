package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// schemaDir holds one JSON schema per kind of JSON the CLI prints.
const schemaDir = "../../docs/schema"

// schemas compiles every schema of schemaDir (each checked against the
// JSON Schema meta-schema), by file name.
func schemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(schemaDir, "*.schema.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no schemas in %s: %v", schemaDir, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	ids := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		id, _ := doc.(map[string]any)["$id"].(string)
		if want := "https://github.com/tpu-autoheal/autoheal/docs/schema/" + filepath.Base(f); id != want {
			t.Fatalf("%s: $id %q, want %q", f, id, want)
		}
		if err := c.AddResource(id, doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		ids[filepath.Base(f)] = id
	}
	out := map[string]*jsonschema.Schema{}
	for name, id := range ids {
		s, err := c.Compile(id)
		if err != nil {
			t.Fatalf("schema %s: %v", name, err)
		}
		out[name] = s
	}
	return out
}

// TestJSONOutputMatchesItsSchema runs every command that prints JSON, in
// runs that fill every part of its output (a breaker trip, a dry run, a
// reject, empty and full ledgers), and checks each object against the
// schema of its kind in docs/schema; every schema there is used.
func TestJSONOutputMatchesItsSchema(t *testing.T) {
	sch := schemas(t)
	used := map[string]int{}
	check := func(what, name string, raw []byte) {
		t.Helper()
		s, ok := sch[name]
		if !ok {
			t.Fatalf("%s: no schema %s in %s", what, name, schemaDir)
		}
		used[name]++
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := s.Validate(v); err != nil {
			t.Errorf("%s does not match %s: %v\n%s", what, name, err, raw)
		}
	}
	lines := func(what string, stdout string) {
		t.Helper()
		for _, raw := range jsonObjects(t, stdout) {
			check(what, kindOf(t, raw)+".schema.json", raw)
		}
	}

	// replay: decisions with a reject and warnings, outcomes, a summary.
	r := runCLI(t, nil, "replay", "--format", "json", "--fleet", fleetFile, incidentFile)
	lines("replay", r.stdout)
	// A breaker trip (error, breakerTrips) and --strict (exit code in the summary).
	r = runCLI(t, nil, "replay", "--format", "json", "--strict", "--fleet", fleetFile, "--breaker", "1/1h", "--stuck-grace", "0s", incidentFile)
	lines("replay with a breaker trip", r.stdout)
	// A dry run: wouldActions.
	r = runCLI(t, nil, "replay", "--format", "json", "--dry-run", "--fleet", fleetFile, incidentFile)
	lines("replay --dry-run", r.stdout)
	// sweep, and the demo's JSON (replay's).
	r = runCLI(t, nil, "sweep", "--format", "json", "--fleet", fleetFile, "--projects", "acme-ml", "--zones", "us-central2-b,europe-west4-a")
	lines("sweep", r.stdout)
	r = runCLI(t, nil, "demo", "--format", "json")
	lines("demo", r.stdout)
	// Compute Engine TPU VMs: replayed instance entries (start, a dry-run
	// would-start), and a sweep over instances (held, prepare).
	instFleet, instEntries := instanceReplayInputs(t)
	r = runCLI(t, nil, "replay", "--format", "json", "--fleet", instFleet, instEntries)
	lines("replay of instance entries", r.stdout)
	r = runCLI(t, nil, "replay", "--format", "json", "--dry-run", "--fleet", instFleet, instEntries)
	lines("replay --dry-run of instance entries", r.stdout)
	csrv := noticeFleet(t)
	defer csrv.Close()
	r = runCLI(t, nil, "sweep", "--format", "json", "--tpu-endpoint", oneNodeTPU(t).URL(), "--compute-endpoint", csrv.URL(), "--projects", "acme-ml", "--zones", "us-central1-c", "--apply")
	lines("sweep over instances", r.stdout)

	// report: one incident a line.
	r = runCLI(t, nil, "report", "--format", "json", "../../internal/report/testdata/night.jsonl")
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, raw := range jsonObjects(t, r.stdout) {
		check("report", "report-incident.schema.json", raw)
	}
	// report --format goodput: one job a line, a capacity wait included.
	r = runCLI(t, nil, "report", "--format", "goodput", "../../internal/report/testdata/night.jsonl", "../../internal/report/testdata/stockout.jsonl")
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, raw := range jsonObjects(t, r.stdout) {
		check("report --format goodput", "report-goodput.schema.json", raw)
	}
	r = runCLI(t, nil, "report", "--format", "json", "../../internal/report/testdata/stockout.jsonl")
	for _, raw := range jsonObjects(t, r.stdout) {
		check("report of a capacity wait", "report-incident.schema.json", raw)
	}

	// status: empty, then with a pause, a hold, an open breaker and an
	// unfinished recovery; status --node with and without a history.
	m := ledger.NewMemory()
	withLedger(t, m)
	out, err := runLedgerCmd(t, "status", "--format", "json", "--ledger-project", "host-proj")
	if err != nil {
		t.Fatal(err)
	}
	check("status of an empty ledger", "status.schema.json", []byte(out))
	ctx := context.Background()
	now := time.Now().UTC()
	if err := m.SetHold(ctx, remediate.Hold{Node: cliNodeB, Project: "proj-a", NodeID: 2, Since: now, EventID: "e2", Reason: "terminated by a user"}); err != nil {
		t.Fatal(err)
	}
	rec, err := m.Claim(ctx, claimReq(cliNode, now))
	if err != nil {
		t.Fatal(err)
	}
	rec.Phase, rec.LastError = remediate.PhaseFailed, "create: RESOURCE_EXHAUSTED"
	if err := m.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := m.SetDeferral(ctx, remediate.Deferral{Node: cliNodeB, Due: now.Add(time.Hour), Since: now, Reason: "REPAIRING"}); err != nil {
		t.Fatal(err)
	}
	if _, err := runLedgerCmd(t, "pause", "--zone", "us-central2-b", "--reason", "INC-1", "--by", "alice", "--ledger-project", "host-proj"); err != nil {
		t.Fatal(err)
	}
	out, err = runLedgerCmd(t, "status", "--format", "json", "--breaker", "1/1h", "--ledger-project", "host-proj")
	if err != nil {
		t.Fatal(err)
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Pauses) != 1 || len(rep.Holds) != 1 || len(rep.OpenBreakers) != 1 || len(rep.Unfinished) != 1 {
		t.Fatalf("status does not list one of each (%v):\n%s", err, out)
	}
	check("status", "status.schema.json", []byte(out))
	// Compute Engine slices: one broken, one healthy.
	withInstanceSlices(t, keptSlices(t, now))
	out, err = runLedgerCmd(t, "status", "--format", "json", "--breaker", "1/1h", "--ledger-project", "host-proj")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.InstanceSlices) != 2 {
		t.Fatalf("status does not list the two instance slices (%v):\n%s", err, out)
	}
	check("status with instance slices", "status.schema.json", []byte(out))
	for _, n := range []string{cliNode, cliNodeB, "projects/proj-a/locations/us-central2-b/nodes/never-seen"} {
		out, err = runLedgerCmd(t, "status", "--format", "json", "--node", n, "--ledger-project", "host-proj")
		if err != nil {
			t.Fatal(err)
		}
		check("status --node "+n, "status-node.schema.json", []byte(out))
	}

	files, _ := filepath.Glob(filepath.Join(schemaDir, "*.schema.json"))
	for _, f := range files {
		if used[filepath.Base(f)] == 0 {
			t.Errorf("%s: no output checked against it", f)
		}
	}
	for _, k := range []string{"decision.schema.json", "outcome.schema.json", "summary.schema.json"} {
		if used[k] < 3 {
			t.Errorf("%s checked %d times; want every run above", k, used[k])
		}
	}
}
