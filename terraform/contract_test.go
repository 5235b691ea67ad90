package terraform_test

import (
	"encoding/base64"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/record"
)

// The tests in this file hold each value the module shares with the Go code
// to the Go constant or function it mirrors; the values themselves come from
// go-contract.json, generated from the Go code.

func TestSinkFilterIsEventsSinkFilter(t *testing.T) {
	m := loadModule(t, ".")
	ctx := m.evalContext(t, nil)
	if got := evalString(t, ctx, m.local(t, "sink_filter")); got != events.SinkFilter {
		t.Errorf("local.sink_filter differs from events.SinkFilter (-want +got):\n%s", cmp.Diff(events.SinkFilter, got))
	}
	// compute_instances = true: the instance path's entries too.
	on := m.evalContext(t, map[string]cty.Value{"compute_instances": cty.True})
	if got := evalString(t, on, m.local(t, "sink_filter")); got != events.InstanceSinkFilter {
		t.Errorf("local.sink_filter with compute_instances differs from events.InstanceSinkFilter (-want +got):\n%s", cmp.Diff(events.InstanceSinkFilter, got))
	}
	for _, key := range []string{"google_logging_project_sink.tpu", "google_logging_folder_sink.tpu", "google_logging_organization_sink.tpu"} {
		if !isReference(attr(t, m.resource(t, key), "filter").Expr, "local.sink_filter") {
			t.Errorf("%s filter is not local.sink_filter", key)
		}
	}
	// No hand-written copy: the filter comes from go-contract.json, which
	// the Go code generates; the .tf files never spell it out.
	n := 0
	for _, dir := range moduleDirs {
		for _, src := range loadModule(t, dir).files {
			n += strings.Count(string(src), "cloudaudit.googleapis.com%2Fsystem_event")
		}
	}
	if n != 0 {
		t.Errorf("the sink filter is written %d times in .tf files; want none (it comes from %s)", n, goContractFile)
	}
}

func TestSchedulerPublishesSweepMessage(t *testing.T) {
	m := loadModule(t, ".")
	ctx := m.evalContext(t, nil)
	job := m.resource(t, "google_cloud_scheduler_job.sweep")
	data := evalString(t, ctx, attr(t, job, "pubsub_target", "data").Expr)
	got, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		t.Fatalf("scheduler data %q is not base64: %v", data, err)
	}
	if string(got) != events.SweepMessage {
		t.Errorf("scheduler publishes %q; want events.SweepMessage %q", got, events.SweepMessage)
	}
	if !events.IsSweep(got) {
		t.Errorf("events.IsSweep(%q) = false; the function would reject the scheduler's message", got)
	}
	if !isReference(attr(t, job, "pubsub_target", "topic_name").Expr, "google_pubsub_topic.events.id") {
		t.Error("the sweep is not published to the topic the function is fed from")
	}
	if got, want := evalString(t, ctx, attr(t, m.variables["sweep_schedule"], "default").Expr), "* * * * *"; got != want {
		t.Errorf("default sweep_schedule = %q; want %q", got, want)
	}
}

func TestEntryPointIsFunctionEntryPoint(t *testing.T) {
	m := loadModule(t, ".")
	fn := m.resource(t, "google_cloudfunctions2_function.autoheal")
	if got := evalString(t, m.evalContext(t, nil), attr(t, fn, "build_config", "entry_point").Expr); got != function.EntryPoint {
		t.Errorf("entry_point = %q; want function.EntryPoint %q", got, function.EntryPoint)
	}
}

// configVars returns the environment variables function.Config reads, with
// each one's default (hasDef is false for required variables).
func configVars(t *testing.T) map[string]configVar {
	t.Helper()
	vars, err := function.Variables()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]configVar{}
	for _, v := range vars {
		out[v.Name] = configVar{
			suffix: strings.TrimPrefix(v.Name, function.EnvPrefix+"_"),
			def:    v.Default,
			hasDef: v.Default != "" || !v.Required,
		}
	}
	if len(out) == 0 {
		t.Fatal("function.Config has no fields")
	}
	return out
}

