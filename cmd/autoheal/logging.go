package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/api/option"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/logsource"
)

// loggingClientOptions point --from-logging at a fake Logging API in tests;
// nil means the real API with Application Default Credentials.
var loggingClientOptions []option.ClientOption

// loggingFlags select entries straight from Cloud Logging for replay.
type loggingFlags struct {
	enabled      bool
	project      string
	filter       string
	since, until string
}

func addLoggingFlags(fs *flag.FlagSet) *loggingFlags {
	l := &loggingFlags{}
	fs.BoolVar(&l.enabled, "from-logging", false, "read the entries from Cloud Logging (Application Default Credentials) instead of files")
	fs.StringVar(&l.project, "project", "", "with --from-logging: the `project` whose logs are read")
	fs.StringVar(&l.filter, "filter", events.SinkFilter, "with --from-logging: the Cloud Logging `filter`; the default is the log sink's")
	fs.StringVar(&l.since, "since", "24h", "with --from-logging: oldest entry, a `time`: RFC 3339, a date (2026-11-30), a duration ago (6h) or days ago (7d)")
	fs.StringVar(&l.until, "until", "", "with --from-logging: newest entry, a `time` as for --since (default: now)")
	return l
}

// window parses --since and --until relative to now.
func (l *loggingFlags) window(now time.Time) (since, until time.Time, err error) {
	if since, err = parseWhen("since", l.since, now); err != nil {
		return since, until, err
	}
	until = now
	if l.until != "" {
		if until, err = parseWhen("until", l.until, now); err != nil {
			return since, until, err
		}
	}
	if !since.Before(until) {
		return since, until, usagef("--since %s is not before --until %s", since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	return since, until, nil
}

// parseWhen reads a time: RFC 3339 (2026-11-20T03:00:00Z), a date
// (2026-11-30, midnight UTC), a Go duration before now (6h, 90m) or whole
// days before now (7d).
func parseWhen(flagName, s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.AddDate(0, 0, -n), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, usagef("--%s %q: want an RFC 3339 time (2026-11-20T03:00:00Z), a date (2026-11-30), a duration ago (6h) or days ago (7d)", flagName, s)
	}
	return now.Add(-d), nil
}

// validate checks the flags that only make sense together.
func (l *loggingFlags) validate() error {
	if !l.enabled {
		return nil
	}
	if l.project == "" {
		return usagef("--from-logging needs --project")
	}
	if strings.TrimSpace(l.filter) == "" {
		return usagef("--filter is empty")
	}
	return nil
}

// progress writes "read N entries" on one stderr line, rewritten in place
// at most five times a second. add is called from the reading goroutine.
type progress struct {
	w    io.Writer
	mu   sync.Mutex
	n    int
	last time.Time
}

func (p *progress) add(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n = n
	if now := time.Now(); now.Sub(p.last) >= 200*time.Millisecond {
		p.last = now
		fmt.Fprintf(p.w, "\rread %d entries from Cloud Logging", p.n)
	}
}

func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\rread %d entries from Cloud Logging\n", p.n)
}

// open validates the flags and starts reading from Cloud Logging; entries
// stream in as replay handles them, with a progress line on stderr.
func (l *loggingFlags) open(ctx context.Context, opts events.Options, stderr io.Writer) (source, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	since, until, err := l.window(time.Now())
	if err != nil {
		return nil, err
	}
	ls, err := logsource.New(ctx, loggingClientOptions...)
	if err != nil {
		return nil, setupf("--from-logging: Cloud Logging client (Application Default Credentials): %v", err)
	}
	p := &progress{w: stderr}
	fmt.Fprintf(stderr, "reading project %s from %s to %s\n", l.project, since.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339))
	rc := ls.JSONLines(ctx, logsource.Options{
		Project:  l.project,
		Filter:   l.filter,
		Since:    since,
		Until:    until,
		Progress: p.add,
	})
	return &loggingSource{name: "Cloud Logging project " + l.project, r: events.NewReader(rc, opts), rc: rc, ls: ls, p: p}, nil
}

// loggingSource is replay's source for --from-logging.
type loggingSource struct {
	name string
	r    *events.Reader
	rc   io.Closer
	ls   *logsource.Source
	p    *progress
	done bool
}

func (s *loggingSource) Next() (sourced, error) {
	it, err := s.r.Next()
	if err != nil && !s.done {
		s.done = true
		s.p.done()
	}
	out := sourced{Item: it, name: s.name}
	if err == nil && it.Err != nil {
		out.at = fmt.Sprintf("%s entry %d", s.name, it.Index+1)
	}
	return out, err
}

// Order: the Logging API is read oldest first (order_by timestamp asc).
func (s *loggingSource) Order() string      { return "oldest first (Cloud Logging is read in time order)" }
func (s *loggingSource) Warnings() []string { return nil }

func (s *loggingSource) Close() error {
	s.rc.Close()
	return s.ls.Close()
}
