package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// actionError is printed in place of one of the six actions for an entry
// that could not be processed (a transient failure that outlasted the
// handler's retries); the command then exits non-zero.
const actionError = "error"

// line is one entry's outcome, as --format json prints it. Every key is
// always present: "" (or [] or 0) when unknown.
type line struct {
	InsertID string   `json:"insertId"`
	Time     string   `json:"time"`
	Node     string   `json:"node"`
	Worker   string   `json:"worker"`
	Method   string   `json:"method"`
	Cause    string   `json:"cause"`
	Action   string   `json:"action"`
	Reason   string   `json:"reason"`
	Warnings []string `json:"warnings"`
	DryRun   bool     `json:"dryRun"`
	// At is where the entry was read: FILE:LINE, or stdin:byte N.
	At string `json:"at"`
	// DurationSeconds is how long deciding and acting took, TPU calls
	// and ledger included.
	DurationSeconds float64 `json:"durationSeconds"`

	rejectCode string // reject reason code, for the text summary
	uncounted  bool   // not a node (sweep: a location that could not be listed)
}

// lineOf builds the output line from the handler's record, falling back to
// the parsed event for anything the record left empty.
func lineOf(rec remediate.Record, ev events.Event) line {
	l := line{
		InsertID: first(rec.InsertID, ev.InsertID),
		Node:     first(rec.Node, ev.Node.Name()),
		Worker:   first(rec.Worker, ev.Worker),
		Method:   first(rec.Method, ev.Method),
		Cause:    first(string(rec.Cause), string(ev.Cause)),
		Action:   string(rec.Action),
		Reason:   rec.Reason,
		Warnings: rec.Warnings,
		DryRun:   rec.DryRun,
	}
	if l.Warnings == nil {
		l.Warnings = []string{}
	}
	t := rec.EventTime
	if t.IsZero() {
		t = ev.Time
	}
	if !t.IsZero() {
		l.Time = t.UTC().Format(time.RFC3339Nano)
	}
	return l
}

// rejectCode is the stable slug of a reject, "other" when err is not an
// events.RejectError.
func rejectCode(err error) string {
	var re *events.RejectError
	if errors.As(err, &re) && re.Code != "" {
		return re.Code
	}
	return "other"
}

func first(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// printer prints lines as they come and a summary at the end.
type printer interface {
	print(l line) error
	// finish prints the summary, then notes (one line each; text only).
	finish(notes ...string) error
}

// newPrinter returns the printer for format; unit names what the text
// summary counts ("entries read", "nodes swept").
func newPrinter(format string, w io.Writer, unit string) printer {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return &jsonPrinter{enc: enc}
	}
	return &textPrinter{w: w, unit: unit, actions: map[string]int{}, rejects: map[string]int{}}
}

// jsonPrinter prints one JSON object per line and no summary, so the output
// is JSON Lines.
type jsonPrinter struct{ enc *json.Encoder }

func (p *jsonPrinter) print(l line) error     { return p.enc.Encode(l) }
func (p *jsonPrinter) finish(...string) error { return nil }

// Text layout: fixed columns, so every row is printed as soon as it is
// decided (no buffering until the end to align, unlike a tabwriter) and fits
// textWidth columns. Long nodes and reasons are cut; --format json has them
// whole.
const (
	textWidth  = 120
	timeWidth  = 20 // 2026-11-20T03:44:36Z
	nodeWidth  = 28 // zone/name
	workWidth  = 2
	causeWidth = 11 // maintenance
	actWidth   = 8  // recreate
	gap        = "  "
	reasonCol  = timeWidth + nodeWidth + workWidth + causeWidth + actWidth + 5*len(gap)
)

// textPrinter prints a table row per line (warnings on the rows below it),
// then the summary: count, actions by kind, rejects by reason code, notes.
type textPrinter struct {
	w       io.Writer
	unit    string
	header  bool
	n       int
	dur     float64
	actions map[string]int
	rejects map[string]int
	err     error
}

