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
		`(?s)\n2026-11-20T09:00:00Z +us-east5-a/llm-v5p-32 +- +maintenance +prepare +notice sent to the guest.*\n +guest at 2026-11-20T09:04:00Z: .*\n2026-11-20T09:05:00Z +us-east5-a/llm-v5p-32 +- +maintenance +maintain +maintenance started now`,
		`(?m)^us-east5-a/llm-v5p-32 +READY +HEALTHY +- +2026-11-20T09:00:00Z$`,
		`(?m)^us-east5-a/eval-v5p-8 +READY +HEALTHY +PENDING SCHEDULED +-$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("demo output does not match %s:\n%s", re, r.stdout)
		}
	}
	if regexp.MustCompile(`eval-v5p-8 +(prepare|maintain)`).MatchString(r.stdout) {
		t.Errorf("the node not opted in was acted on:\n%s", r.stdout)
	}
}
