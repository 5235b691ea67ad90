package record

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// The record format. Terraform's log-based metrics and the README's queries
// depend on these names; change them only together.
//
// Every decision is one log entry. Written through Cloud Logging it goes to
// projects/PROJECT/logs/tpu-autoheal (LogName; a deployed instance's own
// name, WithLogName) as a jsonPayload; written to stdout
// (AUTOHEAL_RECORD_TO=stdout, or when Cloud Logging fails) it is one JSON
// line that Cloud Run's logging agent turns into an entry of
// projects/PROJECT/logs/run.googleapis.com%2Fstdout with the same labels and
// jsonPayload fields. Filter on labels.app="tpu-autoheal" (the instance's
// name, WithApp) to find records from either path.
//
// Severity, by action (an Err overrides: ERROR):
//
//	recreate, reset        NOTICE   the node was (or, dry-run, would be) mutated
//	reject                 WARNING  input was malformed or foreign
//	record, defer, skip    INFO     nothing done, or a guard held; skips are
//	                                 alerted on by metric (labels.action), not severity
//	any action with Err    ERROR    carrying the decision out failed
//	Severity set           that     WARNING: nothing failed, but a person should
//	                                 look (a page token that looped, a paused node left deleted)
//
// Labels (entry labels; "logging.googleapis.com/labels" on stdout), each
// omitted when empty:
//
//	app     always: "tpu-autoheal", or the instance's name (WithApp)
//	node    full resource name projects/P/locations/Z/nodes/N
//	zone    the node's zone
//	action  record|recreate|reset|defer|skip|reject
//	cause   maintenance|preemption|hardware|user|unknown
//
// jsonPayload fields (omitted when empty/zero unless stated):
//
//	message          a one-line summary for people: "ACTION NODE: REASON" (always)
//	action, reason   the decision (always)
//	node, zone, worker, method, cause
//	insertId         the insertId of the audit log entry that triggered it
//	eventTime        that entry's timestamp (RFC 3339)
//	dryRun           true when nothing was mutated on purpose
//	phase            the recovery's phase after this decision
//	generation       the recovery generation
//	spec             on recreate/reset/abandon: the TPU v2 Node (REST JSON), every
//	                 metadata value redacted (RedactSpec); the full spec is in the ledger only
//	steps            [{name, operation, start, durationSeconds, error}]
//	durationSeconds  how long the decision took, ledger and TPU calls included
//	                 (at least the sum of the steps' durations)
//	warnings         [string]
//	error            why carrying it out failed
//	acceleratorType  the node's accelerator type, e.g. v4-128
//	chips            its chip count
//	outcome          recovered|closed|abandoned|failed|prepared|maintained|resumed
//	                 on the record that ended a recovery, an attempt or a maintenance step
//	timeToRecoverSeconds  on the record of a recovery that ended recovered:
//	                 from the recovery's start to the node READY again
//	refusal          on the record of an attempt whose create was refused for
//	                 capacity or quota: {kind: stockout|quota, scope: zone|region,
//	                 zone, message (the API's wording), stockouts, retryAt,
//	                 fallback (stockouts: what metadata autoheal-stockout asked, and
//	                 what is done: wait, zones:…, or why it was refused)}
//	zoneMovedTo      on the records of a recovery a zones: fallback moved: the
//	                 node's full name in the zone it was created in
//	recordError      (stdout only) why Cloud Logging refused the record
const (
	LabelApp    = "app"
	LabelNode   = "node"
	LabelZone   = "zone"
	LabelAction = "action"
	LabelCause  = "cause"

	// AppLabelValue is the default value of the app label on every record;
	// a deployed instance labels its records with its own name (WithApp,
	// AUTOHEAL_APP_LABEL).
	AppLabelValue = "tpu-autoheal"
)

// Severity is the Cloud Logging severity name of a record.
func Severity(r remediate.Record) string {
	if r.Err != "" {
		return "ERROR"
	}
	if r.Severity != "" {
		return r.Severity
	}
	switch r.Action {
	case remediate.ActionRecreate, remediate.ActionReset:
		return "NOTICE"
	case remediate.ActionReject:
		return "WARNING"
	default:
		return "INFO"
	}
}

