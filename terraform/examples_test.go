package terraform_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
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

var tfvarsLineRE = regexp.MustCompile(`(?m)^([a-z_][a-z0-9_]*)\s*=`)

// TestExampleCommandsKeepTheRequiredVariables: every terraform apply or
// destroy an example's README shows (the go-live and teardown commands
// included) passes each required variable of the example, with -var or
// through the terraform.tfvars the README writes, so no command a user
// copies drops tpu_service_accounts.
func TestExampleCommandsKeepTheRequiredVariables(t *testing.T) {
	examples, err := filepath.Glob("examples/*")
	if err != nil || len(examples) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, ex := range examples {
		m := loadModule(t, ex)
		b, err := os.ReadFile(filepath.Join(ex, "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		readme := string(b)
		inTFVars := map[string]bool{}
		if i := strings.Index(readme, "cat > terraform.tfvars <<'EOF'\n"); i >= 0 {
			body := readme[i:]
			body = body[:strings.Index(body, "\nEOF\n")]
			for _, v := range tfvarsLineRE.FindAllStringSubmatch(body, -1) {
				inTFVars[v[1]] = true
			}
		}
		var required []string
		for name, v := range m.variables {
			if _, ok := v.Body.Attributes["default"]; !ok {
				required = append(required, name)
			}
		}
		if !slices.Contains(required, "tpu_service_accounts") {
			t.Errorf("%s: tpu_service_accounts has a default; want it required", ex)
		}
		commands := 0
		for _, line := range strings.Split(strings.ReplaceAll(readme, "\\\n", " "), "\n") {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "terraform apply") && !strings.HasPrefix(line, "terraform destroy") {
				continue
			}
			commands++
			passed := map[string]bool{}
			for _, v := range varFlagRE.FindAllStringSubmatch(line, -1) {
				passed[v[1]] = true
			}
			for _, name := range required {
				if !passed[name] && !inTFVars[name] {
					t.Errorf("%s/README.md: %q drops the required variable %s (pass it, or set it in the terraform.tfvars the README writes)", ex, line, name)
				}
			}
		}
		if commands < 3 {
			t.Errorf("%s/README.md shows %d terraform apply/destroy commands; want the first apply, going live and teardown", ex, commands)
		}
	}
}
