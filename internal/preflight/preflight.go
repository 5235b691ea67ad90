// Package preflight answers an operator's question before go-live and
// after any IAM change: who, besides the function and the people meant to,
// can steer this deployment? It reads the host project's IAM policy (and
// the folders' and organization's above it, where readable), the events
// topic's and the function's service account's, expands every bound role
// into its permissions, and lists every principal that can write the
// ledger's Firestore database, publish to the events topic, or act as the
// function's service account, each with the grants that let it, split into
// expected and unexpected.
//
// It only reads: it never changes a policy, and it runs with the
// operator's credentials, never the function's.
package preflight

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Capability is a way to steer the deployment.
type Capability string

const (
	// WriteLedger: create, change or delete the ledger's documents (a saved
	// spec is what the function creates a node from).
	WriteLedger Capability = "write the ledger"
	// PublishEvents: send the function events, sweeps and follow kicks.
	PublishEvents Capability = "publish to the events topic"
	// ActAsFunction: run code or get tokens as the function's account.
	ActAsFunction Capability = "act as the function's service account"
)

// Capabilities in the order reports list them.
var Capabilities = []Capability{WriteLedger, PublishEvents, ActAsFunction}

// setIamPolicy permissions: a principal that can change a policy on the
// way to a resource can grant itself any permission on it.
var setIamPolicy = []string{
	"resourcemanager.projects.setIamPolicy",
	"resourcemanager.folders.setIamPolicy",
	"resourcemanager.organizations.setIamPolicy",
}

// Permissions is what each capability takes: any one of them is enough.
var Permissions = map[Capability][]string{
	WriteLedger: append([]string{
		"datastore.entities.create", "datastore.entities.update", "datastore.entities.delete",
		"datastore.databases.import", // an import overwrites documents
	}, setIamPolicy...),
	PublishEvents: append([]string{"pubsub.topics.publish", "pubsub.topics.setIamPolicy"}, setIamPolicy...),
	ActAsFunction: append([]string{
		"iam.serviceAccounts.actAs", // deploy code that runs as it
		"iam.serviceAccounts.getAccessToken", "iam.serviceAccounts.getOpenIdToken",
		"iam.serviceAccounts.signBlob", "iam.serviceAccounts.signJwt",
		"iam.serviceAccounts.implicitDelegation", // through a delegation chain
		"iam.serviceAccountKeys.create",          // a key is the account
		"iam.serviceAccounts.setIamPolicy",       // grant itself any of these
	}, setIamPolicy...),
}

// Options says what to check.
type Options struct {
	Project        string   // the host project's id
	Topic          string   // the events topic, projects/P/topics/T
	ServiceAccount string   // the function's service account's email
	Database       string   // the ledger's Firestore database id
	Operators      []string // principals expected to hold these (pause/resume), as IAM members: group:ops@example.com
	// UnactableNodes, when set, lists opted-in nodes whose service
	// account the function could not act as: the recovery would skip
	// them before their delete. Nil: not checked (the engine's check is a
	// later change; the report says so).
	UnactableNodes NodeAccountCheck
}

// NodeAccountCheck lists opted-in nodes whose service account the function
// could not act as (not listed in AUTOHEAL_NODE_SERVICE_ACCOUNTS, or
// iam.serviceAccounts.actAs missing on it).
type NodeAccountCheck func(ctx context.Context) ([]NodeAccount, error)

// NodeAccount is one node the recovery would skip for its service account.
type NodeAccount struct {
	Node           string `json:"node"`
	ServiceAccount string `json:"serviceAccount"`
	Reason         string `json:"reason"`
}

// Grant is one binding that gives a principal a capability.
type Grant struct {
	Resource    string   `json:"resource"` // where the binding is: projects/P, folders/F, a topic, a service account
	Role        string   `json:"role"`
	Permissions []string `json:"permissions"` // those of the role that give the capability
	Condition   string   `json:"condition,omitempty"`
	// ConditionNotEvaluated says the binding has a condition whose effect
	// could not be worked out, so the grant is counted.
	ConditionNotEvaluated bool `json:"conditionNotEvaluated,omitempty"`
}

// Finding is one principal's capability and the grants that give it.
type Finding struct {
	Principal  string     `json:"principal"`
	Capability Capability `json:"capability"`
	Expected   bool       `json:"expected"`
	Why        string     `json:"why"` // why it is expected, or "unexpected"
	Grants     []Grant    `json:"grants"`
}