type configVar struct {
	suffix string
	def    string
	hasDef bool
}

// Variables whose module default differs from the Go default on purpose.
var deliberateDefaults = map[string]string{
	"dry_run": "true: the first deploy only decides and records",
}

func TestEnvironmentIsExactlyFunctionConfig(t *testing.T) {
	m := loadModule(t, ".")
	fn := m.resource(t, "google_cloudfunctions2_function.autoheal")
	env, ok := attr(t, fn, "service_config", "environment_variables").Expr.(*hclsyntax.ObjectConsExpr)
	if !ok {
		t.Fatal("environment_variables is not an object literal")
	}
	got := map[string]*hclsyntax.ObjectConsItem{}
	for i := range env.Items {
		item := &env.Items[i]
		k, diags := item.KeyExpr.Value(nil)
		if diags.HasErrors() || k.Type() != cty.String {
			t.Fatalf("%s: environment variable name is not a literal", exprSource(item.KeyExpr))
		}
		got[k.AsString()] = item
	}
	want := configVars(t)
	var gotNames, wantNames []string
	for n := range got {
		gotNames = append(gotNames, n)
	}
	for n := range want {
		wantNames = append(wantNames, n)
	}
	sort.Strings(gotNames)
	sort.Strings(wantNames)
	if diff := cmp.Diff(wantNames, gotNames); diff != "" {
		t.Fatalf("environment_variables differ from function.Config's variables (-want +got):\n%s", diff)
	}

	ctx := m.evalContext(t, map[string]cty.Value{"project_id": cty.StringVal("p")})
	for name, cv := range want {
		item := got[name]
		varName := strings.ToLower(cv.suffix)
		// Each value comes from the variable named after it, except these,
		// which come from what the module derives or creates.
		if src, special := specialEnvSources[cv.suffix]; special {
			if !isReference(item.ValueExpr, src) && !containsTraversal(item.ValueExpr, src) {
				t.Errorf("%s is not fed from %s", name, src)
			}
		} else {
			vars := hclsyntax.Variables(item.ValueExpr)
			if len(vars) != 1 || traversalString(vars[0]) != "var."+varName {
				t.Errorf("%s is not fed from var.%s alone", name, varName)
			}
		}
		b, ok := m.variables[varName]
		if !ok {
			// Fed from what the module derives or creates (AUTOHEAL_PROJECT
			// is var.project_id; the kick topic is the module's own events
			// topic, the log and app label its name), never typed by a user.
			if _, special := specialEnvSources[cv.suffix]; !special {
				t.Errorf("%s: no variable %q", name, varName)
			}
			continue
		}
		if len(blocksOf(b, "validation")) == 0 && !isBoolVar(t, b) {
			t.Errorf("variable %q (%s) has no validation", varName, name)
		}
		if _, deliberate := deliberateDefaults[varName]; deliberate || !cv.hasDef {
			continue
		}
		def, diags := attr(t, b, "default").Expr.Value(nil)
		if diags.HasErrors() {
			t.Fatalf("default of %q: %v", varName, diags)
		}
		if def.IsNull() {
			continue // derived by the module (firestore_database: the name; TestDefaultNameGivesTheGoDefaults)
		}
		if gotDef := envString(t, def); gotDef != cv.def {
			t.Errorf("variable %q defaults to %q but function.Config's %s to %q", varName, gotDef, name, cv.def)
		}
	}
	if got := evalString(t, ctx, got[function.EnvPrefix+"_PROJECTS"].ValueExpr); got != "p" {
		t.Errorf("%s_PROJECTS with no projects = %q; want the function's own project", function.EnvPrefix, got)
	}
}

