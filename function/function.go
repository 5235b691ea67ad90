// Package function is the Cloud Function (gen2) adapter: it turns the
// Pub/Sub CloudEvent carrying a TPU audit log entry (or a sweep request)
// into a call of the remediate.Handler, with clients built once from the
// AUTOHEAL_* configuration.
//
// It only wires. It must never decide what to do about a node (remediate
// does), never call log.Fatal or os.Exit, and never do I/O at import time:
// the root package's init registers Handle and nothing else.
package function

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/logging"
	cloudevents "github.com/cloudevents/sdk-go/v2"
	"google.golang.org/api/option"
	storage "google.golang.org/api/storage/v1"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/record"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpulegacy"
	"github.com/tpu-autoheal/autoheal/startup"
)

// EntryPoint is the name the function is registered and deployed under
// (Terraform's entry_point, the buildpack's FUNCTION_TARGET).
const EntryPoint = "AutoHeal"

// MaxStartupScriptBytes bounds the startup script: a GCE/TPU metadata value
// holds at most 256 KiB.
const MaxStartupScriptBytes = 256 << 10

// Function handles events with clients built once.
type Function struct {
	cfg     Config
	handler *remediate.Handler
	now     func() time.Time
	closers []func() error
}

type deps struct {
	store      remediate.Store
	tpu        remediate.TPU
	recorder   remediate.Recorder
	now        func() time.Time
	stdout     io.Writer
	storage    []option.ClientOption
	logging    []option.ClientOption
	loggerOpts []logging.LoggerOption
}

// Option replaces a dependency New would otherwise build (tests, `autoheal
// serve`).
type Option func(*deps)

// WithStore uses s as the ledger instead of Firestore.
func WithStore(s remediate.Store) Option { return func(d *deps) { d.store = s } }

// WithTPU uses t instead of the TPU API client.
func WithTPU(t remediate.TPU) Option { return func(d *deps) { d.tpu = t } }

// WithRecorder uses r instead of the recorder AUTOHEAL_RECORD_TO selects.
func WithRecorder(r remediate.Recorder) Option { return func(d *deps) { d.recorder = r } }

// WithClock sets the clock (default time.Now).
func WithClock(now func() time.Time) Option { return func(d *deps) { d.now = now } }

// WithStdout sets where stdout records go (default os.Stdout).
func WithStdout(w io.Writer) Option { return func(d *deps) { d.stdout = w } }

// WithStorageOptions passes client options to the Cloud Storage client that
// reads a gs:// startup script.
func WithStorageOptions(opts ...option.ClientOption) Option {
	return func(d *deps) { d.storage = append(d.storage, opts...) }
}

// WithLoggingOptions passes client options to the Cloud Logging client, and
// logger options to its Logger.
func WithLoggingOptions(client []option.ClientOption, logger ...logging.LoggerOption) Option {
	return func(d *deps) {
		d.logging = append(d.logging, client...)
		d.loggerOpts = append(d.loggerOpts, logger...)
	}
}

