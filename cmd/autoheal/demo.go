package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tpu-autoheal/autoheal/cmd/autoheal/demo"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
	"github.com/tpu-autoheal/autoheal/startup"
)

const demoHelp = `Usage: autoheal demo [--format text|json] [--clock event|wall] [--fleet-out FILE]

Replays a bundled maintenance incident (a copy of
testdata/replay/incident.jsonl) against a simulated TPU control plane seeded
with a bundled fleet (a copy of testdata/fleet.json), through exactly the
code the Cloud Function runs, and prints every decision, how each recovery
ended, and the fleet as it is after the run; then a second simulated fleet
where a maintenance notice becomes prepare and maintain; a simulated Compute
Engine where one VM's host error in a 4-VM TPU7x slice becomes one
recreateInstances of the slice; then the report of
what the incident cost. Needs no credentials and no network.

It decides each entry at its own timestamp (--clock event) and the
simulated deletes take 1 minute and creates 3, as real ones take minutes.
Its decisions are those of

  autoheal replay --clock event --fleet testdata/fleet.json testdata/replay/incident.jsonl

whose simulated operations finish at the first look instead, so that
replay's recoveries end sooner than the demo's.

` + columnLegend + `
` + exitCodesHelp + `
Flags:
`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", demoHelp, stderr)
	format := fs.String("format", "text", "output `format`: text or json")
	clock := fs.String("clock", "event", "decide at each entry's own timestamp (`event`, with simulated deletes of 1m and creates of 3m) or at the wall clock (wall)")
	fleetOut := fs.String("fleet-out", "", "write the simulated fleet to this `file` after the run")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("demo takes no arguments (got %q); use autoheal replay for your own entries", fs.Args())
	}
	var after tpufake.Fleet
	replayArgs := []string{"--format", *format, "--clock", *clock}
	if *fleetOut != "" {
		replayArgs = append(replayArgs, "--fleet-out", *fleetOut)
	}
	records := filepath.Join(os.TempDir(), fmt.Sprintf("autoheal-demo-records-%d.jsonl", os.Getpid()))
	if *format == "text" {
		replayArgs = append(replayArgs, "--records", records)
		defer os.Remove(records)
	}
	if *format == "text" {
		fmt.Fprintf(stdout, "Replaying %d bundled TPU audit log entries against a simulated fleet of %d nodes.\n\n",
			bytes.Count(demo.Incident, []byte("\n")), countNodes(demo.Fleet))
	}
	err := replay(ctx, append(replayArgs, "-"), bytes.NewReader(demo.Incident), stdout, stderr, replayHooks{
		stdinName: "incident.jsonl",
		setup: func(t *targetFlags) {
			t.embedded = demo.Fleet
			t.after = func(f tpufake.Fleet) { after = f }
			if *clock == "event" {
				t.opDelays = map[string]time.Duration{"delete": time.Minute, "create": 3 * time.Minute, "reset": 3 * time.Minute}
			}
		},
	})
	var st *exitStatus
	if err != nil && !errors.As(err, &st) || *format != "text" {
		return err // a failure to run; or JSON, which is replay's alone
	}
	fmt.Fprintln(stdout, "\nFleet after the run:")
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tHEALTH\tGENERATION\tSTARTUP SCRIPT")
	for _, n := range after.Nodes {
		script := "-"
		switch s := n.Metadata["startup-script"]; {
		case s == startup.Script:
			script = "resume-training.sh"
		case s != "":
			script = fmt.Sprintf("the node's own (%d lines)", strings.Count(s, "\n")+1)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", shortNode(n.Name), dash(n.State), dash(n.Health), dash(n.Labels[remediate.GenerationLabel]), script)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := demoMaintenance(ctx, stdout); err != nil {
		return err
	}
	if err := demoTPU7x(ctx, stdout); err != nil {
		return err
	}
	if rerr := writeDemoReport(ctx, records, *clock, stdout, stderr); rerr != nil {
		return rerr
	}
	return err // the replay's outcome (exit 5 when a recovery needs a person)
}

func countNodes(fleet []byte) int {
	f, err := tpufake.ReadFleet(bytes.NewReader(fleet))
	if err != nil {
		return 0
	}
	return len(f.Nodes)
}
