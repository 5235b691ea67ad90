package terraform_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/logging"
	"github.com/google/go-cmp/cmp"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	tpu "google.golang.org/api/tpu/v2"
	"google.golang.org/genproto/googleapis/api/monitoredres"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/loggingfake"
	"github.com/tpu-autoheal/autoheal/internal/record"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/seal"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

const (
	metricsProject = "acme-ml"
	nodeZone       = "us-central2-b"
	vmZone         = "us-central1-c" // the zone of computefake's fleet file
)

var metricsEpoch = time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)

// settable is a virtual clock: read by the code under test, moved by the
// test (never back).
type settable struct {
	mu sync.Mutex
	t  time.Time
}

func (c *settable) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *settable) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.t) {
		c.t = t
	}
}
func (c *settable) add(d time.Duration) { c.set(c.now().Add(d)) }

// writtenRecords runs both paths of the function over the fakes, each
// record written by record.Logging (the function's recorder) to the
// in-process Cloud Logging, and returns the entries as Cloud Logging holds
// them (LogEntry JSON: logName, severity, labels, jsonPayload):
//   - a TPU node TERMINATED by maintenance, recreated (the delivery and
//     the looks that finish it);
//   - a standalone TPU7x VM's host error → start;
//   - a Spot VM deleted by preemption → recreate (insert from the saved
//     spec);
//   - a stuck MIG's VM → record, then recreateInstances past the grace;
//   - a 4-VM slice's maintenance notice → prepare.
func writtenRecords(t *testing.T) []map[string]any {
	t.Helper()
	ctx := context.Background()
	fake, err := loggingfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	client, err := logging.NewClient(ctx, metricsProject, fake.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	rec := record.NewLogging(ctx, client, record.WithLoggerOptions(logging.CommonResource(&monitoredres.MonitoredResource{Type: "cloud_run_revision"})))

	nodeRecords(t, rec)
	instanceRecords(t, rec)

	var out []map[string]any
	for _, e := range fake.Entries() {
		b, err := protojson.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// nodeRecords recreates one TERMINATED TPU node through remediate's
// engine, as the function does, to the end.
func nodeRecords(t *testing.T, rec remediate.Recorder) {
	t.Helper()
	ctx := context.Background()
	clk := &settable{t: metricsEpoch}
	name := "projects/" + metricsProject + "/locations/" + nodeZone + "/nodes/llm-v4-8"
	tf := tpufake.New(tpufake.Fleet{Nodes: []*tpu.Node{{
		Name: name, AcceleratorType: "v4-8", RuntimeVersion: "tpu-ubuntu2204-base", State: "TERMINATED",
		Labels: map[string]string{"tpu-autoheal": "enabled"},
	}}})
	t.Cleanup(tf.Close)
	svc, err := tf.Service(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := remediate.DefaultConfig()
	cfg.StartupScript = "#!/bin/bash\nexec /opt/resume-training\n"
	h, err := remediate.New(remediate.Deps{
		TPU: tpuapi.New(svc), Recorder: rec, Clock: clk.now, Holder: "test",
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}.WithLedger(ledger.NewMemory(ledger.WithClock(clk.now))), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.Handle(ctx, events.Event{
		InsertID: "e1", Time: metricsEpoch.Add(-time.Minute), Method: events.MethodTerminate,
		Node:  events.NodeRef{Project: metricsProject, Zone: nodeZone, Node: "llm-v4-8"},
		Cause: events.CauseMaintenance,
	})
	if err != nil || r.Action != remediate.ActionRecreate {
		t.Fatalf("the terminated node: %s, %v; want recreate", r.Action, err)
	}
	if left, err := h.Drain(ctx, clk.set, 60); err != nil || left != 0 {
		t.Fatalf("Drain: %d unfinished, %v", left, err)
	}
}

// instanceRecords runs the instance path over the simulated Compute
// Engine, as the function does.
func instanceRecords(t *testing.T, rec remediate.Recorder) {
	t.Helper()
	ctx := context.Background()
	f, err := computefake.ReadFleetFile(filepath.Join(repoRoot(t), "internal", "computefake", "testdata", "fleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	clk := &settable{t: metricsEpoch}
	cf := computefake.New(f, computefake.WithClock(clk.now))
	t.Cleanup(cf.Close)
	client, err := computevm.NewFromOptions(ctx, cf.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	l := ledger.NewMemory(ledger.WithClock(clk.now))
	r := &computevm.Recovery{
		Compute: client, Store: computevm.NewMemory(), Ledger: l, Recorder: rec,
		Config: remediate.DefaultConfig(), Policy: vmpolicy.DefaultConfig(), Holder: "test", Now: clk.now,
		Sealer: seal.RandomLocalKeys(),
	}
	vm := func(i string) string { return computefake.InstanceName(metricsProject, vmZone, i) }
	sweep := func() {
		t.Helper()
		res, err := r.Sweep(ctx, []string{metricsProject}, []string{vmZone})
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("Sweep: %v %v", err, res.Errors)
		}
	}
	deliver := func(entry computefake.LogEntry, want string) {
		t.Helper()
		ev, err := events.Parse(entry.JSON(), events.Options{})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := r.HandleEvent(ctx, ev)
		if err != nil || len(recs) == 0 || string(recs[len(recs)-1].Action) != want {
			t.Fatalf("HandleEvent(%s): %v, %v; want %s", ev.Method, recs, err, want)
		}
	}
	if err := cf.SetMIGStuck(computefake.MIGName(metricsProject, vmZone, "serve-mig"), true); err != nil {
		t.Fatal(err)
	}
	sweep() // saves every spec

	entry, err := cf.HostError(vm("reserved-1"))
	if err != nil {
		t.Fatal(err)
	}
	deliver(entry, string(vmpolicy.ActionStart))

	if entry, err = cf.Preempt(vm("spot-delete")); err != nil {
		t.Fatal(err)
	}
	deliver(entry, string(vmpolicy.ActionRecreate))

	if entry, err = cf.HostError(vm("serve-mig-a1b2")); err != nil {
		t.Fatal(err)
	}
	deliver(entry, string(vmpolicy.ActionRecord))
	clk.add(vmpolicy.DefaultConfig().StuckGrace + time.Minute)
	sweep() // past the stuck grace: recreateInstances

	window := clk.now().Add(7 * 24 * time.Hour)
	notices, err := cf.ScheduleMaintenance(vm("slice-mig-w0"), computefake.Maintenance{WindowStart: window, WindowEnd: window.Add(4 * time.Hour), CanReschedule: true})
	if err != nil || len(notices) == 0 {
		t.Fatalf("ScheduleMaintenance: %d notices, %v", len(notices), err)
	}
	deliver(notices[0], string(vmpolicy.ActionPrepare))
}

// moduleMetrics is every google_logging_metric of the module: its name
// (the resource name) → its filter, evaluated as Terraform would with
// project_id acme-ml and the default name.
func moduleMetrics(t *testing.T, m *module) map[string]logFilter {
	t.Helper()
	ctx := m.evalContext(t, map[string]cty.Value{"project_id": cty.StringVal(metricsProject)})
	out := map[string]logFilter{}
	for key, b := range m.resources {
		name, ok := strings.CutPrefix(key, "google_logging_metric.")
		if !ok {
			continue
		}
		src := evalString(t, ctx, attr(t, b, "filter").Expr)
		f, err := parseLogFilter(src)
		if err != nil {
			t.Fatalf("metric %s's filter is not understood by the test's evaluator: %v\n%s", name, err, src)
		}
		out[name] = f
	}
	if len(out) < 10 {
		t.Fatalf("%d log-based metrics in the module; the reading no longer finds them", len(out))
	}
	return out
}

// countedIn is the sorted names of the metrics whose filter matches e.
func countedIn(metrics map[string]logFilter, e map[string]any) []string {
	var out []string
	for name, f := range metrics {
		if f.match(e) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func payloadString(e map[string]any, key string) string {
	p, _ := e["jsonPayload"].(map[string]any)
	s, _ := p[key].(string)
	return s
}

// TestMetricsCountTheRecordsOfTheirPath evaluates every metric's filter
// against the records the function writes: a TPU node's recreate counts in
// the recovery metrics and never in instance_actions; a Compute Engine
// instance's start, recreate, recreateInstances and prepare count in
// instance_actions and never in the node recovery metrics (recreate is a
// word of both paths).
func TestMetricsCountTheRecordsOfTheirPath(t *testing.T) {
	metrics := moduleMetrics(t, loadModule(t, "."))
	entries := writtenRecords(t)
	nodeName := "projects/" + metricsProject + "/locations/" + nodeZone + "/nodes/llm-v4-8"

	// Every record: which metrics it counts in, keyed by node and action
	// (the node's recreate records, in order: the delivery that deleted,
	// the look that created, the look that saw it READY).
	got := map[string][][]string{}
	for _, e := range entries {
		k := payloadString(e, "node") + " " + payloadString(e, "action")
		got[k] = append(got[k], countedIn(metrics, e))
	}
	vm := func(i string) string { return computefake.InstanceName(metricsProject, vmZone, i) }
	mig := computefake.MIGName(metricsProject, vmZone, "slice-mig")
	want := map[string][][]string{
		nodeName + " recreate": {
			{"recoveries_started"},
			{"create_attempts", "recoveries_started"},
			{"outcomes", "recoveries_finished", "recoveries_started", "time_to_recover"},
		},
		vm("reserved-1") + " start":                 {{"instance_actions"}},
		vm("spot-delete") + " recreate":             {{"instance_actions"}},
		vm("serve-mig-a1b2") + " recreateInstances": {{"instance_actions"}},
		mig + " prepare":                            {{"instance_actions", "outcomes"}},
	}
	for k, w := range want {
		if diff := cmp.Diff(w, got[k]); diff != "" {
			t.Errorf("records of %s count in (-want +got):\n%s", k, diff)
		}
	}
	// No other record of the instance path counts in a node metric or in
	// instance_actions (record, defer and skip are not calls).
	for k, counts := range got {
		if _, ok := want[k]; ok {
			continue
		}
		for _, c := range counts {
			for _, name := range c {
				if strings.HasPrefix(name, "recoveries_") || name == "instance_actions" || name == "create_attempts" {
					t.Errorf("record %s counts in %s", k, name)
				}
			}
		}
	}
	// instance_actions' labels are read from fields its records carry.
	for _, e := range entries {
		if !metrics["instance_actions"].match(e) {
			continue
		}
		if payloadString(e, "zone") != vmZone || !machineTypeRE.MatchString(payloadString(e, "acceleratorType")) {
			t.Errorf("instance_actions record %s %s: zone %q, acceleratorType %q; want %s and a machine type",
				payloadString(e, "node"), payloadString(e, "action"), payloadString(e, "zone"), payloadString(e, "acceleratorType"), vmZone)
		}
	}
}

// TestInstanceActionsAreTheCallsOfVmpolicy: the actions instance_actions
// counts are exactly vmpolicy's actions that change an instance
// (Action.Mutates), as go-contract.json lists them.
func TestInstanceActionsAreTheCallsOfVmpolicy(t *testing.T) {
	m := loadModule(t, ".")
	ctx := m.evalContext(t, map[string]cty.Value{"project_id": cty.StringVal(metricsProject)})
	filter := evalString(t, ctx, attr(t, m.resource(t, "google_logging_metric.instance_actions"), "filter").Expr)
	f, err := parseLogFilter(filter)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range comparisonsOf(f) {
		if c.field == "jsonPayload.action" && c.op == "=" {
			got = append(got, c.values...)
		}
	}
	var want []string
	for _, a := range recordWords(t).InstanceActions {
		if vmpolicy.Action(a).Mutates() {
			want = append(want, a)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("instance_actions counts actions (-vmpolicy's calls +filter):\n%s", diff)
	}
}

// dashboardJSON evaluates the dashboard's dashboard_json as Terraform
// would, each google_logging_metric.X.name being the metric's name.
func dashboardJSON(t *testing.T, m *module) map[string]any {
	t.Helper()
	ctx := m.evalContext(t, nil)
	names := map[string]cty.Value{}
	for key, b := range m.resources {
		if n, ok := strings.CutPrefix(key, "google_logging_metric."); ok {
			names[n] = cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal(evalString(t, ctx, attr(t, b, "name").Expr))})
		}
	}
	ctx.Variables["google_logging_metric"] = cty.ObjectVal(names)
	funcs := map[string]function.Function{"jsonencode": stdlib.JSONEncodeFunc, "floor": stdlib.FloorFunc, "compact": stdlib.CompactFunc}
	for k, v := range ctx.Functions {
		funcs[k] = v
	}
	ctx.Functions = funcs
	expr := attr(t, m.resource(t, "google_monitoring_dashboard.autoheal"), "dashboard_json").Expr
	v, diags := expr.Value(ctx)
	if diags.HasErrors() {
		t.Fatalf("evaluate dashboard_json: %v", diags)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(v.AsString()), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// machineTypeRE is a TPU machine type (tpu7x-standard-4t, ct6e-standard-1t).
var machineTypeRE = regexp.MustCompile(`^[a-z0-9]+-standard-[0-9]+t$`)

var metricTypeRE = regexp.MustCompile(`metric\.type="logging\.googleapis\.com/user/([^"]+)"`)
var metricLabelRE = regexp.MustCompile(`metric\.label\.([a-z_]+)`)

// TestDashboardReadsMetricsOfTheModule: every chart names a log-based
// metric the module declares, and only labels that metric has; each
// metric named at least once is asserted by the tile list of
// tests/plan.tftest.hcl, this test holds the names and labels.
func TestDashboardReadsMetricsOfTheModule(t *testing.T) {
	m := loadModule(t, ".")
	ctx := m.evalContext(t, nil)
	labels := map[string][]string{} // metric name → its labels
	for key, b := range m.resources {
		if _, ok := strings.CutPrefix(key, "google_logging_metric."); !ok {
			continue
		}
		name := evalString(t, ctx, attr(t, b, "name").Expr)
		labels[name] = []string{}
		for _, d := range blocksOf(b, "metric_descriptor") {
			for _, l := range blocksOf(d, "labels") {
				labels[name] = append(labels[name], evalString(t, ctx, attr(t, l, "key").Expr))
			}
		}
	}
	d := dashboardJSON(t, m)
	tiles, _ := d["mosaicLayout"].(map[string]any)["tiles"].([]any)
	if len(tiles) < 8 {
		t.Fatalf("%d tiles; want the 8 charts", len(tiles))
	}
	charted := map[string]bool{}
	for _, tile := range tiles {
		w := tile.(map[string]any)["widget"].(map[string]any)
		title, _ := w["title"].(string)
		for _, ds := range w["xyChart"].(map[string]any)["dataSets"].([]any) {
			tsf := ds.(map[string]any)["timeSeriesQuery"].(map[string]any)["timeSeriesFilter"].(map[string]any)
			filter, _ := tsf["filter"].(string)
			mt := metricTypeRE.FindStringSubmatch(filter)
			if mt == nil {
				t.Errorf("tile %q reads no log-based metric: %s", title, filter)
				continue
			}
			have, ok := labels[mt[1]]
			if !ok {
				t.Errorf("tile %q reads metric %s, which the module does not declare", title, mt[1])
				continue
			}
			charted[mt[1]] = true
			used := metricLabelRE.FindAllStringSubmatch(filter, -1)
			for _, g := range tsf["aggregation"].(map[string]any)["groupByFields"].([]any) {
				used = append(used, metricLabelRE.FindAllStringSubmatch(g.(string), -1)...)
			}
			for _, u := range used {
				if !slices.Contains(have, u[1]) {
					t.Errorf("tile %q uses label %s, which metric %s does not have (it has %v)", title, u[1], mt[1], have)
				}
			}
		}
	}
	if !charted["tpu-autoheal/instance_actions"] {
		t.Errorf("no tile charts instance_actions (charted: %v)", charted)
	}
}

// comparisonsOf is every comparison in f, NOT or not.
func comparisonsOf(f logFilter) []comparison {
	switch x := f.(type) {
	case comparison:
		return []comparison{x}
	case notFilter:
		return comparisonsOf(x.f)
	case andFilter:
		var out []comparison
		for _, p := range x {
			out = append(out, comparisonsOf(p)...)
		}
		return out
	case orFilter:
		var out []comparison
		for _, p := range x {
			out = append(out, comparisonsOf(p)...)
		}
		return out
	}
	return nil
}

var readmeMetricsRE = regexp.MustCompile("\\| `google_logging_metric` ×([0-9]+) \\|([^\\n]*)\\|\\n")

// TestREADMEListsEveryMetric: the README's resource table counts the
// module's log-based metrics and names each one (NAME/x).
func TestREADMEListsEveryMetric(t *testing.T) {
	m := loadModule(t, ".")
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := readmeMetricsRE.FindSubmatch(readme)
	if row == nil {
		t.Fatal("README.md has no | `google_logging_metric` ×N | row")
	}
	var names []string
	for key := range m.resources {
		if n, ok := strings.CutPrefix(key, "google_logging_metric."); ok {
			names = append(names, n)
		}
	}
	if got := string(row[1]); got != strconv.Itoa(len(names)) {
		t.Errorf("README.md counts ×%s log-based metrics; the module has %d", got, len(names))
	}
	for _, n := range names {
		if !strings.Contains(string(row[2]), "`NAME/"+n+"`") {
			t.Errorf("README.md's metrics row does not name `NAME/%s`", n)
		}
	}
}
