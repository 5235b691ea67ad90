package remediate_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// repoGoFiles parses every non-test Go file of the module (the repository
// root is two levels up), skipping testdata and hidden directories.
func repoGoFiles(t *testing.T) map[string]*ast.File {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (n == "testdata" || n == "vendor" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		files[filepath.ToSlash(rel)] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files["internal/remediate/deps.go"]; !ok || len(files) < 50 {
		t.Fatalf("walked %d files from %s, not the module", len(files), root)
	}
	return files
}

// typeName is the name an expression names as a type: T, pkg.T, *T.
func typeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return typeName(x.X) + "." + x.Sel.Name
	case *ast.StarExpr:
		return "*" + typeName(x.X)
	}
	return ""
}

// TestEveryEntryPointBuildsTheEngineWithNew: no non-test file builds a
// Handler by a composite literal except New itself (deps.go), so the
// function, replay, sweep and the demo all take their defaults and wiring
// from one place.
func TestEveryEntryPointBuildsTheEngineWithNew(t *testing.T) {
	var news []string
	for path, f := range repoGoFiles(t) {
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CompositeLit:
				name := typeName(x.Type)
				inEngine := strings.HasPrefix(path, "internal/remediate/")
				if name == "remediate.Handler" || (inEngine && name == "Handler") {
					if path != "internal/remediate/deps.go" {
						t.Errorf("%s builds a Handler by a literal; use remediate.New", path)
					}
				}
				if inEngine && (name == "ResumeWatcher" || name == "Maintainer") && path != "internal/remediate/deps.go" {
					t.Errorf("%s builds a %s outside New", path, name)
				}
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && id.Name == "remediate" && x.Sel.Name == "New" {
					news = append(news, path)
				}
			}
			return true
		})
	}
	// Each entry point calls New: a site that stopped building an engine
	// (or built it some other way) is seen here.
	want := []string{"cmd/autoheal/demo_maintenance.go", "cmd/autoheal/replay.go", "cmd/autoheal/sweep.go", "function/function.go"}
	for _, w := range want {
		found := false
		for _, p := range news {
			found = found || p == w
		}
		if !found {
			t.Errorf("%s does not call remediate.New (callers: %v)", w, news)
		}
	}
}

// TestNoCapabilityFoundByTypeAssertion: an optional capability (the
// follower lease, the batched read, the v1/v2 router, the maintenance
// client) is an explicit dependency, never found by asserting a Store's or
// a TPU's dynamic type (issue 21: a store lacking a method silently changed
// behaviour).
func TestNoCapabilityFoundByTypeAssertion(t *testing.T) {
	capability := func(name string) bool {
		base := name[strings.LastIndex(name, ".")+1:]
		return strings.HasSuffix(base, "Lease") || base == "historiesReader" || base == "HistoriesReader" ||
			name == "tpuapi.Router" || base == "MaintenanceTPU" || base == "Ledger"
	}
	for path, f := range repoGoFiles(t) {
		ast.Inspect(f, func(n ast.Node) bool {
			if x, ok := n.(*ast.TypeAssertExpr); ok && x.Type != nil {
				if name := typeName(x.Type); capability(name) {
					t.Errorf("%s asserts .(%s): give the capability as an explicit dependency", path, name)
				}
			}
			return true
		})
	}
}
