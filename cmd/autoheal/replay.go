package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/record"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

const replayHelp = `Usage: autoheal replay [flags] FILE... | -
       autoheal replay --from-logging --project P [--filter F] [--since T] [--until T] [flags]

Feeds TPU audit log entries through exactly the code the Cloud Function runs
(parse, observe the node through the TPU API, decide, act, record) and prints
one line per entry, in the order they were decided.

Input: files, or - for stdin, in any form the function accepts: gcloud
logging read --format=json output (a JSON array), JSON Lines, a single entry,
Pub/Sub push bodies, CloudEvents. A malformed entry is printed with action
reject and where it was (FILE:LINE) and the run goes on; --from-logging reads
the entries straight from Cloud Logging instead (oldest first).

Order: entries are decided in time order, oldest first, as they happened.
gcloud logging read prints newest first: such an export is detected and
decided oldest first (the input is indexed by byte offset and read back, so
memory stays small; stdin is first copied to a temporary file). --order says
what the input is instead: asc (decide as given, streaming), desc (decide in
reverse), input (decide exactly as given). The text summary says which order
was used.

Control plane: --fleet FILE acts on a simulated TPU API seeded from a fleet
file (no credentials needed); --fleet-out FILE writes the fleet after the run.
Without --fleet the real TPU API (or the one at --tpu-endpoint) is only READ:
entries are decided and recorded, nothing is deleted or created, unless
--apply is given. The ledger (dedupe, claims, spec snapshots) is in memory,
fresh for each run, unless --ledger-project (with --apply against a real
API) names the function's Firestore ledger: a second run then resumes what
the first left.

Clock: decisions depend on "now" (grace periods, cooldowns, caps).
--clock=wall decides every entry at the current time, as the function would
if the entries arrived now; --clock=event decides each entry at its own
timestamp, as the function decided (or should have) during the incident.
The default is wall, or event with --records (records for autoheal report
are true of the incident only at the event clock; give --clock wall to
decide them now). Unlike the function, replay never drops entries for being
old. Recoveries the entries started are finished as the function's sweeps
would: on the simulated fleet at once, on the run's clock; with --apply on
a real API on the wall clock, a progress line per recovery on stderr, until
each is recovered, abandoned or closed, or --wait ends, or an interrupt:
then it says how to finish and exits 5 while one is unfinished.

Output: --format text prints a row per entry (120 columns), warnings under
it, then each recovery the run started with its outcome, then a summary;
--format json prints JSON Lines: one {"kind":"decision",...} object per
entry, whole, one {"kind":"outcome",...} per recovery started, and a last
{"kind":"summary",...} (docs/schema/ has their schemas).

` + columnLegend + `
` + exitCodesHelp + `
Flags:
`

func runReplay(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return replay(ctx, args, stdin, stdout, stderr, replayHooks{})
}

// replayHooks let autoheal demo run replay on its bundled inputs.
type replayHooks struct {
	// setup, when not nil, adjusts the target before it is opened (the
	// embedded fleet).
	setup func(*targetFlags)
	// stdinName names stdin in reject locations (the bundled file's name).
	stdinName string
}

