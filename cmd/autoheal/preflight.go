package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/preflight"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
)

// maxPreflightPages bounds the pages listed per project × zone.
const maxPreflightPages = 100

// optedInNodes lists the nodes of every project × zone that carry the
// opt-in label key=value.
func optedInNodes(tc remediate.TPU, projects, zones []string, key, value string) preflight.NodeLister {
	return func(ctx context.Context) ([]*tpu.Node, error) {
		var out []*tpu.Node
		for _, p := range projects {
			for _, z := range zones {
				parent := "projects/" + p + "/locations/" + z
				token := ""
				for page := 0; page < maxPreflightPages; page++ {
					nodes, next, err := tc.ListNodes(ctx, parent, token)
					if err != nil {
						return nil, fmt.Errorf("list the nodes of %s: %w", parent, err)
					}
					for _, n := range nodes {
						if n.Labels[key] == value {
							out = append(out, n)
						}
					}
					if next == "" {
						break
					}
					token = next
				}
			}
		}
		return out, nil
	}
}

const preflightHelp = `Usage: autoheal preflight --project HOST --topic TOPIC --service-account EMAIL --database DB [--operators MEMBERS] [--format text|json]

Who, besides the function and the people meant to, can steer this
deployment? Run it with your own credentials (Application Default
Credentials) before go-live and after any IAM change. It reads the IAM
policies of the host project (and of the folders and organization above it,
where you may read them), of the events topic and of the function's service
account, expands every role into its permissions, and lists every principal
that can
  write the ledger        datastore.entities.create/update/delete, datastore.databases.import
  publish to the topic    pubsub.topics.publish
  act as the function     iam.serviceAccounts.actAs, getAccessToken, getOpenIdToken,
                          signBlob, signJwt, implicitDelegation, serviceAccountKeys.create
(or change a policy that grants these: the setIamPolicy permissions), with
the grants that let it. Expected: the function's account, the project's
owners, the --operators, a log sink's writer identity (publish only) and
Google's service agents of the project; every other principal is
unexpected. Conditions on resource.name are evaluated; a condition it
cannot evaluate is counted and said so.

The values are the Terraform module's outputs: topic, function_service_account,
firestore_database.

Permissions it needs: resourcemanager.projects.get and getIamPolicy,
pubsub.topics.getIamPolicy, iam.serviceAccounts.getIamPolicy, and
iam.roles.get for custom roles; folder and organization policies are read
when you may.

With --node-projects, --zones and --node-service-accounts it also lists the
opted-in nodes (TPU API nodes.list) whose service account the function would
skip them for before a delete: not in --node-service-accounts, or no binding
of the function's account with iam.serviceAccounts.actAs on it (read from
the account's and its project's policies). They are listed, not counted in
the exit status.

Exit status: 0 no unexpected principal; 5 some unexpected principal (listed);
2 bad flags, no credentials, a permission missing or a resource not found;
1 an API failed (run it again).

` + exitCodesHelp + `
Flags:
`

// exitUnexpectedPrincipals is preflight's "needs a person": someone
// unexpected can steer the deployment.
const exitUnexpectedPrincipals = 5

