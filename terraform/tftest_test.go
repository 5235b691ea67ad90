package terraform_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// parseTFTest parses a .tftest.hcl file of tests/.
func parseTFTest(t *testing.T, name string) (*hclsyntax.Body, []byte) {
	t.Helper()
	p := filepath.Join("tests", name)
	src, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	f, diags := hclsyntax.ParseConfig(src, p, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("parse %s: %v", p, diags)
	}
	return f.Body.(*hclsyntax.Body), src
}

// TestEveryValidationHasAFailingRun: each validation block of every variable
// is matched by a run of tests/validations.tftest.hcl that expects that
// variable to fail, so a validation that stops refusing is noticed by
// terraform test.
func TestEveryValidationHasAFailingRun(t *testing.T) {
	m := loadModule(t, ".")
	body, _ := parseTFTest(t, "validations.tftest.hcl")
	runs := map[string]int{}
	for _, b := range body.Blocks {
		if b.Type != "run" {
			continue
		}
		a, ok := b.Body.Attributes["expect_failures"]
		if !ok {
			continue
		}
		for _, tr := range hclsyntax.Variables(a.Expr) {
			if s := traversalString(tr); strings.HasPrefix(s, "var.") {
				runs[strings.TrimPrefix(s, "var.")]++
			}
		}
	}
	total := 0
	for name, v := range m.variables {
		n := len(blocksOf(v, "validation"))
		total += n
		if runs[name] < n {
			t.Errorf("variable %q has %d validations but %d expect_failures runs in tests/validations.tftest.hcl", name, n, runs[name])
		}
	}
	if total == 0 {
		t.Fatal("no validation found")
	}
}

// TestPlanTestCoversEveryIAMGrant: every IAM resource of main.tf appears in
// the binding assertions of tests/plan.tftest.hcl, so a new grant cannot
// slip past the test that lists who gets what.
func TestPlanTestCoversEveryIAMGrant(t *testing.T) {
	m := loadModule(t, ".")
	_, src := parseTFTest(t, "plan.tftest.hcl")
	n := 0
	for key := range m.resources {
		typ := strings.SplitN(key, ".", 2)[0]
		if !strings.Contains(typ, "_iam_") || strings.HasSuffix(typ, "_custom_role") {
			continue
		}
		n++
		if !bytes.Contains(src, []byte(key)) {
			t.Errorf("IAM resource %s is not asserted in tests/plan.tftest.hcl", key)
		}
	}
	if n == 0 {
		t.Fatal("no IAM resource in main.tf")
	}
}

// terraformCLI returns the terraform binary and a CLI config installing the
// providers from the mirror (TF_PROVIDER_MIRROR, default
// <repo>/../shared/terraform-providers), unpacked once per test binary. With
// no terraform the test is skipped (failed under CI=true); with no mirror
// the registry is used.
func terraformCLI(t *testing.T) (bin string, env []string) {
	t.Helper()
	bin, err := exec.LookPath("terraform")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no terraform binary on the PATH (CI=true)")
		}
		t.Skip("SKIPPED: no terraform binary on the PATH")
	}
	env = os.Environ()
	if c := os.Getenv("TF_CLI_CONFIG_FILE"); c != "" {
		if _, err := os.Stat(c); err == nil {
			return bin, env
		}
	}
	mirrorOnce.Do(func() { mirrorConfig, mirrorErr = unpackMirror(t) })
	if mirrorErr != nil {
		t.Log(mirrorErr)
		return bin, env
	}
	return bin, append(env, "TF_CLI_CONFIG_FILE="+mirrorConfig)
}

// unpackMirror unpacks the provider mirror once into the same cache
// scripts/terraform-check.sh uses (keyed by the archive's checksum) and
// returns the path of its CLI configuration.
func unpackMirror(t *testing.T) (string, error) {
	dir := os.Getenv("TF_PROVIDER_MIRROR")
	if dir == "" {
		dir = filepath.Join(repoRoot(t), "..", "shared", "terraform-providers")
	}
	script := filepath.Join(dir, "use-mirror.sh")
	tarball := filepath.Join(dir, "providers.tar.gz")
	f, err := os.Open(tarball)
	if err != nil {
		return "", fmt.Errorf("no provider mirror (%v): using the registry", err)
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	cache := filepath.Join(base, "tpu-autoheal", "terraform-providers-"+hex.EncodeToString(h.Sum(nil))[:16])
	rc := filepath.Join(cache, "terraformrc")
	if _, err := os.Stat(rc); err == nil {
		return rc, nil
	}
	tmp := fmt.Sprintf("%s.tmp%d", cache, os.Getpid())
	defer os.RemoveAll(tmp)
	if out, err := exec.Command(script, tmp).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %v\n%s", script, err, out)
	}
	b, err := os.ReadFile(filepath.Join(tmp, "terraformrc"))
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, "terraformrc"), bytes.ReplaceAll(b, []byte(tmp), []byte(cache)), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, cache); err != nil {
		if _, serr := os.Stat(rc); serr == nil {
			return rc, nil // another process won the race
		}
		return "", err
	}
	return rc, nil
}

var (
	mirrorOnce   sync.Once
	mirrorConfig string
	mirrorErr    error
)

// consoleEval evaluates expr in `terraform console` of a copy of this module
// (so the checkout's .terraform is left alone) with vars set.
func consoleEval(t *testing.T, expr string, vars map[string]string) string {
	t.Helper()
	bin, env := terraformCLI(t)
	dir := t.TempDir()
	for _, f := range []string{"main.tf", "variables.tf", "outputs.tf", "versions.tf", "go-contract.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(stdin string, args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append(env, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("terraform %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	run("", "init", "-backend=false", "-input=false", "-no-color")
	args := []string{"console", "-no-color"}
	for k, v := range vars {
		args = append(args, "-var", k+"="+v)
	}
	return run(expr+"\n", args...)
}

// TestArchiveIsWhatTheBuildpackCompiles evaluates the archive's file list
// with Terraform itself and compares it with what `go list -deps` says the
// root package compiles: the non-test .go files of the main module's
// packages it imports, the files they embed, go.mod and go.sum.
func TestArchiveIsWhatTheBuildpackCompiles(t *testing.T) {
	root := repoRoot(t)
	out := consoleEval(t, "jsonencode(sort(local.source_files))", map[string]string{
		"project_id": "host-project", "region": "us-central1", "source_dir": root,
	})
	var quoted string
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &quoted); err != nil {
		t.Fatalf("console output %q: %v", out, err)
	}
	var got []string
	if err := json.Unmarshal([]byte(quoted), &got); err != nil {
		t.Fatalf("source_files %q: %v", quoted, err)
	}
	want := []string{"go.mod", "go.sum"}
	for _, p := range functionPackages(t) {
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range append(append([]string{}, p.GoFiles...), p.EmbedFiles...) {
			want = append(want, path.Join(filepath.ToSlash(rel), f))
		}
	}
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the archive's files (terraform console) differ from the buildpack's inputs (go list -deps) (-want +got):\n%s", diff)
	}
	for _, f := range got {
		if strings.HasSuffix(f, "_test.go") || strings.HasSuffix(f, ".orig") || strings.Contains(f, "testdata/") || strings.Contains(f, "fake") {
			t.Errorf("archive holds %s (a test, test data, fake or leftover)", f)
		}
	}
}
