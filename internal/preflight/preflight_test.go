package preflight_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/internal/preflight"
	"github.com/tpu-autoheal/autoheal/internal/preflight/iamfake"
)

func options() preflight.Options {
	return preflight.Options{Project: iamfake.Project, Topic: iamfake.Topic, ServiceAccount: iamfake.ServiceAccount,
		Database: iamfake.Database, Operators: []string{iamfake.Operators}}
}

// deployment is the fake with the module's deployment, and the real
// clients pointed at it.
func deployment(t *testing.T) (*iamfake.Server, *preflight.APIs) {
	t.Helper()
	srv := iamfake.New()
	t.Cleanup(srv.Close)
	srv.Deployment()
	opts, err := preflight.EndpointOptions(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	apis, err := preflight.NewAPIs(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return srv, apis
}

func run(t *testing.T, src preflight.Source, o preflight.Options) *preflight.Report {
	t.Helper()
	r, err := preflight.Run(context.Background(), src, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// summary is a finding as one line: principal, capability, why.
func summary(fs []preflight.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s | %s | %s", f.Principal, f.Capability, f.Why))
	}
	sort.Strings(out)
	return out
}

const fn = "serviceAccount:" + iamfake.ServiceAccount

// TestDeploymentHasNoUnexpectedPrincipal: the module's deployment as it
// should be. Each holder is listed with what it can do and why that is
// expected; the other app's grant, conditioned on its own database, and
// the roles that give none of the three capabilities are not listed; the
// organization's policy could not be read, which is said.
func TestDeploymentHasNoUnexpectedPrincipal(t *testing.T) {
	_, apis := deployment(t)
	r := run(t, apis, options())
	if u := r.Unexpected(); len(u) != 0 {
		t.Errorf("unexpected: %v", summary(u))
	}
	want := []string{
		iamfake.Operators + " | write the ledger | an operator, given by --operators",
		iamfake.SchedulerAgent + " | publish to the events topic | a Google-managed service agent of the project",
		iamfake.SinkWriter + " | publish to the events topic | a log sink's writer identity, Google-managed, publishing only what its sink routes",
		fn + " | publish to the events topic | the function's own account",
		fn + " | write the ledger | the function's own account",
		iamfake.Owner + " | act as the function's service account | an owner of the project",
		iamfake.Owner + " | publish to the events topic | an owner of the project",
		iamfake.Owner + " | write the ledger | an owner of the project",
	}
	if diff := cmp.Diff(want, summary(r.Findings)); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"projects/" + iamfake.Project, iamfake.Folder, iamfake.Topic, "projects/-/serviceAccounts/" + iamfake.ServiceAccount}, r.PoliciesRead); diff != "" {
		t.Errorf("policies read (-want +got):\n%s", diff)
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "the IAM policy of organizations/999 (inherited by the project) could not be read") {
		t.Errorf("notes = %q; want one about the organization's policy", r.Notes)
	}
	if r.ProjectNumber != iamfake.ProjectNumber {
		t.Errorf("project number %q", r.ProjectNumber)
	}
	// The function's ledger grant is the host role, its condition held.
	for _, f := range r.Findings {
		if f.Principal == fn && f.Capability == preflight.WriteLedger {
			want := []preflight.Grant{{Resource: "projects/acme-autoheal", Role: iamfake.HostRole,
				Permissions: []string{"datastore.entities.create", "datastore.entities.update", "datastore.entities.delete"},
				Condition:   `resource.name == "projects/acme-autoheal/databases/tpu-autoheal"`}}
			if diff := cmp.Diff(want, f.Grants); diff != "" {
				t.Errorf("function's ledger grants (-want +got):\n%s", diff)
			}
		}
	}
}

// TestOneUnexpectedWriter: someone given roles/datastore.user in the host
// project (another app's account, say) can rewrite saved specs: the one
// unexpected finding, with the grant and the permissions that let it.
func TestOneUnexpectedWriter(t *testing.T) {
	srv, apis := deployment(t)
	srv.Add("projects/"+iamfake.Project, iamfake.Binding{Role: "roles/datastore.user", Members: []string{"serviceAccount:batch-jobs@acme-autoheal.iam.gserviceaccount.com"}})
	r := run(t, apis, options())
	want := []preflight.Finding{{
		Principal: "serviceAccount:batch-jobs@acme-autoheal.iam.gserviceaccount.com", Capability: preflight.WriteLedger, Why: "unexpected",
		Grants: []preflight.Grant{{Resource: "projects/acme-autoheal", Role: "roles/datastore.user",
			Permissions: []string{"datastore.entities.create", "datastore.entities.update", "datastore.entities.delete"}}},
	}}
	if diff := cmp.Diff(want, r.Unexpected()); diff != "" {
		t.Errorf("unexpected (-want +got):\n%s", diff)
	}
	// Sorted first, so a person reads it first.
	if r.Findings[0].Expected {
		t.Errorf("first finding %v is expected; want the unexpected one first", r.Findings[0])
	}
}

// TestInheritedAndResourceGrants: a folder's grant reaches the project; a
// grant on the topic or on the service account itself counts for that
// capability; a grant whose condition cannot be evaluated is counted and
// marked; the default compute account with roles/editor can do it all.
func TestInheritedAndResourceGrants(t *testing.T) {
	srv, apis := deployment(t)
	srv.Add(iamfake.Folder, iamfake.Binding{Role: "roles/iam.serviceAccountUser", Members: []string{"group:platform@acme.example"}})
	srv.Add(iamfake.Topic, iamfake.Binding{Role: "roles/pubsub.publisher", Members: []string{"user:tester@acme.example"},
		Condition: &iamfake.Expr{Expression: `request.time < timestamp("2027-01-01T00:00:00Z")`}})
	srv.Add("projects/-/serviceAccounts/"+iamfake.ServiceAccount, iamfake.Binding{Role: "roles/iam.serviceAccountUser", Members: []string{"user:Dev@Acme.Example"}})
	srv.Add("projects/"+iamfake.Project, iamfake.Binding{Role: "roles/editor", Members: []string{"serviceAccount:123456789012-compute@developer.gserviceaccount.com"}})
	// A look-alike of a service agent, in a project of its own: not one.
	srv.Add(iamfake.Topic, iamfake.Binding{Role: "roles/pubsub.publisher", Members: []string{"serviceAccount:service-123456789012@mallory-proj.iam.gserviceaccount.com"}})
	r := run(t, apis, options())
	want := []string{
		"group:platform@acme.example | act as the function's service account | unexpected",
		"serviceAccount:123456789012-compute@developer.gserviceaccount.com | act as the function's service account | unexpected",
		"serviceAccount:123456789012-compute@developer.gserviceaccount.com | publish to the events topic | unexpected",
		"serviceAccount:123456789012-compute@developer.gserviceaccount.com | write the ledger | unexpected",
		"serviceAccount:service-123456789012@mallory-proj.iam.gserviceaccount.com | publish to the events topic | unexpected",
		"user:dev@acme.example | act as the function's service account | unexpected",
		"user:tester@acme.example | publish to the events topic | unexpected",
	}
	if diff := cmp.Diff(want, summary(r.Unexpected())); diff != "" {
		t.Errorf("unexpected (-want +got):\n%s", diff)
	}
	for _, f := range r.Unexpected() {
		switch f.Principal {
		case "group:platform@acme.example":
			if f.Grants[0].Resource != iamfake.Folder {
				t.Errorf("platform's grant is on %s; want the folder", f.Grants[0].Resource)
			}
		case "user:tester@acme.example":
			if g := f.Grants[0]; !g.ConditionNotEvaluated || g.Resource != iamfake.Topic {
				t.Errorf("tester's grant %+v; want the topic's, condition not evaluated", g)
			}
		}
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), `request.time < timestamp("2027-01-01T00:00:00Z")) could not be evaluated`) {
		t.Errorf("notes %q; want the condition not evaluated named", r.Notes)
	}
}

