package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// ledgerFlags reach the deployed ledger: the Firestore database of the
// project hosting tpu-autoheal. --project is never used for this: in pause
// and resume it is the scope.
type ledgerFlags struct {
	project  string
	database string
	holdTTL  time.Duration
}

func addLedgerFlags(fs *flag.FlagSet) *ledgerFlags {
	l := &ledgerFlags{}
	fs.StringVar(&l.project, "ledger-project", "", "`project` hosting tpu-autoheal's Firestore ledger (required)")
	fs.StringVar(&l.database, "ledger-database", "tpu-autoheal", "Firestore `database` of the ledger (AUTOHEAL_FIRESTORE_DATABASE of the function)")
	fs.DurationVar(&l.holdTTL, "hold-ttl", remediate.DefaultHoldTTL, "how long a user hold lasts (AUTOHEAL_HOLD_TTL of the function)")
	return l
}

// openLedger opens the deployed ledger. Tests replace it with an in-memory
// store. With FIRESTORE_EMULATOR_HOST set the Firestore client talks to the
// emulator by itself.
var openLedger = func(ctx context.Context, project, database string, opts ...ledger.Option) (ledger.Admin, func() error, error) {
	c, err := firestore.NewClientWithDatabase(ctx, project, database)
	if err != nil {
		return nil, nil, fmt.Errorf("firestore client for database %s of project %s (Application Default Credentials): %w", database, project, err)
	}
	return ledger.NewFirestore(c, opts...), c.Close, nil
}

func (l *ledgerFlags) check() error {
	if l.project == "" {
		return usagef("--ledger-project is required: the project hosting tpu-autoheal's ledger (--project is only the scope)")
	}
	if l.database == "" {
		return usagef("--ledger-database must not be empty")
	}
	if l.holdTTL <= 0 {
		return usagef("--hold-ttl %v: must be positive", l.holdTTL)
	}
	return nil
}

func (l *ledgerFlags) open(ctx context.Context) (ledger.Admin, func() error, error) {
	return openLedger(ctx, l.project, l.database, ledger.WithHoldTTL(l.holdTTL))
}

// scopeFlags say what a pause covers.
type scopeFlags struct{ project, zone, node string }

func addScopeFlags(fs *flag.FlagSet, verb string) *scopeFlags {
	s := &scopeFlags{}
	fs.StringVar(&s.project, "project", "", "`project` to "+verb+" (with --zone: only that zone of it)")
	fs.StringVar(&s.zone, "zone", "", "`zone` to "+verb+" (of --project, or of every project)")
	fs.StringVar(&s.node, "node", "", "one `node` to "+verb+": projects/P/locations/Z/nodes/N")
	return s
}

// pause returns the pause the flags name: a node when --node is given (with
// --project and --zone, if given, agreeing with it), else a zone when --zone
// is given, else a project.
func (s *scopeFlags) pause(cmd string) (remediate.Pause, error) {
	for _, f := range []struct{ name, v string }{{"project", s.project}, {"zone", s.zone}} {
		if strings.ContainsAny(f.v, "/ ") {
			return remediate.Pause{}, usagef("%s --%s %q: want a bare %s id (for one node use --node projects/P/locations/Z/nodes/N)", cmd, f.name, f.v, f.name)
		}
	}
	switch {
	case s.node != "":
		project, zone := remediate.NodeProjectZone(s.node)
		if project == "" {
			return remediate.Pause{}, usagef("%s --node %q: want projects/P/locations/Z/nodes/N", cmd, s.node)
		}
		if s.project != "" && s.project != project {
			return remediate.Pause{}, usagef("%s: --project %s disagrees with --node %s (project %s); give --node alone", cmd, s.project, s.node, project)
		}
		if s.zone != "" && s.zone != zone {
			return remediate.Pause{}, usagef("%s: --zone %s disagrees with --node %s (zone %s); give --node alone", cmd, s.zone, s.node, zone)
		}
		return remediate.Pause{Scope: remediate.PauseNode, Node: s.node}, nil
	case s.zone != "":
		return remediate.Pause{Scope: remediate.PauseZone, Zone: s.zone, Project: s.project}, nil
	case s.project != "":
		return remediate.Pause{Scope: remediate.PauseProject, Project: s.project}, nil
	}
	return remediate.Pause{}, usagef("%s: say what: --project P, --zone Z (with or without --project) or --node projects/P/locations/Z/nodes/N", cmd)
}

