package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/policy"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// actionError is printed in place of one of the actions for an entry that
// could not be processed (a transient failure that outlasted the handler's
// retries); the command then exits non-zero.
const actionError = "error"

// JSON output kinds: every object replay, sweep and demo print with
// --format json says which it is, so jq can pick (select(.kind=="outcome")).
// docs/schema/ has a JSON schema for each.
const (
	kindDecision = "decision" // one per entry (replay) or swept node (sweep), as decided
	kindOutcome  = "outcome"  // one per recovery the run started, as it ended
	kindSummary  = "summary"  // the last object: what the run counted, and its exit code
)

// line is one decision, as --format json prints it. Every key is always
// present: "" (or [] or 0) when unknown.
type line struct {
	Kind     string   `json:"kind"`
	InsertID string   `json:"insertId"`
	Time     string   `json:"time"`
	Node     string   `json:"node"`
	Worker   string   `json:"worker"`
	Method   string   `json:"method"`
	Cause    string   `json:"cause"`
	Action   string   `json:"action"`
	Reason   string   `json:"reason"`
	Error    string   `json:"error"`
	Warnings []string `json:"warnings"`
	DryRun   bool     `json:"dryRun"`
	// At is where the entry was read: FILE:LINE, or stdin:byte N.
	At string `json:"at"`
	// DurationSeconds is how long deciding and acting took, TPU calls
	// and ledger included.
	DurationSeconds float64 `json:"durationSeconds"`

	rejectCode string // reject reason code, for the text summary
	uncounted  bool   // not an entry or node (sweep: a location that could not be listed; a zone hint's node)
	zone       string // the node's zone, for breaker trips
}

