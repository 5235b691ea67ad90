package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/startup"
)

// policyFlags are the policy knobs, with the same defaults as the function
// (remediate.DefaultConfig), so a replay decides exactly as the deployed
// function would unless told otherwise.
type policyFlags struct {
	cfg           remediate.Config
	selector      string
	startupScript string
	breaker       string
}

// addPolicyFlags defines the policy flags on fs, but those named in omit: a
// command where a knob does nothing does not offer it.
func addPolicyFlags(fs *flag.FlagSet, omit ...string) *policyFlags {
	d := remediate.DefaultConfig()
	p := &policyFlags{cfg: d}
	skip := map[string]bool{}
	for _, n := range omit {
		skip[n] = true
	}
	// Flags defined on a throwaway set are not offered (their value stays
	// the default).
	unused := flag.NewFlagSet("unused", flag.ContinueOnError)
	on := func(name string) *flag.FlagSet {
		if skip[name] {
			return unused
		}
		return fs
	}
	on("label-selector").StringVar(&p.selector, "label-selector", d.LabelKey+"="+d.LabelValue, "opt-in `label` key=value: nodes without it are never touched")
	on("dry-run").BoolVar(&p.cfg.DryRun, "dry-run", d.DryRun, "decide and record, never mutate a node")
	durationVar(on("unhealthy-grace"), &p.cfg.UnhealthyGrace, "unhealthy-grace", d.UnhealthyGrace, "READY but unhealthy this `long` → recreate")
	durationVar(on("stuck-grace"), &p.cfg.StuckGrace, "stuck-grace", d.StuckGrace, "in a transitional state this `long` → recreate")
	durationVar(on("cooldown"), &p.cfg.Cooldown, "cooldown", d.Cooldown, "minimum `time` between two recreates of one node")
	durationVar(on("window"), &p.cfg.Window, "window", d.Window, "`window` of --max-recreates")
	on("max-recreates").IntVar(&p.cfg.MaxRecreates, "max-recreates", d.MaxRecreates, "recreates of one node within --window")
	on("max-in-flight").IntVar(&p.cfg.MaxInFlight, "max-in-flight", d.MaxInFlight, "project-wide unfinished recoveries")
	on("max-attempts").IntVar(&p.cfg.MaxAttempts, "max-attempts", d.MaxAttempts, "attempts before a recovery failing permanently (not a stockout) is abandoned")
	durationVar(on("lease"), &p.cfg.Lease, "lease", d.Lease, "how `long` a recovery claim is held without renewal")
	durationVar(on("event-ttl"), &p.cfg.EventTTL, "event-ttl", d.EventTTL, "how `long` processed event ids are remembered")
	on("breaker").StringVar(&p.breaker, "breaker", fmt.Sprintf("%d/%s", d.BreakerLimit, shortDuration(d.BreakerWindow)), "storm breaker `LIMIT/WINDOW`: at most LIMIT recreates and resets start in one zone within WINDOW")
	durationVar(on("hold-ttl"), &p.cfg.HoldTTL, "hold-ttl", d.HoldTTL, "how `long` a hold set by a user's termination lasts")
	on("maintenance").StringVar(&p.cfg.MaintenanceMode, "maintenance", d.MaintenanceMode, "what a maintenance notice does: `off|prepare|early`")
	durationVar(on("checkpoint-timeout"), &p.cfg.CheckpointTimeout, "checkpoint-timeout", d.CheckpointTimeout, "with --maintenance early: how `long` the checkpoint may take")
	durationVar(on("resume-watch"), &p.cfg.ResumeWatch, "resume-watch", d.ResumeWatch, "how `long` a training-resumed report is waited for")
	on("startup-script").StringVar(&p.startupScript, "startup-script", "", "`file` set as metadata startup-script on every recreated node, replacing its own (default: a node keeps its own, or gets the embedded resume-training.sh when it carries metadata autoheal-train-cmd)")
	return p
}

// config validates the flags and returns the policy. It reads the startup
// script file, so it is called before any input is read.
func (p *policyFlags) config() (remediate.Config, error) {
	cfg := p.cfg
	key, value, err := remediate.ParseSelector(p.selector)
	if err != nil {
		return cfg, usagef("--label-selector %q: %v", p.selector, err)
	}
	cfg.LabelKey, cfg.LabelValue = key, value
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"unhealthy-grace", cfg.UnhealthyGrace}, {"stuck-grace", cfg.StuckGrace},
		{"cooldown", cfg.Cooldown}, {"window", cfg.Window}, {"lease", cfg.Lease}, {"event-ttl", cfg.EventTTL},
	} {
		if d.v < 0 {
			return cfg, usagef("--%s %v: must not be negative", d.flag, d.v)
		}
	}
	if cfg.Lease == 0 {
		return cfg, usagef("--lease 0: must be positive")
	}
	if cfg.MaxRecreates < 1 {
		return cfg, usagef("--max-recreates %d: must be at least 1", cfg.MaxRecreates)
	}
	if cfg.MaxAttempts < 1 {
		return cfg, usagef("--max-attempts %d: must be at least 1", cfg.MaxAttempts)
	}
	if cfg.MaxInFlight < 1 {
		return cfg, usagef("--max-in-flight %d: must be at least 1", cfg.MaxInFlight)
	}
	if cfg.BreakerLimit, cfg.BreakerWindow, err = remediate.ParseBreaker(p.breaker); err != nil {
		return cfg, usagef("--breaker: %v", err)
	}
	switch cfg.MaintenanceMode {
	case remediate.MaintenanceOff, remediate.MaintenancePrepare, remediate.MaintenanceEarly:
	default:
		return cfg, usagef("--maintenance %q: want off, prepare or early", cfg.MaintenanceMode)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"hold-ttl", cfg.HoldTTL}, {"checkpoint-timeout", cfg.CheckpointTimeout}, {"resume-watch", cfg.ResumeWatch}} {
		if err := checkPositive(d.flag, d.v); err != nil {
			return cfg, err
		}
	}
	// The policy (remediate.StartupScriptFor): a script given here
	// replaces every node's own; else a node carrying autoheal-train-cmd
	// gets the embedded resume script; else it keeps its own.
	cfg.ResumeScript = startup.Script
	cfg.ResumeKeys = []string{startup.MetadataTrainCmd}
	if p.startupScript != "" {
		b, err := os.ReadFile(p.startupScript)
		if err != nil {
			return cfg, usagef("--startup-script: %v", err)
		}
		if len(b) == 0 {
			return cfg, usagef("--startup-script %s: file is empty", p.startupScript)
		}
		cfg.StartupScript = string(b)
	}
	return cfg, nil
}

// checkPositive is a flag sanity check shared by commands.
func checkPositive(flagName string, d time.Duration) error {
	if d <= 0 {
		return usagef("--%s %v: must be positive", flagName, d)
	}
	return nil
}
