package main

import (
	"regexp"
	"testing"
)

func TestDemoShowsANoticeBecomingPrepareThenMaintain(t *testing.T) {
	r := runCLI(t, nil, "demo")
	if r.err != nil {
		t.Fatalf("demo: %v\nstderr: %s", r.err, r.stderr)
	}
	for _, re := range []string{
		`(?s)sweep +projects/acme-ml/locations/us-east5-a/nodes/llm-v5p-32 +prepare .*guest .*sweep +projects/acme-ml/locations/us-east5-a/nodes/llm-v5p-32 +maintain `,
		`(?m)^projects/acme-ml/locations/us-east5-a/nodes/llm-v5p-32 +READY +HEALTHY +- +2026-11-20T09:00:00Z$`,
		`(?m)^projects/acme-ml/locations/us-east5-a/nodes/eval-v5p-8 +READY +HEALTHY +PENDING SCHEDULED +-$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("demo output does not match %s:\n%s", re, r.stdout)
		}
	}
	if regexp.MustCompile(`eval-v5p-8 +(prepare|maintain)`).MatchString(r.stdout) {
		t.Errorf("the node not opted in was acted on:\n%s", r.stdout)
	}
}