// replay is runReplay with hooks.
func replay(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, hooks replayHooks) error {
	fs := newFlagSet("replay", replayHelp, stderr)
	target := addTargetFlags(fs)
	policy := addPolicyFlags(fs)
	format := fs.String("format", "text", "output `format`: text or json")
	clock := fs.String("clock", "wall", "decide at the `wall` clock or at each entry's own timestamp (event); with --records the default is event")
	order := fs.String("order", "auto", "what order the input is in: `auto` (detect; decide oldest first), asc, desc or input (decide as given)")
	strict := fs.Bool("strict", false, "exit 4 when any entry was rejected")
	var projects listFlag
	fs.Var(&projects, "projects", "allow-list of `projects` (comma-separated, repeatable); entries for others are rejected; empty allows all")
	records := fs.String("records", "", "also write the full decision records, as the function logs them, to this `file` (- for stderr)")
	logging := addLoggingFlags(fs)
	applyOpts := addApplyFlags(fs) // replay_apply.go
	if err := parseFlags(fs, args); err != nil {
		return err
	}

	// Every flag and file is checked before any input is read.
	if *format != "text" && *format != "json" {
		return usagef("--format %q: want text or json", *format)
	}
	if *clock != "wall" && *clock != "event" {
		return usagef("--clock %q: want wall or event", *clock)
	}
	if *records != "" && !flagGiven(fs, "clock") && applyOpts.ledger.project == "" {
		// Records are for autoheal report, which is true of the incident
		// only when each entry was decided at its own time.
		*clock = "event"
	}
	switch *order {
	case "auto", "asc", "desc", "input":
	default:
		return usagef("--order %q: want auto, asc, desc or input", *order)
	}
	cfg, err := policy.config()
	if err != nil {
		return err
	}
	if hooks.setup != nil {
		hooks.setup(target)
	}
	if err := target.check(policy); err != nil {
		return err
	}
	if err := applyOpts.check(fs, target, *clock); err != nil {
		return err
	}
	if !logging.enabled {
		var stray []string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "project", "filter", "since", "until":
				stray = append(stray, "--"+f.Name)
			}
		})
		switch len(stray) {
		case 0:
		case 1:
			return usagef("%s applies only to --from-logging", stray[0])
		default:
			return usagef("%s apply only to --from-logging", strings.Join(stray, ", "))
		}
	}
	// An entry dated ahead of now by more than events.MaxFutureSkew is
	// rejected; one without logName (hand-written input) is accepted, one of
	// any log but the audit log is not.
	opts := events.Options{AllowedProjects: projects, Now: time.Now(), AcceptMissingLogName: true}
	var src source
	if logging.enabled {
		if fs.NArg() > 0 {
			return usagef("--from-logging reads Cloud Logging: give no FILE arguments (got %q)", fs.Args())
		}
		if *order == "desc" {
			return usagef("--order desc: Cloud Logging is read oldest first")
		}
		if src, err = logging.open(ctx, opts, stderr); err != nil {
			return err
		}
	} else {
		in, err := openInputs(fs.Args(), stdin, opts)
		if err != nil {
			return err
		}
		if hooks.stdinName != "" {
			in.nameStdin(hooks.stdinName)
		}
		src = in
		in.checkAscending = *order == "asc"
	}
	defer func() { src.Close() }()
	recordsOut, closeRecords, err := openRecords(*records, stderr)
	if err != nil {
		return err
	}
	defer closeRecords()
	tracker := newOutcomeRecorder(recordsOut)
	var rec remediate.Recorder = tracker
	tg, err := target.open(ctx)
	if err != nil {
		return err
	}
	// Only now, with every flag and file checked, is the input read: to
	// index it when it is to be decided in time order.
	if in, ok := src.(*fileSource); ok && (*order == "auto" || *order == "desc") {
		ordered, err := newOrderedSource(in, *order == "desc")
		if err != nil {
			tg.close()
			return err
		}
		src = ordered
	}
	if tg.readOnly {
		cfg.DryRun = true
	}

	var sumNote string
	var now time.Time // the current entry's time, for --clock=event
	clockFn := time.Now
	if *clock == "event" {
		clockFn = func() time.Time {
			if now.IsZero() {
				return time.Now()
			}
			return now
		}
	}
	realWait := tg.srv == nil && !tg.readOnly
	rclk := &replayClock{base: clockFn, realWait: realWait, stderr: stderr} // moved forward by the continuations (continue.go)
	clockFn = rclk.now
	target.simNow = clockFn // the simulated operations take their time on the replay clock
	switch {
	case applyOpts.lookAgain > 0:
		cfg.LookAgain = applyOpts.lookAgain
	case realWait:
		cfg.LookAgain = functionLookAgain // real operations are followed as the function follows them
	}
	if realWait && target.endpoint == "" && !flagGiven(fs, "actor") {
		applyOpts.actor = defaultActor() // --tpu-endpoint is called without credentials: no account
	}
	cfg.Actor = applyOpts.actor // its own audit entries are not a person's (docs/recovery.md, evidence rule)
	// The ledger runs on the same clock as the handler, so that event marks
	// and leases made at an entry's time are judged at entries' times.
	sealer, closeSealer, err := applyOpts.sealer(ctx)
	if err != nil {
		tg.close()
		return err
	}
	defer closeSealer()
	store, mem, resumed, closeStore, err := applyOpts.openStore(ctx, clockFn, cfg.HoldTTL)
	if err != nil {
		tg.close()
		return err
	}
	defer closeStore()
	for _, r := range resumed {
		tracker.resume(r)
	}
	if len(resumed) > 0 {
		fmt.Fprintf(stderr, "autoheal replay: resuming %s an earlier replay left unfinished in ledger %s of project %s\n",
			plural(len(resumed), "recovery", "recoveries"), applyOpts.ledger.database, applyOpts.ledger.project)
	}
	// Decided in time order (all but --order input), replay forgets the
	// marks no later entry can repeat, so its memory does not grow with
	// the input (replay_marks.go). The deployed ledger keeps its own.
	var marks *markWindow
	if *order != "input" && mem != nil {
		marks = &markWindow{store: mem}
	}
	rd := remediate.Deps{
		TPU:      tg.tpu,
		Recorder: rec,
		Holder:   replayHolder,
		Sealer:   sealer, // specs sealed and checked as the function does
		Clock:    clockFn,
	}.WithLedger(store)
	if tg.maint != nil { // notices become prepare/maintain against the simulated fleet
		rd.Maintenance, rd.Notices = tg.maint, ledger.NewMemoryNotices()
		wireReplayResume(&rd, tg.maint, stderr) // resume.go
	}
	h, err := remediate.New(rd, cfg)
	if err != nil {
		tg.close()
		return err
	}
	vms := instancePath(tg.compute, computevm.NewMemory(), store, rec, cfg, clockFn, sealer, replayHolder)

	// The run continues the recoveries it started or resumed; the in-memory
	// ledger holds no others.
	follow := tracker.started
	if mem != nil {
		follow = func(string) bool { return true }
	}
	p := newPrinter(*format, stdout, "entries read")
	st, runErr := replayAll(ctx, h, vms, src, p, func(t time.Time) { now = t; marks.seen(t) }, follow)
	var stopped string
	var interrupted error
	if runErr == nil {
		stopped, runErr = continueRecoveries(ctx, h, rclk, continueOptions{follow: follow, wait: applyOpts.wait, stops: applyOpts.stops()})
	} else if realWait && ctx.Err() != nil {
		// Interrupted among the entries: what it started is reported (and
		// the exit says a person must finish it), not lost in an error.
		interrupted = runErr
		stopped, runErr = stoppedInterrupted, nil
		sumNote = fmt.Sprintf("interrupted after %d entries", st.total)
	}
	outs, err := tracker.results(context.WithoutCancel(ctx), store)
	if err != nil && runErr == nil {
		runErr = err
	}
	if interrupted != nil && countRecoveries(outs).Unfinished == 0 && runErr == nil {
		runErr = interrupted // nothing left for a person: an interrupted run, to run again
	}
	sum := p.tally.summary("entries")
	sum.Order, sum.ReadOnly, sum.Recoveries = src.Order(), tg.readOnly, countRecoveries(outs)
	if st.total == 0 {
		sum.Notes = append(sum.Notes, "no entries in the input")
	}
	if sumNote != "" {
		sum.Notes = append(sum.Notes, sumNote)
	}
	apply := map[int]string{}
	if st.total > 0 && st.unreadable == st.total {
		apply[exitNoEntries] = fmt.Sprintf("not one entry could be read from the input: all %d elements are malformed (see the reject lines)", st.total)
	}
	if st.failed > 0 {
		apply[exitTransient] = fmt.Sprintf("%d of %d entries not processed (transient failures, printed with action %s); replay them again", st.failed, st.total, actionError)
	}
	if *strict && st.rejected > 0 {
		apply[exitRejects] = fmt.Sprintf("--strict: %d of %d entries rejected", st.rejected, st.total)
	}
	exit, runErr := p.end(sum, outs, apply, runErr)
	for _, w := range src.Warnings() {
		fmt.Fprintf(stderr, "autoheal replay: %s\n", w)
	}
	if realWait {
		applyOpts.finishHint(stderr, stopped, outs, args)
	}
	if err := tg.finish(); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return runErr
	}
	return exit
}

