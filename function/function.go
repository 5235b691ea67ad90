// Package function is the Cloud Function (gen2) adapter: it turns the
// Pub/Sub delivery carrying a TPU audit log entry (or a sweep request, or
// a follow kick, kick.go) into a call of the remediate.Handler, with
// clients built once from the AUTOHEAL_* configuration.
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
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/logging"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	storage "google.golang.org/api/storage/v1"

	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/policy"
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
	follow  time.Duration // SweepOptions.Follow: cfg.SweepFollow on the wall clock
	diag    *slog.Logger
	cfg     Config
	handler *remediate.Handler
	now     func() time.Time
	closers []func() error
	control ControlStore  // control.go: the sweep gate and the kicks' nonces; nil = none
	ignored controlCounts // control.go
	// instances is the instance path (instance.go): Compute Engine TPU VMs.
	instances *computevm.Recovery
}

type deps struct {
	store       Ledger
	tpu         remediate.TPU
	tpuBuilt    bool // New built tpu (the TPU API clients), not WithTPU
	recorder    remediate.Recorder
	now         func() time.Time
	stdout      io.Writer
	clockSet    bool // WithClock: a test's clock (sweeps then do not follow)
	diag        io.Writer
	storage     []option.ClientOption
	logging     []option.ClientOption
	loggerOpts  []logging.LoggerOption
	maint       remediate.MaintenanceTPU // maintenance.go
	notices     remediate.NoticeStore    // maintenance.go
	incidents   remediate.IncidentStore  // resume.go
	kicker      Kicker                   // kick.go
	pubsub      []option.ClientOption    // kick.go
	trust       trustDeps                // trust.go
	callTimeout time.Duration            // WithCallTimeout
	compute     computevm.Instances      // instance.go
	vmStore     computevm.Store          // instance.go
}

// Option replaces a dependency New would otherwise build (tests, `autoheal
// serve`).
type Option func(*deps)

// Ledger is the ledger the function runs on: the engine's (a Store with
// the follower lease and the batched read, remediate.Ledger) and the
// control messages' (ControlStore). ledger.Memory and ledger.Firestore are
// one; it is one type so that no capability is found by type assertion.
type Ledger interface {
	remediate.Ledger
	ControlStore
}

var (
	_ Ledger = (*ledger.Memory)(nil)
	_ Ledger = (*ledger.Firestore)(nil)
)

// WithStore uses s as the ledger instead of Firestore.
func WithStore(s Ledger) Option { return func(d *deps) { d.store = s } }

// WithTPU uses t instead of the TPU API client.
func WithTPU(t remediate.TPU) Option { return func(d *deps) { d.tpu = t } }

// WithRecorder uses r instead of the recorder AUTOHEAL_RECORD_TO selects.
func WithRecorder(r remediate.Recorder) Option { return func(d *deps) { d.recorder = r } }

// WithClock sets the clock (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(d *deps) { d.now, d.clockSet = now, true }
}

// WithDiagnostics sets where the function's diagnostic lines go (default
// stderr).
func WithDiagnostics(w io.Writer) Option { return func(d *deps) { d.diag = w } }

