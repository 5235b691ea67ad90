package record

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"cloud.google.com/go/logging"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// WriteTimeout bounds one synchronous write to Cloud Logging; past it the
// record goes to the fallback.
const WriteTimeout = 10 * time.Second

// Logging writes each record to Cloud Logging log LogName synchronously
// (Logger.LogSync: one WriteLogEntries call per record). A function instance
// may be throttled or stopped as soon as it answers, so buffered entries
// (Logger.Log) could be lost; records are one per decision — a few per event,
// one per swept node — so one call each is cheap (Cloud Logging bills bytes
// ingested, not calls) and well within the write quota. When the write fails
// the record goes to the fallback writer (stdout) with a recordError field.
// It is safe for concurrent use.
type Logging struct {
	logger   *logging.Logger
	fallback *Stdout
	timeout  time.Duration
}

var _ remediate.Recorder = (*Logging)(nil)

// Option configures NewLogging.
type Option func(*loggingOptions)

type loggingOptions struct {
	fallback io.Writer
	logger   []logging.LoggerOption
}

// WithFallback sets where records go when Cloud Logging fails (default
// os.Stdout).
func WithFallback(w io.Writer) Option { return func(o *loggingOptions) { o.fallback = w } }

// WithLoggerOptions passes options to client.Logger, e.g.
// logging.CommonResource to skip resource detection (tests do: detection asks
// the metadata server).
func WithLoggerOptions(opts ...logging.LoggerOption) Option {
	return func(o *loggingOptions) { o.logger = append(o.logger, opts...) }
}

// NewLogging returns a recorder writing through client to LogName.
func NewLogging(ctx context.Context, client *logging.Client, opts ...Option) *Logging {
	o := loggingOptions{fallback: os.Stdout}
	for _, opt := range opts {
		opt(&o)
	}
	return &Logging{
		logger:   client.Logger(LogName, o.logger...),
		fallback: NewStdout(o.fallback),
		timeout:  WriteTimeout,
	}
}

// Entry converts r to the Cloud Logging entry Logging writes.
func Entry(ctx context.Context, r remediate.Record) (logging.Entry, error) {
	p, err := Payload(r)
	if err != nil {
		return logging.Entry{}, err
	}
	ts := r.Time
	if ts.IsZero() {
		ts = time.Now()
	}
	return logging.Entry{
		Timestamp: ts,
		Severity:  logging.ParseSeverity(Severity(r)),
		Labels:    Labels(r),
		Payload:   p,
		Trace:     TraceFrom(ctx),
	}, nil
}

// Record writes r to Cloud Logging, or to the fallback when that fails. It
// returns an error only when neither took the record.
func (l *Logging) Record(ctx context.Context, r remediate.Record) error {
	e, err := Entry(ctx, r)
	if err == nil {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
		// rest: logging.entries.write
		err = l.logger.LogSync(wctx, e)
		cancel()
		if err == nil {
			return nil
		}
		err = fmt.Errorf("cloud logging: %w", err)
	}
	if ferr := l.fallback.write(ctx, r, err.Error()); ferr != nil {
		return fmt.Errorf("record %s %s: %w; fallback: %w", r.Action, r.Node, err, ferr)
	}
	return nil
}