// lineOf builds the output line from the handler's record, falling back to
// the parsed event for anything the record left empty.
func lineOf(rec remediate.Record, ev events.Event) line {
	l := line{
		Kind:     kindDecision,
		InsertID: first(rec.InsertID, ev.InsertID),
		Node:     first(rec.Node, ev.Node.Name()),
		Worker:   first(rec.Worker, ev.Worker),
		Method:   first(rec.Method, ev.Method),
		Cause:    first(string(rec.Cause), string(ev.Cause)),
		Action:   string(rec.Action),
		Reason:   rec.Reason,
		Error:    rec.Err,
		Warnings: rec.Warnings,
		DryRun:   rec.DryRun,
		zone:     first(rec.Zone, ev.Node.Zone),
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

// tripped reports whether l is the refusal that tripped a zone's storm
// breaker: a "breaker open" skip carrying an error, the one ERROR record per
// trip that pages a person.
func (l line) tripped() bool {
	return l.Action == string(remediate.ActionSkip) && strings.HasPrefix(l.Reason, "breaker open") && l.Error != ""
}

// would returns X for a dry-run skip whose reason is "dry run: would X: …":
// what would have been done.
func (l line) would() string {
	rest, ok := strings.CutPrefix(l.Reason, "dry run: would ")
	if !ok || l.Action != string(remediate.ActionSkip) {
		return ""
	}
	verb, _, _ := strings.Cut(rest, ":")
	if strings.ContainsAny(verb, " ;") {
		verb, _, _ = strings.Cut(verb, " ")
		verb = strings.TrimRight(verb, ";")
	}
	return verb
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

// outcome is how one recovery the run started ended, as --format json
// prints it (kind "outcome").
type outcome struct {
	Kind       string `json:"kind"`
	Node       string `json:"node"`
	Action     string `json:"action"`  // recreate or reset
	Outcome    string `json:"outcome"` // recovered, closed, abandoned or unfinished
	Phase      string `json:"phase"`
	Generation int    `json:"generation"`
	// Time is when it ended (unfinished: its last step), on the run's clock.
	Time string `json:"time"`
	// Reason: closed and abandoned, why; unfinished, its last error if any.
	Reason string `json:"reason"`
	// NextLookAt is when an unfinished recovery would be looked at next.
	NextLookAt string `json:"nextLookAt"`
	// TimeToRecoverSeconds is, for a recovered one, from its start to the
	// node READY again.
	TimeToRecoverSeconds float64 `json:"timeToRecoverSeconds"`
}

// Outcomes of a recovery besides the record words: one the run could not
// finish (replay's continuation bound, a sweep's interruption).
const outcomeUnfinished = "unfinished"

// needsPerson reports whether the outcome is one a person must look at.
func (o outcome) needsPerson() bool {
	return o.Outcome == string(remediate.OutcomeAbandoned) || o.Outcome == outcomeUnfinished
}

// detail is the outcome's last column in text.
func (o outcome) detail() string {
	switch o.Outcome {
	case string(remediate.OutcomeRecovered):
		d := fmt.Sprintf("READY again, generation %d", o.Generation)
		if o.TimeToRecoverSeconds > 0 {
			d += ", after " + shortDuration(time.Duration(o.TimeToRecoverSeconds*float64(time.Second)).Round(time.Second))
		}
		return d
	case outcomeUnfinished:
		d := "in phase " + o.Phase
		if o.NextLookAt != "" {
			d += ", next look at " + o.NextLookAt
		}
		if o.Reason != "" {
			d += "; last error: " + o.Reason
		}
		return d
	case string(remediate.OutcomeAbandoned):
		return "needs a person: " + o.Reason
	}
	return o.Reason
}

// trip is one breaker trip the run caused.
type trip struct {
	Zone   string `json:"zone"`
	Time   string `json:"time"`
	Reason string `json:"reason"`
}

// recoveryCounts counts the recoveries a run started by how they ended.
type recoveryCounts struct {
	Started    int `json:"started"`
	Recovered  int `json:"recovered"`
	Closed     int `json:"closed"`
	Abandoned  int `json:"abandoned"`
	Unfinished int `json:"unfinished"`
}

// summary is the run's last word (kind "summary" in JSON; the text summary
// says the same).
type summary struct {
	Kind string `json:"kind"`
	// Unit is what Count counts: entries (replay) or nodes (sweep).
	Unit  string `json:"unit"`
	Count int    `json:"count"`
	// Actions counts the decisions by action; a dry-run skip that says
	// what would have been done counts under WouldActions instead.
	Actions      map[string]int `json:"actions"`
	WouldActions map[string]int `json:"wouldActions"`
	Rejects      map[string]int `json:"rejects"`
	Recoveries   recoveryCounts `json:"recoveries"`
	BreakerTrips []trip         `json:"breakerTrips"`
	Order        string         `json:"order"`
	ReadOnly     bool           `json:"readOnly"`
	Notes        []string       `json:"notes"`
	ExitCode     int            `json:"exitCode"`
}

// tally counts what the decisions printed say.
type tally struct {
	n       int
	actions map[string]int
	would   map[string]int
	rejects map[string]int
	trips   []trip
}

func newTally() *tally {
	return &tally{actions: map[string]int{}, would: map[string]int{}, rejects: map[string]int{}}
}

func (t *tally) add(l line) {
	if !l.uncounted {
		t.n++
	}
	if w := l.would(); w != "" {
		t.would[w]++
	} else {
		t.actions[l.Action]++
	}
	if l.Action == string(remediate.ActionReject) {
		t.rejects[first(l.rejectCode, "other")]++
	}
	if l.tripped() {
		t.trips = append(t.trips, trip{Zone: l.zone, Time: l.Time, Reason: l.Reason})
	}
}

// summary fills the counted part of a summary.
func (t *tally) summary(unit string) summary {
	s := summary{Kind: kindSummary, Unit: unit, Count: t.n, Actions: t.actions, WouldActions: t.would, Rejects: t.rejects,
		BreakerTrips: t.trips, Notes: []string{}}
	if s.BreakerTrips == nil {
		s.BreakerTrips = []trip{}
	}
	return s
}

// printer prints decisions as they come, then the outcomes, then the summary.
type printer interface {
	print(l line) error
	outcomes(os []outcome) error
	finish(s summary) error
}

// output prints a run: its decisions as they come (counting them), the
// outcomes, the summary.
type output struct {
	p     printer
	tally *tally
}

func (o *output) print(l line) error          { o.tally.add(l); return o.p.print(l) }
func (o *output) outcomes(os []outcome) error { return o.p.outcomes(os) }
func (o *output) finish(s summary) error      { return o.p.finish(s) }

// end ends a run's output: the exit code of what applies (apply, plus a
// person needed for what sum and outs show) goes into the summary, then the
// outcomes and the summary are printed, unless the run failed (runErr).
// It returns the exit outcome and the run's error.
func (o *output) end(sum summary, outs []outcome, apply map[int]string, runErr error) (exit, err error) {
	if msg := needsPerson(sum, outs); msg != "" {
		apply[exitNeedsPerson] = msg
	}
	exit = firstExit(apply)
	sum.ExitCode = exitCodeOf(runErr, exit)
	if runErr != nil {
		return exit, runErr
	}
	if err := o.outcomes(outs); err != nil {
		return exit, fmt.Errorf("write output: %w", err)
	}
	if err := o.finish(sum); err != nil {
		return exit, fmt.Errorf("write output: %w", err)
	}
	return exit, nil
}

// newPrinter returns the output for format; unit names what the text
// summary counts ("entries read", "nodes swept").
func newPrinter(format string, w io.Writer, unit string) *output {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return &output{p: &jsonPrinter{enc: enc}, tally: newTally()}
	}
	return &output{p: &textPrinter{w: w, unit: unit, actWidth: actWidth}, tally: newTally()}
}

// jsonPrinter prints one JSON object per line (JSON Lines): the decisions,
// the outcomes, the summary.
type jsonPrinter struct{ enc *json.Encoder }

func (p *jsonPrinter) print(l line) error { return p.enc.Encode(l) }
func (p *jsonPrinter) outcomes(os []outcome) error {
	for _, o := range os {
		o.Kind = kindOutcome
		if err := p.enc.Encode(o); err != nil {
			return err
		}
	}
	return nil
}
func (p *jsonPrinter) finish(s summary) error { return p.enc.Encode(s) }

// Text layout: fixed columns, so every row is printed as soon as it is
// decided (no buffering until the end to align, unlike a tabwriter) and fits
// textWidth columns. Long nodes and reasons are cut at the end; --format
// json has them whole. An action is never cut: the ACTION column is as wide
// as the longest action the printer is told of (withActions), and a longer
// one pushes the rest of its row right.
const (
	textWidth  = 120
	timeWidth  = 20 // 2026-11-20T03:44:36Z
	nodeWidth  = 28 // zone/name
	workWidth  = 2
	causeWidth = 11 // maintenance
	actWidth   = 8  // recreate, the longest action of a node (internal/policy)
	gap        = "  "

	outcomeWidth = 10 // unfinished
)

// columnLegend explains the text columns; the commands' help prints it.
const columnLegend = `Columns of the text output: TIME the entry's timestamp (UTC); NODE the node
as zone/name; W the TPU worker the entry is about (0 … N-1 of a multi-host
slice; - for the node as a whole); CAUSE maintenance, preemption, hardware,
user or unknown; ACTION what was decided (record, recreate, reset, defer,
skip, reject, prepare, maintain; error when it could not be processed);
REASON why, cut at the end (JSON has it whole). Then, for each recovery the
run started, its OUTCOME (recovered, closed, abandoned, or unfinished with
its next look), and a summary: decisions by action ("would recreate" in a
read-only run), rejects by reason code, breaker trips.
`

// textPrinter prints a table row per line (warnings on the rows below it),
// then the outcomes, then the summary.
type textPrinter struct {
	w        io.Writer
	unit     string
	actWidth int // the ACTION column's width
	header   bool
	err      error
}

// withActions widens the text ACTION column to the longest of actions (an
// instance backend's, internal/vmpolicy: recreateInstances,
// reportHostAsFaulty), so that every row's action shows in full and the
// columns after it stay aligned. JSON output is unchanged.
func (o *output) withActions(actions []string) *output {
	if p, ok := o.p.(*textPrinter); ok {
		for _, a := range actions {
			p.actWidth = max(p.actWidth, utf8.RuneCountInString(a))
		}
	}
	return o
}

func (p *textPrinter) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// row prints cells in columns of the widths, the last cell taking the rest
// of the line, each cut at its end, except the cell of column whole (the
// action), which is shown in full: longer than its column, it pushes the
// cells after it right, and the last cell is cut shorter so that the line
// still fits textWidth. It reports whether the last cell was cut.
func (p *textPrinter) row(widths []int, whole int, cols ...string) (cutLast bool) {
	var b strings.Builder
	used := 0
	for i, w := range widths {
		c := cols[i]
		if i != whole {
			c = cut(c, w)
		}
		c = pad(c, w)
		b.WriteString(c)
		b.WriteString(gap)
		used += utf8.RuneCountInString(c) + len(gap)
	}
	last, room := cols[len(widths)], max(textWidth-used, 1)
	b.WriteString(cut(last, room))
	p.printf("%s\n", strings.TrimRight(b.String(), " "))
	return utf8.RuneCountInString(last) > room
}

// decisionWidths are the widths of the decision table's columns before
// REASON; the action is column decisionAction.
func (p *textPrinter) decisionWidths() []int {
	return []int{timeWidth, nodeWidth, workWidth, causeWidth, p.actWidth}
}

const decisionAction = 4

func (p *textPrinter) print(l line) error {
	if !p.header {
		p.header = true
		p.row(p.decisionWidths(), decisionAction, "TIME", "NODE", "W", "CAUSE", "ACTION", "REASON")
	}
	reason := reasonText(l.Reason)
	if l.Action == string(remediate.ActionReject) {
		reason = strings.TrimPrefix(reason, "rejected: ")
		if l.At != "" {
			reason = filepath.Base(l.At) + ": " + reason
		}
	}
	t := l.Time
	if tt, err := time.Parse(time.RFC3339Nano, t); err == nil {
		t = tt.UTC().Format(time.RFC3339)
	}
	cutReason := p.row(p.decisionWidths(), decisionAction, dash(t), dash(shortNode(l.Node)), dash(l.Worker), dash(l.Cause), l.Action, reason)
	if l.tripped() {
		msg := "breaker tripped: an ERROR record pages a person"
		if l.Error != l.Reason {
			msg += ": " + l.Error
		} else if cutReason {
			msg += "; " + reason // the whole reason, which the row cut
		}
		for _, ln := range wrap(reasonText(msg), textWidth-4) {
			p.printf("    %s\n", ln)
		}
	}
	for _, w := range l.Warnings {
		for _, ln := range wrap("warning: "+oneLine(w), textWidth-4) {
			p.printf("    %s\n", ln)
		}
	}
	return p.err
}

// outcomeWidths are the widths of the outcome table's columns before
// DETAIL; the action is column 1.
func (p *textPrinter) outcomeWidths() []int {
	return []int{nodeWidth, p.actWidth, outcomeWidth, timeWidth}
}

func (p *textPrinter) outcomes(os []outcome) error {
	if len(os) == 0 {
		return p.err
	}
	p.printf("\nRecoveries this run started, as they ended:\n")
	p.row(p.outcomeWidths(), 1, "NODE", "ACTION", "OUTCOME", "TIME", "DETAIL")
	for _, o := range os {
		t := o.Time
		if tt, err := time.Parse(time.RFC3339Nano, t); err == nil {
			t = tt.UTC().Format(time.RFC3339)
		}
		p.row(p.outcomeWidths(), 1, shortNode(o.Node), o.Action, o.Outcome, dash(t), reasonText(o.detail()))
	}
	return p.err
}

func (p *textPrinter) finish(s summary) error {
	p.printf("\n%s: %d\n", p.unit, s.Count)
	p.printf("actions: %s\n", actionCounts(s.Actions, s.WouldActions))
	if len(s.Rejects) > 0 {
		p.printf("rejects: %s\n", counts(s.Rejects, nil))
	}
	if r := s.Recoveries; r.Started > 0 {
		p.printf("recoveries started: %d (%s)\n", r.Started, counts(map[string]int{
			"recovered": r.Recovered, "closed": r.Closed, "abandoned": r.Abandoned, "unfinished": r.Unfinished,
		}, []string{"recovered", "closed", "abandoned", "unfinished"}))
	}
	if n := len(s.BreakerTrips); n > 0 {
		var zones []string
		for _, t := range s.BreakerTrips {
			zones = append(zones, t.Zone)
		}
		p.printf("breaker trips: %d (%s): a person is paged; autoheal status lists open breakers\n", n, strings.Join(zones, ", "))
	}
	if s.Order != "" {
		p.printf("order: %s\n", s.Order)
	}
	if s.ReadOnly {
		p.printf("read-only: decided and recorded, nothing was changed (add --apply to act on the TPU API)\n")
	}
	for _, n := range s.Notes {
		p.printf("%s\n", n)
	}
	return p.err
}

// actionCounts is "record 3, would recreate 5, defer 1": each action in
// order, what would have been done right after it.
func actionCounts(actions, would map[string]int) string {
	m := map[string]int{}
	order := []string{}
	for _, a := range actionOrder {
		order = append(order, a, "would "+a)
	}
	for k, v := range actions {
		m[k] = v
	}
	for k, v := range would {
		m["would "+k] = v
	}
	return counts(m, order)
}

// durationRE finds Go's spelling of a whole number of minutes (30m0s,
// 1h0m0s, 2h30m0s), which text prints as people write it (30m, 1h, 2h30m).
var durationRE = regexp.MustCompile(`\b(?:\d+h)?\d+m0s\b`)

// reasonText is a reason as the text table shows it: on one line, durations
// as people write them. Its first words, which metrics and alerts match
// (breaker open, paused by, dry run, …), are kept as they are.
func reasonText(s string) string {
	return durationRE.ReplaceAllStringFunc(oneLine(s), func(m string) string {
		m = strings.TrimSuffix(m, "0s")
		if strings.HasSuffix(m, "h0m") {
			m = strings.TrimSuffix(m, "0m")
		}
		return m
	})
}

// shortNode is projects/P/locations/Z/nodes/N as Z/N, and a Compute Engine
// slice's name (projects/P/zones/Z/instances/I, …/instanceGroupManagers/M,
// …/resourcePolicies/R) as Z/I; other names as given.
func shortNode(name string) string {
	p := strings.Split(name, "/")
	if len(p) == 6 && p[0] == "projects" && p[2] == "locations" && p[4] == "nodes" {
		return p[3] + "/" + p[5]
	}
	if len(p) == 6 && p[0] == "projects" && p[2] == "zones" && (p[4] == "instances" || p[4] == "instanceGroupManagers" || p[4] == "resourcePolicies") {
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

// shortDuration prints a duration as a person writes it (policy.ShortDuration).
func shortDuration(d time.Duration) string { return policy.ShortDuration(d) }
