package terraform_test

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/record"
)

// The tests in this file hold the deployment's trust and ordering facts: a
// first apply waits for the grants a build or a delivery needs, the Pub/Sub
// service agent exists before it is bound, the build has roles/run.builder's
// permissions on the narrowest resources only, the ledger role reaches one
// database, and the default instance keeps the Go defaults.

// refsOf returns every TYPE.NAME (data.TYPE.NAME, local.NAME) the block's
// attributes, nested blocks included, refer to.
func refsOf(b *hclsyntax.Block) map[string]bool {
	out := map[string]bool{}
	walkBlocks(b, func(nb *hclsyntax.Block) {
		for _, a := range nb.Body.Attributes {
			for _, tr := range hclsyntax.Variables(a.Expr) {
				parts := strings.SplitN(traversalString(tr), ".", 4)
				switch {
				case parts[0] == "data" && len(parts) >= 3:
					out[strings.Join(parts[:3], ".")] = true
				case len(parts) >= 2:
					out[parts[0]+"."+strings.SplitN(parts[1], "[", 2)[0]] = true
				}
			}
		}
	})
	return out
}

// memberSource is the source text of an IAM resource's member attribute.
func memberSource(t *testing.T, m *module, b *hclsyntax.Block) string {
	t.Helper()
	a, ok := b.Body.Attributes["member"]
	if !ok {
		return ""
	}
	return string(a.Expr.Range().SliceBytes(m.files[filepath.Base(b.Range().Filename)]))
}

