package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/preflight/iamfake"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// preflightArgs are the flags of the fake deployment, topic given bare.
func preflightArgs(endpoint string, extra ...string) []string {
	return append([]string{"preflight", "--project", iamfake.Project, "--topic", "tpu-autoheal-events",
		"--service-account", iamfake.ServiceAccount, "--database", iamfake.Database,
		"--operators", iamfake.Operators, "--endpoint", endpoint}, extra...)
}

func TestPreflightWithNoUnexpectedPrincipalExitsZero(t *testing.T) {
	srv := iamfake.New()
	defer srv.Close()
	srv.Deployment()
	r := runCLI(t, nil, preflightArgs(srv.URL)...)
	if r.err != nil || exitCode(r.err, &strings.Builder{}) != 0 {
		t.Fatalf("preflight: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"Preflight of project acme-autoheal (number 123456789012)",
		"Unexpected: none.",
		"  group:tpu-operators@acme.example (an operator, given by --operators): write the ledger\n",
		"  serviceAccount:" + iamfake.ServiceAccount + " (the function's own account): write the ledger; publish to the events topic\n",
		"the IAM policy of organizations/999 (inherited by the project) could not be read",
		"Result: no unexpected principal.",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestPreflightWithAnUnexpectedWriterExits5: the writer, the grant and the
// permissions are printed, and the exit status is 5.
func TestPreflightWithAnUnexpectedWriterExits5(t *testing.T) {
	srv := iamfake.New()
	defer srv.Close()
	srv.Deployment()
	srv.Add("projects/"+iamfake.Project, iamfake.Binding{Role: "roles/datastore.user", Members: []string{"user:mallory@acme.example"}})
	r := runCLI(t, nil, preflightArgs(srv.URL)...)
	var stderr strings.Builder
	if code := exitCode(r.err, &stderr); code != exitUnexpectedPrincipals {
		t.Fatalf("exit %d (%v); want %d", code, r.err, exitUnexpectedPrincipals)
	}
	if !strings.Contains(stderr.String(), "1 principal can steer the deployment unexpectedly") {
		t.Errorf("stderr %q", stderr.String())
	}
	want := "UNEXPECTED: 1 principal can steer this deployment, and it is none of the function, the project's owners or the operators:\n" +
		"  user:mallory@acme.example can write the ledger\n" +
		"      roles/datastore.user on projects/acme-autoheal: datastore.entities.create, datastore.entities.update, datastore.entities.delete\n"
	if !strings.Contains(r.stdout, want) {
		t.Errorf("output lacks\n%s\ngot:\n%s", want, r.stdout)
	}

	r = runCLI(t, nil, preflightArgs(srv.URL, "--format", "json")...)
	var got struct {
		Findings []struct {
			Principal, Capability string
			Expected              bool
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("--format json: %v\n%s", err, r.stdout)
	}
	if len(got.Findings) == 0 || got.Findings[0].Principal != "user:mallory@acme.example" || got.Findings[0].Expected {
		t.Errorf("first JSON finding %+v; want mallory, unexpected", got.Findings)
	}
}

func TestPreflightFlagsAndSetupErrors(t *testing.T) {
	srv := iamfake.New()
	defer srv.Close()
	srv.Deployment()
	srv.Denied["projects/"+iamfake.Project] = true
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing database", []string{"preflight", "--project", iamfake.Project, "--topic", "t", "--service-account", iamfake.ServiceAccount},
			exitUsage, "--database is required (terraform output firestore_database"},
		{"bad format", preflightArgs(srv.URL, "--format", "yaml"), exitUsage, `--format "yaml": want text or json`},
		{"operator without a type", preflightArgs(srv.URL, "--operators", "ops@acme.example"), exitUsage, `operator "ops@acme.example": want an IAM member`},
		{"stray argument", preflightArgs(srv.URL, "extra"), exitUsage, "preflight takes no arguments"},
		{"bad endpoint", preflightArgs("ftp://x"), exitUsage, `--endpoint "ftp://x": want an http(s) URL`},
		{"permission missing", preflightArgs(srv.URL), exitUsage, "needs resourcemanager.projects.get"},
		{"API down", preflightArgs("http://127.0.0.1:1"), exitError, "preflight (run it again)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, nil, tc.args...)
			var stderr strings.Builder
			if code := exitCode(r.err, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, %q; want %d and %q", code, stderr.String(), tc.code, tc.want)
			}
		})
	}
}

func TestPreflightHelp(t *testing.T) {
	r := runCLI(t, nil, "preflight", "--help")
	if !errors.Is(r.err, errHelp) || !strings.Contains(r.stderr, "Usage: autoheal preflight") || !strings.Contains(r.stderr, "-service-account email") {
		t.Errorf("--help: %v\n%s", r.err, r.stderr)
	}
}

// The opted-in nodes a recovery would skip for their service account:
// one not listed, one listed whose actAs the function lacks; a node whose
// account is fine and one not opted in are not listed.
func TestPreflightListsNodesWhoseAccountTheFunctionCannotActAs(t *testing.T) {
	srv := iamfake.New()
	defer srv.Close()
	srv.Deployment()
	const trainer, other, rogue = "trainer@acme-ml.iam.gserviceaccount.com", "other@acme-ml.iam.gserviceaccount.com", "rogue@acme-ml.iam.gserviceaccount.com"
	srv.Policies["projects/-/serviceAccounts/"+trainer] = []iamfake.Binding{{Role: "roles/iam.serviceAccountUser", Members: []string{"serviceAccount:" + iamfake.ServiceAccount}}}
	srv.Policies["projects/-/serviceAccounts/"+other] = []iamfake.Binding{}
	srv.Policies["projects/acme-ml"] = []iamfake.Binding{}
	node := func(id, sa string, optedIn bool) *tpu.Node {
		n := &tpu.Node{Name: "projects/acme-ml/locations/us-central2-b/nodes/" + id, State: "READY", AcceleratorType: "v4-8",
			ServiceAccount: &tpu.ServiceAccount{Email: sa}, Labels: map[string]string{}}
		if optedIn {
			n.Labels["tpu-autoheal"] = "enabled"
		}
		return n
	}
	fake := tpufake.New(tpufake.Fleet{Nodes: []*tpu.Node{
		node("fine", trainer, true), node("no-act-as", other, true), node("unlisted", rogue, true), node("not-opted-in", rogue, false),
	}})
	defer fake.Close()
	r := runCLI(t, nil, preflightArgs(srv.URL, "--node-projects", "acme-ml", "--zones", "us-central2-b",
		"--node-service-accounts", trainer+","+other, "--tpu-endpoint", fake.URL(), "--format", "json")...)
	if r.err != nil {
		t.Fatalf("preflight: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	var rep struct {
		Checked bool `json:"unactableNodesChecked"`
		Nodes   []struct {
			Node, ServiceAccount, Reason string
		} `json:"unactableNodes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if !rep.Checked || len(rep.Nodes) != 2 {
		t.Fatalf("unactable nodes = %+v (checked %v), want no-act-as and unlisted", rep.Nodes, rep.Checked)
	}
	for i, want := range []struct{ node, reason string }{
		{"no-act-as", "cannot act as " + other},
		{"unlisted", rogue + " is not in AUTOHEAL_NODE_SERVICE_ACCOUNTS"},
	} {
		got := rep.Nodes[i]
		if !strings.HasSuffix(got.Node, "/"+want.node) || !strings.Contains(got.Reason, want.reason) {
			t.Errorf("node %d = %+v, want %s: %q", i, got, want.node, want.reason)
		}
	}
	if r := runCLI(t, nil, preflightArgs(srv.URL, "--zones", "us-central2-b")...); r.err == nil || !strings.Contains(r.err.Error(), "go together") {
		t.Errorf("--zones alone: err %v, want the three named together", r.err)
	}
}
