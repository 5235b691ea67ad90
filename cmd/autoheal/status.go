package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

const statusHelp = `Usage: autoheal status --ledger-project H [--format text|json]
       autoheal status --ledger-project H --node projects/P/locations/Z/nodes/N [--spec]

Lists what the deployed ledger holds that stops or is still doing work: pauses,
user holds (with their expiry: a hold older than --hold-ttl is ignored),
open storm breakers, and unfinished recoveries; then the Compute Engine TPU VM
slices the instance path keeps (a single-host VM, or a multi-host slice's MIG
or workload policy): broken ones first, with since when, the last action sent,
operations without a verdict, calls whose outcome is unknown, faulty-host
reports and early maintenance sent. With --node, what it knows of that node;
with --spec, the node's saved spec as JSON (metadata values included: it is
what a recreate would use).

` + exitCodesHelp + `
Flags:
`

// statusReport is status's JSON output (docs/schema/status.schema.json):
// camelCase keys, every list present ([] when empty). Specs are never in it
// (metadata values stay in the ledger); status --node N --spec prints one.
type statusReport struct {
	Pauses       []statusPause    `json:"pauses"`
	Holds        []statusHold     `json:"holds"`
	OpenBreakers []statusBreaker  `json:"openBreakers"`
	Unfinished   []statusRecovery `json:"unfinished"`
	// InstanceSlices are the Compute Engine TPU VM slices the instance
	// path keeps (computevm.Store), broken ones first.
	InstanceSlices []statusSlice `json:"instanceSlices"`
}

// statusSlice is one Compute Engine slice as the instance path keeps it.
type statusSlice struct {
	Slice string `json:"slice"` // projects/P/zones/Z/instances/I, …/instanceGroupManagers/M, …/resourcePolicies/R
	// Document is the ledger document's id when it does not name its
	// slice (written by a version that did not keep the key); else "".
	Document     string              `json:"document"`
	Broken       bool                `json:"broken"`
	BrokenSince  *time.Time          `json:"brokenSince"` // null: RUNNING when last looked at
	LastAction   string              `json:"lastAction"`  // the last mutating action sent, "" for none
	LastActionAt *time.Time          `json:"lastActionAt"`
	Operations   []string            `json:"operations"` // zone operations without a verdict yet
	Unknown      []statusUnknownCall `json:"unknown"`
	Faulty       []statusFaultyHost  `json:"faultyHostReports"`
	Maintained   []statusMaintained  `json:"maintenanceSent"`
}

type statusUnknownCall struct {
	Instance string    `json:"instance"`
	Action   string    `json:"action"`
	SentAt   time.Time `json:"sentAt"`
	Reads    int       `json:"reads"` // looks since that found it not in effect
}

type statusFaultyHost struct {
	Instance  string    `json:"instance"`
	At        time.Time `json:"at"`
	Operation string    `json:"operation"`
}

type statusMaintained struct {
	Instance string    `json:"instance"`
	Window   string    `json:"window"`
	At       time.Time `json:"at"`
}

func sliceStatus(k computevm.KeptSlice) statusSlice {
	st := k.State
	s := statusSlice{Slice: k.Key, Document: k.Doc, Broken: !st.Since.IsZero(), LastAction: string(st.Incident.Action),
		Operations: st.Operations, Unknown: []statusUnknownCall{}, Faulty: []statusFaultyHost{}, Maintained: []statusMaintained{}}
	if s.Broken {
		t := st.Since
		s.BrokenSince = &t
	}
	if !st.Incident.At.IsZero() {
		t := st.Incident.At
		s.LastActionAt = &t
	}
	if s.Operations == nil {
		s.Operations = []string{}
	}
	for _, u := range st.Unknown {
		s.Unknown = append(s.Unknown, statusUnknownCall{Instance: u.Instance, Action: string(u.Action), SentAt: u.At, Reads: u.Reads})
	}
	for _, f := range st.Faulty {
		s.Faulty = append(s.Faulty, statusFaultyHost{Instance: f.Instance, At: f.At, Operation: f.Operation})
	}
	for _, m := range st.Maintained {
		s.Maintained = append(s.Maintained, statusMaintained{Instance: m.Instance, Window: m.Window, At: m.At})
	}
	return s
}

// instanceSlices lists what the instance path keeps per slice.
type instanceSlices interface {
	Slices(ctx context.Context) ([]computevm.KeptSlice, error)
}

// openInstanceSlices opens the instance path's store in the ledger's
// database (the function's computevm.Firestore). Tests replace it.
var openInstanceSlices = func(ctx context.Context, project, database string) (instanceSlices, func() error, error) {
	c, err := firestore.NewClientWithDatabase(ctx, project, database)
	if err != nil {
		return nil, nil, setupf("firestore client for database %s of project %s (Application Default Credentials): %v", database, project, err)
	}
	return computevm.NewFirestore(c, ""), c.Close, nil
}