// New builds the function's clients from cfg (which must be valid: use
// LoadConfig) once. Firestore honours FIRESTORE_EMULATOR_HOST.
func New(ctx context.Context, cfg Config, opts ...Option) (*Function, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := deps{now: time.Now, stdout: os.Stdout}
	for _, o := range opts {
		o(&d)
	}
	f := &Function{cfg: cfg, now: d.now}
	fail := func(err error) (*Function, error) {
		_ = f.Close()
		return nil, err
	}

	// The script is read within ctx's deadline; clients live as long as the
	// function instance, not the first request.
	script, err := LoadStartupScript(ctx, cfg.StartupScript, d.storage...)
	if err != nil {
		return fail(err)
	}
	ctx = context.WithoutCancel(ctx)
	rc := cfg.RemediateConfig()
	rc.StartupScript = script

	if d.tpu == nil {
		epOpts, err := tpuapi.EndpointOptions(cfg.TPUEndpoint)
		if err != nil {
			return fail(fmt.Errorf("%s_TPU_ENDPOINT: %w", EnvPrefix, err))
		}
		c, err := tpuapi.NewFromOptions(ctx, epOpts...)
		if err != nil {
			return fail(err)
		}
		// Legacy TPU Nodes go through the v1 API. An endpoint override
		// points at a v2 REST endpoint (a simulator in tests, a private
		// endpoint); there is no v1 gRPC counterpart to it, so then V1
		// stays nil and the Router is the v2 client alone.
		router := tpuapi.Router{V2: c}
		if cfg.TPUEndpoint == "" {
			legacy, err := tpulegacy.NewFromOptions(ctx)
			if err != nil {
				return fail(err)
			}
			f.closers = append(f.closers, legacy.Close)
			router.V1 = legacy
		}
		d.tpu = router
	}
	if d.store == nil {
		fc, err := firestore.NewClientWithDatabase(ctx, cfg.Project, cfg.FirestoreDatabase)
		if err != nil {
			return fail(fmt.Errorf("firestore client for database %s: %w", cfg.FirestoreDatabase, err))
		}
		f.closers = append(f.closers, fc.Close)
		d.store = ledger.NewFirestore(fc)
	}
	if d.recorder == nil {
		d.recorder = f.newRecorder(ctx, cfg, d)
	}
	f.handler = &remediate.Handler{
		TPU:      d.tpu,
		Store:    d.store,
		Recorder: d.recorder,
		Config:   rc,
		Now:      d.now,
	}
	return f, nil
}

// newRecorder builds the recorder RECORD_TO selects. A Cloud Logging client
// that cannot be built falls back to stdout, said once on stderr: records
// are never lost for want of a client.
func (f *Function) newRecorder(ctx context.Context, cfg Config, d deps) remediate.Recorder {
	if cfg.RecordTo == RecordToStdout {
		return record.NewStdout(d.stdout)
	}
	lc, err := logging.NewClient(ctx, "projects/"+cfg.Project, d.logging...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tpu-autoheal: cloud logging client: %v; writing records to stdout\n", err)
		return record.NewStdout(d.stdout)
	}
	lc.OnError = func(err error) { fmt.Fprintf(os.Stderr, "tpu-autoheal: cloud logging: %v\n", err) }
	f.closers = append(f.closers, lc.Close)
	return record.NewLogging(ctx, lc, record.WithFallback(d.stdout), record.WithLoggerOptions(d.loggerOpts...))
}

// Close releases the clients New built.
func (f *Function) Close() error {
	var errs []error
	for i := len(f.closers) - 1; i >= 0; i-- {
		errs = append(errs, f.closers[i]())
	}
	f.closers = nil
	return errors.Join(errs...)
}

// Config is the configuration the function was built with.
func (f *Function) Config() Config { return f.cfg }

// HandleCloudEvent handles one google.cloud.pubsub.topic.v1.messagePublished
// CloudEvent: a sweep request runs a sweep; a log entry is parsed and
// handled. It returns an error only when a retry can help (Pub/Sub then
// redelivers): malformed, foreign and stale input is recorded and
// acknowledged.
func (f *Function) HandleCloudEvent(ctx context.Context, e cloudevents.Event) error {
	if tr := traceOf(e, f.cfg.Project); tr != "" {
		ctx = record.WithTrace(ctx, tr)
	}
	data := e.Data()
	payload, _, err := events.Unwrap(data)
	if err != nil {
		f.handler.Reject(ctx, data, err)
		return nil
	}
	if events.IsSweep(payload) {
		res, err := f.handler.Sweep(ctx, remediate.SweepOptions{
			Projects: f.cfg.Projects, Zones: f.cfg.Zones, Budget: f.cfg.SweepBudget,
		})
		if err != nil {
			// A sweep is idempotent: redelivery runs it again.
			return fmt.Errorf("sweep (%d records before the failure): %w", len(res.Records), err)
		}
		return nil
	}
	ev, err := events.Parse(payload, events.Options{AllowedProjects: f.cfg.Projects})
	if err != nil {
		// events.Parse returns a *events.RejectError for every bad
		// input; anything else is treated the same: never retried forever.
		f.handler.Reject(ctx, data, err)
		return nil
	}
	if age := f.now().Sub(ev.Time); age > f.cfg.MaxEventAge {
		return f.recordStale(ctx, ev)
	}
	if _, err := f.handler.Handle(ctx, ev); err != nil {
		// Handle returns only transient failures.
		return fmt.Errorf("handle %s of %s: %w", ev.InsertID, ev.Node.Name(), err)
	}
	return nil
}