// needsPerson says what of a run a person must look at (exit 5): breaker
// trips, recoveries abandoned or left unfinished; "" when nothing.
func needsPerson(s summary, outs []outcome) string {
	var parts []string
	if n := len(s.BreakerTrips); n > 0 {
		var zones []string
		for _, t := range s.BreakerTrips {
			zones = append(zones, t.Zone)
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", plural(n, "breaker trip", "breaker trips"), strings.Join(zones, ", ")))
	}
	var abandoned, unfinished []string
	for _, o := range outs {
		switch {
		case o.Outcome == string(remediate.OutcomeAbandoned):
			abandoned = append(abandoned, shortNode(o.Node))
		case o.needsPerson():
			unfinished = append(unfinished, shortNode(o.Node))
		}
	}
	if len(abandoned) > 0 {
		parts = append(parts, fmt.Sprintf("%s abandoned (%s)", plural(len(abandoned), "recovery", "recoveries"), strings.Join(abandoned, ", ")))
	}
	if len(unfinished) > 0 {
		parts = append(parts, fmt.Sprintf("%s unfinished (%s)", plural(len(unfinished), "recovery", "recoveries"), strings.Join(unfinished, ", ")))
	}
	if len(parts) == 0 {
		return ""
	}
	return "needs a person: " + strings.Join(parts, "; ")
}

// replayStats counts what replayAll did.
type replayStats struct{ total, rejected, unreadable, failed int }

// unreadable reports whether a reject says the bytes are not an entry at
// all (as opposed to an entry replay does not act on: another method,
// service or project).
func unreadable(err error) bool {
	switch rejectCode(err) {
	case events.CodeMalformedJSON, events.CodeNotObject, events.CodeWrongType, events.CodeTooLarge,
		events.CodeBadEnvelope, events.CodeEmptyMessage, "other":
		return true
	}
	return false
}

// replayAll handles every entry of src in its order and prints its line.
// follow says which recoveries the run continues between entries (those it
// started or resumed).
func replayAll(ctx context.Context, h *remediate.Handler, vms *computevm.Recovery, src source, p *output, setNow func(time.Time), follow func(node string) bool) (replayStats, error) {
	var st replayStats
	var lastLook time.Time
	for {
		if err := ctx.Err(); err != nil {
			return st, fmt.Errorf("interrupted after %d entries: %w", st.total, err)
		}
		it, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return st, fmt.Errorf("read %s: %w", it.name, err)
		}
		st.total++
		var l line
		start := time.Now()
		if it.Err != nil {
			st.rejected++
			if unreadable(it.Err) {
				st.unreadable++
			}
			r := h.Reject(ctx, it.Data, it.Err)
			l = lineOf(r, it.Event)
			l.rejectCode = rejectCode(it.Err)
			l.At = it.at
		} else {
			setNow(it.Event.Time)
			// As the deployed function's sweep does every minute, move the
			// recoveries earlier entries started on (their continuation
			// records go to --records; the lines printed are the entries').
			now := time.Now()
			if h.Now != nil {
				now = h.Now()
			}
			if now.Sub(lastLook) >= sweepInterval {
				lastLook = now
				if _, err := h.ContinueNodes(ctx, follow); err != nil {
					return st, fmt.Errorf("continue recoveries at %s: %w", now.UTC().Format(time.RFC3339), err)
				}
			}
			var r remediate.Record
			var printErr error
			err := events.Route(it.Event, events.Routes{
				// Who created or deleted a node: evidence, kept for the
				// node's unfinished recovery and recorded as the function
				// does, never acted on by itself.
				Evidence: func(ev events.Event) (err error) { r, err = h.Evidence(ctx, ev); return err },
				// A Compute Engine instance's entry: the function's
				// instance path (computevm.Recovery) against the
				// simulated Compute Engine or --compute-endpoint;
				// without either it is recorded as skip.
				Instance: func(ev events.Event) error {
					if vms == nil {
						r = h.Skip(ctx, ev, "instance entry: no Compute Engine to look at (give --compute-endpoint, or a --fleet file that holds instances)")
						return nil
					}
					recs, err := vms.HandleEvent(ctx, ev)
					if n := len(recs); n > 0 {
						r = recs[n-1]
					}
					return err
				},
				// A Compute Engine entry about a TPU worker VM: look at
				// the opted-in nodes of its zone now. Each node's
				// decision (a prepare, a recreate) is a row of its own,
				// then the entry's own record.
				ZoneHint: func(ev events.Event) error {
					res, err := h.HandleZoneHint(ctx, ev)
					if n := len(res.Records); n > 0 {
						r = res.Records[n-1]
						for _, nr := range res.Records[:n-1] {
							nl := lineOf(nr, events.Event{Time: ev.Time, Cause: ev.Cause})
							nl.uncounted = true // one entry, counted once
							if printErr = p.print(nl); printErr != nil {
								return nil
							}
						}
					}
					return err
				},
				Node: func(ev events.Event) (err error) { r, err = h.Handle(ctx, ev); return err },
			})
			if printErr != nil {
				return st, fmt.Errorf("write output: %w", printErr)
			}
			l = lineOf(r, it.Event)
			if err != nil {
				st.failed++
				l.Action, l.Reason = actionError, fmt.Sprintf("not processed: %v", err)
			}
		}
		l.DurationSeconds = time.Since(start).Seconds()
		if err := p.print(l); err != nil {
			return st, fmt.Errorf("write output: %w", err)
		}
	}
	return st, nil
}

