package iamfake

import (
	_ "embed"
	"encoding/json"
	"fmt"
)

//go:embed roles.json
var rolesJSON []byte

// GoogleRoles returns the permissions of a few predefined roles
// (roles/datastore.user, roles/pubsub.publisher, roles/iam.serviceAccountUser
// and others), copied whole from Google's IAM data (roles.json says from
// where).
func GoogleRoles() map[string][]string {
	var d struct {
		Roles map[string][]string `json:"roles"`
	}
	if err := json.Unmarshal(rolesJSON, &d); err != nil {
		panic(fmt.Sprintf("iamfake: roles.json: %v", err))
	}
	return d.Roles
}

// OwnerAndEditor are the parts of roles/owner and roles/editor that
// preflight looks at (the whole roles have thousands of permissions; these
// are theirs per Google's role reference: owner may set IAM policies,
// editor may not).
var OwnerAndEditor = map[string][]string{
	"roles/owner": {"datastore.entities.create", "datastore.entities.delete", "datastore.entities.update", "datastore.databases.import",
		"pubsub.topics.publish", "pubsub.topics.setIamPolicy", "iam.serviceAccounts.actAs", "iam.serviceAccounts.getAccessToken",
		"iam.serviceAccounts.signBlob", "iam.serviceAccounts.setIamPolicy", "iam.serviceAccountKeys.create",
		"resourcemanager.projects.setIamPolicy", "resourcemanager.projects.get"},
	"roles/editor": {"datastore.entities.create", "datastore.entities.delete", "datastore.entities.update", "datastore.databases.import",
		"pubsub.topics.publish", "iam.serviceAccounts.actAs", "resourcemanager.projects.get"},
}

// The names Deployment uses.
const (
	Project        = "acme-autoheal"
	ProjectNumber  = "123456789012"
	Folder         = "folders/111"
	Organization   = "organizations/999"
	Topic          = "projects/acme-autoheal/topics/tpu-autoheal-events"
	ServiceAccount = "tpu-autoheal-func@acme-autoheal.iam.gserviceaccount.com"
	Database       = "tpu-autoheal"
	Operators      = "group:tpu-operators@acme.example"
	Owner          = "user:owner@acme.example"
	HostRole       = "projects/acme-autoheal/roles/tpuAutohealHost"
	SinkWriter     = "serviceAccount:service-555555555555@gcp-sa-logging.iam.gserviceaccount.com"
	SchedulerAgent = "serviceAccount:service-123456789012@gcp-sa-cloudscheduler.iam.gserviceaccount.com"
	OtherApp       = "serviceAccount:other-app@acme-autoheal.iam.gserviceaccount.com"
)

// Deployment fills s with a host project as the Terraform module leaves
// it, and no unexpected principal: an owner; the function's account with
// the module's host role conditioned on its database and publish on the
// topic; an operators group that may write the ledger (pause, resume); a
// log sink's writer and the Cloud Scheduler agent that publish; another
// app's account that may write only its own database; a log writer and a
// viewer that can do none of it. The project sits in a folder whose
// policy is readable and an organization whose policy is not.
func (s *Server) Deployment() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, perms := range GoogleRoles() {
		s.Roles[name] = perms
	}
	for name, perms := range OwnerAndEditor {
		s.Roles[name] = perms
	}
	s.Roles[HostRole] = []string{"datastore.databases.get", "datastore.entities.create", "datastore.entities.delete",
		"datastore.entities.get", "datastore.entities.list", "datastore.entities.update", "logging.logEntries.create"}
	fn := "serviceAccount:" + ServiceAccount
	s.Projects[Project] = ProjectInfo{Number: ProjectNumber, Parent: Folder}
	s.Folders[Folder] = Organization
	s.Policies["projects/"+Project] = []Binding{
		{Role: "roles/owner", Members: []string{Owner}},
		{Role: HostRole, Members: []string{fn}, Condition: &Expr{Title: "ledger only", Expression: `resource.name == "projects/acme-autoheal/databases/tpu-autoheal"`}},
		{Role: "roles/logging.logWriter", Members: []string{fn, "user:logger@acme.example"}},
		{Role: "roles/datastore.user", Members: []string{Operators}},
		{Role: "roles/datastore.user", Members: []string{OtherApp}, Condition: &Expr{Title: "its own database", Expression: `resource.name == "projects/acme-autoheal/databases/other-app"`}},
		{Role: "roles/pubsub.publisher", Members: []string{SchedulerAgent}},
		{Role: "roles/storage.objectViewer", Members: []string{"user:viewer@acme.example"}},
	}
	s.Policies[Folder] = []Binding{
		{Role: "roles/logging.logWriter", Members: []string{"group:platform@acme.example"}},
	}
	s.Policies[Organization] = []Binding{}
	s.Denied[Organization] = true
	s.Policies[Topic] = []Binding{
		{Role: "roles/pubsub.publisher", Members: []string{SinkWriter, fn}},
	}
	s.Policies["projects/-/serviceAccounts/"+ServiceAccount] = []Binding{}
}

// Add appends a binding to resource's policy.
func (s *Server) Add(resource string, b Binding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Policies[resource] = append(s.Policies[resource], b)
}
