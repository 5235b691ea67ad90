package terraform_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Least privilege, derived: every call into a Google API client in the
// function's code names its REST method in a `// rest: <method>` comment.
// The methods map to permissions through Google's IAM data
// (IAM_DATA_DIR, default <repo>/../shared/iam: methods.json and
// permissions.json) and iam-exceptions.json (what the data does not know,
// each row with its source). The permissions then go to the binding that
// grants them: the TPU role in every watched project, the ledger role on
// the ledger's database, the records role in the function's project, the
// MAC role on the ledger's key, roles/iam.serviceAccountUser on the nodes'
// service accounts, read access to the startup script's object, and
// publish on the events topic.

// exceptionsFile is the committed table of methods the IAM data does not
// describe (or describes too broadly), and of methods other changes add.
const exceptionsFile = "iam-exceptions.json"

var restRE = regexp.MustCompile(`//\s*rest:\s*(.+?)\s*$`)

// googleClientImports are import path prefixes of Google API clients; a file
// of the function importing one must name the REST methods it calls.
var googleClientImports = []string{
	"google.golang.org/api/",
	"cloud.google.com/go/",
}

// notClients are imports under those prefixes that make no API call.
var notClients = []string{
	"google.golang.org/api/option",
	"google.golang.org/api/googleapi",
	"google.golang.org/api/iterator",
	"google.golang.org/api/transport",
	"cloud.google.com/go/compute/metadata",
	"cloud.google.com/go/longrunning/autogen/longrunningpb",
	"cloud.google.com/go/tpu/apiv1/tpupb",
	"cloud.google.com/go/logging/apiv2/loggingpb",
	"cloud.google.com/go/firestore/apiv1/firestorepb",
}

// goPackage is the part of `go list -json` the tests use.
type goPackage struct {
	ImportPath string
	Dir        string
	Standard   bool
	GoFiles    []string
	EmbedFiles []string
	Imports    []string
	Module     *struct {
		Path string
		Main bool
	}
}

// functionPackages are the main module's packages the function's root
// package builds from (`go list -deps` minus the standard library and other
// modules): what the buildpack compiles, and all the code that runs deployed.
func functionPackages(t *testing.T) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json", ".")
	cmd.Dir = repoRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps of the root package: %v\n%s", err, stderr.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Standard || p.Module == nil || !p.Module.Main {
			continue
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list -deps found no package of the main module")
	}
	return pkgs
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s has no go.mod: %v", root, err)
	}
	return root
}

// sharedDir returns the env variable's value, or <repo>/../shared/<sub>. A
// missing directory skips the test, and fails it under CI=true.
func sharedDir(t *testing.T, env, sub string) string {
	t.Helper()
	dir := os.Getenv(env)
	if dir == "" {
		dir = filepath.Join(repoRoot(t), "..", "shared", sub)
	}
	if _, err := os.Stat(dir); err != nil {
		msg := fmt.Sprintf("%s: %v (set %s to the directory)", env, err, env)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED, " + msg)
	}
	return dir
}

// callSite is where a REST method is named.
type callSite struct {
	method string
	at     string // file:line, relative to the repository root
}

// annotatedMethods scans the non-test .go files of pkgs for `// rest:`
// comments. A comment may name several methods separated by commas (one
// client call that makes several requests, like a Firestore transaction).
// It also reports files that import a Google API client and name no method.
func annotatedMethods(t *testing.T, root string, pkgs []goPackage) (sites []callSite, unannotated []string) {
	t.Helper()
	for _, p := range pkgs {
		for _, f := range p.GoFiles {
			path := filepath.Join(p.Dir, f)
			rel, _ := filepath.Rel(root, path)
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			sc := bufio.NewScanner(bytes.NewReader(src))
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for line := 1; sc.Scan(); line++ {
				m := restRE.FindStringSubmatch(sc.Text())
				if m == nil {
					continue
				}
				for _, method := range strings.Split(m[1], ",") {
					method = strings.TrimSpace(method)
					if method == "" {
						continue
					}
					sites = append(sites, callSite{method: method, at: fmt.Sprintf("%s:%d", filepath.ToSlash(rel), line)})
					n++
				}
			}
			if n == 0 && importsGoogleClient(src) && callsLikeAClient(src) {
				unannotated = append(unannotated, filepath.ToSlash(rel))
			}
		}
	}
	return sites, unannotated
}