// Report is what Run found.
type Report struct {
	Project        string    `json:"project"`
	ProjectNumber  string    `json:"projectNumber"`
	Topic          string    `json:"topic"`
	ServiceAccount string    `json:"serviceAccount"`
	Database       string    `json:"database"`
	PoliciesRead   []string  `json:"policiesRead"`
	Findings       []Finding `json:"findings"`
	// Notes are what could not be read or evaluated; each weakens the
	// answer and says how.
	Notes []string `json:"notes"`
	// UnactableNodes is what Options.UnactableNodes found;
	// UnactableNodesChecked is false when there was no check to run.
	UnactableNodes        []NodeAccount `json:"unactableNodes"`
	UnactableNodesChecked bool          `json:"unactableNodesChecked"`
}

// Unexpected are the findings that are not expected.
func (r *Report) Unexpected() []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if !f.Expected {
			out = append(out, f)
		}
	}
	return out
}

// Source is what Run reads; APIs reads Google's, a test may read a fake.
type Source interface {
	// Project returns the project's number and parent (folders/F,
	// organizations/O or "").
	Project(ctx context.Context, id string) (number, parent string, err error)
	// Parent returns a folder's parent.
	Parent(ctx context.Context, folder string) (string, error)
	// Policy returns the IAM policy (version 3, conditions included) of a
	// project, folder, organization, topic or service account, by name.
	Policy(ctx context.Context, resource string) (Policy, error)
	// Role returns a role's permissions, and whether it is deleted.
	Role(ctx context.Context, name string) (perms []string, deleted bool, err error)
}

// Policy is an IAM policy's bindings.
type Policy struct {
	Bindings []Binding
}

// Binding grants a role to members, under a condition when Condition is
// not empty.
type Binding struct {
	Role      string
	Members   []string
	Condition string // the CEL expression
}

var (
	topicName  = regexp.MustCompile(`^projects/([a-z][a-z0-9-]{4,28}[a-z0-9])/topics/[A-Za-z][A-Za-z0-9._~%+-]{2,254}$`)
	projectID  = regexp.MustCompile(`^[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
	databaseID = regexp.MustCompile(`^[a-z][a-z0-9-]{2,61}[a-z0-9]$`)
	email      = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[a-z]+$`)
	memberRE   = regexp.MustCompile(`^(user|group|serviceAccount|domain):[^\s:]+$|^principal(Set)?://\S+$`)
)

// Validate checks o, with errors naming the option and what is wanted.
func (o Options) Validate() error {
	switch {
	case !projectID.MatchString(o.Project):
		return fmt.Errorf("project %q: want a project id such as acme-autoheal", o.Project)
	case !topicName.MatchString(o.Topic):
		return fmt.Errorf("topic %q: want projects/PROJECT/topics/TOPIC", o.Topic)
	case !email.MatchString(o.ServiceAccount):
		return fmt.Errorf("service account %q: want an email such as tpu-autoheal-func@PROJECT.iam.gserviceaccount.com", o.ServiceAccount)
	case !databaseID.MatchString(o.Database):
		return fmt.Errorf("database %q: want a Firestore database id such as tpu-autoheal", o.Database)
	}
	for _, m := range o.Operators {
		if !memberRE.MatchString(m) {
			return fmt.Errorf("operator %q: want an IAM member such as group:ops@example.com or user:alice@example.com", m)
		}
	}
	return nil
}

// scope is one policy read and the target a permission checked there is
// about.
type scope struct {
	resource string
	policy   Policy
	kind     string // "project", "folder", "organization", "topic", "serviceAccount"
}

