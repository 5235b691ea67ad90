package terraform_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/record"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// The alerts and metrics match words and lines the Go code writes; these
// tests hold each one to its source, so a rename in Go fails here rather
// than leaving an alert that never fires.

func TestOutcomeFiltersUseRemediateOutcomes(t *testing.T) {
	src := string(loadModule(t, ".").files["main.tf"])
	for _, want := range []string{
		`jsonPayload.outcome=(\"` + string(remediate.OutcomeFailed) + `\" OR \"` + string(remediate.OutcomeAbandoned) + `\")`,
		`jsonPayload.outcome=\"` + string(remediate.OutcomeRecovered) + `\"`,
		`metric.label.outcome=\"` + string(remediate.OutcomePrepared) + `\"`,
	} {
		if !strings.Contains(src, want) {
			t.Errorf("main.tf has no %s (the Outcome words of internal/remediate)", want)
		}
	}
}

func TestBreakerAlertMatchesTheBreakerReason(t *testing.T) {
	src := string(loadModule(t, ".").files["main.tf"])
	const want = `jsonPayload.reason=~\"^breaker open\"`
	if !strings.Contains(src, want) {
		t.Fatalf("main.tf has no breaker filter %s", want)
	}
	reason := (&remediate.BreakerOpenError{Zone: "us-central2-b", Limit: 48, Window: time.Hour}).Error()
	if !strings.HasPrefix(reason, "breaker open") {
		t.Errorf("a breaker trip's reason %q does not start with \"breaker open\"", reason)
	}
}

// The start-up error alert matches the line function/handle.go writes.
func TestStartupErrorAlertMatchesLogStartupError(t *testing.T) {
	m := loadModule(t, ".")
	prefix := evalString(t, m.evalContext(t, nil), m.local(t, "startup_error_prefix"))
	handle, err := os.ReadFile(filepath.Join(repoRoot(t), "function", "handle.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(handle), `"`+prefix+`: %v`) {
		t.Errorf("function/handle.go's start-up error line does not start with %q", prefix)
	}
	if !strings.Contains(string(handle), `diag.Error(`) {
		t.Error("function/handle.go's start-up error line is not written with diag.Error (severity ERROR)")
	}
}

// The sweeps-stopped alert counts the line each sweep writes.
func TestSweepMetricMatchesTheSweepLine(t *testing.T) {
	src := string(loadModule(t, ".").files["main.tf"])
	want := `jsonPayload.event=\"` + function.SweepEvent + `\"`
	if !strings.Contains(src, want) {
		t.Errorf("main.tf has no sweep metric filter %s (function.SweepEvent)", want)
	}
}

var goRegexpRE = regexp.MustCompile("gcsRE\\s*=\\s*regexp.MustCompile\\(`([^`]+)`\\)")

// The startup_script validation and the bucket/object split use exactly the
// Go config's pattern, so a plan that passes cannot give a function that
// refuses to start.
func TestStartupScriptPatternIsTheGoConfigs(t *testing.T) {
	load, err := os.ReadFile(filepath.Join(repoRoot(t), "function", "load.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := goRegexpRE.FindSubmatch(load)
	if m == nil {
		t.Fatal("function/load.go has no gcsRE = regexp.MustCompile(`...`)")
	}
	goPattern := string(m[1])
	mod := loadModule(t, ".")
	hclPattern := strings.ReplaceAll(goPattern, `\`, `\\`)
	for _, f := range []string{"variables.tf", "main.tf"} {
		if !strings.Contains(string(mod.files[f]), `regex("`+hclPattern+`", var.startup_script)`) {
			t.Errorf("%s does not match startup_script with function/load.go's gcsRE %s", f, goPattern)
		}
	}
}

// The acquisition metrics read the refusal a stockout record carries: the
// words and field names internal/record writes.
func TestStockoutMetricReadsTheRefusalRecord(t *testing.T) {
	src := string(loadModule(t, ".").files["main.tf"])
	p, err := record.Payload(remediate.Record{Action: remediate.ActionRecreate,
		Refusal: &remediate.Refusal{Kind: remediate.KindStockout.String(), Zone: "us-central2-b", Message: "There is no more capacity in the zone"}})
	if err != nil {
		t.Fatal(err)
	}
	refusal, _ := p["refusal"].(map[string]any)
	if refusal["kind"] != "stockout" || refusal["zone"] != "us-central2-b" {
		t.Fatalf("a stockout record's refusal is %v, want kind stockout and its zone", refusal)
	}
	for _, want := range []string{`jsonPayload.refusal.kind=\"stockout\"`, `EXTRACT(jsonPayload.refusal.zone)`, `jsonPayload.steps.name=\"create\"`} {
		if !strings.Contains(src, want) {
			t.Errorf("main.tf has no %s", want)
		}
	}
}