// clientCallRE matches the shapes of calls into the Google clients the
// code uses (REST builders' Do/Download, Firestore and Logging client
// methods, gRPC request structs); a file that imports a client only for its
// types has none.
var clientCallRE = regexp.MustCompile(`\.Do\(\)|\.Download\(\)|\.RunTransaction\(|\.GetAll\(|\.Documents\(ctx|\.LogSync\(|\.Publish\(ctx|\.Log\(|, &\w+pb\.\w+Request\{`)

func callsLikeAClient(src []byte) bool { return clientCallRE.Match(src) }

var importRE = regexp.MustCompile(`(?m)^\s*(?:[A-Za-z_.]+\s+)?"([^"]+)"\s*$`)

func importsGoogleClient(src []byte) bool {
	// Only the import block matters; a file's first func ends it.
	head := src
	if i := bytes.Index(src, []byte("\nfunc ")); i >= 0 {
		head = src[:i]
	}
	for _, m := range importRE.FindAllSubmatch(head, -1) {
		imp := string(m[1])
		for _, prefix := range googleClientImports {
			if !strings.HasPrefix(imp, prefix) {
				continue
			}
			client := true
			for _, nc := range notClients {
				if imp == nc || strings.HasPrefix(imp, nc+"/") {
					client = false
				}
			}
			if client {
				return true
			}
		}
	}
	return false
}

// iamData is ../shared/iam.
type iamData struct {
	methods     map[string][]string // REST method -> permissions
	permissions map[string]bool
	roles       map[string][]string
}

func loadIAMData(t *testing.T) iamData {
	t.Helper()
	dir := sharedDir(t, "IAM_DATA_DIR", "iam")
	var m struct {
		Methods map[string]map[string][]string `json:"methods"`
	}
	var p struct {
		Permissions []string `json:"permissions"`
	}
	var r struct {
		Roles map[string][]string `json:"roles"`
	}
	for name, v := range map[string]any{"methods.json": &m, "permissions.json": &p, "roles.json": &r} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("IAM data: %v", err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("IAM data %s: %v", name, err)
		}
	}
	d := iamData{methods: map[string][]string{}, permissions: map[string]bool{}, roles: r.Roles}
	for _, svc := range m.Methods {
		for method, perms := range svc {
			d.methods[method] = perms
		}
	}
	for _, perm := range p.Permissions {
		d.permissions[perm] = true
	}
	if len(d.methods) == 0 || len(d.permissions) == 0 {
		t.Fatalf("IAM data in %s is empty", dir)
	}
	for _, r := range loadExceptions(t).Permissions {
		if d.permissions[r.Permission] {
			t.Errorf("%s: permission %q is in the IAM data now: drop its row", exceptionsFile, r.Permission)
		}
		d.permissions[r.Permission] = true
	}
	return d
}

// exceptions is iam-exceptions.json.
type exceptions struct {
	Methods []struct {
		Method      string   `json:"method"`
		Permissions []string `json:"permissions"`
		// NoPermission says the method checks no permission at all (its
		// Permissions are then empty).
		NoPermission bool   `json:"no_permission"`
		Source       string `json:"source"`
	} `json:"methods"`
	Expected []struct {
		Method string `json:"method"`
		Source string `json:"source"`
	} `json:"expected"`
	// Permissions are permissions the dataset's permissions.json lacks
	// (newer than it), each with the page that names it.
	Permissions []struct {
		Permission string `json:"permission"`
		Source     string `json:"source"`
	} `json:"permissions"`
}

