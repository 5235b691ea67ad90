package buildtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/template"

	"github.com/tpu-autoheal/autoheal/function"
)

// Names the buildpack (GoogleCloudPlatform/buildpacks,
// cmd/go/functions_framework) uses: the user's upload is moved into
// sourceDir under the application root, and a generated main module named
// appModule there requires the user's module at v0.0.0, replaced by
// ./sourceDir.
const (
	sourceDir = "serverless_function_source_code"
	appModule = "serverless_function_app"
)

// mainTemplate is the buildpack's main.go template for declarative
// functions (functions-framework-go >= 1.2): it blank-imports the user's
// module root package, whose init registers the function, and serves
// FUNCTION_TARGET on PORT.
var mainTemplate = template.Must(template.New("main").Parse(`// Binary main file implements an HTTP server that loads and runs user's code
// on incoming HTTP requests.
// As this file must compile statically alongside the user code, this file
// will be copied into the function image and the '{{.Package}}' and
// package name derived from the 'FUNCTION_TARGET' env var. That edited file
// will then be compiled as with the user's function code to produce an
// executable app binary that launches the HTTP server.
package main

import (
	"log"
	"net/http"
	"os"

	// Blank import the function package to run the init(), which is where
	// declarative function signatures are expected to be registered.
	_ "{{.Package}}"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"
)

func main() {
	// Don't invoke the function for reserved URLs.
	http.HandleFunc("/robots.txt", http.NotFound)
	http.HandleFunc("/favicon.ico", http.NotFound)

	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	if err := funcframework.Start(port); err != nil {
		log.Fatalf("Function failed to start: %v\n", err)
	}
}
`))

var (
	moduleRE = regexp.MustCompile(`(?m)^module\s+(\S+)\s*$`)
	goRE     = regexp.MustCompile(`(?m)^go\s+(\S+)\s*$`)
)

// repoRoot is the repository root (this package's parent).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// layout builds the buildpack's application root in a temporary directory:
// the deployed files under sourceDir, and the generated main module. It
// returns the application root.
func layout(t testing.TB) string {
	t.Helper()
	root := repoRoot(t)
	app := t.TempDir()
	files, err := function.SourceFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(app, sourceDir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod, gov := moduleRE.FindSubmatch(gomod), goRE.FindSubmatch(gomod)
	if mod == nil || gov == nil {
		t.Fatalf("go.mod has no module or go line")
	}
	userMod := string(mod[1])
	appGoMod := fmt.Sprintf("module %s\n\ngo %s\n\nrequire %s v0.0.0\n\nreplace %s v0.0.0 => ./%s\n",
		appModule, gov[1], userMod, userMod, sourceDir)
	if err := os.WriteFile(filepath.Join(app, "go.mod"), []byte(appGoMod), 0o644); err != nil {
		t.Fatal(err)
	}
	gosum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app, "go.sum"), gosum, 0o644); err != nil {
		t.Fatal(err)
	}
	var main bytes.Buffer
	if err := mainTemplate.Execute(&main, struct{ Package string }{userMod}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app, "main.go"), main.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return app
}

// goCmd runs the go command in dir with the caller's Go environment (module
// cache, proxy setting) and -mod=mod, as the buildpack resolves the main
// module's requirements.
func goCmd(t testing.TB, dir string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestDeployedSourceResolves checks, without compiling, that the uploaded
// files alone make a complete module graph for the generated main package:
// every package the function imports is in the upload (or a dependency), and
// every embedded file is there.
func TestDeployedSourceResolves(t *testing.T) {
	app := layout(t)
	out := goCmd(t, app, "list", "-deps", "-f", "{{if .Error}}ERROR {{.ImportPath}}: {{.Error}}{{end}}{{range .DepsErrors}}ERROR {{.}}{{end}}{{.ImportPath}} {{join .EmbedFiles \",\"}}", ".")
	text := string(out)
	if strings.Contains(text, "ERROR") {
		t.Fatalf("the deployed source does not resolve:\n%s", text)
	}
	for _, want := range []string{
		"github.com/tpu-autoheal/autoheal ",
		"github.com/tpu-autoheal/autoheal/function ",
		"github.com/tpu-autoheal/autoheal/startup resume-training.sh",
		"github.com/GoogleCloudPlatform/functions-framework-go/funcframework ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("go list -deps of the generated main lacks %q:\n%s", want, text)
		}
	}
}

func TestUploadHasNoTestFilesOrTestdata(t *testing.T) {
	files, err := function.SourceFiles(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	has := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || strings.Contains("/"+f, "/testdata/") {
			t.Errorf("upload includes %s", f)
		}
		has[f] = true
	}
	for _, want := range []string{"go.mod", "go.sum", "register.go", "function/function.go", "function/config.go"} {
		if !has[want] {
			t.Errorf("upload lacks %s", want)
		}
	}
}