// WithCallTimeout bounds each TPU call (default remediate.DefaultCallTimeout,
// 30 s): a test of a call that hangs past its deadline need not wait 30 s.
func WithCallTimeout(d time.Duration) Option { return func(x *deps) { x.callTimeout = d } }

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
	f := &Function{cfg: cfg, now: d.now, diag: newDiag(os.Stderr, cfg.AppLabel), follow: cfg.SweepFollow}
	if d.clockSet {
		// A test's clock: following waits on real timers for looks that
		// are due on that clock, so it would wait in vain.
		f.follow = 0
	}
	if d.diag != nil {
		f.diag = newDiag(d.diag, cfg.AppLabel)
	}
	fail := func(err error) (*Function, error) {
		_ = f.Close()
		return nil, err
	}

	// The script is read within ctx's deadline; clients live as long as the
	// function instance, not the first request.
	script, err := LoadStartupScript(ctx, cfg.StartupScript, cfg.StartupScriptGeneration, d.storage...)
	if err != nil {
		return fail(err)
	}
	ctx = context.WithoutCancel(ctx)
	rc := cfg.RemediateConfig()
	// The startup-script policy is remediate's (StartupScriptFor): an
	// explicitly configured script wins; else a node that opted into the
	// resume script by carrying autoheal-train-cmd gets it; else the node
	// keeps its own.
	rc.StartupScript = script
	rc.ResumeScript = startup.Script
	rc.ResumeKeys = []string{startup.MetadataTrainCmd}

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
		d.tpu, d.tpuBuilt = router, true
	}
	if d.store == nil {
		fc, err := firestore.NewClientWithDatabase(ctx, cfg.Project, cfg.FirestoreDatabase)
		if err != nil {
			return fail(fmt.Errorf("firestore client for database %s: %w", cfg.FirestoreDatabase, err))
		}
		f.closers = append(f.closers, fc.Close)
		// The ledger's clock is the function's: an event mark's expiry is
		// judged on the same clock that dated it.
		d.store = ledger.NewFirestore(fc, ledger.WithHoldTTL(cfg.HoldTTL), ledger.WithClock(d.now))
		if d.vmStore == nil {
			d.vmStore = computevm.NewFirestore(fc, "") // instance.go
		}
		if d.notices == nil {
			d.notices = ledger.NewFirestoreNotices(fc) // maintenance.go
		}
		if d.incidents == nil {
			d.incidents = ledger.NewFirestoreIncidents(fc) // resume.go
		}
	}
	if d.recorder == nil {
		d.recorder = f.newRecorder(ctx, cfg, d)
	}
	f.control = d.store // control.go
	rd := remediate.Deps{
		TPU: d.tpu, Recorder: d.recorder, Clock: d.now, Log: f.diag,
		// d.callTimeout: a test's bound on each TPU call (WithCallTimeout);
		// 0 = remediate.DefaultCallTimeout.
		CallTimeout: d.callTimeout,
	}.WithLedger(d.store)
	if err := wireMaintenance(ctx, cfg, &d, &rd); err != nil { // maintenance.go
		return fail(err)
	}
	wireResume(&d, &rd)                                    // resume.go
	if err := f.wireTrust(ctx, cfg, &d, &rd); err != nil { // trust.go
		return fail(err)
	}
	// kick.go: follow kicks, when a follow run has a window to follow in.
	if cfg.SweepFollow > 0 {
		switch {
		case d.kicker != nil:
			rd.Kicker = nonceKicker{f: f, k: d.kicker}
		case cfg.KickTopic != "":
			k := newPubSubKicker(cfg.KickTopic, d.pubsub)
			f.closers = append(f.closers, k.Close)
			rd.Kicker = nonceKicker{f: f, k: k}
		}
	}
	if f.handler, err = remediate.New(rd, rc); err != nil {
		return fail(err)
	}
	// instance.go: the instance path (Compute Engine TPU VMs), when on.
	if f.instances, err = newInstances(ctx, cfg, &d, rc, f.handler); err != nil {
		return fail(err)
	}
	return f, nil
}