type statusPause struct {
	Scope   string    `json:"scope"`   // project, zone or node
	Project string    `json:"project"` // "" for a zone pause of every project, or a node pause
	Zone    string    `json:"zone"`
	Node    string    `json:"node"`
	What    string    `json:"what"` // what it covers, for people
	Reason  string    `json:"reason"`
	By      string    `json:"by"`
	Since   time.Time `json:"since"`
}

func pauseStatus(p remediate.Pause) statusPause {
	return statusPause{Scope: string(p.Scope), Project: p.Project, Zone: p.Zone, Node: p.Node, What: p.What(), Reason: p.Reason, By: p.By, Since: p.Since}
}

type statusHold struct {
	Node    string    `json:"node"`
	NodeID  int64     `json:"nodeId"`
	Since   time.Time `json:"since"`
	Expires time.Time `json:"expires"`
	Expired bool      `json:"expired"`
	EventID string    `json:"eventId"`
	Reason  string    `json:"reason"`
}

type statusBreaker struct {
	Zone     string    `json:"zone"`
	Started  int       `json:"started"`
	Limit    int       `json:"limit"`
	Window   string    `json:"window"` // as people write it: 1h
	Until    time.Time `json:"until"`
	Reported bool      `json:"tripReported"`
}

type statusRecovery struct {
	Node       string    `json:"node"`
	Action     string    `json:"action"`
	Phase      string    `json:"phase"`
	Generation int       `json:"generation"`
	Attempts   int       `json:"attempts"`
	Holder     string    `json:"holder"`
	LeaseUntil time.Time `json:"leaseUntil"`
	StartedAt  time.Time `json:"startedAt"`
	SpecSaved  bool      `json:"specSaved"`
	LastError  string    `json:"lastError"`
	// DeletedWhilePaused: the recovery deleted the node and a pause holds
	// it back: the node stays deleted until resume (listed first).
	DeletedWhilePaused bool `json:"deletedWhilePaused,omitempty"`
	// ZoneMovedTo: a zones: fallback moved the node; its full name in the
	// zone it went to (the recovery stays under the home zone's name).
	ZoneMovedTo string `json:"zoneMovedTo,omitempty"`
}

// statusNodeHistory is status --node's JSON output
// (docs/schema/status-node.schema.json); absent parts are null.
type statusNodeHistory struct {
	Node      string          `json:"node"`
	Recovery  *statusRecovery `json:"recovery"`
	Recreates []time.Time     `json:"recreates"`
	Deferral  *statusDeferral `json:"deferral"`
	Hold      *statusNodeHold `json:"hold"`
	Pause     *statusPause    `json:"pause"`
}

type statusNodeHold struct {
	Since   time.Time `json:"since"`
	NodeID  int64     `json:"nodeId"`
	EventID string    `json:"eventId"`
	Reason  string    `json:"reason"`
}

type statusDeferral struct {
	Due    time.Time `json:"due"`
	Since  time.Time `json:"since"`
	Reason string    `json:"reason"`
}

