package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"
)

const simulateHelp = `Usage: autoheal simulate --fleet FILE [--addr HOST:PORT] [--compute-addr HOST:PORT] [--op-time D] [--fleet-out FILE]

Serves the simulated TPU v2 control plane that replay --fleet uses, on a
fixed address, so that another process — autoheal serve, replay --apply
--tpu-endpoint, or the function itself with
AUTOHEAL_TPU_ENDPOINT=http://HOST:PORT — can be tried end to end without
credentials. A fleet file that holds Compute Engine instances
({"nodes": [...], "instances": [...]}) is also served as a simulated Compute
Engine on --compute-addr (AUTOHEAL_COMPUTE_ENDPOINT=http://HOST:PORT, with
AUTOHEAL_COMPUTE_INSTANCES=true). Runs until SIGINT or SIGTERM, then prints
the calls it received and writes the TPU fleet as it then is to --fleet-out.

Operations are done at once unless --op-time says how long they take on the
wall clock, as real ones take minutes: one duration for every operation
(--op-time 2s), or per verb (--op-time delete=1s,create=3s,reset=3s).

` + exitCodesHelp + `
Flags:
`

func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("simulate", simulateHelp, stderr)
	tf := &targetFlags{}
	fs.StringVar(&tf.fleet, "fleet", "", "fleet `file` to serve (required): a JSON array of TPU v2 nodes, concatenated \"gcloud ... tpu-vm describe --format=json\" outputs, or {\"nodes\":[...],\"queuedResources\":[...]}")
	fs.StringVar(&tf.fleetOut, "fleet-out", "", "on exit, write the fleet as it then is to this `file`")
	addr := fs.String("addr", "127.0.0.1:8471", "`address` to serve the simulated TPU API on")
	opTime := fs.String("op-time", "", "how `long` the simulated operations take on the wall clock: one duration (2s) or per verb (delete=1s,create=3s,reset=3s); default: done at once")
	computeAddr := fs.String("compute-addr", "127.0.0.1:8472", "`address` to serve the simulated Compute Engine on, when the fleet file holds instances")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	delays, err := parseOpTimes(*opTime)
	if err != nil {
		return err
	}
	tf.opDelays = delays
	if fs.NArg() > 0 {
		return usagef("simulate takes no arguments (got %q)", fs.Args())
	}
	if tf.fleet == "" {
		return usagef("simulate needs --fleet FILE")
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return usagef("--addr %s: %v", *addr, err)
	}
	tf.listener, tf.computeAddr = ln, *computeAddr
	tg, err := tf.open(ctx)
	if err != nil {
		ln.Close()
		return err
	}
	fmt.Fprintf(stdout, "simulated TPU API at %s (set AUTOHEAL_TPU_ENDPOINT=%s); stop with Ctrl-C\n", tg.srv.URL(), tg.srv.URL())
	ce := tg.csrv // nil for a TPU-only fleet; stopped by finish
	if ce != nil {
		fmt.Fprintf(stdout, "simulated Compute Engine at %s (set AUTOHEAL_COMPUTE_ENDPOINT=%s and AUTOHEAL_COMPUTE_INSTANCES=true)\n", ce.URL(), ce.URL())
	}
	<-ctx.Done()
	if ce != nil {
		ccalls := map[string]int{}
		for _, r := range ce.Requests() {
			ccalls[r.Method]++
		}
		fmt.Fprintf(stdout, "compute calls received: %s\n", counts(ccalls, nil))
	}
	calls := map[string]int{}
	for _, r := range tg.srv.Requests() {
		calls[r.RPC]++
	}
	fmt.Fprintf(stdout, "calls received: %s\n", counts(calls, nil))
	return tg.finish()
}

// opVerbs are the verbs of the simulated long-running operations.
var opVerbs = []string{"delete", "create", "reset"}

// parseOpTimes reads --op-time: "" (operations done at once), one duration
// for every verb, or VERB=DURATION pairs separated by commas.
func parseOpTimes(s string) (map[string]time.Duration, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]time.Duration{}
	if !strings.Contains(s, "=") {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return nil, usagef("--op-time %q: want a duration (2s) or delete=1s,create=3s,reset=3s", s)
		}
		for _, v := range opVerbs {
			out[v] = d
		}
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		verb, val, _ := strings.Cut(strings.TrimSpace(part), "=")
		if !slices.Contains(opVerbs, verb) {
			return nil, usagef("--op-time %q: unknown operation %q (want %s)", s, verb, strings.Join(opVerbs, ", "))
		}
		d, err := time.ParseDuration(val)
		if err != nil || d < 0 {
			return nil, usagef("--op-time %q: %s=%q is not a duration", s, verb, val)
		}
		out[verb] = d
	}
	return out, nil
}
