package terraform_test

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// moduleDirs are the Terraform module directories under test: the module
// itself and its examples.
var moduleDirs = []string{".", "examples/basic", "examples/org-wide"}

// module is one directory's Terraform configuration, parsed.
type module struct {
	dir       string
	files     map[string][]byte // file name -> source
	bodies    map[string]*hclsyntax.Body
	variables map[string]*hclsyntax.Block
	outputs   map[string]*hclsyntax.Block
	locals    map[string]*hclsyntax.Attribute
	resources map[string]*hclsyntax.Block // "TYPE.NAME"
	data      map[string]*hclsyntax.Block // "TYPE.NAME"
	modules   map[string]*hclsyntax.Block
	checks    map[string]*hclsyntax.Block
	providers []*hclsyntax.Block
}

// loadModule parses every .tf file of dir; parse errors fail the test.
func loadModule(t *testing.T, dir string) *module {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("%s: no .tf files", dir)
	}
	m := &module{
		dir:       dir,
		files:     map[string][]byte{},
		bodies:    map[string]*hclsyntax.Body{},
		variables: map[string]*hclsyntax.Block{},
		outputs:   map[string]*hclsyntax.Block{},
		locals:    map[string]*hclsyntax.Attribute{},
		resources: map[string]*hclsyntax.Block{},
		data:      map[string]*hclsyntax.Block{},
		modules:   map[string]*hclsyntax.Block{},
		checks:    map[string]*hclsyntax.Block{},
	}
	for _, path := range paths {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("parse %s: %v", path, diags)
		}
		name := filepath.Base(path)
		body := f.Body.(*hclsyntax.Body)
		m.files[name] = src
		m.bodies[name] = body
		if len(body.Attributes) > 0 {
			t.Errorf("%s: top-level attributes are not valid Terraform", path)
		}
		for _, b := range body.Blocks {
			key := strings.Join(b.Labels, ".")
			var into map[string]*hclsyntax.Block
			switch b.Type {
			case "variable":
				into = m.variables
			case "output":
				into = m.outputs
			case "resource":
				into = m.resources
			case "data":
				into = m.data
			case "module":
				into = m.modules
			case "check":
				into = m.checks
			case "provider":
				m.providers = append(m.providers, b)
				continue
			case "terraform":
				continue
			case "locals":
				for n, a := range b.Body.Attributes {
					if _, dup := m.locals[n]; dup {
						t.Errorf("%s: local %q declared twice", path, n)
					}
					m.locals[n] = a
				}
				continue
			default:
				t.Errorf("%s: unexpected top-level block %q", path, b.Type)
				continue
			}
			if _, dup := into[key]; dup {
				t.Errorf("%s: %s %q declared twice", path, b.Type, key)
			}
			into[key] = b
		}
	}
	return m
}

// resource returns the resource block TYPE.NAME, failing the test if absent.
func (m *module) resource(t *testing.T, key string) *hclsyntax.Block {
	t.Helper()
	b, ok := m.resources[key]
	if !ok {
		t.Fatalf("%s: no resource %s", m.dir, key)
	}
	return b
}

// local returns the local's expression, failing the test if absent.
func (m *module) local(t *testing.T, name string) hcl.Expression {
	t.Helper()
	a, ok := m.locals[name]
	if !ok {
		t.Fatalf("%s: no local %q", m.dir, name)
	}
	return a.Expr
}

// evalContext evaluates expressions the way Terraform would for the values
// known without a provider: var.* are the variables' defaults (or the
// overrides), local.* every local that evaluates in that context, and the
// few Terraform functions the module uses on such values.
func (m *module) evalContext(t *testing.T, overrides map[string]cty.Value) *hcl.EvalContext {
	t.Helper()
	vars := map[string]cty.Value{}
	for name, b := range m.variables {
		if v, ok := overrides[name]; ok {
			vars[name] = v
			continue
		}
		if a, ok := b.Body.Attributes["default"]; ok {
			v, diags := a.Expr.Value(nil)
			if !diags.HasErrors() {
				vars[name] = v
			}
		}
	}
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{
			"var":  cty.ObjectVal(vars),
			"path": cty.ObjectVal(map[string]cty.Value{"module": cty.StringVal(m.dir)}),
		},
		Functions: map[string]function.Function{
			"file":         fileFunc,
			"jsondecode":   stdlib.JSONDecodeFunc,
			"base64encode": base64EncodeFunc,
			"join":         stdlib.JoinFunc,
			"tostring":     toStringFunc,
			"replace":      stdlib.ReplaceFunc,
			"distinct":     stdlib.DistinctFunc,
			"length":       stdlib.LengthFunc,
			"concat":       stdlib.ConcatFunc,
			"coalesce":     stdlib.CoalesceFunc,
			"merge":        stdlib.MergeFunc,
		},
	}
	// Locals may refer to one another: evaluate until nothing new resolves.
	locals := map[string]cty.Value{}
	for changed := true; changed; {
		changed = false
		ctx.Variables["local"] = cty.ObjectVal(locals)
		for name, a := range m.locals {
			if _, done := locals[name]; done {
				continue
			}
			v, diags := a.Expr.Value(ctx)
			if diags.HasErrors() || !v.IsWhollyKnown() {
				continue
			}
			locals[name] = v
			changed = true
		}
	}
	ctx.Variables["local"] = cty.ObjectVal(locals)
	return ctx
}