// recordStale records an entry older than MaxEventAge as a skip: it is well
// formed (not a reject) and may well be about a node that still needs help,
// but a day-old event is a backlog being drained, not a signal; the sweep
// looks at every opted-in node on its own.
func (f *Function) recordStale(ctx context.Context, ev events.Event) error {
	f.handler.Skip(ctx, ev, "stale: older than "+shortDuration(f.cfg.MaxEventAge))
	return nil
}

// shortDuration prints 24h for 24h0m0s and 1h30m for 1h30m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

var traceparentRE = regexp.MustCompile(`^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$`)

// traceOf is the Cloud Trace resource name from the event's W3C
// traceparent extension (Eventarc sets it), or "".
func traceOf(e cloudevents.Event, project string) string {
	tp, ok := e.Extensions()["traceparent"].(string)
	if !ok {
		return ""
	}
	m := traceparentRE.FindStringSubmatch(tp)
	if m == nil {
		return ""
	}
	return "projects/" + project + "/traces/" + m[1]
}

// LoadStartupScript returns the script AUTOHEAL_STARTUP_SCRIPT names: a
// gs://BUCKET/OBJECT read through the Cloud Storage JSON API (needs
// storage.objects.get), a local path, or, when empty, the embedded default
// startup.Script.
func LoadStartupScript(ctx context.Context, src string, opts ...option.ClientOption) (string, error) {
	var (
		b   []byte
		err error
	)
	switch {
	case src == "":
		return startup.Script, nil
	case strings.HasPrefix(src, "gs://"):
		b, err = readGCS(ctx, src, opts...)
	default:
		b, err = readLocal(src)
	}
	if err != nil {
		return "", fmt.Errorf("%s_STARTUP_SCRIPT=%q: %w", EnvPrefix, src, err)
	}
	if len(b) == 0 {
		return "", fmt.Errorf("%s_STARTUP_SCRIPT=%q: empty script", EnvPrefix, src)
	}
	return string(b), nil
}

func readLocal(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return readCapped(fh)
}

func readGCS(ctx context.Context, uri string, opts ...option.ClientOption) ([]byte, error) {
	m := gcsRE.FindStringSubmatch(uri)
	if m == nil {
		return nil, errors.New("want gs://BUCKET/OBJECT")
	}
	svc, err := storage.NewService(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("storage client: %w", err)
	}
	resp, err := svc.Objects.Get(m[1], m[2]).Context(ctx).Download()
	if err != nil {
		return nil, fmt.Errorf("read object: %w", err)
	}
	defer resp.Body.Close()
	return readCapped(resp.Body)
}

func readCapped(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxStartupScriptBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxStartupScriptBytes {
		return nil, fmt.Errorf("script larger than %d bytes (the metadata value limit)", MaxStartupScriptBytes)
	}
	return b, nil
}

// Permissions are the IAM permissions the deployed function needs: the union
// of what its TPU, ledger and record clients call, plus storage.objects.get
// for a gs:// startup script. Sorted, without duplicates; Terraform's custom
// role is checked against it.
func Permissions() []string {
	seen := map[string]bool{"storage.objects.get": true}
	for _, list := range [][]string{tpuapi.Permissions, ledger.Permissions, record.Permissions} {
		for _, p := range list {
			seen[p] = true
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
