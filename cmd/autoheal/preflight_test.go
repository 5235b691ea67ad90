package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tpu-autoheal/autoheal/internal/preflight/iamfake"
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