func loadExceptions(t *testing.T) exceptions {
	t.Helper()
	b, err := os.ReadFile(exceptionsFile)
	if err != nil {
		t.Fatal(err)
	}
	var e exceptions
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatalf("%s: %v", exceptionsFile, err)
	}
	delete(raw, "about")
	clean, _ := json.Marshal(raw)
	dec := json.NewDecoder(bytes.NewReader(clean))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("%s: %v", exceptionsFile, err)
	}
	for _, r := range e.Methods {
		if r.Method == "" || (len(r.Permissions) == 0) != r.NoPermission || strings.TrimSpace(r.Source) == "" {
			t.Errorf("%s: row %q needs a method, its permissions (or none, with no_permission) and a source", exceptionsFile, r.Method)
		}
	}
	for _, r := range e.Expected {
		if r.Method == "" || strings.TrimSpace(r.Source) == "" {
			t.Errorf("%s: expected row %q needs a method and a source", exceptionsFile, r.Method)
		}
	}
	for _, r := range e.Permissions {
		if r.Permission == "" || strings.TrimSpace(r.Source) == "" {
			t.Errorf("%s: permissions row %q needs a permission and a source", exceptionsFile, r.Permission)
		}
	}
	return e
}

// Grants: where each permission the code needs is granted.
const (
	grantTPURole     = "tpu"        // custom role in every watched project (TPU API and Compute Engine)
	grantLedgerRole  = "ledger"     // custom role on the ledger's database (an IAM condition)
	grantRecordsRole = "records"    // custom role in the function's project
	grantMACRole     = "mac"        // custom role on the ledger's KMS key
	grantActAs       = "actAs"      // roles/iam.serviceAccountUser on each tpu_service_accounts entry
	grantScriptRead  = "scriptRead" // roles/storage.objectViewer on the startup script's object
	grantKick        = "kick"       // roles/pubsub.publisher on the events topic (follow kicks)
	actAsRole        = "roles/iam.serviceAccountUser"
	scriptReaderRole = "roles/storage.objectViewer"
	kickRole         = "roles/pubsub.publisher"
)

// customRoles are the grants made with a custom role of the module, whose
// permission list go-contract.json holds under the key given.
var customRoles = map[string]string{
	grantTPURole:     "tpu_permissions",
	grantLedgerRole:  "ledger_permissions",
	grantRecordsRole: "records_permissions",
	grantMACRole:     "mac_permissions",
}

var grantNames = map[string]string{
	grantTPURole:     "the TPU role (google_project_iam_custom_role.tpu, every watched project)",
	grantLedgerRole:  "the ledger role (google_project_iam_custom_role.ledger, on the ledger's database)",
	grantRecordsRole: "the records role (google_project_iam_custom_role.records, project_id)",
	grantMACRole:     "the MAC role (google_project_iam_custom_role.mac, on the ledger's KMS key)",
	grantActAs:       actAsRole + " on each tpu_service_accounts entry",
	grantScriptRead:  scriptReaderRole + " on the startup script's object",
	grantKick:        kickRole + " on the events topic (google_pubsub_topic_iam_policy.events)",
}

func grantOf(perm string) string {
	switch {
	case perm == "iam.serviceAccounts.actAs":
		return grantActAs
	case strings.HasPrefix(perm, "tpu."), strings.HasPrefix(perm, "compute."):
		// compute.*: the instance path (Compute Engine TPU VMs) acts in
		// the same watched projects.
		return grantTPURole
	case strings.HasPrefix(perm, "datastore."):
		return grantLedgerRole
	case strings.HasPrefix(perm, "logging."):
		return grantRecordsRole
	case strings.HasPrefix(perm, "cloudkms.cryptoKeyVersions.useTo"):
		return grantMACRole
	case strings.HasPrefix(perm, "storage.objects."):
		return grantScriptRead
	case perm == "pubsub.topics.publish":
		return grantKick
	}
	return ""
}

// needed is one permission the code needs, and why.
type needed struct {
	perm string
	by   []string // "method (file:line)"
}