// sweepInterval is how often replay continues the recoveries its entries
// started, as the Terraform module's Cloud Scheduler sweeps do.
const sweepInterval = time.Minute

// sourced is an item with where it came from.
type sourced struct {
	events.Item
	name string // the input's name, for errors
	at   string // FILE:LINE (or stdin:byte N) of a reject
}

// source yields entries in decision order.
type source interface {
	Next() (sourced, error)
	// Order says, for the summary, what order the entries were decided in.
	Order() string
	// Warnings are said on stderr after the run.
	Warnings() []string
	Close() error
}

// input is one FILE or stdin.
type input struct {
	name   string
	r      io.Reader
	file   *os.File  // nil for stdin and other streams (a pipe, <(...))
	closer io.Closer // a stream's file, closed after the run
	lines  *lineCounter
}

// fileSource reads files and stdin one after another, as given.
type fileSource struct {
	inputs []*input
	opts   events.Options
	cur    *events.Reader
	i      int

	checkAscending bool // --order asc: warn when an entry is older than the one before
	last           time.Time
	backwards      int
	temps          []*os.File // streams spooled by newOrderedSource
}

// openInputs opens every input up front so that an unreadable file is
// reported before anything is read or done.
func openInputs(args []string, stdin io.Reader, opts events.Options) (*fileSource, error) {
	opened, err := openArgs(args, stdin)
	if err != nil {
		return nil, err
	}
	s := &fileSource{opts: opts}
	for _, in := range opened {
		i := &input{name: in.name, r: in.r, file: in.file, closer: in.closer}
		if in.file != nil {
			i.lines = &lineCounter{name: in.name}
		}
		s.inputs = append(s.inputs, i)
	}
	return s, nil
}

