package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// declaredActions are the values of every constant of type Action declared
// in the package directory dir (internal/policy, internal/vmpolicy), read
// from the source so that a new action is tested without editing this.
func declaredActions(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				out = append(out, actionValues(t, g)...)
			}
		}
	}
	sort.Strings(out)
	if len(out) < 8 {
		t.Fatalf("%s declares %d actions (%v): the parse missed them", dir, len(out), out)
	}
	return out
}

// actionValues are the string values of the constants of type Action in g.
func actionValues(t *testing.T, g *ast.GenDecl) []string {
	t.Helper()
	var out []string
	for _, s := range g.Specs {
		vs := s.(*ast.ValueSpec)
		if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Action" {
			continue
		}
		for _, v := range vs.Values {
			if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				a, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, a)
			}
		}
	}
	return out
}

// The instance table is sized from vmpolicy.Actions: it must list every
// action internal/vmpolicy declares.
func TestInstanceActionsAreEveryVMPolicyAction(t *testing.T) {
	got := instanceActions()
	sort.Strings(got)
	if diff := cmp.Diff(declaredActions(t, "../../internal/vmpolicy"), got); diff != "" {
		t.Errorf("vmpolicy.Actions differs from the Action constants of internal/vmpolicy (-declared +listed):\n%s", diff)
	}
}

// TestTextTableShowsEveryActionWhole: every action of internal/policy and
// internal/vmpolicy shows in full in the decision and outcome tables
// (recreateInstances was cut to "recreat…"), each line fits 120 columns,
// and with the instance actions (withActions) the REASON and OUTCOME
// columns stay aligned under their headers.
func TestTextTableShowsEveryActionWhole(t *testing.T) {
	policy := declaredActions(t, "../../internal/policy")
	vm := declaredActions(t, "../../internal/vmpolicy")
	all := append(append([]string{}, policy...), vm...)
	reason := strings.Repeat("a reason long enough to be cut ", 6)
	for _, tc := range []struct {
		name    string
		actions []string // told to the printer
		aligned bool     // every action fits its column
	}{
		{"node actions", nil, false},
		{"instance actions", instanceActions(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			out := newPrinter("text", &b, "").withActions(tc.actions)
			for _, a := range all {
				if err := out.print(line{Time: "2026-11-20T10:00:00Z", Node: "projects/p/zones/us-central1-c/instanceGroupManagers/slice-mig", Cause: "hardware", Action: a, Reason: reason}); err != nil {
					t.Fatal(err)
				}
			}
			var os []outcome
			for _, a := range all {
				os = append(os, outcome{Node: "projects/p/zones/us-central1-c/instances/vm", Action: a, Outcome: "recovered", Time: "2026-11-20T10:05:00Z", Reason: reason})
			}
			if err := out.p.outcomes(os); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(b.String()), "\n")
			decisions, outcomes := lines[1:1+len(all)], lines[len(lines)-len(all):]
			reasonCol := column(lines[0], "REASON")
			outcomeCol := column(lines[len(lines)-len(all)-1], "OUTCOME")
			for i, a := range all {
				for _, l := range []string{decisions[i], outcomes[i]} {
					if !strings.Contains(l, "  "+a+"  ") {
						t.Errorf("action %q is not whole in %q", a, l)
					}
					if n := utf8.RuneCountInString(l); n > textWidth {
						t.Errorf("line is %d columns, want <= %d: %q", n, textWidth, l)
					}
				}
				if !tc.aligned {
					continue
				}
				if got := column(decisions[i], "a reason"); got != reasonCol {
					t.Errorf("%s: reason at column %d, REASON at %d: %q", a, got, reasonCol, decisions[i])
				}
				if got := column(outcomes[i], "recovered"); got != outcomeCol {
					t.Errorf("%s: outcome at column %d, OUTCOME at %d: %q", a, got, outcomeCol, outcomes[i])
				}
			}
		})
	}
}

// column is the column (in runes: "…" is one) where sub starts in l.
func column(l, sub string) int {
	i := strings.Index(l, sub)
	if i < 0 {
		return -1
	}
	return utf8.RuneCountInString(l[:i])
}