// specialEnvSources are the function.Config variables not fed from the
// Terraform variable of the same name.
var specialEnvSources = map[string]string{
	"PROJECT":            "var.project_id",
	"PROJECTS":           "local.tpu_projects",
	"DRY_RUN":            "local.dry_run",
	"FIRESTORE_DATABASE": "google_firestore_database.ledger.name",
	"KICK_TOPIC":         "google_pubsub_topic.events.id", // kicks go to the module's own events topic
	// The instance's name: its own log and app label.
	"RECORD_LOG": "local.record_log_name",
	"APP_LABEL":  "local.record_app_label",
	// The generation Terraform read of the gs:// script.
	"STARTUP_SCRIPT_GENERATION": "local.startup_script_generation",
	// The accounts the function may act as are the ones it may create
	// nodes running as.
	"NODE_SERVICE_ACCOUNTS": "var.tpu_service_accounts",
	// The module's own MAC key version.
	"MAC_KEY": "google_kms_crypto_key_version.ledger_mac.name",
	// The identity the function acts as: its own service account.
	"ACTOR": "google_service_account.function.email",
}

func containsTraversal(expr hclsyntax.Expression, want string) bool {
	for _, tr := range hclsyntax.Variables(expr) {
		if traversalString(tr) == want {
			return true
		}
	}
	return false
}

// envString renders a Terraform variable's default as the environment
// variable Terraform would set from it.
func envString(t *testing.T, v cty.Value) string {
	t.Helper()
	switch {
	case v.Type() == cty.String:
		return v.AsString()
	case v.Type() == cty.Number:
		return v.AsBigFloat().Text('f', -1)
	case v.Type() == cty.Bool:
		return strconv.FormatBool(v.True())
	case v.CanIterateElements():
		var parts []string
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			parts = append(parts, envString(t, e))
		}
		return strings.Join(parts, ",")
	}
	t.Fatalf("unsupported default %#v", v)
	return ""
}

// The values Terraform sets must be ones function.LoadConfig accepts.
func TestDefaultEnvironmentLoads(t *testing.T) {
	m := loadModule(t, ".")
	fn := m.resource(t, "google_cloudfunctions2_function.autoheal")
	env := attr(t, fn, "service_config", "environment_variables").Expr.(*hclsyntax.ObjectConsExpr)
	ctx := m.evalContext(t, map[string]cty.Value{
		"project_id":           cty.StringVal("my-project"),
		"tpu_service_accounts": cty.ListVal([]cty.Value{cty.StringVal("trainer@my-project.iam.gserviceaccount.com")}),
	})
	ctx.Variables["google_firestore_database"] = cty.ObjectVal(map[string]cty.Value{
		"ledger": cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("tpu-autoheal")}),
	})
	// The provider's id of a topic is projects/P/topics/NAME.
	ctx.Variables["google_pubsub_topic"] = cty.ObjectVal(map[string]cty.Value{
		"events": cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("projects/my-project/topics/tpu-autoheal")}),
	})
	ctx.Variables["google_service_account"] = cty.ObjectVal(map[string]cty.Value{
		"function": cty.ObjectVal(map[string]cty.Value{"email": cty.StringVal("tpu-autoheal@my-project.iam.gserviceaccount.com")}),
	})
	ctx.Variables["google_kms_crypto_key_version"] = cty.ObjectVal(map[string]cty.Value{
		"ledger_mac": cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("projects/my-project/locations/us-central1/keyRings/tpu-autoheal/cryptoKeys/tpu-autoheal-ledger-mac/cryptoKeyVersions/1")}),
	})
	// No gs:// script: no object read, generation 0.
	locals := ctx.Variables["local"].AsValueMap()
	locals["startup_script_generation"] = cty.StringVal("0")
	ctx.Variables["local"] = cty.ObjectVal(locals)
	vals := map[string]string{}
	for _, item := range env.Items {
		k, _ := item.KeyExpr.Value(nil)
		vals[k.AsString()] = evalString(t, ctx, item.ValueExpr)
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, function.EnvPrefix+"_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	for k, v := range vals {
		t.Setenv(k, v)
	}
	cfg, err := function.LoadConfig()
	if err != nil {
		t.Fatalf("LoadConfig(module defaults) = %v", err)
	}
	if !cfg.DryRun {
		t.Error("module defaults load with DryRun false; the first deploy must be a dry run")
	}
	if diff := cmp.Diff([]string{"my-project"}, cfg.Projects); diff != "" {
		t.Errorf("Projects (-want +got):\n%s", diff)
	}
}

