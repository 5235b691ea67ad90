package terraform_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// words are the record vocabulary (remediate's enumerated words, and the
// actions of the instance path: vmpolicy's Action constants).
type words struct {
	Actions         []string `json:"actions"`
	InstanceActions []string `json:"instance_actions"`
	Phases          []string `json:"phases"`
	Outcomes        []string `json:"outcomes"`
	ReasonPrefixes  []string `json:"reason_prefixes"`
}

func recordWords(t *testing.T) words {
	t.Helper()
	var w words
	for _, a := range remediate.Actions {
		w.Actions = append(w.Actions, string(a))
	}
	w.InstanceActions = vmpolicyActions(t)
	for _, p := range remediate.Phases {
		w.Phases = append(w.Phases, string(p))
	}
	for _, o := range remediate.Outcomes {
		w.Outcomes = append(w.Outcomes, string(o))
	}
	w.ReasonPrefixes = remediate.ReasonPrefixes
	return w
}

var update = flag.Bool("update", false, "rewrite go-contract.json from the Go code")

// goContractFile holds the values the Go code owns and the module reads with
// jsondecode(file(...)), so that none of them is typed twice.
const goContractFile = "go-contract.json"

// goContract is go-contract.json as the Go code defines it.
func goContract(t *testing.T) []byte {
	t.Helper()
	roles := derivedForContract(t)
	pkgDirs, embeds := sourcePackages(t)
	v := struct {
		SinkFilter         string            `json:"sink_filter"`
		InstanceSinkFilter string            `json:"instance_sink_filter"`
		SweepMessage       string            `json:"sweep_message"`
		EntryPoint         string            `json:"entry_point"`
		TPUPermissions     []string          `json:"tpu_permissions"`
		LedgerPermissions  []string          `json:"ledger_permissions"`
		RecordsPermissions []string          `json:"records_permissions"`
		MACPermissions     []string          `json:"mac_permissions"`
		SourcePackages     []string          `json:"source_packages"`
		SourceEmbeds       []string          `json:"source_embeds"`
		ConfigEnv          map[string]string `json:"config_env"`
		EventsCollection   string            `json:"events_collection"`
		EventsExpireField  string            `json:"events_expire_field"`
		Words              words             `json:"words"`
	}{
		SinkFilter:         events.SinkFilter,
		InstanceSinkFilter: events.InstanceSinkFilter,
		SweepMessage:       events.SweepMessage,
		EntryPoint:         function.EntryPoint,
		TPUPermissions:     roles[grantTPURole],
		LedgerPermissions:  roles[grantLedgerRole],
		RecordsPermissions: roles[grantRecordsRole],
		MACPermissions:     roles[grantMACRole],
		SourcePackages:     pkgDirs,
		SourceEmbeds:       embeds,
		ConfigEnv:          configEnv(t),
		EventsCollection:   ledger.CollectionEvents,
		EventsExpireField:  ledger.EventExpireField,
		Words:              recordWords(t),
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGoContractFileIsGeneratedFromTheGoCode fails when a Go constant the
// module depends on changed without `go test ./terraform -update`.
func TestGoContractFileIsGeneratedFromTheGoCode(t *testing.T) {
	want := goContract(t)
	if *update {
		if err := os.WriteFile(goContractFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(goContractFile)
	if err != nil {
		t.Fatalf("%v (generate it with go test ./terraform -update)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is stale; regenerate with go test ./terraform -update (-want +got):\n%s", goContractFile, diff)
	}
}

// sourcePackages returns the directories (relative to the repository root,
// "" for the root) of the main module's packages the root package builds
// from, and the files they embed: what the function's source archive holds
// besides go.mod and go.sum.
func sourcePackages(t *testing.T) (dirs, embeds []string) {
	t.Helper()
	root := repoRoot(t)
	for _, p := range functionPackages(t) {
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			rel = ""
		}
		dirs = append(dirs, rel)
		for _, e := range p.EmbedFiles {
			embeds = append(embeds, path.Join(rel, filepath.ToSlash(e)))
		}
	}
	sort.Strings(dirs)
	sort.Strings(embeds)
	return dirs, embeds
}

// configEnv is every environment variable function.Config reads, with its
// default ("" when it has none): the function's environment in Terraform
// must be exactly these names.
func configEnv(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, cv := range configVars(t) {
		out[name] = cv.def
	}
	return out
}

// vmpolicyActions is every constant of type Action that internal/vmpolicy
// declares, in source order. vmpolicy.Actions is a hand-kept list, so the
// source is read instead: a new instance action reaches go-contract.json,
// and the filters that name it, even when nobody adds it to that list.
func vmpolicyActions(t *testing.T) []string {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "internal", "vmpolicy")
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	var out []string
	fset := token.NewFileSet()
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Action" {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: an Action constant that is not a string literal: %s", fset.Position(v.Pos()), exprString(fset, v))
					}
					word, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, word)
				}
			}
		}
	}
	// The reading must see the constants the instance path writes.
	for _, want := range []vmpolicy.Action{vmpolicy.ActionStart, vmpolicy.ActionRecreateInstances, vmpolicy.ActionReportFaulty, vmpolicy.ActionHeld} {
		if !slices.Contains(out, string(want)) {
			t.Fatalf("read vmpolicy's Action constants as %v: %q missing (the reading no longer matches its source)", out, want)
		}
	}
	return out
}

func exprString(fset *token.FileSet, e ast.Expr) string {
	var b strings.Builder
	_ = printer.Fprint(&b, fset, e)
	return b.String()
}