// Labels are the entry labels of a record written by the instance whose app
// label is app.
func Labels(r remediate.Record, app string) map[string]string {
	l := map[string]string{LabelApp: app}
	for k, v := range map[string]string{
		LabelNode:   r.Node,
		LabelZone:   r.Zone,
		LabelAction: string(r.Action),
		LabelCause:  string(r.Cause),
	} {
		if v != "" {
			l[k] = v
		}
	}
	return l
}

// Message is the record's one-line summary.
func Message(r remediate.Record) string {
	node := r.Node
	if node == "" {
		node = "(unknown node)"
	}
	msg := fmt.Sprintf("%s %s: %s", r.Action, node, r.Reason)
	if r.DryRun {
		msg += " (dry run)"
	}
	if r.Err != "" {
		msg += ": error: " + r.Err
	}
	return msg
}

type stepPayload struct {
	Name            string    `json:"name"`
	Operation       string    `json:"operation,omitempty"`
	Start           time.Time `json:"start"`
	DurationSeconds float64   `json:"durationSeconds"`
	Error           string    `json:"error,omitempty"`
}

// payload is the jsonPayload of a record; see the const block above.
type payload struct {
	Message         string          `json:"message"`
	Action          string          `json:"action"`
	Reason          string          `json:"reason"`
	Node            string          `json:"node,omitempty"`
	Zone            string          `json:"zone,omitempty"`
	Worker          string          `json:"worker,omitempty"`
	Method          string          `json:"method,omitempty"`
	Cause           string          `json:"cause,omitempty"`
	InsertID        string          `json:"insertId,omitempty"`
	EventTime       string          `json:"eventTime,omitempty"`
	DryRun          bool            `json:"dryRun,omitempty"`
	Phase           string          `json:"phase,omitempty"`
	Generation      int             `json:"generation,omitempty"`
	Spec            json.RawMessage `json:"spec,omitempty"`
	Steps           []stepPayload   `json:"steps,omitempty"`
	DurationSeconds float64         `json:"durationSeconds,omitempty"`
	Warnings        []string        `json:"warnings,omitempty"`
	Error           string          `json:"error,omitempty"`
	AcceleratorType string          `json:"acceleratorType,omitempty"`
	Chips           int             `json:"chips,omitempty"`
	Outcome         string          `json:"outcome,omitempty"`
	TimeToRecover   float64         `json:"timeToRecoverSeconds,omitempty"`
	Refusal         *refusalPayload `json:"refusal,omitempty"`
	ZoneMovedTo     string          `json:"zoneMovedTo,omitempty"`
}

// refusalPayload is a create refused for capacity (stockout) or quota.
type refusalPayload struct {
	Kind      string `json:"kind"`
	Scope     string `json:"scope,omitempty"`
	Zone      string `json:"zone,omitempty"`
	Message   string `json:"message"`
	Stockouts int    `json:"stockouts,omitempty"`
	RetryAt   string `json:"retryAt,omitempty"`
	Fallback  string `json:"fallback,omitempty"`
}

