// Package iamfake is an httptest server speaking the REST protocol of the
// APIs autoheal preflight reads: Cloud Resource Manager v3 (projects.get,
// folders.get, and getIamPolicy of projects, folders and organizations),
// Pub/Sub v1 (topics.getIamPolicy) and IAM v1 (serviceAccounts.getIamPolicy
// and the three roles.get; serviceAccounts.testIamPermissions, answered
// from Held). The real google.golang.org/api clients talk
// to it (option.WithEndpoint, WithoutAuthentication). Conditional bindings
// are only served to a caller that asks for policy version 3, as Google
// does.
//
// It is a test double: it holds what a test puts in it and never models
// who may read what beyond the Denied set.
package iamfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
)

// Binding is a policy binding as the APIs send it.
type Binding struct {
	Role      string   `json:"role"`
	Members   []string `json:"members"`
	Condition *Expr    `json:"condition,omitempty"`
}

// Expr is a binding's condition.
type Expr struct {
	Title      string `json:"title,omitempty"`
	Expression string `json:"expression"`
}

// ProjectInfo is what projects.get answers.
type ProjectInfo struct {
	Number string // the project number, without projects/
	Parent string // folders/F, organizations/O or ""
}

// Server is the fake. Fill its maps before the first request, or under
// Lock; Close it when done.
type Server struct {
	*httptest.Server

	mu       sync.Mutex
	Projects map[string]ProjectInfo // by project id
	Folders  map[string]string      // folders/F → its parent
	Policies map[string][]Binding   // by resource: projects/P, folders/F, organizations/O, projects/P/topics/T, projects/-/serviceAccounts/EMAIL
	Roles    map[string][]string    // role name → permissions
	Deleted  map[string]bool        // roles that are deleted
	Denied   map[string]bool        // resources and roles that answer 403
	// Held is what the caller holds, by resource
	// (projects/-/serviceAccounts/EMAIL): testIamPermissions answers the
	// asked permissions found there. A service account with no entry (and
	// no policy) is NOT FOUND.
	Held     map[string][]string
	requests []string
}

