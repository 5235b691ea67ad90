package preflight

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/tpu-autoheal/autoheal/internal/endpoint"
	crm "google.golang.org/api/cloudresourcemanager/v3"
	"google.golang.org/api/googleapi"
	iam "google.golang.org/api/iam/v1"
	"google.golang.org/api/option"
	pubsub "google.golang.org/api/pubsub/v1"
)

// APIs is the Source that reads Google's APIs: Cloud Resource Manager v3
// (projects, folders, organizations and their policies), Pub/Sub v1 (the
// topic's policy) and IAM v1 (the service account's policy, roles).
type APIs struct {
	crm    *crm.Service
	pubsub *pubsub.Service
	iam    *iam.Service
}

var _ Source = (*APIs)(nil)

// NewAPIs builds the three clients with opts (credentials: Application
// Default Credentials unless opts say otherwise).
func NewAPIs(ctx context.Context, opts ...option.ClientOption) (*APIs, error) {
	c, err := crm.NewService(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("cloud resource manager client: %w", err)
	}
	p, err := pubsub.NewService(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("pub/sub client: %w", err)
	}
	i, err := iam.NewService(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("iam client: %w", err)
	}
	return &APIs{crm: c, pubsub: p, iam: i}, nil
}

// EndpointOptions sends every API call to endpoint (a test server, or a
// proxy) instead of Google's: nil for "", the endpoint for an https URL,
// and the endpoint without credentials for a plain http one, so
// credentials never travel in clear text.
func EndpointOptions(e string) ([]option.ClientOption, error) {
	return endpoint.Options("endpoint", e, "")
}

const policyVersion = 3 // conditions are only returned in version 3

// Project reads the project (resourcemanager.projects.get).
func (a *APIs) Project(ctx context.Context, id string) (string, string, error) {
	p, err := a.crm.Projects.Get("projects/" + id).Context(ctx).Do()
	if err != nil {
		return "", "", apiError(err, "resourcemanager.projects.get")
	}
	return strings.TrimPrefix(p.Name, "projects/"), p.Parent, nil
}

// Parent reads a folder's parent (resourcemanager.folders.get).
func (a *APIs) Parent(ctx context.Context, folder string) (string, error) {
	f, err := a.crm.Folders.Get(folder).Context(ctx).Do()
	if err != nil {
		return "", apiError(err, "resourcemanager.folders.get")
	}
	return f.Parent, nil
}

// Policy reads a policy, by the kind of resource named.
func (a *APIs) Policy(ctx context.Context, resource string) (Policy, error) {
	req := &crm.GetIamPolicyRequest{Options: &crm.GetPolicyOptions{RequestedPolicyVersion: policyVersion}}
	switch {
	case strings.Contains(resource, "/topics/"):
		p, err := a.pubsub.Projects.Topics.GetIamPolicy(resource).OptionsRequestedPolicyVersion(policyVersion).Context(ctx).Do()
		if err != nil {
			return Policy{}, apiError(err, "pubsub.topics.getIamPolicy")
		}
		var out Policy
		for _, b := range p.Bindings {
			out.Bindings = append(out.Bindings, Binding{Role: b.Role, Members: b.Members, Condition: pubsubExpr(b.Condition)})
		}
		return out, nil
	case strings.Contains(resource, "/serviceAccounts/"):
		p, err := a.iam.Projects.ServiceAccounts.GetIamPolicy(resource).OptionsRequestedPolicyVersion(policyVersion).Context(ctx).Do()
		if err != nil {
			return Policy{}, apiError(err, "iam.serviceAccounts.getIamPolicy")
		}
		var out Policy
		for _, b := range p.Bindings {
			out.Bindings = append(out.Bindings, Binding{Role: b.Role, Members: b.Members, Condition: iamExpr(b.Condition)})
		}
		return out, nil
	}
	var p *crm.Policy
	var err error
	switch {
	case strings.HasPrefix(resource, "projects/"):
		p, err = a.crm.Projects.GetIamPolicy(resource, req).Context(ctx).Do()
		err = apiError(err, "resourcemanager.projects.getIamPolicy")
	case strings.HasPrefix(resource, "folders/"):
		p, err = a.crm.Folders.GetIamPolicy(resource, req).Context(ctx).Do()
		err = apiError(err, "resourcemanager.folders.getIamPolicy")
	case strings.HasPrefix(resource, "organizations/"):
		p, err = a.crm.Organizations.GetIamPolicy(resource, req).Context(ctx).Do()
		err = apiError(err, "resourcemanager.organizations.getIamPolicy")
	default:
		return Policy{}, fmt.Errorf("no policy reader for %q", resource)
	}
	if err != nil {
		return Policy{}, err
	}
	var out Policy
	for _, b := range p.Bindings {
		expr := ""
		if b.Condition != nil {
			expr = b.Condition.Expression
		}
		out.Bindings = append(out.Bindings, Binding{Role: b.Role, Members: b.Members, Condition: expr})
	}
	return out, nil
}

func pubsubExpr(e *pubsub.Expr) string {
	if e == nil {
		return ""
	}
	return e.Expression
}

func iamExpr(e *iam.Expr) string {
	if e == nil {
		return ""
	}
	return e.Expression
}

// Role reads a predefined role (roles/R), a project's custom role
// (projects/P/roles/R) or an organization's (organizations/O/roles/R).
func (a *APIs) Role(ctx context.Context, name string) ([]string, bool, error) {
	var r *iam.Role
	var err error
	switch {
	case strings.HasPrefix(name, "roles/"):
		r, err = a.iam.Roles.Get(name).Context(ctx).Do()
	case strings.HasPrefix(name, "projects/"):
		r, err = a.iam.Projects.Roles.Get(name).Context(ctx).Do()
	case strings.HasPrefix(name, "organizations/"):
		r, err = a.iam.Organizations.Roles.Get(name).Context(ctx).Do()
	default:
		return nil, false, fmt.Errorf("role %q: not a role name (roles/R, projects/P/roles/R, organizations/O/roles/R)", name)
	}
	if err != nil {
		return nil, false, apiError(err, "iam.roles.get")
	}
	return r.IncludedPermissions, r.Deleted, nil
}

// ErrDenied is matched by an error from an API that refused the call for
// want of a permission (or credentials): the operator's to fix, not
// worth retrying as it is.
var ErrDenied = errors.New("permission denied")

// ErrNotFound is matched by an error about a resource that does not
// exist (a wrong flag).
var ErrNotFound = errors.New("not found")

type apiErr struct {
	kind       error
	permission string
	err        error
}

func (e *apiErr) Error() string {
	switch e.kind {
	case ErrDenied:
		return fmt.Sprintf("%v (needs %s)", e.err, e.permission)
	}
	return e.err.Error()
}

func (e *apiErr) Unwrap() []error { return []error{e.kind, e.err} }

// apiError classifies a REST error; nil stays nil.
func apiError(err error, permission string) error {
	if err == nil {
		return nil
	}
	var g *googleapi.Error
	if errors.As(err, &g) {
		switch g.Code {
		case http.StatusForbidden, http.StatusUnauthorized:
			return &apiErr{kind: ErrDenied, permission: permission, err: err}
		case http.StatusNotFound:
			return &apiErr{kind: ErrNotFound, permission: permission, err: err}
		}
	}
	return err
}