// iamMembers returns the module's *_iam_member resources whose member is
// exactly src (e.g. "local.function_member").
func iamMembers(t *testing.T, m *module, src string) []string {
	t.Helper()
	var out []string
	for key, b := range m.resources {
		if strings.HasSuffix(strings.SplitN(key, ".", 2)[0], "_iam_member") && memberSource(t, m, b) == src {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}

func dependsOn(t *testing.T, b *hclsyntax.Block) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	if a, ok := b.Body.Attributes["depends_on"]; ok {
		for _, tr := range hclsyntax.Variables(a.Expr) {
			out[traversalString(tr)] = true
		}
	}
	return out
}

// TestFirstApplyWaitsForWhatItNeeds: the function (its build) waits for the
// build grants' wait, which follows every grant to the build account; the
// push subscription waits for the push grants' wait, which follows the
// invoker and token creator grants and every grant to the function's
// account; every binding of the Pub/Sub service agent names it through the
// wait that follows its creation.
func TestFirstApplyWaitsForWhatItNeeds(t *testing.T) {
	m := loadModule(t, ".")

	fn := m.resource(t, "google_cloudfunctions2_function.autoheal")
	if !dependsOn(t, fn)["time_sleep.build_grants"] {
		t.Error("google_cloudfunctions2_function.autoheal does not depend on time_sleep.build_grants: its build can start before its grants propagate")
	}
	buildWait := refsOf(m.resource(t, "time_sleep.build_grants"))
	buildGrants := iamMembers(t, m, "local.build_member")
	if len(buildGrants) < 3 {
		t.Fatalf("grants to the build account: %v; want its logs, source and image grants", buildGrants)
	}
	for _, g := range buildGrants {
		if !buildWait[g] {
			t.Errorf("time_sleep.build_grants does not follow %s, a grant the build needs", g)
		}
	}

	push := m.resource(t, "google_pubsub_subscription.push")
	if !dependsOn(t, push)["time_sleep.push_grants"] {
		t.Error("google_pubsub_subscription.push does not depend on time_sleep.push_grants: a delivery can arrive before its grants propagate")
	}
	pushWait := refsOf(m.resource(t, "time_sleep.push_grants"))
	// The ledger binding is the function's and the operators' (for_each).
	needed := append([]string{"google_cloud_run_service_iam_member.push_invoker", "google_service_account_iam_member.pubsub_token_creator", "google_project_iam_member.ledger"},
		iamMembers(t, m, "local.function_member")...)
	for _, g := range needed {
		if !pushWait[g] {
			t.Errorf("time_sleep.push_grants does not follow %s, a grant a delivery needs", g)
		}
	}
	if n := len(iamMembers(t, m, "local.function_member")); n < 5 {
		t.Errorf("found %d grants to local.function_member; want the TPU, records, MAC, actAs and script grants", n)
	}
	for _, key := range []string{"time_sleep.build_grants", "time_sleep.push_grants"} {
		if !isReference(attr(t, m.resource(t, key), "create_duration").Expr, "var.iam_propagation_wait") {
			t.Errorf("%s does not wait var.iam_propagation_wait", key)
		}
	}

	// The agent: created, waited for, and named only through the wait.
	if !isReference(m.local(t, "pubsub_agent"), `time_sleep.pubsub_agent.triggers["member"]`) {
		t.Errorf("local.pubsub_agent is %s; want time_sleep.pubsub_agent.triggers[\"member\"], so every binding naming the agent waits for it", exprSource(m.local(t, "pubsub_agent")))
	}
	agentWait := m.resource(t, "time_sleep.pubsub_agent")
	if !refsOf(agentWait)["google_workload_identity_service_agent.pubsub"] {
		t.Error("time_sleep.pubsub_agent does not follow google_workload_identity_service_agent.pubsub")
	}
	if parent := string(attr(t, m.resource(t, "google_workload_identity_service_agent.pubsub"), "parent").Expr.Range().SliceBytes(m.files["main.tf"])); !strings.HasSuffix(parent, `/locations/global/serviceProducers/pubsub.googleapis.com"`) {
		t.Errorf("google_workload_identity_service_agent.pubsub's parent %s is not Pub/Sub's service producer", parent)
	}
	agentGrants := iamMembers(t, m, "local.pubsub_agent")
	if diff := cmp.Diff([]string{
		"google_pubsub_subscription_iam_member.push_subscriber",
		"google_pubsub_topic_iam_member.dead_letter_publisher",
		"google_service_account_iam_member.pubsub_token_creator",
	}, agentGrants); diff != "" {
		t.Errorf("bindings of the Pub/Sub service agent through local.pubsub_agent (-want +got):\n%s", diff)
	}
	for name, src := range m.files {
		if n := strings.Count(string(src), "gcp-sa-pubsub"); n > 0 && !(name == "main.tf" && n == 1) {
			t.Errorf("%s spells the Pub/Sub service agent %d times; want once, in time_sleep.pubsub_agent", name, n)
		}
	}
	triggers := string(attr(t, agentWait, "triggers").Expr.Range().SliceBytes(m.files["main.tf"]))
	if !strings.Contains(triggers, "gcp-sa-pubsub") {
		t.Error("time_sleep.pubsub_agent's triggers do not carry the agent's member")
	}
}

// TestBuildHasRunBuildersPermissionsOnTheNarrowestResources: the build
// account holds what roles/run.builder holds (Google's role for a
// function's build account, from the IAM data), minus Cloud Source
// Repositories, which this module never builds from; the registry
// permissions on the instance's repository, the storage one conditioned on
// the source buckets, logging alone project-wide.
func TestBuildHasRunBuildersPermissionsOnTheNarrowestResources(t *testing.T) {
	data := loadIAMData(t)
	m := loadModule(t, ".")
	ctx := m.evalContext(t, map[string]cty.Value{"project_id": cty.StringVal("p")})
	rolePerms := func(key string) []string {
		return evalStrings(t, ctx, attr(t, m.resource(t, key), "permissions").Expr)
	}
	image, source := rolePerms("google_project_iam_custom_role.build_image"), rolePerms("google_project_iam_custom_role.build_source")
	records := contractPermissions(t)[grantRecordsRole]
	got := append(append(append([]string{}, image...), source...), records...)
	sort.Strings(got)
	var want []string
	for _, p := range data.roles["roles/run.builder"] {
		if p != "source.repos.get" {
			want = append(want, p)
		}
	}
	sort.Strings(want)
	if len(want) == 0 {
		t.Fatal("roles/run.builder is not in the IAM data's roles.json")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the build's permissions (image role, source role, records role) differ from roles/run.builder's without source.repos.get (-want +got):\n%s", diff)
	}
	for _, p := range image {
		if !strings.HasPrefix(p, "artifactregistry.repositories.") {
			t.Errorf("the image role holds %s, which is not a repository permission", p)
		}
	}

	img := m.resource(t, "google_artifact_registry_repository_iam_member.build_image")
	if !isReference(attr(t, img, "repository").Expr, "google_artifact_registry_repository.images.repository_id") || !isReference(attr(t, img, "role").Expr, "google_project_iam_custom_role.build_image.id") {
		t.Error("the image role is not granted on the instance's own repository")
	}
	if !isReference(attr(t, m.resource(t, "google_cloudfunctions2_function.autoheal"), "build_config", "docker_repository").Expr, "google_artifact_registry_repository.images.id") {
		t.Error("the function's image is not built into the instance's own repository")
	}
	src := m.resource(t, "google_project_iam_member.build_source")
	cond := string(attr(t, src, "condition", "expression").Expr.Range().SliceBytes(m.files["main.tf"]))
	for _, w := range []string{"google_storage_bucket.source.name", "local.functions_sources_bucket"} {
		if !strings.Contains(cond, w) {
			t.Errorf("the source role's condition %s does not name %s", cond, w)
		}
	}
	logs := m.resource(t, "google_project_iam_member.build_logs")
	if !isReference(attr(t, logs, "role").Expr, "google_project_iam_custom_role.records.id") || len(blocksOf(logs, "condition")) != 0 {
		t.Error("build logs must be the records role, project-wide")
	}
	if !slices.Equal(records, []string{"logging.logEntries.create"}) {
		t.Errorf("the records role (also the build's logs role) holds %v; want logging.logEntries.create alone", records)
	}
	for _, key := range iamMembers(t, m, "local.build_member") {
		if key == "google_project_iam_member.build_logs" || key == "google_artifact_registry_repository_iam_member.build_image" {
			continue
		}
		if strings.HasPrefix(key, "google_project_iam_member.") && len(blocksOf(m.resources[key], "condition")) == 0 {
			t.Errorf("%s grants the build account project-wide without a condition", key)
		}
	}
}

// TestLedgerRoleReachesOneDatabase: every binding of the ledger role (the
// function's and the operators') carries the condition naming the
// instance's database.
func TestLedgerRoleReachesOneDatabase(t *testing.T) {
	m := loadModule(t, ".")
	ctx := m.evalContext(t, map[string]cty.Value{"project_id": cty.StringVal("p")})
	if got, want := evalString(t, ctx, m.local(t, "ledger_database_condition")), `resource.name == "projects/p/databases/tpu-autoheal"`; got != want {
		t.Errorf("local.ledger_database_condition = %s; want %s", got, want)
	}
	n := 0
	for key, b := range m.resources {
		a, ok := b.Body.Attributes["role"]
		if !ok || !isReference(a.Expr, "google_project_iam_custom_role.ledger.id") {
			continue
		}
		n++
		if len(blocksOf(b, "condition")) != 1 || !isReference(attr(t, b, "condition", "expression").Expr, "local.ledger_database_condition") {
			t.Errorf("%s grants the ledger role without the database condition", key)
		}
	}
	if n != 1 {
		t.Errorf("%d resources bind the ledger role; want the one for the function and the operators", n)
	}
	members := string(attr(t, m.resource(t, "google_project_iam_member.ledger"), "for_each").Expr.Range().SliceBytes(m.files["main.tf"]))
	if !strings.Contains(members, "local.function_member") || !strings.Contains(members, "var.operators") {
		t.Errorf("the ledger role is bound to %s; want the function and the operators", members)
	}
}

// TestDefaultNameGivesTheGoDefaults: the default instance's database, log
// and app label are the Go defaults (function.Config, record), which the
// CLI's own defaults (--ledger-database) follow.
func TestDefaultNameGivesTheGoDefaults(t *testing.T) {
	m := loadModule(t, ".")
	name := evalDefault(t, m, "name").AsString()
	if !evalDefault(t, m, "firestore_database").IsNull() {
		t.Error("firestore_database has a default of its own; want null (the instance's name)")
	}
	vars := configVars(t)
	for _, c := range []struct{ what, want string }{
		{"record.LogName", record.LogName},
		{"record.AppLabelValue", record.AppLabelValue},
		{function.EnvPrefix + "_FIRESTORE_DATABASE's default", vars[function.EnvPrefix+"_FIRESTORE_DATABASE"].def},
		{function.EnvPrefix + "_RECORD_LOG's default", vars[function.EnvPrefix+"_RECORD_LOG"].def},
		{function.EnvPrefix + "_APP_LABEL's default", vars[function.EnvPrefix+"_APP_LABEL"].def},
	} {
		if c.want != name {
			t.Errorf("default name %q differs from %s %q", name, c.what, c.want)
		}
	}
	for _, l := range []string{"record_log_name", "record_app_label"} {
		if !isReference(m.local(t, l), "var.name") {
			t.Errorf("local.%s is not var.name", l)
		}
	}
	pause, err := os.ReadFile(filepath.Join(repoRoot(t), "cmd", "autoheal", "pause.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(pause), `"ledger-database", "`+name+`"`) {
		t.Errorf("cmd/autoheal/pause.go's --ledger-database default is not the default instance's database %q", name)
	}
}