func (s *scopeFlags) args() string {
	var a []string
	for _, f := range []struct{ name, v string }{{"project", s.project}, {"zone", s.zone}, {"node", s.node}} {
		if f.v != "" {
			a = append(a, "--"+f.name+" "+f.v)
		}
	}
	return strings.Join(a, " ")
}

const pauseHelp = `Usage: autoheal pause [--project P] [--zone Z] [--node projects/P/locations/Z/nodes/N] --reason TEXT --ledger-project H

Writes a pause to the deployed ledger. From then on the function and every
sweep skip the nodes it covers before any mutation (reason "paused by WHO:
REASON"), and the ledger refuses to claim them, unfinished recoveries
included. Nodes broken while paused are looked at again after the pause is
lifted with "autoheal resume" (same scope flags).

Flags:
`

const resumeHelp = `Usage: autoheal resume [--project P] [--zone Z] [--node projects/P/locations/Z/nodes/N] --ledger-project H

Removes the pause of exactly that scope (a pause of a wider or narrower scope
stays: see "autoheal status").

Flags:
`

func defaultBy() string {
	for _, v := range []string{"AUTOHEAL_USER", "USER", "USERNAME"} {
		if s := os.Getenv(v); s != "" {
			return s
		}
	}
	return ""
}

func runPause(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("pause", pauseHelp, stderr)
	scope := addScopeFlags(fs, "pause")
	lf := addLedgerFlags(fs)
	reason := fs.String("reason", "", "why, for the people who read the records (required)")
	by := fs.String("by", defaultBy(), "who pauses (default $USER)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("pause takes no arguments (got %q)", fs.Args())
	}
	p, err := scope.pause("pause")
	if err != nil {
		return err
	}
	if strings.TrimSpace(*reason) == "" {
		return usagef("pause: --reason is required (it is in every skipped decision's record)")
	}
	if strings.TrimSpace(*by) == "" {
		return usagef("pause: --by is required when $USER is not set")
	}
	if err := lf.check(); err != nil {
		return err
	}
	p.Reason, p.By, p.Since = strings.TrimSpace(*reason), strings.TrimSpace(*by), time.Now().UTC()
	store, closeFn, err := lf.open(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	if err := store.SetPause(ctx, p); err != nil {
		return fmt.Errorf("pause %s (retry: it is idempotent): %w", p.What(), err)
	}
	fmt.Fprintf(stdout, "paused %s: %s (by %s at %s)\nnothing it covers is claimed or mutated until: autoheal resume %s --ledger-project %s\n",
		p.What(), p.Reason, p.By, p.Since.Format(time.RFC3339), scope.args(), lf.project)
	return nil
}

func runResume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("resume", resumeHelp, stderr)
	scope := addScopeFlags(fs, "resume")
	lf := addLedgerFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("resume takes no arguments (got %q)", fs.Args())
	}
	p, err := scope.pause("resume")
	if err != nil {
		return err
	}
	if err := lf.check(); err != nil {
		return err
	}
	store, closeFn, err := lf.open(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	existed, err := store.ClearPause(ctx, p)
	if err != nil {
		return fmt.Errorf("resume %s (retry: it is idempotent): %w", p.What(), err)
	}
	if !existed {
		fmt.Fprintf(stdout, "no pause of %s: nothing to resume (see autoheal status --ledger-project %s)\n", p.What(), lf.project)
		return nil
	}
	fmt.Fprintf(stdout, "resumed %s\n", p.What())
	others, err := store.Pauses(ctx)
	if err != nil {
		return fmt.Errorf("list remaining pauses: %w", err)
	}
	for _, o := range others {
		fmt.Fprintf(stdout, "still paused: %s (by %s: %s)\n", o.What(), o.By, o.Reason)
	}
	return nil
}