func (p *textPrinter) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *textPrinter) row(cols ...string) {
	widths := []int{timeWidth, nodeWidth, workWidth, causeWidth, actWidth}
	var b strings.Builder
	for i, w := range widths {
		b.WriteString(pad(cut(cols[i], w), w))
		b.WriteString(gap)
	}
	b.WriteString(cut(cols[len(widths)], textWidth-reasonCol))
	p.printf("%s\n", strings.TrimRight(b.String(), " "))
}

func (p *textPrinter) print(l line) error {
	if !p.header {
		p.header = true
		p.row("TIME", "NODE", "W", "CAUSE", "ACTION", "REASON")
	}
	if !l.uncounted {
		p.n++
	}
	p.dur += l.DurationSeconds
	p.actions[l.Action]++
	reason := oneLine(l.Reason)
	if l.Action == string(remediate.ActionReject) {
		p.rejects[first(l.rejectCode, "other")]++
		if l.At != "" {
			reason = filepath.Base(l.At) + ": " + reason
		}
	}
	t := l.Time
	if tt, err := time.Parse(time.RFC3339Nano, t); err == nil {
		t = tt.UTC().Format(time.RFC3339)
	}
	p.row(dash(t), dash(shortNode(l.Node)), dash(l.Worker), dash(l.Cause), l.Action, reason)
	for _, w := range l.Warnings {
		for _, ln := range wrap("warning: "+oneLine(w), textWidth-4) {
			p.printf("    %s\n", ln)
		}
	}
	return p.err
}

func (p *textPrinter) finish(notes ...string) error {
	p.printf("\n%s: %d\n", p.unit, p.n)
	p.printf("actions: %s\n", counts(p.actions, actionOrder))
	if len(p.rejects) > 0 {
		p.printf("rejects: %s\n", counts(p.rejects, nil))
	}
	for _, n := range notes {
		p.printf("%s\n", n)
	}
	return p.err
}

// shortNode is projects/P/locations/Z/nodes/N as Z/N; other names as given.
func shortNode(name string) string {
	p := strings.Split(name, "/")
	if len(p) == 6 && p[0] == "projects" && p[2] == "locations" && p[4] == "nodes" {
		return p[3] + "/" + p[5]
	}
	return name
}

// cut shortens s to at most n runes, marking the cut with "…".
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n <= 1 {
		return string(r[:n])
	}
	return string(r[:n-1]) + "…"
}

func pad(s string, n int) string {
	if k := utf8.RuneCountInString(s); k < n {
		return s + strings.Repeat(" ", n-k)
	}
	return s
}

// wrap breaks s into lines of at most n runes, at spaces where it can.
func wrap(s string, n int) []string {
	var out []string
	for utf8.RuneCountInString(s) > n {
		r := []rune(s)
		i := n
		for i > n/2 && r[i] != ' ' {
			i--
		}
		if r[i] != ' ' {
			i = n
		}
		out = append(out, strings.TrimRight(string(r[:i]), " "))
		s = strings.TrimLeft(string(r[i:]), " ")
	}
	return append(out, s)
}

// actionOrder is the order actions are summarised in.
var actionOrder = []string{
	string(remediate.ActionRecord), string(remediate.ActionRecreate), string(remediate.ActionReset),
	string(remediate.ActionDefer), string(remediate.ActionSkip), string(remediate.ActionPrepare),
	string(remediate.ActionMaintain), string(remediate.ActionResumed), string(remediate.ActionReject), actionError,
}

// counts formats "a 1, b 2": keys in order first, then the rest sorted.
func counts(m map[string]int, order []string) string {
	var parts []string
	seen := map[string]bool{}
	for _, k := range order {
		seen[k] = true
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	var rest []string
	for k := range m {
		if !seen[k] && m[k] > 0 {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a reason on its table row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
