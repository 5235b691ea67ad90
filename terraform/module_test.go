package terraform_test

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

func TestTerraformFilesAreFormatted(t *testing.T) {
	var paths []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".terraform" {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".tf") || strings.HasSuffix(path, ".tfvars")) {
			paths = append(paths, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 8 {
		t.Fatalf("found %d .tf files (%v); want the module's four and both examples'", len(paths), paths)
	}
	for _, path := range paths {
		t.Run(path, func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos); diags.HasErrors() {
				t.Fatalf("parse: %v", diags)
			}
			if got := hclwrite.Format(src); !bytes.Equal(got, src) {
				t.Errorf("not formatted as terraform fmt would (diff -want +got):\n%s", cmp.Diff(string(src), string(got)))
			}
		})
	}
}

func TestVariablesAndOutputsAreTypedAndDescribed(t *testing.T) {
	for _, dir := range moduleDirs {
		m := loadModule(t, dir)
		for name, b := range m.variables {
			if _, ok := b.Body.Attributes["type"]; !ok {
				t.Errorf("%s: variable %q has no type", dir, name)
			}
			if d, ok := b.Body.Attributes["description"]; !ok || evalString(t, nil, d.Expr) == "" {
				t.Errorf("%s: variable %q has no description", dir, name)
			}
		}
		for name, b := range m.outputs {
			if d, ok := b.Body.Attributes["description"]; !ok || evalString(t, nil, d.Expr) == "" {
				t.Errorf("%s: output %q has no description", dir, name)
			}
		}
	}
}

// Terraform's own names, which are never declarations of the module.
var specialRoots = map[string]bool{"each": true, "count": true, "self": true, "path": true, "terraform": true}

func TestEveryReferenceResolves(t *testing.T) {
	for _, dir := range moduleDirs {
		m := loadModule(t, dir)
		bad, checked := unresolvedReferences(m)
		for _, b := range bad {
			t.Errorf("%s: %s", dir, b)
		}
		if checked < 10 {
			t.Errorf("%s: only %d references found; the walk is broken", dir, checked)
		}
	}
}

// unresolvedReferences walks every expression of m (for expressions' own
// names excluded) and returns each reference to something m does not
// declare, and how many references it checked.
func unresolvedReferences(m *module) (bad []string, checked int) {
	resolves := func(tr hcl.Traversal) bool {
		root := tr.RootName()
		attrName := func(i int) string {
			if len(tr) <= i {
				return ""
			}
			if a, ok := tr[i].(hcl.TraverseAttr); ok {
				return a.Name
			}
			return ""
		}
		switch {
		case specialRoots[root]:
			return true
		case root == "var":
			_, ok := m.variables[attrName(1)]
			return ok
		case root == "local":
			_, ok := m.locals[attrName(1)]
			return ok
		case root == "module":
			_, ok := m.modules[attrName(1)]
			return ok
		case root == "data":
			_, ok := m.data[attrName(1)+"."+attrName(2)]
			return ok
		default:
			_, ok := m.resources[root+"."+attrName(1)]
			return ok
		}
	}
	for _, top := range m.allBlocks() {
		// A dynamic block's iterator (its label) is in scope in its content.
		dynamic := map[string]bool{}
		walkBlocks(top, func(b *hclsyntax.Block) {
			if b.Type == "dynamic" && len(b.Labels) == 1 {
				dynamic[b.Labels[0]] = true
			}
		})
		walkBlocks(top, func(b *hclsyntax.Block) {
			for name, a := range b.Body.Attributes {
				if b.Type == "variable" && name == "type" {
					continue // a type constraint, not an expression
				}
				for _, tr := range hclsyntax.Variables(a.Expr) {
					checked++
					if dynamic[tr.RootName()] && len(tr) > 1 {
						continue
					}
					if !resolves(tr) {
						bad = append(bad, exprSource(a.Expr)+" refers to undeclared "+traversalString(tr))
					}
				}
			}
		})
	}
	sort.Strings(bad)
	return bad, checked
}

