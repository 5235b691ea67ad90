package main

import (
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
		`(?m)^2026-11-20T10:31:00Z +us-central1-c/slice-mig +- +hardware +recreat`,
		`(?m)^ +us-central1-c/slice-mig: 1 recreateInstances of all 4 VMs together, 31m0s after the host error$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("demo output does not match %s:\n%s", re, r.stdout)
		}
	}
}
