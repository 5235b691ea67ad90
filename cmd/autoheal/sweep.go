package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/seal"
)

const sweepHelp = `Usage: autoheal sweep [flags] --projects P --zones Z

Runs the function's sweep once: lists the opted-in nodes of the projects in
the zones, and decides and acts on each as on an event, maintenance notices
included (--maintenance). The recoveries it starts are then finished as the
function's next sweeps would finish them: on the simulated fleet at once,
on the real API (with --apply) by waiting for each next look. The ledger is
in memory, fresh for the run. Prints one line per swept node, healthy ones
included, like replay, each recovery started with its outcome, and a
summary that counts nodes and says what each location held (a zone that
does not exist is an error, exit 2).

Without --fleet it reads the real TPU API (Application Default Credentials)
or the one at --tpu-endpoint, and changes nothing: nodes are decided and
recorded only, unless --apply is given. With --fleet it acts on the
simulated fleet.

Then, as the function's sweep does, the opted-in Compute Engine TPU VMs of
the zones: each slice (a single-host VM, a multi-host slice's MIG or
workload policy) is decided once and printed on a line of its own, not
counted among the nodes; the summary says how many slices and what each zone
held. The Compute Engine is the simulated one of a --fleet file that holds
instances ({"nodes": [...], "instances": [...]}), the one at
--compute-endpoint, or beside the real TPU API the real one; with
--tpu-endpoint alone instances are not swept.

` + columnLegend + `
` + exitCodesHelp + `
Flags:
`

func runSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sweep", sweepHelp, stderr)
	target := addTargetFlags(fs)
	// A one-shot sweep handles no events (so no event ids to remember,
	// no user holds) and runs no resume watch: those flags would do nothing.
	policy := addPolicyFlags(fs, "event-ttl", "hold-ttl", "resume-watch")
	format := fs.String("format", "text", "output `format`: text or json")
	var projects, zones listFlag
	fs.Var(&projects, "projects", "`projects` to sweep (comma-separated, repeatable)")
	fs.Var(&zones, "zones", "`zones` to list nodes in (comma-separated, repeatable)")
	var budget time.Duration
	durationVar(fs, &budget, "budget", 4*time.Minute, "stop listing after this `long`")
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
	for _, z := range zones {
		if err := checkZone("sweep --zones", z); err != nil {
			return err
		}
	}
	if err := checkPositive("budget", budget); err != nil {
		return err
	}
	cfg, err := policy.config()
	if err != nil {
		return err
	}
	if err := target.check(policy); err != nil {
		return err
	}
	tg, err := target.open(ctx)
	if err != nil {
		return err
	}
	if tg.readOnly {
		cfg.DryRun = true
	}
	if err := tg.checkZones(ctx, projects, zones); err != nil {
		tg.close()
		return err
	}
	clk := &replayClock{base: time.Now, realWait: tg.srv == nil && !tg.readOnly, stderr: stderr}
	target.simNow = clk.now
	store := ledger.NewMemory(ledger.WithClock(clk.now))
	tracker := newOutcomeRecorder(discardRecorder{})
	listed := &listingTPU{TPU: tg.tpu}
	sealer := seal.RandomLocalKeys() // specs sealed and checked as the function does, with a key of this run
	rd := remediate.Deps{
		TPU:      listed,
		Recorder: tracker,
		Holder:   sweepHolder,
		Sealer:   sealer,
		Clock:    clk.now,
	}.WithLedger(store)
	if tg.maint != nil {
		rd.Maintenance, rd.Notices = tg.maint, ledger.NewMemoryNotices()
	}
	h, err := remediate.New(rd, cfg)
	if err != nil {
		tg.close()
		return err
	}
	start := time.Now()
	res, runErr := h.Sweep(ctx, remediate.SweepOptions{Projects: projects, Zones: zones, Budget: budget})
	p := newPrinter(*format, stdout, "nodes swept")
	for _, l := range sweepLines(res, listed, cfg) {
		if err := p.print(l); err != nil && runErr == nil {
			runErr = fmt.Errorf("write output: %w", err)
		}
	}
	// Then, as the function's sweep does after the nodes', the opted-in
	// TPU instances of the zones, one line per slice.
	var instances *listingCompute
	var ires computevm.SweepResult
	if tg.compute != nil && runErr == nil {
		instances = &listingCompute{Instances: tg.compute}
		vms := instancePath(instances, computevm.NewMemory(), store, tracker, cfg, clk.now, sealer, sweepHolder)
		var err error
		ires, err = vms.Sweep(ctx, projects, zones)
		for _, r := range ires.Records {
			l := lineOf(r, events.Event{})
			l.uncounted = true // a slice, not a node
			if err := p.print(l); err != nil && runErr == nil {
				runErr = fmt.Errorf("write output: %w", err)
			}
		}
		if err != nil && runErr == nil {
			runErr = fmt.Errorf("instance sweep: %w", err)
		}
	}
	if runErr == nil {
		_, runErr = continueRecoveries(ctx, h, clk, continueOptions{})
	}
	outs, err := tracker.results(ctx, store)
	if err != nil && runErr == nil {
		runErr = err
	}
	sum := p.tally.summary("nodes")
	sum.ReadOnly, sum.Recoveries = tg.readOnly, countRecoveries(outs)
	sum.Notes = append(sum.Notes, fmt.Sprintf("locations: %s; took %.1fs", listed.summary(), time.Since(start).Seconds()))
	if instances != nil {
		sum.Notes = append(sum.Notes, fmt.Sprintf("instance slices: %d (%s)", len(ires.Records), instances.summary()))
	}
	if !res.Complete {
		sum.Notes = append(sum.Notes, fmt.Sprintf("stopped after --budget %s before listing every node", shortDuration(budget)))
	}
	apply := map[int]string{}
	var unlisted []string
	if len(res.Errors) > 0 {
		unlisted = append(unlisted, fmt.Sprintf("%d location(s) could not be listed; their nodes were not checked: %s", len(res.Errors), strings.Join(res.Errors, "; ")))
	}
	if len(ires.Errors) > 0 {
		var errs []string
		for _, e := range ires.Errors {
			errs = append(errs, e.Error())
		}
		unlisted = append(unlisted, fmt.Sprintf("%d instance zone(s) or slice(s) could not be read; they were not checked: %s", len(ires.Errors), strings.Join(errs, "; ")))
	}
	if len(unlisted) > 0 {
		apply[exitTransient] = "sweep: " + strings.Join(unlisted, "; ")
	}
	exit, runErr := p.end(sum, outs, apply, runErr)
	if err := tg.finish(); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return fmt.Errorf("sweep: %w", runErr)
	}
	return exit
}