func runPreflight(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("preflight", preflightHelp, stderr)
	project := fs.String("project", "", "the host `project` id (required)")
	topic := fs.String("topic", "", "the events `topic`: projects/P/topics/T, or T in --project (required; terraform output topic)")
	account := fs.String("service-account", "", "the function's service account `email` (required; terraform output function_service_account)")
	database := fs.String("database", "", "the ledger's Firestore `database` id (required; terraform output firestore_database)")
	var operators listFlag
	fs.Var(&operators, "operators", "IAM `members` expected to write the ledger (pause, resume), comma-separated or repeated: group:ops@example.com")
	format := fs.String("format", "text", "output `format`: text or json")
	endpoint := fs.String("endpoint", "", "send every API call to this `URL` instead of Google's (a test server; plain http gets no credentials)")
	var nodeProjects, zones, nodeAccounts listFlag
	fs.Var(&nodeProjects, "node-projects", "with --zones and --node-service-accounts: list the opted-in nodes of these `projects` and say which the function would skip for their service account")
	fs.Var(&zones, "zones", "the `zones` whose nodes --node-projects lists (AUTOHEAL_ZONES)")
	fs.Var(&nodeAccounts, "node-service-accounts", "the `emails` the function may recreate nodes as (AUTOHEAL_NODE_SERVICE_ACCOUNTS: terraform tpu_service_accounts)")
	selector := fs.String("label-selector", "tpu-autoheal=enabled", "the opt-in `label`, key=value (AUTOHEAL_LABEL_SELECTOR)")
	tpuEndpoint := fs.String("tpu-endpoint", "", "send the TPU API calls of --node-projects to this `URL` (a test server)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("preflight takes no arguments (got %q; see autoheal preflight -h)", fs.Args())
	}
	for _, f := range []struct{ name, value, where string }{
		{"--project", *project, "the host project's id"},
		{"--topic", *topic, "terraform output topic"},
		{"--service-account", *account, "terraform output function_service_account"},
		{"--database", *database, "terraform output firestore_database"},
	} {
		if f.value == "" {
			return usagef("preflight: %s is required (%s; see autoheal preflight -h)", f.name, f.where)
		}
	}
	if *format != "text" && *format != "json" {
		return usagef("preflight: --format %q: want text or json", *format)
	}
	if !strings.Contains(*topic, "/") {
		*topic = "projects/" + *project + "/topics/" + *topic
	}
	o := preflight.Options{Project: *project, Topic: *topic, ServiceAccount: *account, Database: *database, Operators: operators}
	if err := o.Validate(); err != nil {
		return usagef("preflight: %v", err)
	}
	opts, err := preflight.EndpointOptions(*endpoint)
	if err != nil {
		return usagef("preflight: --%v", err)
	}
	apis, err := preflight.NewAPIs(ctx, opts...)
	if err != nil {
		return usagef("preflight: %v (credentials: gcloud auth application-default login)", err)
	}
	if len(nodeProjects) > 0 || len(zones) > 0 || len(nodeAccounts) > 0 {
		if len(nodeProjects) == 0 || len(zones) == 0 || len(nodeAccounts) == 0 {
			return usagef("preflight: --node-projects, --zones and --node-service-accounts go together")
		}
		key, value, err := remediate.ParseSelector(*selector)
		if err != nil {
			return usagef("preflight: --label-selector %q: want key=value", *selector)
		}
		tpuOpts, err := tpuapi.EndpointOptions(*tpuEndpoint)
		if err != nil {
			return usagef("preflight: --tpu-endpoint: %v", err)
		}
		tc, err := tpuapi.NewFromOptions(ctx, tpuOpts...)
		if err != nil {
			return usagef("preflight: TPU API client: %v", err)
		}
		o.UnactableNodes = preflight.NodeAccounts(apis, *account, nodeAccounts, optedInNodes(tc, nodeProjects, zones, key, value))
	}
	r, err := preflight.Run(ctx, apis, o)
	switch {
	case errors.Is(err, preflight.ErrDenied), errors.Is(err, preflight.ErrNotFound):
		return usagef("preflight: %v", err)
	case err != nil:
		return fmt.Errorf("preflight (run it again): %w", err)
	}
	if *format == "json" {
		err = preflight.WriteJSON(stdout, r)
	} else {
		err = preflight.WriteText(stdout, r)
	}
	if err != nil {
		return err
	}
	if u := r.Unexpected(); len(u) > 0 {
		n := map[string]bool{}
		for _, f := range u {
			n[f.Principal] = true
		}
		return &exitStatus{code: exitUnexpectedPrincipals, msg: fmt.Sprintf("preflight: %s can steer the deployment unexpectedly (listed above)", plural(len(n), "principal", "principals"))}
	}
	return nil
}