// The function opens the ledger without a collection prefix, so the deployed
// collection group is ledger.CollectionEvents itself.
func TestTTLPolicyIsOnLedgerEvents(t *testing.T) {
	m := loadModule(t, ".")
	ctx := m.evalContext(t, nil)
	field := m.resource(t, "google_firestore_field.events_ttl")
	collection := evalString(t, ctx, attr(t, field, "collection").Expr)
	name := evalString(t, ctx, attr(t, field, "field").Expr)
	if collection != ledger.CollectionEvents || name != ledger.EventExpireField {
		t.Errorf("TTL policy on %s.%s; want the ledger's %s.%s", collection, name, ledger.CollectionEvents, ledger.EventExpireField)
	}
	if len(blocksOf(field, "ttl_config")) != 1 {
		t.Error("google_firestore_field.events_ttl has no ttl_config")
	}
}

func TestMetricsReadTheRecordsLog(t *testing.T) {
	m := loadModule(t, ".")
	ctx := m.evalContext(t, map[string]cty.Value{"project_id": cty.StringVal("p")})
	if got := evalString(t, ctx, m.local(t, "record_log_name")); got != record.LogName {
		t.Errorf("local.record_log_name = %q; want record.LogName %q", got, record.LogName)
	}
	if got := evalString(t, ctx, m.local(t, "record_app_label")); got != record.AppLabelValue {
		t.Errorf("local.record_app_label = %q; want record.AppLabelValue %q", got, record.AppLabelValue)
	}
	filter := evalString(t, ctx, m.local(t, "record_log_filter"))
	for _, want := range []string{
		`logName="projects/p/logs/` + record.LogName + `"`,
		`labels.` + record.LabelApp + `="` + record.AppLabelValue + `"`,
	} {
		if !strings.Contains(filter, want) {
			t.Errorf("record filter %q lacks %s", filter, want)
		}
	}
	for _, name := range []string{"recoveries_started", "recoveries_finished", "recoveries_failed", "outcomes", "time_to_recover", "rejects", "instance_actions"} { // sweeps: the diagnostic line, TestSweepMetricMatchesTheSweepLine
		b := m.resource(t, "google_logging_metric."+name)
		src := string(attr(t, b, "filter").Expr.Range().SliceBytes(m.files["main.tf"]))
		if !strings.Contains(src, "${local.record_log_filter}") {
			t.Errorf("metric %s does not filter on the records log: %s", name, src)
		}
	}
	alert := m.resource(t, "google_monitoring_alert_policy.recovery_failed")
	if !isReference(attr(t, alert, "notification_channels").Expr, "var.notification_channels") {
		t.Error("the alert does not notify var.notification_channels")
	}
}

func blocksOf(b *hclsyntax.Block, typ string) []*hclsyntax.Block {
	var out []*hclsyntax.Block
	for _, nb := range b.Body.Blocks {
		if nb.Type == typ {
			out = append(out, nb)
		}
	}
	return out
}

func isBoolVar(t *testing.T, b *hclsyntax.Block) bool {
	t.Helper()
	a, ok := b.Body.Attributes["type"]
	if !ok {
		return false
	}
	st, ok := a.Expr.(*hclsyntax.ScopeTraversalExpr)
	return ok && traversalString(st.Traversal) == "bool"
}
