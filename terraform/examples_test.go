package terraform_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"
)

// varFlagRE finds the variables a README tells users to pass: -var NAME=…,
// -var 'NAME=…' and -var "NAME=…".
var varFlagRE = regexp.MustCompile(`-var\s+['"]?([a-z_][a-z0-9_]*)=`)

// TestExamplesDeclareWhatTheREADMEsPass: every -var in an example's
// README is a variable of that example, and every -var in the module's and
// the repository's READMEs (whose commands run in either example) is a
// variable of both; each example has its own README, variables and outputs.
func TestExamplesDeclareWhatTheREADMEsPass(t *testing.T) {
	examples, err := filepath.Glob("examples/*")
	if err != nil || len(examples) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	flags := func(path string) []string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, m := range varFlagRE.FindAllSubmatch(b, -1) {
			seen[string(m[1])] = true
		}
		var out []string
		for v := range seen {
			out = append(out, v)
		}
		sort.Strings(out)
		return out
	}
	shared := append(flags("README.md"), flags(filepath.Join(repoRoot(t), "README.md"))...)
	if len(shared) == 0 {
		t.Fatal("no -var in the READMEs: the pattern is broken")
	}
	for _, ex := range examples {
		for _, f := range []string{"README.md", "variables.tf", "outputs.tf", "main.tf", "versions.tf"} {
			if _, err := os.Stat(filepath.Join(ex, f)); err != nil {
				t.Errorf("%s has no %s", ex, f)
			}
		}
		m := loadModule(t, ex)
		for _, v := range append(flags(filepath.Join(ex, "README.md")), shared...) {
			if _, ok := m.variables[v]; !ok {
				t.Errorf("%s does not declare variable %q, which a README passes with -var", ex, v)
			}
		}
	}
}
