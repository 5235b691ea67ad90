package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
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

// addLedgerFlags defines the flags that reach the ledger; withHoldTTL adds
// --hold-ttl, which only a command that lists holds (status) uses.
func addLedgerFlags(fs *flag.FlagSet, withHoldTTL bool) *ledgerFlags {
	l := &ledgerFlags{holdTTL: remediate.DefaultHoldTTL}
	fs.StringVar(&l.project, "ledger-project", "", "`project` hosting tpu-autoheal's Firestore ledger (required)")
	fs.StringVar(&l.database, "ledger-database", "tpu-autoheal", "Firestore `database` of the ledger (AUTOHEAL_FIRESTORE_DATABASE of the function)")
	if withHoldTTL {
		durationVar(fs, &l.holdTTL, "hold-ttl", remediate.DefaultHoldTTL, "how `long` a user hold lasts (AUTOHEAL_HOLD_TTL of the function), to tell which holds expired")
	}
	return l
}

// openLedger opens the deployed ledger. Tests replace it with an in-memory
// store. With FIRESTORE_EMULATOR_HOST set the Firestore client talks to the
// emulator by itself.
var openLedger = func(ctx context.Context, project, database string, opts ...ledger.Option) (ledger.Admin, func() error, error) {
	c, err := firestore.NewClientWithDatabase(ctx, project, database)
	if err != nil {
		return nil, nil, setupf("firestore client for database %s of project %s (Application Default Credentials): %v", database, project, err)
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
		return usagef("--hold-ttl %s: must be positive", shortDuration(l.holdTTL))
	}
	return nil
}

// open checks the flags and opens the ledger they name.
func (l *ledgerFlags) open(ctx context.Context) (ledger.Admin, func() error, error) {
	if err := l.check(); err != nil {
		return nil, nil, err
	}
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
	if s.zone != "" {
		if err := checkZone(cmd+" --zone", s.zone); err != nil {
			return remediate.Pause{}, err
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
lifted with "autoheal resume" (same scope flags). WHO is --by, else the
login name, else the gcloud account, else the host. A pause of the same
scope is replaced, and the output says what it replaced.

` + exitCodesHelp + `
Flags:
`

const resumeHelp = `Usage: autoheal resume [--project P] [--zone Z] [--node projects/P/locations/Z/nodes/N] --ledger-project H

Removes the pause of exactly that scope (a pause of a wider or narrower scope
stays: see "autoheal status").

` + exitCodesHelp + `
Flags:
`

// whoSources are where pause finds who pauses when --by is not given, in
// order: the login name, the gcloud account, the host. Tests replace them.
var whoSources = []struct {
	name string
	find func() string
}{
	{"the login name", loginName},
	{"the gcloud account", gcloudAccount},
	{"the host name", hostName},
}

// defaultBy is who pauses when --by is not given, and where that came from.
func defaultBy() (who, from string) {
	for _, s := range whoSources {
		if w := strings.TrimSpace(s.find()); w != "" {
			return w, s.name
		}
	}
	return "", ""
}

// loginName is $AUTOHEAL_USER, else the login name from the environment or
// the system's account database (root in a container says nothing: skipped).
func loginName() string {
	for _, v := range []string{"AUTOHEAL_USER", "USER", "LOGNAME", "USERNAME"} {
		if s := os.Getenv(v); s != "" {
			return s
		}
	}
	if u, err := user.Current(); err == nil && u.Username != "" && u.Username != "root" {
		return u.Username
	}
	return ""
}

// gcloudAccount is the account gcloud is logged in with, if gcloud is
// installed and answers within a few seconds.
func gcloudAccount() string {
	path, err := exec.LookPath("gcloud")
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "config", "get-value", "account").Output()
	if err != nil {
		return ""
	}
	a := strings.TrimSpace(string(out))
	if a == "(unset)" {
		return ""
	}
	return a
}

func hostName() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return "someone on " + h
}

func runPause(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("pause", pauseHelp, stderr)
	scope := addScopeFlags(fs, "pause")
	lf := addLedgerFlags(fs, false)
	reason := fs.String("reason", "", "why, for the people who read the records (required)")
	by := fs.String("by", "", "`who` pauses (default: the login name, else the gcloud account, else the host)")
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
	if err := lf.check(); err != nil {
		return err
	}
	who, from := strings.TrimSpace(*by), ""
	if who == "" {
		if who, from = defaultBy(); who == "" {
			return usagef("pause: --by WHO is required: no login name, gcloud account or host name to say who pauses")
		}
	}
	p.Reason, p.By, p.Since = strings.TrimSpace(*reason), who, time.Now().UTC()
	store, closeFn, err := lf.open(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	// A pause of the same scope is replaced: say what it was.
	existing, err := store.Pauses(ctx)
	if err != nil {
		return fmt.Errorf("pause %s: read the pauses (retry: it is idempotent): %w", p.What(), err)
	}
	var replaced *remediate.Pause
	for i, e := range existing {
		if e.Scope == p.Scope && e.Project == p.Project && e.Zone == p.Zone && e.Node == p.Node {
			replaced = &existing[i]
		}
	}
	if err := store.SetPause(ctx, p); err != nil {
		return fmt.Errorf("pause %s (retry: it is idempotent): %w", p.What(), err)
	}
	byNote := ""
	if from != "" {
		byNote = " (no --by: " + from + ")"
	}
	fmt.Fprintf(stdout, "paused %s: %s (by %s%s at %s)\n", p.What(), p.Reason, p.By, byNote, p.Since.Format(time.RFC3339))
	if replaced != nil {
		fmt.Fprintf(stdout, "replaced the pause of the same scope by %s since %s: %s\n", replaced.By, replaced.Since.UTC().Format(time.RFC3339), replaced.Reason)
	}
	fmt.Fprintf(stdout, "nothing it covers is claimed or mutated until: autoheal resume %s --ledger-project %s\n", scope.args(), lf.project)
	return nil
}

func runResume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("resume", resumeHelp, stderr)
	scope := addScopeFlags(fs, "resume")
	lf := addLedgerFlags(fs, false)
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
