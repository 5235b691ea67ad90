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

	"github.com/tpu-autoheal/autoheal/internal/logsource"
	"github.com/tpu-autoheal/autoheal/internal/record"
	"github.com/tpu-autoheal/autoheal/internal/report"
)

const reportHelp = `Usage: autoheal report [flags] FILE... | -
       autoheal report --from-logging --project P [--since 168h] [--until T] [flags]

What did the incidents cost? Reads tpu-autoheal's decision records and groups
them into incidents: one node, from its first event until it is healthy and
training resumed, or the incident was closed. Per incident: node, accelerator
type and chips, cause, first event, detection latency, each phase's time
(claimed, deleted, created, READY, resumed), outcome, downtime, progress lost
and chip-hours lost (downtime x chips); then a summary (incidents by cause and
outcome, time to recover median and p95, downtime and chip-hours in total).

Input: files or - for stdin: autoheal replay --records FILE output (JSON
Lines), the function's stdout, or a gcloud logging read --format=json export
of the records log (a JSON array of entries); read as a stream. Or
--from-logging reads the records straight from Cloud Logging (Application
Default Credentials, permission logging.logEntries.list).

Output: --format text (aligned tables), json (one object per incident, one a
line), or csv; --html FILE also writes a self-contained page with the summary
and a timeline, one row per incident, one coloured bar per phase.

Input that is not records is named, with the command that reads it: audit
log entries (autoheal replay), autoheal replay --format json output; with
no record at all that is exit 3. Records decided long after their event
(a replay at the wall clock) are counted in a warning.

` + exitCodesHelp + `

Flags:
`

// RecordsFilter selects one instance's records in Cloud Logging: its
// records log (AUTOHEAL_RECORD_LOG), or Cloud Run's stdout log for records
// written to stdout (AUTOHEAL_RECORD_TO=stdout), with its labels.app
// (AUTOHEAL_APP_LABEL): the same selection as the module's log-based
// metrics (terraform local.record_log_filter). An entry labelled
// app=tpu-autoheal in any other log is not read.
func RecordsFilter(project, recordLog, app string) string {
	return fmt.Sprintf(`(logName="projects/%s/logs/%s" OR logName="projects/%s/logs/run.googleapis.com%%2Fstdout") AND labels.app="%s" AND jsonPayload.action:*`,
		project, recordLog, project, app)
}