// TestRolesAreReadOncePerRun: roles/datastore.user is bound three times
// and checked for three capabilities; it is read once.
func TestRolesAreReadOncePerRun(t *testing.T) {
	srv, apis := deployment(t)
	run(t, apis, options())
	n := 0
	for _, req := range srv.Requests() {
		if req == "GET /v1/roles/datastore.user" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("roles/datastore.user read %d times; want once:\n%s", n, strings.Join(srv.Requests(), "\n"))
	}
}

func TestWhatCannotBeReadIsAnErrorOrANote(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(*iamfake.Server)
		wantErr string
		kind    error
		note    string
	}{
		{name: "host policy denied", setup: func(s *iamfake.Server) { s.Denied["projects/"+iamfake.Project] = true },
			wantErr: "read project acme-autoheal", kind: preflight.ErrDenied},
		{name: "topic missing", setup: func(s *iamfake.Server) { delete(s.Policies, iamfake.Topic) },
			wantErr: "read the IAM policy of topic " + iamfake.Topic, kind: preflight.ErrNotFound},
		{name: "service account missing", setup: func(s *iamfake.Server) { delete(s.Policies, "projects/-/serviceAccounts/"+iamfake.ServiceAccount) },
			wantErr: "read the IAM policy of service account " + iamfake.ServiceAccount, kind: preflight.ErrNotFound},
		{name: "custom role unreadable", setup: func(s *iamfake.Server) { s.Denied[iamfake.HostRole] = true },
			wantErr: "read role " + iamfake.HostRole + " (to know what its holders can do)", kind: preflight.ErrDenied},
		{name: "folder unreadable", setup: func(s *iamfake.Server) { s.Denied[iamfake.Folder] = true; s.Denied[iamfake.Folder+"#get"] = true },
			note: "the parent of folders/111 could not be read"},
		{name: "deleted role", setup: func(s *iamfake.Server) { s.Deleted["roles/datastore.user"] = true },
			note: "role roles/datastore.user is deleted: its bindings grant nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, apis := deployment(t)
			tc.setup(srv)
			r, err := preflight.Run(context.Background(), apis, options())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, tc.kind) {
					t.Fatalf("err = %v; want %q, matching %v", err, tc.wantErr, tc.kind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(r.Notes, "\n"), tc.note) {
				t.Errorf("notes %q; want %q", r.Notes, tc.note)
			}
		})
	}
}