// evalString evaluates expr to a string in ctx.
func evalString(t *testing.T, ctx *hcl.EvalContext, expr hcl.Expression) string {
	t.Helper()
	v, diags := expr.Value(ctx)
	if diags.HasErrors() {
		t.Fatalf("evaluate %s: %v", exprSource(expr), diags)
	}
	if v.IsNull() || !v.Type().Equals(cty.String) {
		t.Fatalf("evaluate %s: got %#v; want a string", exprSource(expr), v)
	}
	return v.AsString()
}

// evalStrings evaluates expr to a list of strings in ctx.
func evalStrings(t *testing.T, ctx *hcl.EvalContext, expr hcl.Expression) []string {
	t.Helper()
	v, diags := expr.Value(ctx)
	if diags.HasErrors() {
		t.Fatalf("evaluate %s: %v", exprSource(expr), diags)
	}
	if !v.CanIterateElements() {
		t.Fatalf("evaluate %s: got %#v; want a list", exprSource(expr), v)
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if !e.Type().Equals(cty.String) {
			t.Fatalf("evaluate %s: element %#v is not a string", exprSource(expr), e)
		}
		out = append(out, e.AsString())
	}
	return out
}

// attr returns the attribute at path (nested block types, then the
// attribute name) within b, failing the test if any step is missing or a
// block type repeats.
func attr(t *testing.T, b *hclsyntax.Block, path ...string) *hclsyntax.Attribute {
	t.Helper()
	body := b.Body
	for _, typ := range path[:len(path)-1] {
		var found []*hclsyntax.Block
		for _, nb := range body.Blocks {
			if nb.Type == typ {
				found = append(found, nb)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%s %s: %d %q blocks; want 1", b.Type, strings.Join(b.Labels, "."), len(found), typ)
		}
		body = found[0].Body
	}
	a, ok := body.Attributes[path[len(path)-1]]
	if !ok {
		t.Fatalf("%s %s: no attribute %s", b.Type, strings.Join(b.Labels, "."), strings.Join(path, "."))
	}
	return a
}

// traversalString renders a traversal as HCL would print it: local.x, a.b[0].c.
func traversalString(tr hcl.Traversal) string {
	var sb strings.Builder
	for _, step := range tr {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			sb.WriteString(s.Name)
		case hcl.TraverseAttr:
			sb.WriteString("." + s.Name)
		case hcl.TraverseIndex:
			if s.Key.Type() == cty.String {
				fmt.Fprintf(&sb, "[%q]", s.Key.AsString())
			} else {
				fmt.Fprintf(&sb, "[%s]", s.Key.AsBigFloat().String())
			}
		case hcl.TraverseSplat:
			sb.WriteString("[*]")
		}
	}
	return sb.String()
}

// isReference reports whether expr is exactly the reference want (e.g.
// "local.sink_filter"), which proves the value is not a second hand-written copy.
func isReference(expr hcl.Expression, want string) bool {
	st, ok := expr.(*hclsyntax.ScopeTraversalExpr)
	return ok && traversalString(st.Traversal) == want
}

func exprSource(expr hcl.Expression) string {
	r := expr.Range()
	return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line)
}

// walkBlocks calls fn for b and every block nested in it.
func walkBlocks(b *hclsyntax.Block, fn func(*hclsyntax.Block)) {
	fn(b)
	for _, nb := range b.Body.Blocks {
		walkBlocks(nb, fn)
	}
}

// allBlocks returns every top-level block of m, in file then source order.
func (m *module) allBlocks() []*hclsyntax.Block {
	names := make([]string, 0, len(m.bodies))
	for n := range m.bodies {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []*hclsyntax.Block
	for _, n := range names {
		out = append(out, m.bodies[n].Blocks...)
	}
	return out
}

var base64EncodeFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "str", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.StringVal(base64.StdEncoding.EncodeToString([]byte(args[0].AsString()))), nil
	},
})

var toStringFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "v", Type: cty.DynamicPseudoType}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v := args[0]
		switch {
		case v.Type() == cty.Bool:
			return cty.StringVal(fmt.Sprint(v.True())), nil
		case v.Type() == cty.Number:
			return cty.StringVal(v.AsBigFloat().Text('f', -1)), nil
		case v.Type() == cty.String:
			return v, nil
		}
		return cty.NilVal, fmt.Errorf("tostring: unsupported %s", v.Type().FriendlyName())
	},
})

// fileFunc is Terraform's file(): the contents of a file, as a string.
var fileFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "path", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		b, err := os.ReadFile(args[0].AsString())
		if err != nil {
			return cty.NilVal, err
		}
		return cty.StringVal(string(b)), nil
	},
})
