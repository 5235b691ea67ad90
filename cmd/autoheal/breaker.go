package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// knownStartsWindow is how far back breaker reset looks for starts to tell
// a zone the ledger knows from a typo: longer than any breaker window.
const knownStartsWindow = 30 * 24 * time.Hour

const breakerHelp = `Usage: autoheal breaker reset --zone Z --ledger-project H

The storm breaker refuses new recreates and resets in a zone once
AUTOHEAL_BREAKER (default 48/1h) started there within the window; it closes by
itself when the oldest counted start leaves the window. "breaker reset" closes
it now: the starts counted so far no longer count. Do it once the cause of the
storm is understood ("autoheal status" lists open breakers). A zone in which
the ledger counts no start is refused (exit 2): a typo, or a breaker that is
not open.

` + exitCodesHelp + `

Flags:
`

func runBreaker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "-help" && args[0] != "--help" {
		return usagef("breaker: missing subcommand: autoheal breaker reset --zone Z --ledger-project H")
	}
	sub, rest := args[0], args[1:]
	fs := newFlagSet("breaker", breakerHelp, stderr)
	lf := addLedgerFlags(fs, false)
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
	if *zone == "" {
		return usagef("breaker reset: --zone Z is required (a bare zone id such as us-central2-b)")
	}
	if err := checkZone("breaker reset --zone", *zone); err != nil {
		return err
	}
	store, closeFn, err := lf.open(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	// The zones whose breaker counts a start: any start still kept, in a
	// window as long as any a deployment would set, counted with a limit
	// of one.
	counting := remediate.DefaultConfig()
	counting.BreakerLimit, counting.BreakerWindow = 1, knownStartsWindow
	counted, err := store.OpenBreakers(ctx, time.Now().UTC(), counting)
	if err != nil {
		return fmt.Errorf("breaker reset: read the breakers (retry: it is idempotent): %w", err)
	}
	var zones []string
	known := false
	for _, b := range counted {
		zones = append(zones, b.Zone)
		known = known || b.Zone == *zone
	}
	if !known {
		with := "no zone has"
		if len(zones) > 0 {
			sort.Strings(zones)
			with = "zones with starts: " + strings.Join(zones, ", ")
		}
		return usagef("breaker reset --zone %s: the ledger counts no recreate or reset started in that zone (%s): nothing to reset", *zone, with)
	}
	if err := store.ResetBreaker(ctx, *zone); err != nil {
		return fmt.Errorf("breaker reset (retry: it is idempotent): %w", err)
	}
	fmt.Fprintf(stdout, "breaker of zone %s reset: recreates and resets may start there again (up to the limit per window)\n", *zone)
	return nil
}