func runReport(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("report", reportHelp, stderr)
	format := fs.String("format", "text", "output `format`: text, json or csv")
	html := fs.String("html", "", "also write the report as one self-contained HTML page to this `file`")
	title := fs.String("title", "tpu-autoheal: what did it cost?", "the HTML page's `title`")
	fromLogging := fs.Bool("from-logging", false, "read the records from Cloud Logging (Application Default Credentials) instead of files")
	project := fs.String("project", "", "with --from-logging: the `project` whose records are read")
	filter := fs.String("filter", "", "with --from-logging: the Cloud Logging `filter` of the records (default: the records of --record-log and --app-label)")
	recordLog := fs.String("record-log", record.LogName, "with --from-logging: the records `log` id, the instance's AUTOHEAL_RECORD_LOG (Terraform: its name)")
	appLabel := fs.String("app-label", record.AppLabelValue, "with --from-logging: the records' labels.app `value`, the instance's AUTOHEAL_APP_LABEL (Terraform: its name)")
	since := fs.String("since", "168h", "with --from-logging: oldest record, an RFC 3339 `time` or a duration ago")
	until := fs.String("until", "", "with --from-logging: newest record, an RFC 3339 `time` or a duration ago (default: now)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch *format {
	case "text", "json", "csv":
	default:
		return usagef("--format %q: want text, json or csv", *format)
	}
	var next func() (report.Record, error)
	var closeInput func()
	skipped := func() report.Skipped { return report.Skipped{} }
	if *fromLogging {
		if fs.NArg() > 0 {
			return usagef("--from-logging reads Cloud Logging: give no FILE arguments (got %q)", fs.Args())
		}
		if *project == "" {
			return usagef("--from-logging needs --project")
		}
		if !flagGiven(fs, "filter") {
			*filter = RecordsFilter(*project, *recordLog, *appLabel)
		} else if strings.TrimSpace(*filter) == "" {
			return usagef("--filter is empty")
		}
		now := time.Now()
		from, err := parseWhen("since", *since, now)
		if err != nil {
			return err
		}
		to := now
		if *until != "" {
			if to, err = parseWhen("until", *until, now); err != nil {
				return err
			}
		}
		if !from.Before(to) {
			return usagef("--since %s is not before --until %s", from.Format(time.RFC3339), to.Format(time.RFC3339))
		}
		ls, err := logsource.New(ctx, loggingClientOptions...)
		if err != nil {
			return setupf("--from-logging: Cloud Logging client (Application Default Credentials): %v", err)
		}
		fmt.Fprintf(stderr, "reading records of project %s from %s to %s\n", *project, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
		p := &progress{w: stderr}
		rc := ls.JSONLines(ctx, logsource.Options{Project: *project, Filter: *filter, Since: from, Until: to, Progress: p.add})
		r := report.NewReader(rc, "Cloud Logging project "+*project)
		finished := false
		next = func() (report.Record, error) {
			rec, err := r.Next()
			if err != nil && !finished {
				finished = true
				p.done()
			}
			return rec, err
		}
		closeInput = func() { rc.Close(); ls.Close() }
	} else {
		var stray []string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "project", "filter", "since", "until", "record-log", "app-label":
				stray = append(stray, "--"+f.Name)
			}
		})
		if len(stray) > 0 {
			return usagef("%s only apply to --from-logging", strings.Join(stray, ", "))
		}
		in, err := openReportInputs(fs.Args(), stdin)
		if err != nil {
			return err
		}
		next, closeInput, skipped = in.next, in.close, in.skippedSoFar
	}
	defer closeInput()

	var htmlFile *os.File
	if *html != "" {
		f, err := os.Create(*html)
		if err != nil {
			return usagef("--html: %v", err)
		}
		htmlFile = f
		defer f.Close()
	}

	g := report.NewGrouper()
	read, late := 0, 0
	decided := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted: %w", err)
		}
		rec, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		var fe *report.FormatError
		if errors.As(err, &fe) {
			return &exitStatus{code: exitNoEntries, msg: fmt.Sprintf("read records: %v; no report written", err)}
		}
		if err != nil {
			return fmt.Errorf("read records: %w", err)
		}
		read++
		// The first record of an event is its decision; later ones
		// (continuations, the resume watch) come late by design.
		if rec.InsertID != "" && !decided[rec.InsertID] {
			decided[rec.InsertID] = true
			if !rec.EventTime.IsZero() && rec.Time.Sub(rec.EventTime) > lateDecision {
				late++
			}
		}
		g.Add(rec)
	}
	if msg := notRecords(skipped(), read); msg != "" {
		if read == 0 {
			return &exitStatus{code: exitNoEntries, msg: msg}
		}
		fmt.Fprintf(stderr, "autoheal report: %s\n", msg)
	}
	if late > 0 {
		fmt.Fprintf(stderr, "autoheal report: %s decided more than %s after they happened (replayed at the wall clock?): detection and downtime count that delay; autoheal replay --clock event --records FILE decides each at its own time\n",
			plural(late, "event was", "events were"), shortDuration(lateDecision))
	}
	incs := g.Incidents()
	sum := report.Summarize(incs)
	var err error
	switch *format {
	case "text":
		err = report.WriteText(stdout, incs, sum)
	case "json":
		err = report.WriteJSON(stdout, incs)
	case "csv":
		err = report.WriteCSV(stdout, incs)
	}
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if htmlFile != nil {
		if err := report.WriteHTML(htmlFile, incs, sum, *title); err != nil {
			return fmt.Errorf("write %s: %w", *html, err)
		}
		if err := htmlFile.Close(); err != nil {
			return fmt.Errorf("write %s: %w", *html, err)
		}
	}
	return nil
}

