package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// actionError is printed in place of one of the six actions for an entry
// that could not be processed (a transient failure that outlasted the
// handler's retries); the command then exits non-zero.
const actionError = "error"

// line is one entry's outcome, as --format json prints it. Every key is
// always present: "" when unknown.
type line struct {
	InsertID string `json:"insertId"`
	Time     string `json:"time"`
	Node     string `json:"node"`
	Worker   string `json:"worker"`
	Method   string `json:"method"`
	Cause    string `json:"cause"`
	Action   string `json:"action"`
	Reason   string `json:"reason"`

	rejectCode string // reject reason code, for the text summary
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
	finish() error
}

func newPrinter(format string, w io.Writer) printer {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return &jsonPrinter{enc: enc}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tINSERT ID\tNODE\tWORKER\tMETHOD\tCAUSE\tACTION\tREASON")
	return &textPrinter{w: w, tw: tw, actions: map[string]int{}, rejects: map[string]int{}}
}

// jsonPrinter prints one JSON object per line and no summary, so the output
// is JSON Lines.
type jsonPrinter struct{ enc *json.Encoder }

func (p *jsonPrinter) print(l line) error { return p.enc.Encode(l) }
func (p *jsonPrinter) finish() error      { return nil }

// textPrinter prints an aligned table, then the summary: entries read,
// actions by kind, rejects by reason code.
type textPrinter struct {
	w       io.Writer
	tw      *tabwriter.Writer
	n       int
	actions map[string]int
	rejects map[string]int
}

func (p *textPrinter) print(l line) error {
	p.n++
	p.actions[l.Action]++
	if l.Action == string(remediate.ActionReject) {
		p.rejects[first(l.rejectCode, "other")]++
	}
	t := l.Time
	if tt, err := time.Parse(time.RFC3339Nano, t); err == nil {
		t = tt.UTC().Format(time.RFC3339)
	}
	_, err := fmt.Fprintf(p.tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
		dash(t), dash(l.InsertID), dash(l.Node), dash(l.Worker), dash(l.Method), dash(l.Cause), l.Action, oneLine(l.Reason))
	return err
}

func (p *textPrinter) finish() error {
	if err := p.tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(p.w, "\nentries read: %d\n", p.n)
	fmt.Fprintf(p.w, "actions: %s\n", counts(p.actions, actionOrder))
	if len(p.rejects) > 0 {
		_, err := fmt.Fprintf(p.w, "rejects: %s\n", counts(p.rejects, nil))
		return err
	}
	return nil
}

// actionOrder is the order actions are summarised in.
var actionOrder = []string{
	string(remediate.ActionRecord), string(remediate.ActionRecreate), string(remediate.ActionReset),
	string(remediate.ActionDefer), string(remediate.ActionSkip), string(remediate.ActionReject), actionError,
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
