package main

import (
	"os"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/cmd/autoheal/demo"
)

func TestDemoInputsAreTheBundledTestdata(t *testing.T) {
	for _, f := range []struct {
		embedded []byte
		path     string
	}{
		{demo.Fleet, fleetFile},
		{demo.Incident, incidentFile},
	} {
		want, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(f.embedded)); diff != "" {
			t.Errorf("cmd/autoheal/demo's copy of %s differs; copy it again (-testdata +embedded):\n%s", f.path, diff)
		}
	}
}

func TestDemoDecidesLikeReplayAndShowsTheFleetAfter(t *testing.T) {
	r := runCLI(t, nil, "demo", "--format", "json", "--clock", "event")
	if r.err != nil {
		t.Fatalf("demo: %v\nstderr: %s", r.err, r.stderr)
	}
	want, err := os.ReadFile(incidentWant)
	if err != nil {
		t.Fatal(err)
	}
	// The same decisions as replay's; the demo's simulated operations
	// take minutes, so its outcomes end later than the golden file's.
	if diff := cmp.Diff(comparable(parseLines(t, string(want))), comparable(parseLines(t, r.stdout)), cmp.AllowUnexported(line{})); diff != "" {
		t.Errorf("demo --format json decides otherwise than the replay golden file (-want +got):\n%s", diff)
	}

	r = runCLI(t, nil, "demo")
	if r.err != nil {
		t.Fatalf("demo: %v\nstderr: %s", r.err, r.stderr)
	}
	for _, re := range []string{
		`(?m)^entries read: 13$`,
		`(?m)^Fleet after the run:$`,
		`(?m)^us-central2-b/llm-v4-128 +READY +HEALTHY +1 +resume-training\.sh$`,
		`(?m)^us-central2-b/v4-32-not-opted-in +TERMINATED +UNHEALTHY_MAINTENANCE +- +-$`,
		`(?m)^us-central2-b/llm-v4-128 +recreate +recovered +2026-11-20T03:49:00Z +READY again, generation 1, after 4m24s$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("demo output does not match %s:\n%s", re, r.stdout)
		}
	}
	if regexp.MustCompile(`(?m)^actions:.*\berror\b`).MatchString(r.stdout) {
		t.Errorf("demo left entries unprocessed:\n%s", r.stdout)
	}
}
