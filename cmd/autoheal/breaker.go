package main

import (
	"context"
	"fmt"
	"io"
	"strings"
)

const breakerHelp = `Usage: autoheal breaker reset --zone Z --ledger-project H

The storm breaker refuses new recreates and resets in a zone once
AUTOHEAL_BREAKER (default 48/1h) started there within the window; it closes by
itself when the oldest counted start leaves the window. "breaker reset" closes
it now: the starts counted so far no longer count. Do it once the cause of the
storm is understood ("autoheal status" lists open breakers).

Flags:
`

func runBreaker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "-help" && args[0] != "--help" {
		return usagef("breaker: missing subcommand: autoheal breaker reset --zone Z --ledger-project H")
	}
	sub, rest := args[0], args[1:]
	fs := newFlagSet("breaker", breakerHelp, stderr)
	lf := addLedgerFlags(fs)
	zone := fs.String("zone", "", "`zone` whose breaker to reset (required)")
	switch sub {
	case "-h", "-help", "--help":
		return parseFlags(fs, []string{"-h"})
	case "reset":
	default:
		return usagef("breaker: unknown subcommand %q: want reset", sub)
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("breaker reset takes no arguments (got %q)", fs.Args())
	}
	if *zone == "" || strings.ContainsAny(*zone, "/ ") {
		return usagef("breaker reset: --zone Z is required (a bare zone id such as us-central2-b)")
	}
	if err := lf.check(); err != nil {
		return err
	}
	store, closeFn, err := lf.open(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	if err := store.ResetBreaker(ctx, *zone); err != nil {
		return fmt.Errorf("breaker reset (retry: it is idempotent): %w", err)
	}
	fmt.Fprintf(stdout, "breaker of zone %s reset: recreates and resets may start there again (up to the limit per window)\n", *zone)
	return nil
}