func TestReferenceCheckCatchesUndeclaredNames(t *testing.T) {
	dir := t.TempDir()
	src := `variable "known" {
  type        = string
  description = "declared"
}

locals {
  ok     = [for x in [var.known] : upper(x)]
  no_var = var.missing
  no_loc = local.missing
  no_res = google_pubsub_topic.missing.id
  no_dat = data.google_project.missing.number
  no_mod = module.missing.out
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bad, _ := unresolvedReferences(loadModule(t, dir))
	var got []string
	for _, b := range bad {
		got = append(got, b[strings.LastIndex(b, " ")+1:])
	}
	sort.Strings(got)
	want := []string{"data.google_project.missing.number", "google_pubsub_topic.missing.id", "local.missing", "module.missing.out", "var.missing"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unresolved references (-want +got):\n%s", diff)
	}
}

func TestExamplesPassOnlyModuleVariablesAndKeepDryRun(t *testing.T) {
	root := loadModule(t, ".")
	if got := evalDefault(t, root, "dry_run"); got != cty.True {
		t.Errorf("module default dry_run = %#v; want true (safe first deploy)", got)
	}
	for _, dir := range moduleDirs[1:] {
		m := loadModule(t, dir)
		mod, ok := m.modules["tpu_autoheal"]
		if !ok {
			t.Fatalf("%s: no module \"tpu_autoheal\"", dir)
		}
		if src := evalString(t, nil, mod.Body.Attributes["source"].Expr); src != "../.." {
			t.Errorf("%s: module source = %q; want ../..", dir, src)
		}
		for name := range mod.Body.Attributes {
			if name == "source" || name == "providers" || name == "depends_on" {
				continue
			}
			if _, ok := root.variables[name]; !ok {
				t.Errorf("%s: passes %q, which the module does not declare", dir, name)
			}
		}
		for name, b := range root.variables {
			if _, hasDefault := b.Body.Attributes["default"]; !hasDefault {
				if _, passed := mod.Body.Attributes[name]; !passed {
					t.Errorf("%s: does not pass required variable %q", dir, name)
				}
			}
		}
		if got := evalDefault(t, m, "dry_run"); got != cty.True {
			t.Errorf("%s: default dry_run = %#v; want true", dir, got)
		}
		if !isReference(mod.Body.Attributes["dry_run"].Expr, "var.dry_run") {
			t.Errorf("%s: module dry_run is not var.dry_run", dir)
		}
	}
}

func evalDefault(t *testing.T, m *module, name string) cty.Value {
	t.Helper()
	b, ok := m.variables[name]
	if !ok {
		t.Fatalf("%s: no variable %q", m.dir, name)
	}
	a, ok := b.Body.Attributes["default"]
	if !ok {
		t.Fatalf("%s: variable %q has no default", m.dir, name)
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		t.Fatalf("%s: default of %q: %v", m.dir, name, diags)
	}
	return v
}

func TestNoPublicPrincipals(t *testing.T) {
	for _, dir := range moduleDirs {
		m := loadModule(t, dir)
		for name, src := range m.files {
			for _, p := range []string{"allUsers", "allAuthenticatedUsers"} {
				if bytes.Contains(bytes.ToLower(src), bytes.ToLower([]byte(p))) {
					t.Errorf("%s/%s mentions %s", dir, name, p)
				}
			}
		}
	}
	m := loadModule(t, ".")
	ctx := m.evalContext(t, map[string]cty.Value{"project_id": cty.StringVal("p")})
	invokers := 0
	for key, b := range m.resources {
		if !strings.HasSuffix(strings.SplitN(key, ".", 2)[0], "_iam_member") {
			continue
		}
		v, diags := attr(t, b, "role").Expr.Value(ctx)
		if diags.HasErrors() {
			continue // a custom role's id, known only after apply
		}
		role := v.AsString()
		if strings.Contains(role, "invoker") {
			invokers++
			member := string(attr(t, b, "member").Expr.Range().SliceBytes(m.files[filepath.Base(b.Range().Filename)]))
			if member != `"serviceAccount:${google_service_account.push.email}"` {
				t.Errorf("%s grants %s to %s; want only the push subscription's account", key, role, member)
			}
		}
	}
	if invokers != 1 {
		t.Errorf("%d invoker grants; want exactly 1 (the push subscription's account)", invokers)
	}
}

func TestFunctionIsInternalAndOnlyReachedByAuthenticatedPush(t *testing.T) {
	m := loadModule(t, ".")
	fn := m.resource(t, "google_cloudfunctions2_function.autoheal")
	ctx := m.evalContext(t, nil)
	if got := evalString(t, ctx, attr(t, fn, "service_config", "ingress_settings").Expr); got != "ALLOW_INTERNAL_ONLY" {
		t.Errorf("ingress_settings = %q; want ALLOW_INTERNAL_ONLY", got)
	}
	for _, b := range fn.Body.Blocks {
		if b.Type == "event_trigger" {
			t.Error("function has an event_trigger; delivery must go through the push subscription, which carries the dead-letter policy")
		}
	}

	push := m.resource(t, "google_pubsub_subscription.push")
	if !isReference(attr(t, push, "push_config", "oidc_token", "service_account_email").Expr, "google_service_account.push.email") {
		t.Error("push subscription does not authenticate as the push service account")
	}
	// The Functions Framework turns a push body into a messagePublished
	// CloudEvent only when the URL path names the topic, projects/P/topics/T.
	ctx.Variables["google_cloudfunctions2_function"] = cty.ObjectVal(map[string]cty.Value{
		"autoheal": cty.ObjectVal(map[string]cty.Value{
			"service_config": cty.TupleVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{
				"uri": cty.StringVal("https://tpu-autoheal-abc-uc.a.run.app"),
			})}),
		}),
	})
	ctx.Variables["google_pubsub_topic"] = cty.ObjectVal(map[string]cty.Value{
		"events": cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("projects/p/topics/tpu-autoheal")}),
	})
	endpoint := evalString(t, ctx, attr(t, push, "push_config", "push_endpoint").Expr)
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := u.Host+u.Path, "tpu-autoheal-abc-uc.a.run.app/projects/p/topics/tpu-autoheal"; got != want {
		t.Errorf("push endpoint = %q; want host and path %q", endpoint, want)
	}
	if got := evalString(t, ctx, attr(t, push, "push_config", "oidc_token", "audience").Expr); got != "https://tpu-autoheal-abc-uc.a.run.app" {
		t.Errorf("OIDC audience = %q; want the service URL", got)
	}
	if !isReference(attr(t, push, "dead_letter_policy", "dead_letter_topic").Expr, "google_pubsub_topic.dead_letter.id") {
		t.Error("push subscription's dead letters do not go to the dead-letter topic")
	}
	for _, p := range [][]string{{"retry_policy", "minimum_backoff"}, {"retry_policy", "maximum_backoff"}, {"dead_letter_policy", "max_delivery_attempts"}} {
		attr(t, push, p...)
	}
	dl := m.resource(t, "google_pubsub_subscription.dead_letter")
	if !isReference(attr(t, dl, "topic").Expr, "google_pubsub_topic.dead_letter.id") {
		t.Error("no subscription keeps the dead-letter topic's messages")
	}
	for _, key := range []string{"google_pubsub_subscription.push", "google_pubsub_subscription.dead_letter"} {
		if got := evalString(t, ctx, attr(t, m.resource(t, key), "expiration_policy", "ttl").Expr); got != "" {
			t.Errorf("%s expires after %q of inactivity; want never", key, got)
		}
	}
}

func TestFunctionTimeoutFitsPushAckDeadline(t *testing.T) {
	m := loadModule(t, ".")
	push := m.resource(t, "google_pubsub_subscription.push")
	if !isReference(attr(t, push, "ack_deadline_seconds").Expr, "var.function_timeout_seconds") {
		t.Error("push ack deadline is not the function timeout: a delivery still running would be redelivered")
	}
	v := evalDefault(t, m, "function_timeout_seconds")
	if f, _ := v.AsBigFloat().Float64(); f > 600 {
		t.Errorf("default function timeout %v exceeds Pub/Sub's 600 s push deadline", f)
	}
}

func TestRuntimeBuildsGoMod(t *testing.T) {
	m := loadModule(t, ".")
	runtime := evalDefault(t, m, "runtime").AsString()
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go 1\.(\d+)`).FindSubmatch(mod)
	if goLine == nil {
		t.Fatal("go.mod has no go directive")
	}
	rt := regexp.MustCompile(`^go1(\d+)$`).FindStringSubmatch(runtime)
	if rt == nil {
		t.Fatalf("runtime default %q is not go1NN", runtime)
	}
	minor, _ := strconv.Atoi(string(goLine[1]))
	got, _ := strconv.Atoi(rt[1])
	if got < minor {
		t.Errorf("runtime default %q is older than go.mod's go 1.%d: the build would fail", runtime, minor)
	}
}