// TestDeniedErrorNamesThePermission: the operator learns what to ask for.
func TestDeniedErrorNamesThePermission(t *testing.T) {
	srv, apis := deployment(t)
	srv.Denied["projects/"+iamfake.Project] = true
	_, err := preflight.Run(context.Background(), apis, options())
	if err == nil || !strings.Contains(err.Error(), "needs resourcemanager.projects.get") {
		t.Errorf("err = %v; want the permission named", err)
	}
}

func TestOptionsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*preflight.Options)
		want string
	}{
		{"bare topic", func(o *preflight.Options) { o.Topic = "tpu-autoheal-events" }, `topic "tpu-autoheal-events": want projects/PROJECT/topics/TOPIC`},
		{"project number", func(o *preflight.Options) { o.Project = "123456789012" }, `project "123456789012": want a project id`},
		{"account id", func(o *preflight.Options) { o.ServiceAccount = "tpu-autoheal-func" }, `service account "tpu-autoheal-func": want an email`},
		{"database path", func(o *preflight.Options) { o.Database = "projects/p/databases/d" }, `database "projects/p/databases/d": want a Firestore database id`},
		{"operator without type", func(o *preflight.Options) { o.Operators = []string{"ops@acme.example"} }, `operator "ops@acme.example": want an IAM member such as group:`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options()
			tc.edit(&o)
			_, err := preflight.Run(context.Background(), nil, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v; want %q", err, tc.want)
			}
		})
	}
}

// TestUnactableNodesHook: without a check the report says it was not
// checked; with one, its nodes are listed.
func TestUnactableNodesHook(t *testing.T) {
	_, apis := deployment(t)
	r := run(t, apis, options())
	var text bytes.Buffer
	if err := preflight.WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	if r.UnactableNodesChecked || !strings.Contains(text.String(), "Opted-in nodes whose service account the function cannot act as: not checked (give --node-projects, --zones and --node-service-accounts).") {
		t.Errorf("checked %v; text:\n%s", r.UnactableNodesChecked, text.String())
	}
	o := options()
	o.UnactableNodes = func(context.Context) ([]preflight.NodeAccount, error) {
		return []preflight.NodeAccount{{Node: "projects/acme-ml/locations/us-central2-b/nodes/n1", ServiceAccount: "train@acme-ml.iam.gserviceaccount.com", Reason: "not in AUTOHEAL_NODE_SERVICE_ACCOUNTS"}}, nil
	}
	r = run(t, apis, o)
	text.Reset()
	_ = preflight.WriteText(&text, r)
	if !r.UnactableNodesChecked || len(r.UnactableNodes) != 1 || !strings.Contains(text.String(), "nodes/n1 runs as train@acme-ml.iam.gserviceaccount.com: not in AUTOHEAL_NODE_SERVICE_ACCOUNTS") {
		t.Errorf("report %+v; text:\n%s", r, text.String())
	}
}

// TestJSONHasEmptyListsAndCamelCase: jq-friendly.
func TestJSONHasEmptyListsAndCamelCase(t *testing.T) {
	_, apis := deployment(t)
	r := run(t, apis, options())
	r.Notes = []string{}
	var b bytes.Buffer
	if err := preflight.WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"project", "projectNumber", "topic", "serviceAccount", "database", "policiesRead", "findings", "notes", "unactableNodes", "unactableNodesChecked"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if !strings.Contains(b.String(), `"notes": []`) || !strings.Contains(b.String(), `"unactableNodes": []`) {
		t.Errorf("empty lists are not []:\n%s", b.String())
	}
}

// TestRolesDataIsGooglesData: the roles the fake serves are the IAM data's
// own (IAM_DATA_DIR, default <repo>/../shared/iam), when it is there; in
// CI it must be.
func TestRolesDataIsGooglesData(t *testing.T) {
	dir := os.Getenv("IAM_DATA_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "iam")
	}
	b, err := os.ReadFile(filepath.Join(dir, "roles.json"))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("IAM data: %v (set IAM_DATA_DIR)", err)
		}
		t.Skipf("IAM data not found: %v (set IAM_DATA_DIR to check the roles against it)", err)
	}
	var d struct {
		Roles map[string][]string `json:"roles"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	for name, perms := range iamfake.GoogleRoles() {
		if diff := cmp.Diff(d.Roles[name], perms); diff != "" {
			t.Errorf("%s differs from the IAM data (-data +fake):\n%s", name, diff)
		}
	}
}
