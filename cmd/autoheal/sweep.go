package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

const sweepHelp = `Usage: autoheal sweep [flags] --projects P --zones Z

Runs the function's sweep once: lists the opted-in nodes of the projects in
the zones, and decides and acts on each as on an event (the ledger is in
memory, so there are no unfinished recoveries or deferrals to resume). Prints
one line per swept node, like replay.

Without --fleet it talks to the real TPU API with Application Default
Credentials: add --dry-run to see what it would do.

Flags:
`

func runSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sweep", sweepHelp, stderr)
	target := addTargetFlags(fs)
	policy := addPolicyFlags(fs)
	format := fs.String("format", "text", "output `format`: text or json")
	var projects, zones listFlag
	fs.Var(&projects, "projects", "`projects` to sweep (comma-separated, repeatable)")
	fs.Var(&zones, "zones", "`zones` to list nodes in (comma-separated, repeatable)")
	budget := fs.Duration("budget", 4*time.Minute, "stop listing after this long")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("sweep takes no arguments (got %q)", fs.Args())
	}
	if *format != "text" && *format != "json" {
		return usagef("--format %q: want text or json", *format)
	}
	if len(projects) == 0 {
		return usagef("--projects is required")
	}
	if len(zones) == 0 {
		return usagef("--zones is required")
	}
	if err := checkPositive("budget", *budget); err != nil {
		return err
	}
	cfg, err := policy.config()
	if err != nil {
		return err
	}
	tg, err := target.open(ctx)
	if err != nil {
		return err
	}
	h := &remediate.Handler{
		TPU:      tg.tpu,
		Store:    ledger.NewMemory(),
		Recorder: discardRecorder{},
		Config:   cfg,
		Holder:   "autoheal-sweep",
	}
	res, runErr := h.Sweep(ctx, remediate.SweepOptions{Projects: projects, Zones: zones, Budget: *budget})
	p := newPrinter(*format, stdout)
	for _, r := range res.Records {
		if err := p.print(lineOf(r, events.Event{})); err != nil && runErr == nil {
			runErr = fmt.Errorf("write output: %w", err)
		}
	}
	if err := p.finish(); err != nil && runErr == nil {
		runErr = fmt.Errorf("write output: %w", err)
	}
	if err := tg.finish(); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return fmt.Errorf("sweep: %w", runErr)
	}
	if !res.Complete {
		fmt.Fprintf(stderr, "sweep stopped after --budget %v before listing every node\n", *budget)
	}
	if len(res.Errors) > 0 {
		return fmt.Errorf("sweep: %d location(s) could not be listed; their nodes were not checked: %s", len(res.Errors), strings.Join(res.Errors, "; "))
	}
	return nil
}