// newRecorder builds the recorder RECORD_TO selects. A Cloud Logging client
// that cannot be built falls back to stdout, said once on stderr: records
// are never lost for want of a client.
func (f *Function) newRecorder(ctx context.Context, cfg Config, d deps) remediate.Recorder {
	app := record.WithApp(cfg.AppLabel)
	if cfg.RecordTo == RecordToStdout {
		return record.NewStdout(d.stdout, app)
	}
	lc, err := logging.NewClient(ctx, "projects/"+cfg.Project, d.logging...)
	if err != nil {
		f.diag.Warn("cloud logging client failed; writing records to stdout", "error", err.Error())
		return record.NewStdout(d.stdout, app)
	}
	lc.OnError = func(err error) { f.diag.Warn("cloud logging write failed", "error", err.Error()) }
	f.closers = append(f.closers, lc.Close)
	return record.NewLogging(ctx, lc, app, record.WithLogName(cfg.RecordLog),
		record.WithFallback(d.stdout), record.WithLoggerOptions(d.loggerOpts...))
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

// MaxBodyBytes bounds one request body. A TPU audit log entry is a few KiB
// (Cloud Logging refuses entries over 256 KiB, events.DefaultMaxEntryBytes),
// so a Pub/Sub push body carrying one in base64 stays well under this; a
// larger body is never read further, let alone decoded: it is acknowledged
// with an `oversized` reject record (a redelivery would be just as large).
const MaxBodyBytes = 512 << 10

// requestTimeout bounds the work of one request. The work is detached from
// the request's own context: when Pub/Sub gives up waiting (its ack
// deadline), a TPU call or ledger write under way is not cut in half; every
// step is saved before it is made, so a redelivery finishes whatever this
// request could not.
const requestTimeout = 5 * time.Minute

// ServeHTTP is the function's HTTP entry point: it reads the request body
// itself (at most MaxBodyBytes, through http.MaxBytesReader) and accepts
// every form a delivery takes — a Pub/Sub push body, a binary-mode
// CloudEvent (ce-* headers, the push body as its data), a structured-mode
// CloudEvent (application/cloudevents+json), or a bare LogEntry. It answers
// 204 when the delivery is done with (handled, recorded, or rejected as
// malformed, foreign, stale or oversized) and 500 when a retry can help, so
// Pub/Sub redelivers only then.
//
// It replaces the CloudEvent signature, whose HTTP receive path in
// cloudevents/sdk-go can leave a request unanswered forever when clients
// give up mid-request (sdk-go issues #1224, #1332).
func (f *Function) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "tpu-autoheal accepts POST only", http.StatusMethodNotAllowed)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), requestTimeout)
	defer cancel()
	if tr := traceOfHeader(r.Header, f.cfg.Project); tr != "" {
		ctx = record.WithTrace(ctx, tr)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		f.handler.Reject(ctx, body, &events.RejectError{Code: "oversized", Field: "body",
			Reason: fmt.Sprintf("oversized: over %d bytes, not read further; acknowledged, never retried", MaxBodyBytes)})
		w.WriteHeader(http.StatusNoContent)
		return
	case err != nil:
		// The client went away mid-body: nobody is waiting for the answer,
		// and Pub/Sub redelivers what it did not see acknowledged.
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := f.HandleMessage(ctx, body); err != nil {
		// 500, not 503: a nack either way, but Pub/Sub's push backs off
		// much further on 503 (seen on the emulator: four deliveries in
		// eight minutes instead of five within a minute), which would
		// delay the retry and the dead-lettering a transient failure needs.
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// HandleMessage handles the body of one delivery, in any form ServeHTTP
// accepts: a follow kick follows the unfinished recoveries (always
// acknowledged); a sweep request runs a sweep; a log entry is parsed and
// handled, and kicks a follower when it left a recovery waiting.
// It returns an error only when a retry can help (Pub/Sub then redelivers):
// malformed, foreign and stale input is recorded and acknowledged.
func (f *Function) HandleMessage(ctx context.Context, data []byte) error {
	// One decode of the delivery (events.Decode): which of the three it
	// is, and the entry. Now: an entry dated more than
	// events.MaxFutureSkew ahead is rejected (future-timestamp), so a
	// forged far-future entry cannot pass the stale check and put a
	// permanent hold on a node.
	d, err := events.Decode(data, events.Options{AllowedProjects: f.cfg.Projects, Now: f.now()})
	if err != nil {
		// Decode returns a *events.RejectError for every bad input;
		// anything else is treated the same: never retried forever.
		f.handler.Reject(ctx, data, err)
		return nil
	}
	switch d.Kind {
	case events.DeliveryFollow:
		// A follow kick (kick.go): always acknowledged; acted on only with
		// a nonce we issued (control.go).
		if f.followAdmitted(ctx, d.Nonce) {
			f.handleFollow(ctx)
		}
		return nil
	case events.DeliverySweep:
		return f.handleSweep(ctx, data)
	}
	ev := d.Event
	if age := f.now().Sub(ev.Time); age > f.cfg.MaxEventAge {
		return f.recordStale(ctx, ev)
	}
	return events.Route(ev, events.Routes{
		Evidence: func(ev events.Event) error {
			// Who created or deleted a node: evidence, kept for the
			// node's unfinished recovery, recorded and acknowledged,
			// never acted on by itself. Only a ledger failure is retried.
			if _, err := f.handler.Evidence(ctx, ev); err != nil {
				return fmt.Errorf("evidence %s of %s: %w", ev.InsertID, ev.Node.Name(), err)
			}
			return nil
		},
		// A Compute Engine instance that is not a Cloud TPU worker: the
		// instance path (instance.go).
		Instance: func(ev events.Event) error { return f.handleInstance(ctx, ev) },
		// A Compute Engine entry about a TPU worker VM names no node:
		// look at the opted-in nodes of its project and zone now.
		ZoneHint: func(ev events.Event) error { return f.handleZoneHint(ctx, ev) },
		Node: func(ev events.Event) error {
			r, err := f.handler.Handle(ctx, ev)
			if err != nil {
				// Handle returns only transient failures.
				return fmt.Errorf("handle %s of %s: %w", ev.InsertID, ev.Node.Name(), err)
			}
			f.handler.KickAfter(ctx, r) // the kick policy (remediate/kick.go)
			return nil
		},
	})
}

// handleSweep runs the sweep a sweep request asks for, unless the sweep
// gate says one ran too recently (control.go).
func (f *Function) handleSweep(ctx context.Context, data []byte) error {
	id, act, err := f.beginSweep(ctx, data) // control.go
	if err != nil {
		return fmt.Errorf("sweep gate: %w", err)
	}
	if !act {
		return nil
	}
	res, err := f.handler.Sweep(ctx, remediate.SweepOptions{
		Projects: f.cfg.Projects, Zones: f.cfg.Zones, Budget: f.cfg.SweepBudget,
		Follow: f.follow,
	})
	if err != nil {
		// A sweep is idempotent: redelivery runs it again.
		f.diag.Error("sweep failed", "event", SweepEvent, "records", len(res.Records), "error", err.Error())
		return fmt.Errorf("sweep (%d records before the failure): %w", len(res.Records), err)
	}
	f.endSweep(ctx, id)
	f.diag.Info(fmt.Sprintf("sweep: %d opted-in nodes looked at, %d records", res.Nodes, len(res.Records)),
		"event", SweepEvent, "nodes", res.Nodes, "records", len(res.Records), "complete", res.Complete, "unlisted", len(res.Errors))
	f.sweepInstances(ctx)               // instance.go
	f.handler.KickChain(ctx, res.Chain) // kick.go
	return nil
}

// recordStale records an entry older than MaxEventAge as a skip: it is well
// formed (not a reject) and may well be about a node that still needs help,
// but a day-old event is a backlog being drained, not a signal; the sweep
// looks at every opted-in node on its own.
func (f *Function) recordStale(ctx context.Context, ev events.Event) error {
	f.handler.Skip(ctx, ev, "stale: older than "+policy.ShortDuration(f.cfg.MaxEventAge))
	return nil
}

var traceparentRE = regexp.MustCompile(`^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$`)

// traceOfHeader is the Cloud Trace resource name from the request's W3C
// trace context (traceparent, or ce-traceparent on a binary-mode
// CloudEvent), or "".
func traceOfHeader(h http.Header, project string) string {
	for _, k := range []string{"Traceparent", "Ce-Traceparent"} {
		if m := traceparentRE.FindStringSubmatch(h.Get(k)); m != nil {
			return "projects/" + project + "/traces/" + m[1]
		}
	}
	return ""
}

// LoadStartupScript returns the script AUTOHEAL_STARTUP_SCRIPT names: a
// gs://BUCKET/OBJECT read at exactly generation (AUTOHEAL_STARTUP_SCRIPT_
// GENERATION, which Terraform pins; required) through the Cloud Storage
// JSON API (needs storage.objects.get), a local path, or, when empty, ""
// (no script configured: a recreated node keeps its own, or gets the
// embedded resume script when it carries autoheal-train-cmd).
func LoadStartupScript(ctx context.Context, src string, generation int64, opts ...option.ClientOption) (string, error) {
	var (
		b   []byte
		err error
	)
	switch {
	case src == "":
		return "", nil
	case strings.HasPrefix(src, "gs://"):
		b, err = readGCS(ctx, src, generation, opts...)
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

func readGCS(ctx context.Context, uri string, generation int64, opts ...option.ClientOption) ([]byte, error) {
	m := gcsRE.FindStringSubmatch(uri)
	if m == nil {
		return nil, errors.New("want gs://BUCKET/OBJECT")
	}
	if generation <= 0 {
		return nil, fmt.Errorf("no %s_STARTUP_SCRIPT_GENERATION: a gs:// script is read at exactly the generation Terraform pinned; run terraform apply again", EnvPrefix)
	}
	svc, err := storage.NewService(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("storage client: %w", err)
	}
	// rest: storage.objects.get
	resp, err := svc.Objects.Get(m[1], m[2]).Generation(generation).Context(ctx).Download()
	var gerr *googleapi.Error
	if errors.As(err, &gerr) && gerr.Code == http.StatusNotFound {
		return nil, fmt.Errorf("generation %d is gone (the object was replaced or deleted since the last terraform apply, in a bucket that keeps no old versions): run terraform apply again to pin its current generation: %w", generation, err)
	}
	if err != nil {
		return nil, fmt.Errorf("read generation %d: %w", generation, err)
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
// for a gs:// startup script and pubsub.topics.publish for follow kicks
// (kick.go). Sorted, without duplicates; Terraform's custom role is checked
// against it.
func Permissions() []string {
	seen := map[string]bool{"storage.objects.get": true, "pubsub.topics.publish": true}
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