func (s *fileSource) Next() (sourced, error) {
	for s.i < len(s.inputs) {
		in := s.inputs[s.i]
		if s.cur == nil {
			s.cur = events.NewReader(in.r, s.opts)
		}
		it, err := s.cur.Next()
		if errors.Is(err, io.EOF) {
			s.i, s.cur = s.i+1, nil
			continue
		}
		out := sourced{Item: it, name: in.name}
		if err == nil && it.Err != nil {
			out.at = in.where(it.Offset)
		}
		if err == nil && it.Err == nil && s.checkAscending {
			if t := it.Event.Time; !t.IsZero() {
				if t.Before(s.last) {
					s.backwards++
				}
				s.last = t
			}
		}
		return out, err
	}
	return sourced{}, io.EOF
}

func (s *fileSource) Order() string {
	if s.checkAscending {
		if s.backwards > 0 {
			return fmt.Sprintf("as given (--order asc), but %d entries were older than the one before them", s.backwards)
		}
		return "as given, oldest first (--order asc)"
	}
	return "as given (--order input)"
}

func (s *fileSource) Warnings() []string {
	if s.checkAscending && s.backwards > 0 {
		return []string{fmt.Sprintf("--order asc: %d entries were older than the one before them, so they were decided out of time order; use --order auto (the default) to sort", s.backwards)}
	}
	return nil
}

// rewind starts every input again from its first byte (each is a file by
// now: newOrderedSource spooled stdin).
func (s *fileSource) rewind() error {
	for _, in := range s.inputs {
		if _, err := in.file.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("read %s: %w", in.name, err)
		}
		in.r = in.file
	}
	s.i, s.cur = 0, nil
	return nil
}

// nameStdin names stdin in reject locations (autoheal demo's bundled file).
func (s *fileSource) nameStdin(name string) {
	for _, in := range s.inputs {
		if in.file == nil && in.closer == nil {
			in.name = name
		}
	}
}

func (s *fileSource) Close() error {
	for _, in := range s.inputs {
		if in.file != nil {
			in.file.Close()
		}
		if in.closer != nil {
			in.closer.Close()
		}
		in.lines.close()
	}
	for _, t := range s.temps {
		t.Close()
		os.Remove(t.Name())
	}
	s.temps = nil
	return nil
}

