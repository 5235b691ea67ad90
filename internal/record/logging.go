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

// Logging writes each record to Cloud Logging log LogName (or the one
// WithLogName names) synchronously
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
	app      string
	timeout  time.Duration
}

var _ remediate.Recorder = (*Logging)(nil)

// Option configures NewLogging and NewStdout.
type Option func(*options)

type options struct {
	fallback io.Writer
	logger   []logging.LoggerOption
	logName  string
	app      string
}

func newOptions(opts []Option) options {
	o := options{fallback: os.Stdout, logName: LogName, app: AppLabelValue}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithFallback sets where records go when Cloud Logging fails (default
// os.Stdout).
func WithFallback(w io.Writer) Option { return func(o *options) { o.fallback = w } }

// WithLoggerOptions passes options to client.Logger, e.g.
// logging.CommonResource to skip resource detection (tests do: detection asks
// the metadata server).
func WithLoggerOptions(opts ...logging.LoggerOption) Option {
	return func(o *options) { o.logger = append(o.logger, opts...) }
}

// WithLogName sets the log (its LOG_ID) NewLogging writes to, default
// LogName: one per deployed instance (AUTOHEAL_RECORD_LOG, which Terraform
// sets to the instance's name), so two instances in one project keep their
// records, metrics and alerts apart. name must be a valid LOG_ID (the
// function's config checks it).
func WithLogName(name string) Option { return func(o *options) { o.logName = name } }

// WithApp sets the value of the app label every record carries, default
// AppLabelValue (AUTOHEAL_APP_LABEL, set by Terraform to the instance's
// name).
func WithApp(app string) Option { return func(o *options) { o.app = app } }

// NewLogging returns a recorder writing through client to LogName (or the
// WithLogName log), labelled with AppLabelValue (or WithApp's value).
func NewLogging(ctx context.Context, client *logging.Client, opts ...Option) *Logging {
	o := newOptions(opts)
	return &Logging{
		logger:   client.Logger(o.logName, o.logger...),
		fallback: NewStdout(o.fallback, WithApp(o.app)),
		app:      o.app,
		timeout:  WriteTimeout,
	}
}

// Entry converts r to the Cloud Logging entry Logging writes, labelled
// app=app.
func Entry(ctx context.Context, r remediate.Record, app string) (logging.Entry, error) {
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
		Labels:    Labels(r, app),
		Payload:   p,
		Trace:     TraceFrom(ctx),
	}, nil
}

// Record writes r to Cloud Logging, or to the fallback when that fails. It
// returns an error only when neither took the record.
func (l *Logging) Record(ctx context.Context, r remediate.Record) error {
	e, err := Entry(ctx, r, l.app)
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