// derivePermissions maps the function's REST methods (annotated, plus the
// expected rows) to permissions, grouped by the grant that gives them.
func derivePermissions(t *testing.T) map[string][]needed {
	t.Helper()
	data := loadIAMData(t)
	exc := loadExceptions(t)
	root := repoRoot(t)
	sites, unannotated := annotatedMethods(t, root, functionPackages(t))
	for _, f := range unannotated {
		t.Errorf("%s imports a Google API client but names no REST method: add `// rest: <method id>` before each call", f)
	}
	if len(sites) == 0 {
		t.Fatal("no `// rest:` annotation in the function's code")
	}
	annotated := map[string]bool{}
	for _, s := range sites {
		annotated[s.method] = true
	}
	for _, e := range exc.Expected {
		if annotated[e.Method] {
			t.Logf("%s is now annotated in the code; its expected row in %s can go", e.Method, exceptionsFile)
			continue
		}
		sites = append(sites, callSite{method: e.Method, at: exceptionsFile + " (expected: " + e.Source + ")"})
	}
	override := map[string][]string{}
	for _, r := range exc.Methods {
		override[r.Method] = r.Permissions
	}
	byPerm := map[string]*needed{}
	for _, s := range sites {
		perms, ok := override[s.method]
		if !ok {
			known, inData := data.methods[s.method]
			switch {
			case !inData:
				t.Errorf("%s names %q, which is no REST method in the IAM data (a typo? else add a row with its source to %s)", s.at, s.method, exceptionsFile)
				continue
			case len(known) == 0:
				t.Errorf("%s names %s, whose permissions the IAM data does not know: add a row with its source to %s", s.at, s.method, exceptionsFile)
				continue
			}
			perms = known
		}
		for _, p := range perms {
			if !data.permissions[p] {
				t.Errorf("%s: %s maps to %q, which no predefined role names (not a permission?)", s.at, s.method, p)
			}
			n := byPerm[p]
			if n == nil {
				n = &needed{perm: p}
				byPerm[p] = n
			}
			n.by = append(n.by, s.method+" ("+s.at+")")
		}
	}
	out := map[string][]needed{}
	for _, n := range byPerm {
		g := grantOf(n.perm)
		if g == "" {
			t.Errorf("no grant of the module gives %s (needed by %s): route it in grantOf and grant it in main.tf", n.perm, strings.Join(n.by, ", "))
			continue
		}
		out[g] = append(out[g], *n)
	}
	for g := range out {
		sort.Slice(out[g], func(i, j int) bool { return out[g][i].perm < out[g][j].perm })
	}
	return out
}

func perms(ns []needed) []string {
	out := make([]string, 0, len(ns))
	for _, n := range ns {
		out = append(out, n.perm)
	}
	return out
}

// contractPermissions reads the custom roles' permissions go-contract.json
// holds, by grant.
func contractPermissions(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(goContractFile)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]json.RawMessage
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", goContractFile, err)
	}
	out := map[string][]string{}
	for grant, key := range customRoles {
		var perms []string
		if raw, ok := c[key]; ok {
			if err := json.Unmarshal(raw, &perms); err != nil {
				t.Fatalf("%s %s: %v", goContractFile, key, err)
			}
		}
		out[grant] = perms
	}
	return out
}

// TestRolesHoldExactlyWhatTheCodeCalls compares the custom roles Terraform
// creates (their permission lists live in go-contract.json, which
// main.tf reads and the terraform tests check in the plan) with the
// permissions derived from the code.
func TestRolesHoldExactlyWhatTheCodeCalls(t *testing.T) {
	derived := derivePermissions(t)
	data := loadIAMData(t)
	contract := contractPermissions(t)
	for grant := range customRoles {
		have := map[string]bool{}
		for _, p := range contract[grant] {
			have[p] = true
			if !data.permissions[p] {
				t.Errorf("%s holds %q, which is not in permissions.json: a custom role naming it cannot be created", grantNames[grant], p)
			}
		}
		want := map[string]bool{}
		for _, n := range derived[grant] {
			want[n.perm] = true
			if !have[n.perm] {
				t.Errorf("%s lacks %s, needed by %s: add it (go test ./terraform -update regenerates %s)",
					grantNames[grant], n.perm, strings.Join(n.by, ", "), goContractFile)
			}
		}
		for _, p := range contract[grant] {
			if !want[p] {
				t.Errorf("%s holds %s, which no call of the function needs: remove it (go test ./terraform -update)", grantNames[grant], p)
			}
		}
		if len(contract[grant]) == 0 {
			t.Errorf("%s holds no permission: a custom role cannot be empty", grantNames[grant])
		}
	}
	// Permissions granted by predefined roles on one resource: the role
	// must hold them.
	for grant, role := range map[string]string{grantActAs: actAsRole, grantScriptRead: scriptReaderRole, grantKick: kickRole} {
		in := map[string]bool{}
		for _, p := range data.roles[role] {
			in[p] = true
		}
		for _, n := range derived[grant] {
			if !in[n.perm] {
				t.Errorf("%s does not hold %s, needed by %s", role, n.perm, strings.Join(n.by, ", "))
			}
		}
	}
}