// where names an element of the input at byte offset off: FILE:LINE for a
// file, stdin:byte N for a stream.
func (in *input) where(off int64) string {
	if in.lines != nil {
		if n, err := in.lines.lineAt(off); err == nil {
			return fmt.Sprintf("%s:%d", in.name, n)
		}
	}
	return fmt.Sprintf("%s:byte %d", in.name, off)
}

// lineCounter turns byte offsets, asked for in increasing order, into line
// numbers, reading the file through its own handle (opened on first use, as
// only rejects need it).
type lineCounter struct {
	name string
	f    *os.File
	br   *bufio.Reader
	pos  int64
	line int
}

func (c *lineCounter) lineAt(off int64) (int, error) {
	if c.f == nil {
		f, err := os.Open(c.name)
		if err != nil {
			return 0, err
		}
		c.f, c.br, c.line = f, bufio.NewReaderSize(f, 64<<10), 1
	}
	if off < c.pos {
		// Asked out of order: count again from the start.
		if _, err := c.f.Seek(0, io.SeekStart); err != nil {
			return 0, err
		}
		c.br.Reset(c.f)
		c.pos, c.line = 0, 1
	}
	for c.pos < off {
		b, err := c.br.ReadByte()
		if err != nil {
			return 0, err
		}
		c.pos++
		if b == '\n' {
			c.line++
		}
	}
	return c.line, nil
}

func (c *lineCounter) close() {
	if c != nil && c.f != nil {
		c.f.Close()
	}
}

// orderedSource decides entries in time order. A first pass reads every
// input and keeps, per element, only its place (input, byte offset, length)
// and timestamp; the elements are then read back by offset in decision
// order. So memory is one small entryRef per element (plus the message of
// each reject), whatever the entries' size.
type orderedSource struct {
	fs      *fileSource
	refs    []entryRef
	rejects map[refKey]sourced // the rejects as first read, by place
	next    int
	buf     []byte
	order   string
	stream  bool // the input is in time order: read on as given (fs.Next), no index kept
	desc    bool // index: the entries were in descending time order
}

// refKey is an element's place: input number and byte offset.
type refKey struct {
	in  uint16
	off int64
}

// entryRef is an element's place in the input and its time.
type entryRef struct {
	t   int64  // timestamp, Unix ns (an element without one takes its predecessor's)
	off int64  // byte offset in the input
	n   uint32 // length in bytes
	in  uint16 // input number
	rej bool   // a reject: see orderedSource.rejects
}

// newOrderedSource indexes the inputs of fs (stdin is first copied to a
// temporary file, so that it can be read back). With reverse it decides the
// entries in the reverse of their input order (--order desc); else in time
// order: as given if they are ascending, reversed if they are descending,
// sorted by timestamp (stably) otherwise.
func newOrderedSource(fs *fileSource, reverse bool) (*orderedSource, error) {
	if len(fs.inputs) > 1<<16 {
		return nil, usagef("too many inputs (%d)", len(fs.inputs))
	}
	for _, in := range fs.inputs {
		if in.file != nil {
			continue
		}
		tmp, err := os.CreateTemp("", "autoheal-replay-stdin-*")
		if err != nil {
			return nil, fmt.Errorf("copy %s to a temporary file (to decide it in time order; --order input streams it instead): %w", in.name, err)
		}
		fs.temps = append(fs.temps, tmp) // one per stream: stdin, a pipe, <(...)
		if _, err := io.Copy(tmp, in.r); err != nil {
			return nil, fmt.Errorf("copy %s to %s: %w", in.name, tmp.Name(), err)
		}
		in.file, in.r, in.lines = tmp, nil, &lineCounter{name: tmp.Name()}
	}
	s := &orderedSource{fs: fs}
	if !reverse {
		// First see whether the input is already in time order (the
		// common case: an export read oldest first). Then it is streamed
		// again as given, and no index is kept: memory stays flat however
		// long the input. The first entry out of order stops this pass.
		asc, err := s.index(false)
		if err != nil {
			return nil, err
		}
		if asc {
			if err := fs.rewind(); err != nil {
				return nil, err
			}
			s.stream = true
			s.order = "oldest first (the input was in time order)"
			return s, nil
		}
	}
	asc, err := s.index(true)
	if err != nil {
		return nil, err
	}
	desc := s.desc
	switch {
	case reverse:
		slices.Reverse(s.refs)
		s.order = "newest-first input decided in reverse, oldest first (--order desc)"
	case asc:
		s.order = "oldest first (the input was in time order)"
	case desc:
		slices.Reverse(s.refs)
		s.order = "oldest first (the input was newest first, as gcloud logging read prints it: decided in reverse)"
	default:
		// Rejects keep their place after the entry that preceded them.
		sort.SliceStable(s.refs, func(a, b int) bool { return s.refs[a].t < s.refs[b].t })
		s.order = "oldest first (the input was out of time order: sorted by timestamp)"
	}
	if !s.fs.checkAscending && reverse && asc && !desc {
		s.order += "; but the input was oldest first"
	}
	return s, nil
}

