package terraform_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// filterWordRE finds the record words a filter compares with:
// jsonPayload.action="x", jsonPayload.outcome=("x" OR "y"), the same with
// phase, and metric.label.outcome="x" in alert conditions.
var filterWordRE = regexp.MustCompile(`(?:jsonPayload|metric\.label)\.(action|phase|outcome)\s*=\s*(\((?:\\"[^"\\]*\\"(?:\s+OR\s+)?)+\)|\\"[^"\\]*\\")`)

var quotedRE = regexp.MustCompile(`\\"([^"\\]*)\\"`)

// TestMetricFiltersUseTheRecordWords: every action, phase and outcome word
// a metric or alert filter of the module compares with is one the Go code
// writes (go-contract.json's words, generated from remediate's enumerated
// lists and vmpolicy's Action constants): a renamed phase cannot leave a
// metric that never counts again.
func TestMetricFiltersUseTheRecordWords(t *testing.T) {
	var contract struct {
		Words map[string][]string `json:"words"`
	}
	b, err := os.ReadFile(goContractFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &contract); err != nil {
		t.Fatal(err)
	}
	known := map[string][]string{
		"action": append(contract.Words["actions"], contract.Words["instance_actions"]...), "phase": contract.Words["phases"], "outcome": contract.Words["outcomes"],
	}
	src := string(loadModule(t, ".").files["main.tf"])
	found := 0
	for _, m := range filterWordRE.FindAllStringSubmatch(src, -1) {
		for _, q := range quotedRE.FindAllStringSubmatch(m[2], -1) {
			found++
			if !slices.Contains(known[m[1]], q[1]) {
				t.Errorf("main.tf filters on %s %q, which the Go code never writes (known: %s)", m[1], q[1], strings.Join(known[m[1]], ", "))
			}
		}
	}
	if found < 5 {
		t.Fatalf("found %d record words in main.tf's filters: the pattern no longer matches the module", found)
	}
}
