// Package report turns tpu-autoheal's decision records into incidents and
// what they cost: per node, from its first event until it is healthy and
// training resumed (or the incident was closed), with each phase's time,
// the outcome, downtime, progress lost and chip-hours lost; and a summary.
//
// Reading (Reader) and grouping (Grouper) are pure over plain values and
// stream: memory grows with the number of incidents, not of records. The
// package never talks to a Google API; cmd/autoheal's report command does
// the I/O.
package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Record is the part of a decision record (internal/record's jsonPayload)
// a report reads.
type Record struct {
	Time            time.Time // the entry's timestamp: when the decision was recorded
	Action          string
	Reason          string
	Node            string
	Zone            string
	Cause           string
	InsertID        string
	EventTime       time.Time // the triggering audit entry's timestamp
	DryRun          bool
	Phase           string
	Generation      int
	Steps           []Step
	Err             string
	AcceleratorType string // the record's, else its spec's
	Chips           int
	Outcome         string
	// Refusal is the kind of a create refusal this record saw ("stockout"
	// or "quota"; "" for none), RefusalZone where.
	Refusal, RefusalZone string
	// Job names the job the node belongs to: its spec's metadata
	// autoheal-job, else its queued resource; "" when neither is known.
	Job string
	// ZoneMovedTo is where a zones: fallback moved the node (its full
	// name in that zone); "" when it did not.
	ZoneMovedTo string
}

// JobMetadataKey is the node metadata key that names the job it belongs
// to (a queued resource or multislice spanning several nodes), for
// `autoheal report --format goodput`.
const JobMetadataKey = "autoheal-job"

// Step is one timed step of a record.
type Step struct {
	Name     string
	Start    time.Time
	Duration time.Duration
	Err      string
}

// End is when the step ended.
func (s Step) End() time.Time { return s.Start.Add(s.Duration) }

// wireStep and wirePayload are the JSON of a record's payload. Times are
// strings so that an empty one is not an error.
type wireStep struct {
	Name            string  `json:"name"`
	Start           string  `json:"start"`
	DurationSeconds float64 `json:"durationSeconds"`
	Error           string  `json:"error"`
}

type wirePayload struct {
	Timestamp       string     `json:"timestamp"` // stdout lines only
	Action          string     `json:"action"`
	Reason          string     `json:"reason"`
	Node            string     `json:"node"`
	Zone            string     `json:"zone"`
	Cause           string     `json:"cause"`
	InsertID        string     `json:"insertId"`
	EventTime       string     `json:"eventTime"`
	DryRun          bool       `json:"dryRun"`
	Phase           string     `json:"phase"`
	Generation      int        `json:"generation"`
	Steps           []wireStep `json:"steps"`
	Error           string     `json:"error"`
	AcceleratorType string     `json:"acceleratorType"`
	Chips           int        `json:"chips"`
	Outcome         string     `json:"outcome"`
	Spec            *struct {
		AcceleratorType string            `json:"acceleratorType"`
		QueuedResource  string            `json:"queuedResource"`
		Metadata        map[string]string `json:"metadata"`
	} `json:"spec"`
	Refusal *struct {
		Kind string `json:"kind"`
		Zone string `json:"zone"`
	} `json:"refusal"`
	ZoneMovedTo string `json:"zoneMovedTo"`
}

// wireObject is one input object: a stdout record line (the payload's
// fields at the top level) or a LogEntry whose jsonPayload is the record.
type wireObject struct {
	wirePayload
	JSONPayload *wirePayload `json:"jsonPayload"`

	// What tells other inputs from records: autoheal replay's --format
	// json output (kind), a LogEntry of the audit log (protoPayload), a
	// Pub/Sub push body (subscription; records have a message too), a
	// CloudEvent (specversion).
	Kind         string          `json:"kind"`
	ProtoPayload json.RawMessage `json:"protoPayload"`
	Subscription string          `json:"subscription"`
	SpecVersion  string          `json:"specversion"`
}

// FormatError is input that cannot be read as records: not JSON, or a
// record without a timestamp. An I/O error is not one.
type FormatError struct{ msg string }

func (e *FormatError) Error() string { return e.msg }

func formatErrorf(format string, args ...any) error {
	return &FormatError{msg: fmt.Sprintf(format, args...)}
}

// Skipped counts the objects a Reader passed over because they are not
// records, by what they are.
type Skipped struct {
	AuditEntries int // TPU or Compute Engine audit log entries (LogEntry, push body, CloudEvent)
	ReplayOutput int // autoheal replay's (or sweep's) --format json objects
	Other        int // objects with no action
}

// Reader reads records from JSON Lines of records (`autoheal replay
// --records`, the function's stdout), JSON Lines of LogEntries (Cloud
// Logging reads), or a JSON array of LogEntries (`gcloud logging read
// --format=json`), one object at a time. Objects that are not records
// (no action) are skipped.
type Reader struct {
	name    string
	br      *bufio.Reader
	dec     *json.Decoder
	array   bool
	n       int // objects read
	done    bool
	skipped Skipped
}

// Skipped says what the Reader passed over so far.
func (r *Reader) Skipped() Skipped { return r.skipped }

// NewReader reads from r; name is used in errors.
func NewReader(r io.Reader, name string) *Reader {
	return &Reader{name: name, br: bufio.NewReaderSize(r, 1<<16)}
}

func (r *Reader) start() error {
	for {
		b, err := r.br.ReadByte()
		if err != nil {
			return err // io.EOF: empty input
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		case '[', '{':
			if err := r.br.UnreadByte(); err != nil {
				return err
			}
		default:
			return formatErrorf("%s: want JSON objects (JSON Lines) or a JSON array of log entries, got %q at the start", r.name, b)
		}
		r.dec = json.NewDecoder(r.br)
		if b == '[' {
			r.array = true
			if _, err := r.dec.Token(); err != nil {
				return err
			}
		}
		return nil
	}
}

// Next returns the next record; io.EOF at the end.
func (r *Reader) Next() (Record, error) {
	if r.done {
		return Record{}, io.EOF
	}
	if r.dec == nil {
		if err := r.start(); err != nil {
			r.done = true
			return Record{}, err
		}
	}
	for {
		if r.array && !r.dec.More() {
			r.done = true
			if _, err := r.dec.Token(); err != nil { // the closing ]
				return Record{}, fmt.Errorf("%s: after %d entries: %v", r.name, r.n, err)
			}
			return Record{}, io.EOF
		}
		var o wireObject
		err := r.dec.Decode(&o)
		if errors.Is(err, io.EOF) && !r.array {
			r.done = true
			return Record{}, io.EOF
		}
		if err != nil {
			r.done = true
			var se *json.SyntaxError
			var te *json.UnmarshalTypeError
			if errors.As(err, &se) || errors.As(err, &te) || errors.Is(err, io.ErrUnexpectedEOF) {
				return Record{}, formatErrorf("%s: object %d (byte %d) is not a record: %v", r.name, r.n+1, r.dec.InputOffset(), err)
			}
			return Record{}, fmt.Errorf("%s: object %d (byte %d): %w", r.name, r.n+1, r.dec.InputOffset(), err)
		}
		r.n++
		switch {
		case o.Kind != "":
			r.skipped.ReplayOutput++
			continue
		case len(o.ProtoPayload) > 0 || o.Subscription != "" || o.SpecVersion != "":
			r.skipped.AuditEntries++
			continue
		}
		p := &o.wirePayload
		ts := o.Timestamp
		if o.JSONPayload != nil {
			p = o.JSONPayload // the entry's timestamp is kept
		}
		if p.Action == "" {
			r.skipped.Other++
			continue
		}
		rec, err := p.record(ts)
		if err != nil {
			r.done = true
			return Record{}, formatErrorf("%s: object %d: %v", r.name, r.n, err)
		}
		return rec, nil
	}
}

func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q is not an RFC 3339 time", field, s)
	}
	return t, nil
}

