package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/record"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

const replayHelp = `Usage: autoheal replay [flags] FILE... | -
       autoheal replay --from-logging --project P [--filter F] [--since T] [--until T] [flags]

Feeds TPU audit log entries through exactly the code the Cloud Function runs
(parse, observe the node through the TPU API, decide, act, record) and prints
one line per entry, in input order.

Input: files, or - for stdin, in any form the function accepts: gcloud
logging read --format=json output (a JSON array), JSON Lines, a single entry,
Pub/Sub push bodies, CloudEvents. A malformed entry is printed with action
reject and the run goes on; --from-logging reads the entries straight from
Cloud Logging instead.

Control plane: --fleet FILE runs against a simulated TPU API seeded from a
fleet file (no credentials needed); --fleet-out FILE writes the fleet after
the run. Without --fleet the real TPU API is used with Application Default
Credentials: add --dry-run to decide without mutating anything. The ledger
(dedupe, claims, spec snapshots) is always in memory, fresh for each run.

Clock: decisions depend on "now" (grace periods, cooldowns, caps).
--clock=wall (default) decides every entry at the current time, as the
function would if the entries arrived now; --clock=event decides each entry
at its own timestamp, as the function decided (or should have) during the
incident. Unlike the function, replay never drops entries for being old.

Output: --format text prints an aligned table and a summary (entries read,
actions by kind, rejects by reason code); --format json prints one object per
entry: {"insertId","time","node","worker","method","cause","action","reason"}.
An entry that still fails transiently after the handler's retries is printed
with action "error" and the command exits 1. Exit status 0 means every entry was processed
(rejects included); 2 means bad flags or unreadable files, before any input
was read.

Flags:
`

func runReplay(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return replay(ctx, args, stdin, stdout, stderr, nil)
}

// replay is runReplay; setup, when not nil, adjusts the target before it is
// opened (autoheal demo uses it to supply the embedded fleet).
func replay(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, setup func(*targetFlags)) error {
	fs := newFlagSet("replay", replayHelp, stderr)
	target := addTargetFlags(fs)
	policy := addPolicyFlags(fs)
	format := fs.String("format", "text", "output `format`: text or json")
	clock := fs.String("clock", "wall", "decide at the `wall` clock or at each entry's own timestamp (event)")
	var projects listFlag
	fs.Var(&projects, "projects", "allow-list of `projects` (comma-separated, repeatable); entries for others are rejected; empty allows all")
	records := fs.String("records", "", "also write the full decision records, as the function logs them, to this `file` (- for stderr)")
	logging := addLoggingFlags(fs)
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
	cfg, err := policy.config()
	if err != nil {
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
		if len(stray) > 0 {
			return usagef("%s only apply to --from-logging", strings.Join(stray, ", "))
		}
	}
	opts := events.Options{AllowedProjects: projects}
	var src source
	if logging.enabled {
		if fs.NArg() > 0 {
			return usagef("--from-logging reads Cloud Logging: give no FILE arguments (got %q)", fs.Args())
		}
		if src, err = logging.open(ctx, opts, stderr); err != nil {
			return err
		}
	} else {
		if src, err = openInputs(fs.Args(), stdin, opts); err != nil {
			return err
		}
	}
	defer src.Close()
	rec, closeRecords, err := openRecords(*records, stderr)
	if err != nil {
		return err
	}
	defer closeRecords()
	if setup != nil {
		setup(target)
	}
	tg, err := target.open(ctx)
	if err != nil {
		return err
	}

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
	rclk := &replayClock{base: clockFn} // moved forward by the continuations (continue.go)
	clockFn = rclk.now
	// The ledger runs on the same clock as the handler, so that event marks
	// and leases made at an entry's time are judged at entries' times.
	h := &remediate.Handler{
		TPU:      tg.tpu,
		Store:    ledger.NewMemory(ledger.WithClock(clockFn)),
		Recorder: rec,
		Config:   cfg,
		Holder:   "autoheal-replay",
		Now:      clockFn,
	}

	p := newPrinter(*format, stdout)
	runErr := replayAll(ctx, h, src, p, func(t time.Time) { now = t })
	if runErr == nil {
		runErr = continueRecoveries(ctx, h, rclk, stderr)
	}
	if err := p.finish(); err != nil && runErr == nil {
		runErr = fmt.Errorf("write output: %w", err)
	}
	if err := tg.finish(); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// replayAll handles every entry of src in order and prints its line.
func replayAll(ctx context.Context, h *remediate.Handler, src source, p printer, setNow func(time.Time)) error {
	var total, failed int
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted after %d entries: %w", total, err)
		}
		name, it, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		total++
		var l line
		if it.Err != nil {
			r := h.Reject(ctx, it.Data, it.Err)
			l = lineOf(r, it.Event)
			l.rejectCode = rejectCode(it.Err)
		} else {
			setNow(it.Event.Time)
			r, err := h.Handle(ctx, it.Event)
			l = lineOf(r, it.Event)
			if err != nil {
				failed++
				l.Action, l.Reason = actionError, fmt.Sprintf("not processed: %v", err)
			}
		}
		if err := p.print(l); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d entries not processed (transient failures, printed with action %s); replay them again", failed, total, actionError)
	}
	return nil
}

// source yields entries in input order, with the name of the input each
// came from (for error messages).
type source interface {
	Next() (name string, it events.Item, err error)
	Close() error
}

// fileSource reads files and stdin one after another.
type fileSource struct {
	names   []string
	readers []io.Reader
	closers []io.Closer
	opts    events.Options
	cur     *events.Reader
}

// openInputs opens every input up front so that an unreadable file is
// reported before anything is read or done.
func openInputs(args []string, stdin io.Reader, opts events.Options) (*fileSource, error) {
	if len(args) == 0 {
		return nil, usagef("no input: give FILE... or - for stdin (or --from-logging)")
	}
	s := &fileSource{opts: opts}
	sawStdin := false
	for _, a := range args {
		if a == "-" {
			if sawStdin {
				s.Close()
				return nil, usagef("- (stdin) given more than once")
			}
			sawStdin = true
			s.names, s.readers = append(s.names, "stdin"), append(s.readers, stdin)
			continue
		}
		f, err := os.Open(a)
		if err == nil {
			var fi os.FileInfo
			if fi, err = f.Stat(); err == nil && fi.IsDir() {
				err = fmt.Errorf("open %s: is a directory", a)
			}
		}
		if err != nil {
			if f != nil {
				f.Close()
			}
			s.Close()
			return nil, usagef("input: %v", err)
		}
		s.names, s.readers, s.closers = append(s.names, a), append(s.readers, f), append(s.closers, f)
	}
	return s, nil
}

func (s *fileSource) Next() (string, events.Item, error) {
	for len(s.readers) > 0 {
		if s.cur == nil {
			s.cur = events.NewReader(s.readers[0], s.opts)
		}
		it, err := s.cur.Next()
		if errors.Is(err, io.EOF) {
			s.names, s.readers, s.cur = s.names[1:], s.readers[1:], nil
			continue
		}
		return s.names[0], it, err
	}
	return "", events.Item{}, io.EOF
}

func (s *fileSource) Close() error {
	for _, c := range s.closers {
		c.Close()
	}
	s.closers = nil
	return nil
}

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