// index reads every input once. With keep it keeps each element's place
// (s.refs, s.rejects) and says whether the entries were ascending (and, in
// s.desc, descending); without, it only checks whether they are ascending,
// stopping at the first entry that is not.
func (s *orderedSource) index(keep bool) (asc bool, err error) {
	fs := s.fs
	s.refs, s.rejects = nil, map[refKey]sourced{}
	var last int64
	asc, desc := true, true
	seen := false
	for i, in := range fs.inputs {
		if _, err := in.file.Seek(0, io.SeekStart); err != nil {
			return false, fmt.Errorf("read %s: %w", in.name, err)
		}
		r := events.NewReader(bufio.NewReaderSize(in.file, 64<<10), fs.opts)
		for {
			it, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return false, fmt.Errorf("read %s: %w", in.name, err)
			}
			ref := entryRef{t: last, off: it.Offset, n: uint32(len(it.Data)), in: uint16(i)}
			if it.Err != nil {
				if !keep {
					continue // read again in place when streamed
				}
				// A reject is decided at its own time when it has one,
				// else right after the entry before it.
				if t := events.Peek(it.Data).Time; !t.IsZero() {
					ref.t = t.UnixNano()
				}
				ref.rej = true
				rj := sourced{Item: it, name: in.name, at: in.where(it.Offset)}
				rj.Data = nil // read back by offset like the others
				s.rejects[refKey{ref.in, ref.off}] = rj
			} else if t := it.Event.Time; !t.IsZero() {
				ref.t = t.UnixNano()
				if seen {
					asc = asc && ref.t >= last
					desc = desc && ref.t <= last
				}
				seen, last = true, ref.t
				if !keep && !asc {
					return false, nil
				}
			}
			if keep {
				s.refs = append(s.refs, ref)
			}
		}
	}
	s.desc = desc
	return asc, nil
}

func (s *orderedSource) Next() (sourced, error) {
	if s.stream {
		return s.fs.Next()
	}
	if s.next >= len(s.refs) {
		return sourced{}, io.EOF
	}
	ref := s.refs[s.next]
	s.next++
	in := s.fs.inputs[ref.in]
	if cap(s.buf) < int(ref.n) {
		s.buf = make([]byte, ref.n)
	}
	data := s.buf[:ref.n]
	if _, err := in.file.ReadAt(data, ref.off); err != nil && !(errors.Is(err, io.EOF) && ref.rej) {
		return sourced{name: in.name}, fmt.Errorf("read back %d bytes at byte %d: %w", ref.n, ref.off, err)
	}
	data = bytes.Clone(data)
	if ref.rej {
		rj := s.rejects[refKey{ref.in, ref.off}]
		rj.Data = data
		return rj, nil
	}
	ev, err := events.Parse(data, s.fs.opts)
	out := sourced{Item: events.Item{Offset: ref.off, Data: data, Event: ev, Err: err}, name: in.name}
	if err != nil {
		out.at = in.where(ref.off)
	}
	return out, nil
}

func (s *orderedSource) Order() string      { return s.order }
func (s *orderedSource) Warnings() []string { return nil }
func (s *orderedSource) Close() error       { return s.fs.Close() }

// openRecords returns the recorder for --records: full records as the
// function writes them with AUTOHEAL_RECORD_TO=stdout, or nothing.
func openRecords(path string, stderr io.Writer) (remediate.Recorder, func(), error) {
	switch path {
	case "":
		return discardRecorder{}, func() {}, nil
	case "-":
		return record.NewStdout(stderr), func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, usagef("--records: %v", err)
	}
	return record.NewStdout(f), func() { f.Close() }, nil
}

// discardRecorder drops records: the printed lines are replay's output.
type discardRecorder struct{}

func (discardRecorder) Record(context.Context, remediate.Record) error { return nil }