// sweepHolder is whom the sweep's claims are held by.
const sweepHolder = "autoheal-sweep"

// sweepLines is one line per swept node: its record when the sweep wrote
// one, else (a node the sweep looked at and found nothing to do about, which
// it does not record) a line saying so from the listing. Records of nodes
// not listed (unfinished recoveries, deferrals) come first, then the listed
// nodes in listing order; records without a node (a location that could not
// be listed) are printed but not counted as nodes.
func sweepLines(res remediate.SweepResult, listed *listingTPU, cfg remediate.Config) []line {
	byNode := map[string]remediate.Record{}
	var out []line
	isListed := map[string]bool{}
	for _, n := range listed.nodes {
		isListed[n.Name] = true
	}
	for _, r := range res.Records {
		if r.Node == "" {
			l := lineOf(r, events.Event{})
			l.uncounted = true
			out = append(out, l)
			continue
		}
		if _, dup := byNode[r.Node]; !dup && !isListed[r.Node] {
			out = append(out, lineOf(r, events.Event{}))
		}
		byNode[r.Node] = r
	}
	for _, n := range listed.nodes {
		if n.Labels[cfg.LabelKey] != cfg.LabelValue {
			continue
		}
		if r, ok := byNode[n.Name]; ok {
			out = append(out, lineOf(r, events.Event{}))
			continue
		}
		l := lineOf(remediate.Record{Node: n.Name, Action: remediate.ActionRecord, DryRun: cfg.DryRun,
			Reason: fmt.Sprintf("%s %s: nothing to do (as in the function, an unchanged node is not recorded)", dash(n.State), dash(n.Health))}, events.Event{})
		out = append(out, l)
	}
	return out
}

// listingTPU remembers what ListNodes returned, so that sweep can print
// the nodes it looked at and found nothing to do about, and say what each
// location held.
type listingTPU struct {
	remediate.TPU
	nodes []*tpu.Node
	listings
}

func (l *listingTPU) ListNodes(ctx context.Context, parent, pageToken string) ([]*tpu.Node, string, error) {
	nodes, next, err := l.TPU.ListNodes(ctx, parent, pageToken)
	if err == nil {
		l.nodes = append(l.nodes, nodes...)
	}
	// A transient failure of a page is retried by the sweep.
	l.note(parent, len(nodes), err, err != nil && !remediate.IsTransient(err))
	return nodes, next, err
}

// summary is "acme-ml/europe-west4-a 1 node, acme-ml/nowhere-1a no nodes":
// a zone mistyped shows as one with no nodes.
func (l *listingTPU) summary() string { return l.listings.summary(shortLocation, "node", "nodes") }

// listings are the locations a sweep listed and what each held.
type listings struct {
	listed   []string       // locations listed, in order
	count    map[string]int // what each listed location held
	notFound []string       // locations the API does not know
	failed   []string       // locations that could not be listed
}

// note keeps the answer to a listing of where (n things, or err; failed
// says that err means where could not be listed).
func (l *listings) note(where string, n int, err error, failed bool) {
	switch {
	case err == nil:
		if l.count == nil {
			l.count = map[string]int{}
		}
		if _, ok := l.count[where]; !ok {
			l.listed = append(l.listed, where)
		}
		l.count[where] += n
	case remediate.IsNotFound(err):
		l.notFound = append(l.notFound, where)
	case failed:
		l.failed = append(l.failed, where)
	}
}

// summary says what each location listed held (one, many: what it holds;
// name: how a location is written), then the locations not found and
// those that could not be listed.
func (l *listings) summary(name func(string) string, one, many string) string {
	var parts []string
	for _, p := range l.listed {
		switch n := l.count[p]; n {
		case 0:
			parts = append(parts, name(p)+" no "+many)
		default:
			parts = append(parts, name(p)+" "+plural(n, one, many))
		}
	}
	for _, p := range l.notFound {
		parts = append(parts, name(p)+" not found")
	}
	for _, p := range l.failed {
		parts = append(parts, name(p)+" could not be listed")
	}
	if len(parts) == 0 {
		return "none listed"
	}
	return strings.Join(parts, ", ")
}

// shortLocation is projects/P/locations/Z as P/Z.
func shortLocation(parent string) string {
	p := strings.Split(parent, "/")
	if len(p) == 4 {
		return p[1] + "/" + p[3]
	}
	return parent
}
