package policy

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// allowedImports are the packages the policy may import. Each computes
// over values it is given, or is a type the policy reads as data.
var allowedImports = map[string]string{
	"errors":  "sentinel errors and errors.Is/As over values given",
	"fmt":     "formatting reasons",
	"maps":    "copying metadata maps",
	"math":    "arithmetic",
	"regexp":  "matching a zone's name",
	"slices":  "slices",
	"sort":    "sorting",
	"strconv": "numbers in labels",
	"strings": "strings",
	"time":    "time values and durations (never the clock: see forbiddenCalls)",
	// encoding/json: the canonical encoding of a spec (its size against
	// the ledger's limit) and the guest's checkpoint reports, both values
	// in memory.
	"encoding/json": "canonical encoding of values in memory",
	// hash/fnv and encoding/binary: the stockout jitter is a hash of the
	// seed, the node and the attempt, so a seed replays the same delays.
	"hash/fnv":        "the seeded stockout jitter",
	"encoding/binary": "the seeded stockout jitter",
	"github.com/tpu-autoheal/autoheal/internal/events": "the parsed event, a value",
	// internal/seal: Recovery.SpecSeal is a seal.Seal, a value the policy
	// keeps and never computes or checks (the interpreter does).
	"github.com/tpu-autoheal/autoheal/internal/seal": "the seal type, as data",
	// The API's generated structs, as data (doc.go says why).
	"google.golang.org/api/tpu/v2": "tpu.Node and tpu.QueuedResource as data",
}

// forbiddenCalls are package functions that read the clock, draw random
// numbers or wait, by import path: none may be called, even where the
// package itself may be imported (time).
var forbiddenCalls = map[string][]string{
	"time": {"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTicker", "NewTimer"},
}

// forbiddenPackages may not be referred to at all (an import of them is a
// finding already; this catches them under another name too).
var forbiddenPackages = []string{"math/rand", "math/rand/v2", "crypto/rand", "os", "net", "net/http", "context", "io", "syscall"}

// ioMethods are method names of clients and stores: a call of one on a
// value of another package (a client, a store) is I/O. The policy's own
// types have no method of these names. Write and Read are not listed: the
// stockout jitter writes to an in-memory hash, and an io.Writer or a file
// cannot reach the package without an import the allow-list refuses.
var ioMethods = []string{"Do", "Get", "List", "Create", "Delete", "Patch", "Insert", "Update", "Send", "Publish"}

// TestPolicyIsPure: the package imports nothing that does I/O and calls
// neither the clock nor randomness nor a client's method.
func TestPolicyIsPure(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	srcs := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs[f] = string(b)
	}
	if len(srcs) < 10 {
		t.Fatalf("%d non-test files found; the test must run in the package's directory", len(srcs))
	}
	findings, err := purityFindings(srcs)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		t.Error(f)
	}
}

// TestPurityCheckerFinds: the checker reports each kind of impurity, so
// TestPolicyIsPure passing means something.
func TestPurityCheckerFinds(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"the clock", `package policy
import "time"
func f() time.Time { return time.Now() }`, "time.Now"},
		{"the clock under another name", `package policy
import clock "time"
func f() clock.Duration { return clock.Since(clock.Time{}) }`, "time.Since"},
		{"a timer", `package policy
import "time"
func f() { <-time.After(time.Second) }`, "time.After"},
		{"a network client", `package policy
import "net/http"
func f() { http.Get("http://example.com") }`, `import "net/http"`},
		{"a context", `package policy
import "context"
func f(ctx context.Context) {}`, `import "context"`},
		{"randomness", `package policy
import "math/rand"
func f() int { return rand.Int() }`, `import "math/rand"`},
		{"the file system", `package policy
import "os"
func f() { os.Getenv("X") }`, `import "os"`},
		{"a client's method on another package's value", `package policy
import tpu "google.golang.org/api/tpu/v2"
func f(s *tpu.Service) { s.Projects.Locations.Nodes.Delete("n").Do() }`, "Delete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := purityFindings(map[string]string{"x.go": tc.src})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(got, func(f string) bool { return strings.Contains(f, tc.want) }) {
				t.Errorf("findings %q; want one naming %s", got, tc.want)
			}
		})
	}
	clean := `package policy
import "time"
type T struct{}
func (T) Get() int { return 1 }
func f(now time.Time, d time.Duration) (time.Time, int) { return now.Add(d), T{}.Get() }`
	if got, err := purityFindings(map[string]string{"x.go": clean}); err != nil || len(got) != 0 {
		t.Errorf("pure source: findings %q, %v; want none", got, err)
	}
}

// purityFindings parses srcs (file name → Go source of package policy)
// and reports every import outside allowedImports, every call of a
// forbidden function or a forbidden package, and every call of an
// I/O-named method on a value whose type is not declared in srcs.
func purityFindings(srcs map[string]string) ([]string, error) {
	fset := token.NewFileSet()
	var parsed []*ast.File
	names := make([]string, 0, len(srcs))
	for n := range srcs {
		names = append(names, n)
	}
	slices.Sort(names)
	local := map[string]bool{} // types declared in the package
	for _, n := range names {
		f, err := parser.ParseFile(fset, n, srcs[n], parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		parsed = append(parsed, f)
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					local[s.(*ast.TypeSpec).Name.Name] = true
				}
			}
		}
	}
	var findings []string
	for _, f := range parsed {
		imported := map[string]string{} // name in the file → import path
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			name := path[strings.LastIndex(path, "/")+1:]
			if path == "google.golang.org/api/tpu/v2" || path == "math/rand/v2" {
				name = path[:strings.LastIndex(path, "/")]
				name = name[strings.LastIndex(name, "/")+1:]
			}
			if im.Name != nil {
				name = im.Name.Name
			}
			imported[name] = path
			if _, ok := allowedImports[path]; !ok {
				findings = append(findings, fmt.Sprintf("%s: import %q is not allowed in the policy", fset.Position(im.Pos()), path))
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pos := fset.Position(call.Pos())
			if id, ok := sel.X.(*ast.Ident); ok {
				if path, ok := imported[id.Name]; ok {
					if slices.Contains(forbiddenCalls[path], sel.Sel.Name) {
						findings = append(findings, fmt.Sprintf("%s: call of %s.%s (the policy takes now and never waits)", pos, path, sel.Sel.Name))
					}
					if slices.Contains(forbiddenPackages, path) {
						findings = append(findings, fmt.Sprintf("%s: call of %s.%s", pos, path, sel.Sel.Name))
					}
					return true
				}
			}
			if slices.Contains(ioMethods, sel.Sel.Name) && !receiverIsLocal(sel.X, local) {
				findings = append(findings, fmt.Sprintf("%s: call of method %s on a value of another package (I/O)", pos, sel.Sel.Name))
			}
			return true
		})
	}
	return findings, nil
}

// receiverIsLocal reports whether x is plainly a value of a type declared
// in the package: a composite literal or conversion of a local type. Any
// other receiver of an I/O-named method is a finding: the package's code
// calls no method of those names, so a false finding shows at once.
func receiverIsLocal(x ast.Expr, local map[string]bool) bool {
	switch x := ast.Unparen(x).(type) {
	case *ast.CompositeLit:
		if id, ok := x.Type.(*ast.Ident); ok {
			return local[id.Name]
		}
	case *ast.CallExpr:
		if id, ok := x.Fun.(*ast.Ident); ok {
			return local[id.Name]
		}
	}
	return false
}
