package main

import (
	"context"
	"fmt"
	"io"
	"net"
)

const simulateHelp = `Usage: autoheal simulate --fleet FILE [--addr HOST:PORT] [--fleet-out FILE]

Serves the simulated TPU v2 control plane that replay --fleet uses, on a
fixed address, so that another process — autoheal serve, or the function
itself with AUTOHEAL_TPU_ENDPOINT=http://HOST:PORT — can be tried end to end
without credentials. Runs until SIGINT or SIGTERM, then prints the calls it
received and writes the fleet as it then is to --fleet-out.

` + exitCodesHelp + `
Flags:
`

func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("simulate", simulateHelp, stderr)
	tf := &targetFlags{}
	fs.StringVar(&tf.fleet, "fleet", "", "fleet `file` to serve (required): a JSON array of TPU v2 nodes, concatenated \"gcloud ... tpu-vm describe --format=json\" outputs, or {\"nodes\":[...],\"queuedResources\":[...]}")
	fs.StringVar(&tf.fleetOut, "fleet-out", "", "on exit, write the fleet as it then is to this `file`")
	addr := fs.String("addr", "127.0.0.1:8471", "`address` to serve the simulated TPU API on")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
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
	tf.listener = ln
	tg, err := tf.open(ctx)
	if err != nil {
		ln.Close()
		return err
	}
	fmt.Fprintf(stdout, "simulated TPU API at %s (set AUTOHEAL_TPU_ENDPOINT=%s); stop with Ctrl-C\n", tg.srv.URL(), tg.srv.URL())
	<-ctx.Done()
	calls := map[string]int{}
	for _, r := range tg.srv.Requests() {
		calls[r.RPC]++
	}
	fmt.Fprintf(stdout, "calls received: %s\n", counts(calls, nil))
	return tg.finish()
}