// TestDerivationSeesEveryCall: the derivation reads the real call sites; a
// method every recovery calls, named in the TPU client, is found there, and
// the transactions' permission is derived.
func TestDerivationSeesEveryCall(t *testing.T) {
	sites, unannotated := annotatedMethods(t, repoRoot(t), functionPackages(t))
	if len(unannotated) > 0 {
		t.Errorf("unannotated client files: %v", unannotated)
	}
	got := map[string]bool{}
	for _, s := range sites {
		if strings.HasSuffix(s.at, "_test.go") {
			t.Errorf("a test file was scanned: %s", s.at)
		}
		got[s.method] = true
	}
	for _, m := range []string{
		"tpu.projects.locations.nodes.delete",
		"tpu.projects.locations.nodes.create",
		"firestore.projects.databases.documents.beginTransaction",
		"logging.entries.write",
		"storage.objects.get",
	} {
		if !got[m] {
			t.Errorf("no call site names %s", m)
		}
	}
	derived := derivePermissions(t)
	if !contains(perms(derived[grantLedgerRole]), "datastore.databases.get") {
		t.Errorf("ledger role derived without datastore.databases.get: %v", perms(derived[grantLedgerRole]))
	}
	if got := perms(derived[grantMACRole]); !slices.Equal(got, []string{"cloudkms.cryptoKeyVersions.useToSign", "cloudkms.cryptoKeyVersions.useToVerify"}) {
		t.Errorf("MAC role derived as %v; want exactly useToSign and useToVerify", got)
	}
}

func TestImportsGoogleClient(t *testing.T) {
	for _, c := range []struct {
		name string
		src  string
		want bool
	}{
		{"tpu client", "package x\nimport (\n\ttpu \"google.golang.org/api/tpu/v2\"\n)\nfunc f() {}", true},
		{"firestore", "package x\nimport \"cloud.google.com/go/firestore\"\n", true},
		{"option only", "package x\nimport (\n\t\"google.golang.org/api/option\"\n)\n", false},
		{"std only", "package x\nimport \"fmt\"\n", false},
	} {
		if got := importsGoogleClient([]byte(c.src)); got != c.want {
			t.Errorf("%s: importsGoogleClient = %v; want %v", c.name, got, c.want)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// derivedForContract returns the custom roles' permission lists for
// go-contract.json, by grant: derived from the code when the IAM data is
// there, else (the data missing outside CI) the lists the file already
// holds, so the rest of the contract is still checked.
func derivedForContract(t *testing.T) map[string][]string {
	t.Helper()
	dir := os.Getenv("IAM_DATA_DIR")
	if dir == "" {
		dir = filepath.Join(repoRoot(t), "..", "shared", "iam")
	}
	if _, err := os.Stat(dir); err != nil && os.Getenv("CI") != "true" {
		t.Logf("IAM data %s missing: role permissions in %s not re-derived", dir, goContractFile)
		return contractPermissions(t)
	}
	d := derivePermissions(t)
	out := map[string][]string{}
	for grant := range customRoles {
		out[grant] = perms(d[grant])
	}
	return out
}
