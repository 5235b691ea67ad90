package main

import (
	"encoding/json"
	"os"
	"strings"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/cmd/autoheal/demo"
	"regexp"
	"testing"
)

func TestDemoShowsATPU7xSliceHostErrorBecomingOneRecreateOfTheSlice(t *testing.T) {
	r := runCLI(t, nil, "demo")
	if r.err != nil {
		t.Fatalf("demo: %v\nstderr: %s", r.err, r.stderr)
	}
	for _, re := range []string{
		`(?m)^2026-11-20T10:00:00Z +us-central1-c/slice-mig +- +hardware +record `,
		`(?m)^2026-11-20T10:31:00Z +us-central1-c/slice-mig +- +hardware +recreateInstances +not RUNNING`,
		`(?m)^ +us-central1-c/slice-mig: 1 recreateInstances of all 4 VMs together, 31m0s after the host error$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("demo output does not match %s:\n%s", re, r.stdout)
		}
	}
}

// The demo's TPU7x fleet is the slice-mig part of the simulated Compute
// Engine's test fleet, so the demo shows the slice the tests prove.
func TestDemoTPU7xFleetIsTheTestFleetsSlice(t *testing.T) {
	var full, got map[string][]map[string]any
	b, err := os.ReadFile("../../internal/computefake/testdata/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &full); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(demo.TPU7x, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string][]map[string]any{}
	for k, items := range full {
		for _, it := range items {
			if n, _ := it["name"].(string); n == "slice-mig" || strings.HasPrefix(n, "slice-mig-") {
				want[k] = append(want[k], it)
			}
		}
	}
	if len(want["instances"]) != 4 {
		t.Fatalf("test fleet has %d slice-mig instances, want 4", len(want["instances"]))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cmd/autoheal/demo/tpu7x.json differs from the test fleet's slice-mig (-want +got):\n%s", diff)
	}
}