// Run reads the policies and roles and reports who can do what. An error
// means the answer could not be had (the host project's, the topic's or
// the service account's policy, or a role, could not be read); what is
// only weaker (an ancestor not readable) is a note.
func Run(ctx context.Context, src Source, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	r := &Report{Project: o.Project, Topic: o.Topic, ServiceAccount: o.ServiceAccount, Database: o.Database,
		PoliciesRead: []string{}, Findings: []Finding{}, Notes: []string{}, UnactableNodes: []NodeAccount{}}
	number, parent, err := src.Project(ctx, o.Project)
	if err != nil {
		return nil, fmt.Errorf("read project %s: %w", o.Project, err)
	}
	r.ProjectNumber = number

	project := "projects/" + o.Project
	hostPolicy, err := src.Policy(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("read the IAM policy of %s: %w", project, err)
	}
	r.PoliciesRead = append(r.PoliciesRead, project)
	hierarchy := []scope{{resource: project, policy: hostPolicy, kind: "project"}}
	hierarchy = append(hierarchy, readAncestors(ctx, src, parent, r)...)

	topicPolicy, err := src.Policy(ctx, o.Topic)
	if err != nil {
		return nil, fmt.Errorf("read the IAM policy of topic %s: %w", o.Topic, err)
	}
	r.PoliciesRead = append(r.PoliciesRead, o.Topic)
	saResource := "projects/-/serviceAccounts/" + o.ServiceAccount
	saPolicy, err := src.Policy(ctx, saResource)
	if err != nil {
		return nil, fmt.Errorf("read the IAM policy of service account %s: %w", o.ServiceAccount, err)
	}
	r.PoliciesRead = append(r.PoliciesRead, saResource)

	roles := roleCache{src: src, perms: map[string][]string{}}
	expect := newExpectations(o, number, hostPolicy)
	ledger := target{names: withNumber("projects/"+o.Project+"/databases/"+o.Database, o.Project, number), complete: true,
		typ: "firestore.googleapis.com/Database", service: "firestore.googleapis.com"}
	topic := target{names: withNumber(o.Topic, o.Project, number), complete: true, typ: "pubsub.googleapis.com/Topic", service: "pubsub.googleapis.com"}
	sa := target{names: []string{saResource, "projects/" + o.Project + "/serviceAccounts/" + o.ServiceAccount}, typ: "iam.googleapis.com/ServiceAccount", service: "iam.googleapis.com"}
	byCap := map[Capability]struct {
		t      target
		scopes []scope
	}{
		WriteLedger:   {ledger, hierarchy},
		PublishEvents: {topic, append([]scope{{resource: o.Topic, policy: topicPolicy, kind: "topic"}}, hierarchy...)},
		ActAsFunction: {sa, append([]scope{{resource: saResource, policy: saPolicy, kind: "serviceAccount"}}, hierarchy...)},
	}
	found := map[[2]string]*Finding{}
	for _, c := range Capabilities {
		for _, sc := range byCap[c].scopes {
			for _, b := range sc.policy.Bindings {
				perms, err := roles.permissions(ctx, b.Role, r)
				if err != nil {
					return nil, err
				}
				g, ok := grantOf(c, b, perms, sc, byCap[c].t, o.Project, number, r)
				if !ok {
					continue
				}
				for _, m := range b.Members {
					m = normalMember(m)
					if strings.HasPrefix(m, "deleted:") {
						r.note(fmt.Sprintf("%s on %s is bound to %s, which grants nothing unless it is undeleted", b.Role, sc.resource, m))
						continue
					}
					k := [2]string{m, string(c)}
					f := found[k]
					if f == nil {
						expected, why := expect.of(m, c)
						f = &Finding{Principal: m, Capability: c, Expected: expected, Why: why}
						found[k] = f
					}
					f.Grants = append(f.Grants, g)
				}
			}
		}
	}
	for _, f := range found {
		r.Findings = append(r.Findings, *f)
	}
	capOrder := map[Capability]int{}
	for i, c := range Capabilities {
		capOrder[c] = i
	}
	sort.Slice(r.Findings, func(i, j int) bool {
		a, b := r.Findings[i], r.Findings[j]
		if a.Expected != b.Expected {
			return !a.Expected
		}
		if a.Principal != b.Principal {
			return a.Principal < b.Principal
		}
		return capOrder[a.Capability] < capOrder[b.Capability]
	})

	if o.UnactableNodes != nil {
		nodes, err := o.UnactableNodes(ctx)
		if err != nil {
			return nil, fmt.Errorf("list opted-in nodes whose service account the function cannot act as: %w", err)
		}
		r.UnactableNodesChecked = true
		r.UnactableNodes = append(r.UnactableNodes, nodes...)
	}
	return r, nil
}

func (r *Report) note(s string) {
	for _, n := range r.Notes {
		if n == s {
			return
		}
	}
	r.Notes = append(r.Notes, s)
}