// lateDecision: a record decided this long after its event was most likely
// replayed at the wall clock, not by the function during the incident.
const lateDecision = time.Hour

// notRecords says, when the input held objects that are not records, what
// they are and which command reads them; "" when it held none.
func notRecords(s report.Skipped, read int) string {
	var what, instead string
	switch {
	case s.AuditEntries > 0:
		what = plural(s.AuditEntries, "TPU audit log entry", "TPU audit log entries")
		instead = "autoheal replay reads those: autoheal replay --clock event --fleet FLEET --records records.jsonl FILE, then autoheal report records.jsonl"
	case s.ReplayOutput > 0:
		what = plural(s.ReplayOutput, "object of autoheal replay --format json", "objects of autoheal replay --format json")
		instead = "its decisions are not records: run autoheal replay --records records.jsonl ... (the full records), then autoheal report records.jsonl"
	default:
		if read == 0 && s.Other > 0 {
			return fmt.Sprintf("the input holds %s, none of them a tpu-autoheal record (no action): no report", plural(s.Other, "JSON object", "JSON objects"))
		}
		return ""
	}
	skippedNote := "skipped"
	if read == 0 {
		skippedNote = "and no record"
	}
	return fmt.Sprintf("the input holds %s, not tpu-autoheal records (%s); %s", what, skippedNote, instead)
}

// reportInputs reads files and stdin one after another.
type reportInputs struct {
	names   []string
	readers []io.Reader
	closers []io.Closer
	cur     *report.Reader
	skipped report.Skipped // of the inputs read to the end
}

// skippedSoFar is what the readers passed over, the current one included.
func (in *reportInputs) skippedSoFar() report.Skipped {
	s := in.skipped
	if in.cur != nil {
		c := in.cur.Skipped()
		s.AuditEntries += c.AuditEntries
		s.ReplayOutput += c.ReplayOutput
		s.Other += c.Other
	}
	return s
}

// openReportInputs opens every input up front, so that an unreadable file
// is reported before anything is read.
func openReportInputs(args []string, stdin io.Reader) (*reportInputs, error) {
	opened, err := openArgs(args, stdin)
	if err != nil {
		return nil, err
	}
	in := &reportInputs{}
	for _, o := range opened {
		in.names, in.readers = append(in.names, o.name), append(in.readers, o.r)
		if o.file != nil {
			in.closers = append(in.closers, o.file)
		}
		if o.closer != nil {
			in.closers = append(in.closers, o.closer)
		}
	}
	return in, nil
}

func (in *reportInputs) next() (report.Record, error) {
	for len(in.readers) > 0 {
		if in.cur == nil {
			in.cur = report.NewReader(in.readers[0], in.names[0])
		}
		rec, err := in.cur.Next()
		if errors.Is(err, io.EOF) {
			in.skipped = in.skippedSoFar()
			in.names, in.readers, in.cur = in.names[1:], in.readers[1:], nil
			continue
		}
		return rec, err
	}
	return report.Record{}, io.EOF
}

func (in *reportInputs) close() {
	for _, c := range in.closers {
		c.Close()
	}
	in.closers = nil
}

// writeDemoReport prints the report of the records file autoheal demo
// wrote.
func writeDemoReport(ctx context.Context, records, clock string, stdout, stderr io.Writer) error {
	fmt.Fprintln(stdout, "\nWhat did it cost (autoheal report over the records of this run):")
	if clock == "wall" {
		fmt.Fprintln(stdout, "(--clock wall decided the bundled entries of 2026-11-20 now, so the report counts all that time as\n"+
			"detection and downtime; --clock event decides each at its own time, and the simulated API answers at once.)")
	}
	return runReport(ctx, []string{records}, nil, stdout, stderr)
}