func (p *wirePayload) record(timestamp string) (Record, error) {
	r := Record{
		Action: p.Action, Reason: p.Reason, Node: p.Node, Zone: p.Zone, Cause: p.Cause,
		InsertID: p.InsertID, DryRun: p.DryRun, Phase: p.Phase, Generation: p.Generation,
		Err: p.Error, AcceleratorType: p.AcceleratorType, Chips: p.Chips, Outcome: p.Outcome,
		ZoneMovedTo: p.ZoneMovedTo,
	}
	if r.AcceleratorType == "" && p.Spec != nil {
		r.AcceleratorType = p.Spec.AcceleratorType
	}
	if p.Spec != nil {
		r.Job = p.Spec.Metadata[JobMetadataKey]
		if r.Job == "" {
			r.Job = p.Spec.QueuedResource
		}
	}
	if p.Refusal != nil {
		r.Refusal, r.RefusalZone = p.Refusal.Kind, p.Refusal.Zone
	}
	var err error
	if r.Time, err = parseTime("timestamp", timestamp); err != nil {
		return Record{}, err
	}
	if r.EventTime, err = parseTime("eventTime", p.EventTime); err != nil {
		return Record{}, err
	}
	if r.Time.IsZero() {
		r.Time = r.EventTime
	}
	if r.Time.IsZero() {
		return Record{}, fmt.Errorf("record %q about %s has no timestamp", p.Action, p.Node)
	}
	for _, s := range p.Steps {
		st, err := parseTime("steps.start", s.Start)
		if err != nil {
			return Record{}, err
		}
		r.Steps = append(r.Steps, Step{Name: s.Name, Start: st, Duration: time.Duration(s.DurationSeconds * float64(time.Second)), Err: s.Error})
	}
	return r, nil
}

// ReadAll reads every record of data (for tests and small inputs).
func ReadAll(data []byte) ([]Record, error) {
	r := NewReader(bytes.NewReader(data), "input")
	var out []Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
}
