package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// TestPolicyFlagsSetTheNewerKnobs: --breaker, --hold-ttl, --maintenance,
// --checkpoint-timeout and --resume-watch reach the policy, defaults equal
// the function's, and bad values are usage errors naming the flag.
func TestPolicyFlagsSetTheNewerKnobs(t *testing.T) {
	parse := func(args ...string) (*policyFlags, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		p := addPolicyFlags(fs)
		return p, fs.Parse(args)
	}
	p, _ := parse()
	cfg, err := p.config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BreakerLimit != 48 || cfg.BreakerWindow != time.Hour || cfg.HoldTTL != 168*time.Hour || cfg.MaintenanceMode != "prepare" ||
		cfg.CheckpointTimeout != 30*time.Minute || cfg.ResumeWatch != 2*time.Hour {
		t.Errorf("defaults = %+v, want breaker 48/1h, hold 168h, prepare, 30m, 2h", cfg)
	}
	p, _ = parse("--breaker", "5/90m", "--hold-ttl", "1h", "--maintenance", "early", "--checkpoint-timeout", "10m", "--resume-watch", "3h")
	cfg, err = p.config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BreakerLimit != 5 || cfg.BreakerWindow != 90*time.Minute || cfg.HoldTTL != time.Hour || cfg.MaintenanceMode != "early" ||
		cfg.CheckpointTimeout != 10*time.Minute || cfg.ResumeWatch != 3*time.Hour {
		t.Errorf("config = %+v, want the flags' values", cfg)
	}
	for _, bad := range [][]string{{"--breaker", "48"}, {"--breaker", "0/1h"}, {"--maintenance", "sometimes"}, {"--hold-ttl", "0s"}} {
		p, _ := parse(bad...)
		if _, err := p.config(); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: error %v, want a usage error naming %s", bad, err, bad[0])
		}
	}
}
