// Package logsource reads log entries from Cloud Logging for
// `autoheal replay --from-logging`, and hands each one on as LogEntry JSON in
// the shape `gcloud logging read --format=json` prints, so events.Parse reads
// it exactly as it reads a saved file.
//
// It only reads. It must never write, delete or change logs, sinks or
// metrics, and it never interprets the entries it reads.
//
// It uses the Logging API's generated client (cloud.google.com/go/logging/apiv2,
// the same ListLogEntries call logadmin makes) rather than logadmin itself:
// logadmin's Entry drops receiveTimestamp, unescapes logName
// ("cloudaudit.googleapis.com%2Fsystem_event" becomes ".../system_event") and
// adds a hidden 24-hour filter, all of which would make a replayed entry differ
// from the one the sink delivered. The raw LogEntry proto, printed with
// protojson, is field for field the JSON gcloud prints.
package logsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	logging "cloud.google.com/go/logging/apiv2"
	logpb "cloud.google.com/go/logging/apiv2/loggingpb"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	_ "google.golang.org/genproto/googleapis/cloud/audit" // registers AuditLog for protoPayload
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

// Permissions are the IAM permissions reading needs (the CLI's user, not the
// function). Reading audit logs other than Admin Activity and System Event
// would also need logging.privateLogEntries.list.
var Permissions = []string{"logging.logEntries.list"}

// Options select the entries to read.
type Options struct {
	Project string // the project whose logs are read (required)
	// Filter is a Cloud Logging query; "" means events.SinkFilter.
	Filter string
	// Since and Until, when set, add timestamp>="Since" and
	// timestamp<"Until" clauses to the filter.
	Since, Until time.Time
	// NewestFirst orders by timestamp descending (gcloud's default);
	// the default is oldest first, the order events happened in.
	NewestFirst bool
	// PageSize is entries per ListLogEntries call (0 = 1000).
	PageSize int32
	// Progress, when set, is called after each entry with the number of
	// entries read so far.
	Progress func(read int)
}

// Query returns the filter Read sends: base (or events.SinkFilter when empty)
// with the time range appended as AND clauses. In the Logging query language
// OR binds tighter than AND, so appending clauses never changes what base
// selects.
func Query(base string, since, until time.Time) string {
	if base == "" {
		base = events.SinkFilter
	}
	q := base
	if !since.IsZero() {
		q += fmt.Sprintf(` AND timestamp>="%s"`, since.UTC().Format(time.RFC3339Nano))
	}
	if !until.IsZero() {
		q += fmt.Sprintf(` AND timestamp<"%s"`, until.UTC().Format(time.RFC3339Nano))
	}
	return q
}

// Source reads from one Logging API endpoint.
type Source struct {
	client *logging.Client
}

// New connects to the Logging API (Application Default Credentials unless
// opts say otherwise).
func New(ctx context.Context, opts ...option.ClientOption) (*Source, error) {
	c, err := logging.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("logsource: logging client: %w", err)
	}
	return &Source{client: c}, nil
}

// Close releases the connection.
func (s *Source) Close() error { return s.client.Close() }

// Read calls fn with each matching entry's JSON, in order. It stops at the
// first error from the API or from fn.
func (s *Source) Read(ctx context.Context, o Options, fn func(entry []byte) error) error {
	if o.Project == "" {
		return errors.New("logsource: no project")
	}
	req := &logpb.ListLogEntriesRequest{
		ResourceNames: []string{"projects/" + o.Project},
		Filter:        Query(o.Filter, o.Since, o.Until),
		OrderBy:       "timestamp asc",
		PageSize:      o.PageSize,
	}
	if o.NewestFirst {
		req.OrderBy = "timestamp desc"
	}
	if req.PageSize == 0 {
		req.PageSize = 1000
	}
	it := s.client.ListLogEntries(ctx, req)
	for n := 0; ; {
		e, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("logsource: list entries of project %s (after %d): %w", o.Project, n, err)
		}
		b, err := EntryJSON(e)
		if err != nil {
			return err
		}
		if err := fn(b); err != nil {
			return err
		}
		n++
		if o.Progress != nil {
			o.Progress(n)
		}
	}
}

// JSONLines returns a reader of the matching entries as JSON Lines (one
// entry a line), which events.NewReader reads. Closing it stops the read.
func (s *Source) JSONLines(ctx context.Context, o Options) io.ReadCloser {
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	go func() {
		err := s.Read(ctx, o, func(entry []byte) error {
			_, err := pw.Write(append(entry, '\n'))
			return err
		})
		pw.CloseWithError(err)
	}()
	return &pipeReader{PipeReader: pr, cancel: cancel}
}

type pipeReader struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (p *pipeReader) Close() error {
	p.cancel()
	return p.PipeReader.Close()
}

// EntryJSON prints e as gcloud does: the LogEntry's JSON mapping, logName
// still escaped, protoPayload with its "@type". A protoPayload whose type is
// not linked in is printed as {"@type": ...} alone (events rejects it) rather
// than failing the whole read.
func EntryJSON(e *logpb.LogEntry) ([]byte, error) {
	b, err := protojson.Marshal(e)
	if err == nil {
		return b, nil
	}
	pp := e.GetProtoPayload()
	if pp == nil {
		return nil, fmt.Errorf("logsource: entry %s: %w", e.GetInsertId(), err)
	}
	c := proto.Clone(e).(*logpb.LogEntry)
	c.Payload = nil
	b, err2 := protojson.Marshal(c)
	if err2 != nil {
		return nil, fmt.Errorf("logsource: entry %s: %w", e.GetInsertId(), err2)
	}
	return spliceField(b, "protoPayload", fmt.Sprintf(`{"@type":%q}`, pp.GetTypeUrl())), nil
}

// spliceField adds "key":raw to the JSON object obj.
func spliceField(obj []byte, key, raw string) []byte {
	field := fmt.Sprintf("%q:%s", key, raw)
	trimmed := obj[:len(obj)-1] // drop '}'
	for len(trimmed) > 0 && (trimmed[len(trimmed)-1] == ' ' || trimmed[len(trimmed)-1] == '\n') {
		trimmed = trimmed[:len(trimmed)-1]
	}
	out := append([]byte{}, trimmed...)
	if out[len(out)-1] != '{' {
		out = append(out, ',')
	}
	return append(append(out, field...), '}')
}