func recoveryStatus(r remediate.Recovery) statusRecovery {
	return statusRecovery{
		Node: r.Node, Action: string(r.Action), Phase: string(r.Phase), Generation: r.Generation, Attempts: r.Attempts,
		Holder: r.Holder, LeaseUntil: r.LeaseUntil, StartedAt: r.StartedAt, SpecSaved: r.Spec != nil, LastError: r.LastError,
		ZoneMovedTo: r.ZoneMoveNode,
	}
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", statusHelp, stderr)
	lf := addLedgerFlags(fs, true)
	format := fs.String("format", "text", "output `format`: text or json")
	node := fs.String("node", "", "show this `node` (projects/P/locations/Z/nodes/N)")
	spec := fs.Bool("spec", false, "with --node: print the node's saved spec as JSON")
	breaker := fs.String("breaker", fmt.Sprintf("%d/%s", remediate.DefaultBreakerLimit, shortDuration(remediate.DefaultBreakerWindow)), "the function's storm breaker `LIMIT/WINDOW` (AUTOHEAL_BREAKER), to tell which breakers are open")
	var window time.Duration
	durationVar(fs, &window, "window", remediate.DefaultConfig().Window, "`window` of the recreates listed with --node (AUTOHEAL_WINDOW)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("status takes no arguments (got %q)", fs.Args())
	}
	if *format != "text" && *format != "json" {
		return usagef("--format %q: want text or json", *format)
	}
	if *spec && *node == "" {
		return usagef("status --spec needs --node projects/P/locations/Z/nodes/N")
	}
	project, _ := remediate.NodeProjectZone(*node)
	if *node != "" && project == "" {
		return usagef("status --node %q: want projects/P/locations/Z/nodes/N", *node)
	}
	limit, bw, err := remediate.ParseBreaker(*breaker)
	if err != nil {
		return usagef("--breaker: %v", err)
	}
	store, closeFn, err := lf.open(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	now := time.Now().UTC()

	if *node != "" {
		h, err := store.History(ctx, *node, project, "", now, window)
		if err != nil {
			return fmt.Errorf("status of %s: %w", *node, err)
		}
		if *spec {
			if h.Recovery == nil || h.Recovery.Spec == nil {
				return fmt.Errorf("status %s: no saved spec in the ledger (no recovery of it saved one)", *node)
			}
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(h.Recovery.Spec)
		}
		return printNodeStatus(stdout, *format, *node, h)
	}

	rep := statusReport{Pauses: []statusPause{}, Holds: []statusHold{}, OpenBreakers: []statusBreaker{}, Unfinished: []statusRecovery{}, InstanceSlices: []statusSlice{}}
	pauses, err := store.Pauses(ctx)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	for _, p := range pauses {
		rep.Pauses = append(rep.Pauses, pauseStatus(p))
	}
	holds, err := store.Holds(ctx, now)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	for _, h := range holds {
		rep.Holds = append(rep.Holds, statusHold{Node: h.Node, NodeID: h.NodeID, Since: h.Since, Expires: h.Expires, Expired: h.Expired, EventID: h.EventID, Reason: h.Reason})
	}
	cfg := remediate.DefaultConfig()
	cfg.BreakerLimit, cfg.BreakerWindow = limit, bw
	open, err := store.OpenBreakers(ctx, now, cfg)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	for _, b := range open {
		rep.OpenBreakers = append(rep.OpenBreakers, statusBreaker{Zone: b.Zone, Started: b.Started, Limit: b.Limit, Window: shortDuration(b.Window), Until: b.Until, Reported: b.Tripped})
	}
	un, err := store.Unfinished(ctx)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	for _, r := range un {
		st := recoveryStatus(r)
		if remediate.DeletedWhilePaused(&r) {
			for _, p := range pauses {
				if p.Covers(r.Node) {
					st.DeletedWhilePaused = true
					break
				}
			}
		}
		rep.Unfinished = append(rep.Unfinished, st)
	}
	// A node a pause leaves deleted is what a person must see first.
	sort.SliceStable(rep.Unfinished, func(i, j int) bool {
		return rep.Unfinished[i].DeletedWhilePaused && !rep.Unfinished[j].DeletedWhilePaused
	})
	vms, closeVMs, err := openInstanceSlices(ctx, lf.project, lf.database)
	if err != nil {
		return err
	}
	defer closeVMs()
	kept, err := vms.Slices(ctx)
	if err != nil {
		return fmt.Errorf("status: instance slices: %w", err)
	}
	for _, k := range kept {
		rep.InstanceSlices = append(rep.InstanceSlices, sliceStatus(k))
	}
	// A broken slice is what a person must see first.
	sort.SliceStable(rep.InstanceSlices, func(i, j int) bool {
		return rep.InstanceSlices[i].Broken && !rep.InstanceSlices[j].Broken
	})
	if *format == "json" {
		return writeJSON(stdout, rep)
	}
	return printStatus(stdout, rep)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func printStatus(w io.Writer, rep statusReport) error {
	p := &errWriter{w: w}
	p.printf("pauses: %d\n", len(rep.Pauses))
	for _, x := range rep.Pauses {
		p.printf("  %s  by %s since %s: %s\n", x.What, x.By, ts(x.Since), x.Reason)
	}
	p.printf("holds: %d\n", len(rep.Holds))
	for _, h := range rep.Holds {
		state := "expires " + ts(h.Expires)
		if h.Expired {
			state = "EXPIRED " + ts(h.Expires) + " (ignored)"
		}
		p.printf("  %s  since %s, %s: %s\n", h.Node, ts(h.Since), state, h.Reason)
	}
	p.printf("open breakers: %d\n", len(rep.OpenBreakers))
	for _, b := range rep.OpenBreakers {
		p.printf("  zone %s: %d starts within %s (limit %d), closes at %s or with: autoheal breaker reset --zone %s\n",
			b.Zone, b.Started, b.Window, b.Limit, ts(b.Until), b.Zone)
	}
	p.printf("unfinished recoveries: %d\n", len(rep.Unfinished))
	for _, r := range rep.Unfinished {
		if r.DeletedWhilePaused {
			p.printf("  DELETED WHILE PAUSED (created again only after autoheal resume):")
		}
		p.printf("  %s  %s gen %d %s, attempt %d, held by %s until %s", r.Node, r.Action, r.Generation, r.Phase, r.Attempts, r.Holder, ts(r.LeaseUntil))
		if r.ZoneMovedTo != "" {
			p.printf(", moved to %s", r.ZoneMovedTo)
		}
		if r.LastError != "" {
			p.printf(": %s", r.LastError)
		}
		p.printf("\n")
	}
	broken := 0
	for _, x := range rep.InstanceSlices {
		if x.Broken {
			broken++
		}
	}
	p.printf("instance slices: %d (%d broken)\n", len(rep.InstanceSlices), broken)
	for _, x := range rep.InstanceSlices {
		p.printf("  %s  %s\n", sliceName(x), sliceText(x))
	}
	return p.err
}

// sliceName is the slice as the text shows it: Z/NAME, or the document id of
// one whose key was not kept.
func sliceName(x statusSlice) string {
	if x.Slice == "" {
		return "(document " + x.Document + ", slice not named)"
	}
	return shortNode(x.Slice)
}

// sliceText is "BROKEN since T; last start at T; …".
func sliceText(x statusSlice) string {
	parts := []string{"healthy when last looked at"}
	if x.Broken {
		parts[0] = "BROKEN since " + ts(*x.BrokenSince)
	}
	if x.LastAction != "" {
		at := ""
		if x.LastActionAt != nil {
			at = " at " + ts(*x.LastActionAt)
		}
		parts = append(parts, "last "+x.LastAction+at)
	}
	if n := len(x.Operations); n > 0 {
		parts = append(parts, plural(n, "operation", "operations")+" without a verdict: "+strings.Join(x.Operations, ", "))
	}
	for _, u := range x.Unknown {
		parts = append(parts, fmt.Sprintf("outcome unknown: %s of %s sent %s (%s since)", u.Action, shortNode(u.Instance), ts(u.SentAt), plural(u.Reads, "look", "looks")))
	}
	for _, f := range x.Faulty {
		parts = append(parts, fmt.Sprintf("host of %s reported faulty %s", shortNode(f.Instance), ts(f.At)))
	}
	for _, m := range x.Maintained {
		parts = append(parts, fmt.Sprintf("performMaintenance of %s sent %s (window %s)", shortNode(m.Instance), ts(m.At), m.Window))
	}
	return strings.Join(parts, "; ")
}

func printNodeStatus(w io.Writer, format, node string, h remediate.History) error {
	st := statusNodeHistory{Node: node, Recreates: h.Recreates}
	if st.Recreates == nil {
		st.Recreates = []time.Time{}
	}
	if h.Hold != nil {
		st.Hold = &statusNodeHold{Since: h.Hold.Since, NodeID: h.Hold.NodeID, EventID: h.Hold.EventID, Reason: h.Hold.Reason}
	}
	if h.Pause != nil {
		ps := pauseStatus(*h.Pause)
		st.Pause = &ps
	}
	if h.Recovery != nil {
		r := recoveryStatus(*h.Recovery)
		st.Recovery = &r
	}
	if d := h.Deferral; d != nil {
		st.Deferral = &statusDeferral{Due: d.Due, Since: d.Since, Reason: d.Reason}
	}
	if format == "json" {
		return writeJSON(w, st)
	}
	p := &errWriter{w: w}
	p.printf("node %s\n", node)
	if st.Pause != nil {
		p.printf("  paused: %s\n", h.Pause.Why())
	}
	if st.Hold != nil {
		p.printf("  held since %s (event %s): %s\n", ts(st.Hold.Since), st.Hold.EventID, st.Hold.Reason)
	}
	if r := st.Recovery; r != nil {
		p.printf("  recovery: %s gen %d %s, attempt %d, held by %s until %s, spec saved: %t", r.Action, r.Generation, r.Phase, r.Attempts, r.Holder, ts(r.LeaseUntil), r.SpecSaved)
		if r.ZoneMovedTo != "" {
			p.printf(", moved to %s", r.ZoneMovedTo)
		}
		if r.LastError != "" {
			p.printf(": %s", r.LastError)
		}
		p.printf("\n")
	} else {
		p.printf("  recovery: none\n")
	}
	p.printf("  recreates in the window: %d\n", len(st.Recreates))
	if d := st.Deferral; d != nil {
		p.printf("  deferred until %s: %s\n", ts(d.Due), d.Reason)
	}
	return p.err
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

var _ ledger.Admin = (*ledger.Memory)(nil)