// Payload returns the record's jsonPayload fields as a JSON object.
func Payload(r remediate.Record) (map[string]any, error) {
	p := payload{
		Message:    Message(r),
		Action:     string(r.Action),
		Reason:     r.Reason,
		Node:       r.Node,
		Zone:       r.Zone,
		Worker:     r.Worker,
		Method:     r.Method,
		Cause:      string(r.Cause),
		InsertID:   r.InsertID,
		DryRun:     r.DryRun,
		Phase:      string(r.Phase),
		Generation: r.Generation,
		Warnings:   r.Warnings,
		Error:      r.Err,

		AcceleratorType: r.AcceleratorType,
		Chips:           r.Chips,
		Outcome:         string(r.Outcome),
		TimeToRecover:   r.TimeToRecover.Seconds(),
		ZoneMovedTo:     r.ZoneMovedTo,
	}
	if f := r.Refusal; f != nil {
		p.Refusal = &refusalPayload{Kind: f.Kind, Scope: f.Scope, Zone: f.Zone, Message: f.Message, Stockouts: f.Stockouts, Fallback: f.Fallback}
		if !f.RetryAt.IsZero() {
			p.Refusal.RetryAt = f.RetryAt.UTC().Format(time.RFC3339Nano)
		}
	}
	if !r.EventTime.IsZero() {
		p.EventTime = r.EventTime.UTC().Format(time.RFC3339Nano)
	}
	if r.Spec != nil {
		b, err := RedactSpec(r.Spec).MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("record: marshal spec of %s: %w", r.Node, err)
		}
		p.Spec = b
	}
	var total time.Duration
	for _, s := range r.Steps {
		p.Steps = append(p.Steps, stepPayload{
			Name: s.Name, Operation: s.Operation, Start: s.Start.UTC(),
			DurationSeconds: s.Duration.Seconds(), Error: s.Err,
		})
		total += s.Duration
	}
	// The decision's whole time when the handler measured it (ledger reads
	// and writes included); never less than its TPU calls took.
	p.DurationSeconds = max(r.Elapsed, total).Seconds()
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("record: marshal payload: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("record: payload: %w", err)
	}
	return m, nil
}

type traceKey struct{}

// WithTrace returns a context whose records carry trace, a Cloud Trace
// resource name projects/P/traces/TRACE_ID (e.g. from the CloudEvent's
// traceparent).
func WithTrace(ctx context.Context, trace string) context.Context {
	return context.WithValue(ctx, traceKey{}, trace)
}

// TraceFrom returns the trace set by WithTrace, or "".
func TraceFrom(ctx context.Context) string {
	s, _ := ctx.Value(traceKey{}).(string)
	return s
}

// Stdout writes records as one JSON line each, in the structured shape Cloud
// Logging ingests from a Cloud Run / Cloud Functions container's stdout.
// It is safe for concurrent use.
type Stdout struct {
	mu  sync.Mutex
	w   io.Writer
	app string
	now func() time.Time
}

// NewStdout returns a Stdout recorder writing to w (os.Stdout in the
// function), labelled with AppLabelValue or WithApp's value (the other
// options do not apply to it).
func NewStdout(w io.Writer, opts ...Option) *Stdout {
	return &Stdout{w: w, app: newOptions(opts).app, now: time.Now}
}

var _ remediate.Recorder = (*Stdout)(nil)

// Record writes r as one line.
func (s *Stdout) Record(ctx context.Context, r remediate.Record) error {
	return s.write(ctx, r, "")
}

func (s *Stdout) write(ctx context.Context, r remediate.Record, recordErr string) error {
	line, err := StdoutLine(r, s.app, TraceFrom(ctx), recordErr, s.now)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write(line); err != nil {
		return fmt.Errorf("record: write stdout: %w", err)
	}
	return nil
}

// Special keys of Cloud Logging's structured stdout format.
const (
	keySeverity  = "severity"
	keyTimestamp = "timestamp"
	keyLabels    = "logging.googleapis.com/labels"
	keyTrace     = "logging.googleapis.com/trace"
)

// StdoutLine renders r as one structured-logging JSON line (with the final
// newline), labelled app=app. now is used when r.Time is zero.
func StdoutLine(r remediate.Record, app, trace, recordErr string, now func() time.Time) ([]byte, error) {
	m, err := Payload(r)
	if err != nil {
		return nil, err
	}
	ts := r.Time
	if ts.IsZero() {
		ts = now()
	}
	m[keySeverity] = Severity(r)
	m[keyTimestamp] = ts.UTC().Format(time.RFC3339Nano)
	m[keyLabels] = Labels(r, app)
	if trace != "" {
		m[keyTrace] = trace
	}
	if recordErr != "" {
		m["recordError"] = recordErr
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("record: marshal line: %w", err)
	}
	return append(b, '\n'), nil
}