func TestSinkDestinationAndWriterIdentities(t *testing.T) {
	m := loadModule(t, ".")
	for _, key := range []string{"google_logging_project_sink.tpu", "google_logging_folder_sink.tpu", "google_logging_organization_sink.tpu"} {
		b := m.resource(t, key)
		dest := string(attr(t, b, "destination").Expr.Range().SliceBytes(m.files["main.tf"]))
		if !strings.Contains(dest, "google_pubsub_topic.events.id") {
			t.Errorf("%s destination %s is not the events topic", key, dest)
		}
		if !strings.Contains(string(m.files["main.tf"]), "for s in "+key+" : ") &&
			!strings.Contains(string(m.files["main.tf"]), "in "+key+" : ") {
			t.Errorf("%s's writer identity is not among local.sink_writers (no publisher grant)", key)
		}
	}
	// The events topic's whole policy: publisher for the sinks' writers
	// and the function, nobody else.
	policy := m.resource(t, "google_pubsub_topic_iam_policy.events")
	if !isReference(attr(t, policy, "topic").Expr, "google_pubsub_topic.events.name") || !isReference(attr(t, policy, "policy_data").Expr, "data.google_iam_policy.events_topic.policy_data") {
		t.Error("the events topic's IAM policy is not data.google_iam_policy.events_topic")
	}
	bindings := blocksOf(m.data["google_iam_policy.events_topic"], "binding")
	if len(bindings) != 1 || evalString(t, nil, attr(t, bindings[0], "role").Expr) != "roles/pubsub.publisher" || !isReference(attr(t, bindings[0], "members").Expr, "local.events_publishers") {
		t.Fatal("the events topic's policy is not one roles/pubsub.publisher binding of local.events_publishers")
	}
	if got := strings.Join(strings.Fields(string(m.local(t, "events_publishers").Range().SliceBytes(m.files["main.tf"]))), " "); got != "concat(values(local.sink_writers), [local.function_member])" {
		t.Errorf("local.events_publishers = %s; want exactly the sinks' writers and the function", got)
	}
	for key := range m.resources {
		if strings.HasPrefix(key, "google_pubsub_topic_iam_") && key != "google_pubsub_topic_iam_policy.events" {
			topic := string(attr(t, m.resources[key], "topic").Expr.Range().SliceBytes(m.files["main.tf"]))
			if strings.Contains(topic, "google_pubsub_topic.events.") {
				t.Errorf("%s grants on the events topic besides its policy", key)
			}
		}
	}
}

func TestREADMEDocumentsEveryInputAndOutput(t *testing.T) {
	m := loadModule(t, ".")
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	start, end := bytes.Index(readme, []byte("\n## Inputs")), bytes.Index(readme, []byte("\n## Examples"))
	if start < 0 || end < start {
		t.Fatal("README.md has no Inputs ... Examples sections")
	}
	rows := map[string]bool{}
	for _, match := range regexp.MustCompile("(?m)^\\| `([a-z0-9_]+)` \\|").FindAllSubmatch(readme[start:end], -1) {
		rows[string(match[1])] = true
	}
	for name := range m.variables {
		if !rows[name] {
			t.Errorf("README.md has no row for input %q", name)
		}
	}
	for name := range m.outputs {
		if !rows[name] {
			t.Errorf("README.md has no row for output %q", name)
		}
	}
	for name := range rows {
		if m.variables[name] == nil && m.outputs[name] == nil {
			t.Errorf("README.md documents %q, which is neither an input nor an output", name)
		}
	}
}