// readAncestors reads the policies of the folders and the organization
// above the project, as far as they can be read; what cannot is a note.
func readAncestors(ctx context.Context, src Source, parent string, r *Report) []scope {
	var out []scope
	for i := 0; parent != "" && i < 12; i++ { // folders nest at most 10 deep
		kind := "folder"
		if strings.HasPrefix(parent, "organizations/") {
			kind = "organization"
		}
		if p, err := src.Policy(ctx, parent); err != nil {
			r.note(fmt.Sprintf("the IAM policy of %s (inherited by the project) could not be read: %v; its bindings are not checked", parent, err))
		} else {
			r.PoliciesRead = append(r.PoliciesRead, parent)
			out = append(out, scope{resource: parent, policy: p, kind: kind})
		}
		if kind == "organization" {
			return out
		}
		next, err := src.Parent(ctx, parent)
		if err != nil {
			r.note(fmt.Sprintf("the parent of %s could not be read: %v; the policies above it are not checked", parent, err))
			return out
		}
		parent = next
	}
	return out
}

// grantOf is the grant binding b gives for capability c, if any: the
// role's permissions that give c, minus those a condition rules out.
func grantOf(c Capability, b Binding, perms []string, sc scope, t target, project, number string, r *Report) (Grant, bool) {
	g := Grant{Resource: sc.resource, Role: b.Role, Condition: b.Condition, Permissions: []string{}}
	have := map[string]bool{}
	for _, p := range perms {
		have[p] = true
	}
	for _, p := range Permissions[c] {
		if !have[p] {
			continue
		}
		if b.Condition != "" {
			// A setIamPolicy permission is checked on the policy's own
			// resource; the others on the capability's target.
			on := t
			if strings.HasSuffix(p, ".setIamPolicy") {
				on = scopeTarget(sc, project, number)
			}
			switch evaluate(b.Condition, on) {
			case no:
				continue
			case unknown:
				g.ConditionNotEvaluated = true
				r.note(fmt.Sprintf("the condition of %s on %s (%s) could not be evaluated: its grant is counted", b.Role, sc.resource, b.Condition))
			}
		}
		g.Permissions = append(g.Permissions, p)
	}
	return g, len(g.Permissions) > 0
}

// scopeTarget is a policy's own resource as a condition sees it.
func scopeTarget(sc scope, project, number string) target {
	switch sc.kind {
	case "project":
		return target{names: withNumber(sc.resource, project, number), complete: true, typ: "cloudresourcemanager.googleapis.com/Project", service: "cloudresourcemanager.googleapis.com"}
	case "folder":
		return target{names: []string{sc.resource}, complete: true, typ: "cloudresourcemanager.googleapis.com/Folder", service: "cloudresourcemanager.googleapis.com"}
	case "organization":
		return target{names: []string{sc.resource}, complete: true, typ: "cloudresourcemanager.googleapis.com/Organization", service: "cloudresourcemanager.googleapis.com"}
	}
	return target{names: []string{sc.resource}}
}

// withNumber is name and, when it starts with projects/<id>, the same name
// with the project's number: conditions may use either.
func withNumber(name, project, number string) []string {
	out := []string{name}
	if number != "" && (strings.HasPrefix(name, "projects/"+project+"/") || name == "projects/"+project) {
		out = append(out, "projects/"+number+strings.TrimPrefix(name, "projects/"+project))
	}
	return out
}

// normalMember lowercases a member's email part (IAM compares them so).
func normalMember(m string) string {
	if i := strings.IndexByte(m, ':'); i > 0 && !strings.Contains(m, "://") {
		return m[:i+1] + strings.ToLower(m[i+1:])
	}
	return m
}

// roleCache reads each role once per run.
type roleCache struct {
	src   Source
	perms map[string][]string
}

func (c *roleCache) permissions(ctx context.Context, role string, r *Report) ([]string, error) {
	if p, ok := c.perms[role]; ok {
		return p, nil
	}
	perms, deleted, err := c.src.Role(ctx, role)
	if err != nil {
		return nil, fmt.Errorf("read role %s (to know what its holders can do): %w", role, err)
	}
	if deleted {
		r.note(fmt.Sprintf("role %s is deleted: its bindings grant nothing unless it is undeleted", role))
		perms = nil
	}
	c.perms[role] = perms
	return perms, nil
}