// New starts an empty fake.
func New() *Server {
	s := &Server{Projects: map[string]ProjectInfo{}, Folders: map[string]string{}, Policies: map[string][]Binding{},
		Roles: map[string][]string{}, Deleted: map[string]bool{}, Denied: map[string]bool{}, Held: map[string][]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Requests lists the requests served, as "METHOD PATH".
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

var (
	projectGet   = regexp.MustCompile(`^/v3/projects/([^/:]+)$`)
	folderGet    = regexp.MustCompile(`^/v3/(folders/[^/:]+)$`)
	crmPolicy    = regexp.MustCompile(`^/v3/((?:projects|folders|organizations)/[^/:]+):getIamPolicy$`)
	topicPolicy  = regexp.MustCompile(`^/v1/(projects/[^/]+/topics/[^/:]+):getIamPolicy$`)
	saPolicy     = regexp.MustCompile(`^/v1/projects/[^/]+/serviceAccounts/([^/:]+):getIamPolicy$`)
	saTest       = regexp.MustCompile(`^/v1/projects/[^/]+/serviceAccounts/([^/:]+):testIamPermissions$`)
	roleGet      = regexp.MustCompile(`^/v1/((?:projects/[^/]+/|organizations/[^/]+/)?roles/[^/]+)$`)
	versionField = regexp.MustCompile(`"requestedPolicyVersion":\s*(\d+)`)
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r.Method+" "+r.URL.Path)
	p := r.URL.Path
	switch {
	case r.Method == http.MethodGet && projectGet.MatchString(p):
		id := projectGet.FindStringSubmatch(p)[1]
		pr, ok := s.Projects[id]
		if !s.allowed(w, "projects/"+id) {
			return
		}
		if !ok {
			apiError(w, http.StatusNotFound, "NOT_FOUND", "project "+id+" not found")
			return
		}
		reply(w, map[string]any{"name": "projects/" + pr.Number, "projectId": id, "parent": pr.Parent, "state": "ACTIVE"})
	case r.Method == http.MethodGet && folderGet.MatchString(p):
		f := folderGet.FindStringSubmatch(p)[1]
		parent, ok := s.Folders[f]
		if !s.allowed(w, f+"#get") {
			return
		}
		if !ok {
			apiError(w, http.StatusNotFound, "NOT_FOUND", f+" not found")
			return
		}
		reply(w, map[string]any{"name": f, "parent": parent, "state": "ACTIVE"})
	case r.Method == http.MethodPost && crmPolicy.MatchString(p):
		body, _ := io.ReadAll(r.Body)
		s.policy(w, crmPolicy.FindStringSubmatch(p)[1], requested(versionField.FindSubmatch(body)))
	case r.Method == http.MethodGet && topicPolicy.MatchString(p):
		s.policy(w, topicPolicy.FindStringSubmatch(p)[1], r.URL.Query().Get("options.requestedPolicyVersion"))
	case r.Method == http.MethodPost && saPolicy.MatchString(p):
		s.policy(w, "projects/-/serviceAccounts/"+saPolicy.FindStringSubmatch(p)[1], r.URL.Query().Get("options.requestedPolicyVersion"))
	case r.Method == http.MethodPost && saTest.MatchString(p):
		s.testPermissions(w, r, "projects/-/serviceAccounts/"+saTest.FindStringSubmatch(p)[1])
	case r.Method == http.MethodGet && roleGet.MatchString(p):
		name := roleGet.FindStringSubmatch(p)[1]
		if !s.allowed(w, name) {
			return
		}
		perms, ok := s.Roles[name]
		if !ok {
			apiError(w, http.StatusNotFound, "NOT_FOUND", "role "+name+" not found")
			return
		}
		reply(w, map[string]any{"name": name, "includedPermissions": perms, "deleted": s.Deleted[name], "etag": "BwX"})
	default:
		apiError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("iamfake: no method %s %s", r.Method, p))
	}
}

// testPermissions answers testIamPermissions: the asked permissions the
// caller holds on resource (Held).
func (s *Server) testPermissions(w http.ResponseWriter, r *http.Request, resource string) {
	var req struct {
		Permissions []string `json:"permissions"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "bad body: "+err.Error())
		return
	}
	held, ok := s.Held[resource]
	if _, policy := s.Policies[resource]; !ok && !policy {
		apiError(w, http.StatusNotFound, "NOT_FOUND", resource+" not found")
		return
	}
	out := []string{}
	for _, p := range req.Permissions {
		for _, h := range held {
			if p == h {
				out = append(out, p)
				break
			}
		}
	}
	reply(w, map[string]any{"permissions": out})
}

func requested(m [][]byte) string {
	if m == nil {
		return ""
	}
	return string(m[1])
}

// allowed answers 403 for a denied resource.
func (s *Server) allowed(w http.ResponseWriter, resource string) bool {
	if s.Denied[resource] {
		apiError(w, http.StatusForbidden, "PERMISSION_DENIED", "The caller does not have permission on "+strings.TrimSuffix(resource, "#get"))
		return false
	}
	return true
}

func (s *Server) policy(w http.ResponseWriter, resource, version string) {
	if !s.allowed(w, resource) {
		return
	}
	bindings, ok := s.Policies[resource]
	if !ok {
		apiError(w, http.StatusNotFound, "NOT_FOUND", resource+" not found")
		return
	}
	v := 1
	for _, b := range bindings {
		if b.Condition != nil {
			v = 3
		}
	}
	if v == 3 && version != "3" {
		apiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "the policy of "+resource+" has conditions: request policy version 3")
		return
	}
	reply(w, map[string]any{"version": v, "etag": "BwX", "bindings": bindings})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, code int, status, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
}
