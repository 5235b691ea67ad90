package swarm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/policy"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// BaseEnv is the function's configuration in every run (AUTOHEAL_*), for
// function.LoadConfig: the test sets it, loads the Config once and hands it
// to Run, which points it at each run's control plane. AUTOHEAL_ACTOR names
// the identity the function acts as (its calls are audited as Us).
var BaseEnv = map[string]string{
	"AUTOHEAL_PROJECT":      "acme-ops",
	"AUTOHEAL_PROJECTS":     Project,
	"AUTOHEAL_ZONES":        ZoneA + "," + ZoneB,
	"AUTOHEAL_TPU_ENDPOINT": "http://127.0.0.1:1",
	"AUTOHEAL_RECORD_TO":    "stdout",
	"AUTOHEAL_ACTOR":        Us,
}

// Options configure Run.
type Options struct {
	// Config is the function's configuration (BaseEnv loaded).
	Config function.Config
	// Kinds are the fault kinds drawn from (nil: Enabled).
	Kinds []Kind
	// Firestore, when set, is the ledger (each run in collections of its
	// own); else the in-memory ledger.
	Firestore *firestore.Client
	// Prefix makes the Firestore collections of a run unique across
	// processes sharing an emulator.
	Prefix string
}

// Result is what one run did and which invariants it broke.
type Result struct {
	Plan       Plan
	Violations []string
	// Calls is every TPU API request the function made; Deliveries every
	// delivery it answered; Sweeps the sweeps among them; Took the
	// simulated time until quiescence.
	Calls, Deliveries, Sweeps int
	Took                      time.Duration
	// Moved are the nodes a zones: fallback moved to another zone;
	// ZoneRefused the stockout records that refused a zones: fallback.
	Moved, ZoneRefused int
	// Trace is every node's records and the TPU calls, for a failure.
	Trace string
}

// The run's schedule.
const (
	// step is how far the clock moves between two looks at the queue.
	step = 30 * time.Second
	// busyFor is how long the run is driven in steps before it may be
	// quiescent; then slowStep until the recoveries' own cap.
	busyFor  = 2 * time.Hour
	slowStep = 20 * time.Minute
	// horizon is when a run that is not quiescent ends: past the 24 h cap
	// of a recovery (recoveryCap, with an hour to notice).
	horizon     = 27 * time.Hour
	recoveryCap = 25 * time.Hour
	// redeliveries is how often Pub/Sub delivers what was not acknowledged
	// (the dead-letter policy's maximum), a minute apart.
	redeliveries = 5
)

// t0 is when every run starts.
var t0 = time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)

// clock is the virtual clock the function, the ledger and the control
// plane share.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// recorder keeps the function's records.
type recorder struct {
	mu   sync.Mutex
	recs []remediate.Record
}

func (r *recorder) Record(_ context.Context, rec remediate.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}

func (r *recorder) all() []remediate.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.recs)
}

func (r *recorder) len() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.recs) }

// delivery is a message Pub/Sub has to deliver at at.
type delivery struct {
	at       time.Time
	data     []byte
	attempts int
	forged   *ForgedEntry
	what     string
}

type world struct {
	plan   Plan
	clock  *clock
	fake   *tpufake.Server
	fn     *function.Function
	store  remediate.Store // the ledger without faults, for the checks
	rec    *recorder
	queue  []delivery
	audits int // audit entries of the fake already queued
	res    *Result
	// maxPerDelivery is the most calls one delivery made; listPerSweep the
	// most nodes.list calls of one zone in one sweep.
	maxPerDelivery int
	listPerSweep   map[string]int
	forgedActed    []string
	nacked         int
	budget         *budget
	cut            []string // deliveries cut at the call budget
	cap            capacity
	maxRequeues    int
}

// Run runs seed with opts to quiescence and checks the invariants.
func Run(ctx context.Context, seed uint64, opts Options) Result {
	kinds := opts.Kinds
	if kinds == nil {
		kinds = Enabled
	}
	res := Result{Plan: NewPlan(seed, kinds)}
	w, err := newWorld(ctx, res.Plan, opts, &res)
	if err != nil {
		res.Violations = append(res.Violations, "setup: "+err.Error())
		return res
	}
	defer w.close()
	w.drive(ctx)
	w.check(ctx)
	return res
}

func newWorld(ctx context.Context, p Plan, opts Options, res *Result) (*world, error) {
	c := &clock{t: t0}
	var nodes []*tpu.Node
	for _, name := range NodeNames {
		state, health := "READY", "HEALTHY"
		if slices.Contains(p.Broken, name) {
			state, health = "TERMINATED", "UNHEALTHY_MAINTENANCE"
		}
		n := nodeSpec(name, state, health)
		if f, ok := p.Fallback[name]; ok {
			n.Metadata[policy.StockoutMetadataKey] = f
		}
		pin(n, p.Pinned[name])
		nodes = append(nodes, n)
	}
	fake := tpufake.New(tpufake.Fleet{Nodes: nodes},
		tpufake.WithClock(c.now), tpufake.WithAuditLog(1<<16), tpufake.WithPageSize(2),
		tpufake.WithOperationDelay("delete", 2*time.Minute), tpufake.WithOperationDelay("create", 5*time.Minute),
		tpufake.WithRequestLog(64))
	for _, r := range p.Rules {
		fake.Fail(r)
	}
	for _, a := range p.Acts {
		fake.ActAt(t0.Add(a.At), a.Act)
	}
	in := newInjector(p.Ledger)
	var store function.Ledger
	var plain remediate.Store
	if opts.Firestore != nil {
		prefix := fmt.Sprintf("%sswarm%d-", opts.Prefix, p.Seed)
		fs := ledger.NewFirestore(opts.Firestore, ledger.WithClock(c.now), ledger.WithPrefix(prefix))
		store, plain = faultyFirestore{Firestore: fs, in: in}, fs
	} else {
		m := ledger.NewMemory(ledger.WithClock(c.now))
		store, plain = faultyMemory{Memory: m, in: in}, m
	}
	cfg := opts.Config
	cfg.TPUEndpoint = fake.URL()
	rec := &recorder{}
	epOpts, err := tpuapi.EndpointOptions(fake.URL())
	if err != nil {
		fake.Close()
		return nil, err
	}
	v2, err := tpuapi.NewFromOptions(ctx, epOpts...)
	if err != nil {
		fake.Close()
		return nil, err
	}
	maint, err := tpuapi.NewMaintenanceFromOptions(ctx, epOpts...)
	if err != nil {
		fake.Close()
		return nil, err
	}
	b := &budget{}
	fnOpts := []function.Option{function.WithStore(store), function.WithClock(c.now),
		function.WithTPU(budgetTPU{TPU: tpuapi.Router{V2: v2}, b: b}), function.WithMaintenanceTPU(budgetMaintenance{m: maint, b: b}),
		function.WithRecorder(rec), function.WithStdout(io.Discard), function.WithDiagnostics(io.Discard)}
	if opts.Firestore != nil {
		prefix := fmt.Sprintf("%sswarm%d-", opts.Prefix, p.Seed)
		fnOpts = append(fnOpts,
			function.WithNotices(ledger.NewFirestoreNotices(opts.Firestore, ledger.WithPrefix(prefix))),
			function.WithIncidents(ledger.NewFirestoreIncidents(opts.Firestore, ledger.WithPrefix(prefix))))
	}
	fn, err := function.New(ctx, cfg, fnOpts...)
	if err != nil {
		fake.Close()
		return nil, err
	}
	w := &world{plan: p, clock: c, fake: fake, fn: fn, store: plain, rec: rec, res: res, budget: b, listPerSweep: map[string]int{},
		maxRequeues: cfg.MaxRequeues}
	c.set(t0.Add(10 * time.Second))
	for i, n := range p.Broken {
		w.queue = append(w.queue, delivery{at: c.now(), data: terminateEntry(fmt.Sprintf("terminate-%d", i), n, t0, "system@google.com",
			events.AuditLogName(Project, events.LogSystemEvent)), what: "terminate " + short(n)})
	}
	for i := range p.Forged {
		f := &p.Forged[i]
		w.queue = append(w.queue, delivery{at: t0.Add(f.At), data: forgedEntry(i, *f), forged: f, what: "forged " + forgedVariants[f.Variant]})
	}
	return w, nil
}

func (w *world) close() {
	w.fn.Close()
	w.fake.Close()
}

// nodeSpec is an opted-in v4-32 node.
func nodeSpec(name, state, health string) *tpu.Node {
	return &tpu.Node{
		Name: name, AcceleratorType: "v4-32", State: state, Health: health,
		RuntimeVersion: "tpu-ubuntu2204-base",
		NetworkConfig:  &tpu.NetworkConfig{Network: "projects/" + Project + "/global/networks/default"},
		Labels:         map[string]string{"tpu-autoheal": "enabled", "team": "llm"},
		Metadata:       map[string]string{"ssh-keys": "alice:ssh-ed25519 AAAA alice"},
		CreateTime:     "2026-11-01T00:00:00Z",
		ApiVersion:     "V2",
	}
}

// mutatingRPCs are the calls that change the fleet.
var mutatingRPCs = []string{"nodes.delete", "nodes.create", "nodes.patch", "nodes.performMaintenance", "queuedResources.reset"}

// allRPCs are every call the function makes of the fake.
var allRPCs = append([]string{"nodes.get", "nodes.list", "operations.get", "queuedResources.get", "nodes.getGuestAttributes"}, mutatingRPCs...)

func (w *world) count(rpcs []string, name string) int {
	n := 0
	for _, rpc := range rpcs {
		n += w.fake.Count(rpc, name)
	}
	return n
}

// drive runs the schedule until quiescence or the horizon.
func (w *world) drive(ctx context.Context) {
	nextSweep := t0.Add(w.plan.SweepEvery)
	lastAct := time.Duration(0)
	for _, a := range w.plan.Acts {
		lastAct = max(lastAct, a.At)
	}
	for _, ps := range w.plan.Pauses {
		lastAct = max(lastAct, ps.At+ps.For)
	}
	lastAct = max(lastAct, w.plan.lastCapacityAt())
	paused := make([]bool, len(w.plan.Pauses))
	resumed := make([]bool, len(w.plan.Pauses))
	quietFrom := t0.Add(max(30*time.Minute, lastAct+20*time.Minute))
	confirmed := 0
	for {
		now := w.clock.now()
		for i, ps := range w.plan.Pauses {
			if !paused[i] && !now.Before(t0.Add(ps.At)) {
				paused[i] = true
				w.pause(ctx, ps, true)
			}
			if !resumed[i] && !now.Before(t0.Add(ps.At+ps.For)) {
				resumed[i] = true
				w.pause(ctx, ps, false)
			}
		}
		w.stepCapacity(now)
		w.stepZones(now)
		w.queueAudit()
		w.deliverDue(ctx, now)
		if !now.Before(nextSweep) {
			w.sweep(ctx)
			nextSweep = now.Add(w.plan.SweepEvery)
		}
		if !now.Before(quietFrom) && len(w.queue) == 0 && w.quiet(ctx) {
			// Quiet: confirmed by two more sweeps an hour apart, which
			// look once more at whatever is left (a node stuck half-way,
			// a deferral); if they start something, it is driven on.
			if confirmed == 2 {
				break
			}
			confirmed++
			w.clock.set(now.Add(time.Hour))
			w.sweep(ctx)
			continue
		}
		confirmed = 0
		if now.Sub(t0) >= horizon {
			// A node stuck half-way for good is recovered again after an
			// abandoned recovery (bounded by the recreate cap per window):
			// only a recovery running past its own cap is a broken bound.
			if late := w.unfinished(ctx, now.Add(-recoveryCap)); late != "" {
				w.res.Violations = append(w.res.Violations, fmt.Sprintf("unfinished past the recovery cap (%v): %s", recoveryCap, late))
			}
			break
		}
		d := step
		if now.Sub(t0) >= busyFor && len(w.queue) == 0 {
			d = slowStep
			nextSweep = now.Add(d) // a sweep every slow step
		}
		w.clock.set(now.Add(d))
	}
	w.res.Took = w.clock.now().Sub(t0)
	w.res.Calls = w.count(allRPCs, "")
}

// pause is `autoheal pause` (on) or `autoheal resume` of ps: a write of
// the ledger, as the CLI does.
func (w *world) pause(ctx context.Context, ps TimedPause, on bool) {
	admin, ok := w.store.(ledger.Admin)
	if !ok {
		w.res.Violations = append(w.res.Violations, "setup: the ledger cannot pause")
		return
	}
	p := remediate.Pause{Scope: remediate.PauseNode, Node: ps.Node, Project: Project, By: Alice, Reason: "swarm", Since: w.clock.now()}
	if ps.Zone {
		project, zone := remediate.NodeProjectZone(ps.Node)
		p = remediate.Pause{Scope: remediate.PauseZone, Project: project, Zone: zone, By: Alice, Reason: "swarm", Since: w.clock.now()}
	}
	var err error
	if on {
		err = admin.SetPause(ctx, p)
	} else {
		_, err = admin.ClearPause(ctx, p)
	}
	if err != nil {
		w.res.Violations = append(w.res.Violations, fmt.Sprintf("setup: pause %s: %v", ps, err))
	}
}

// quiet reports whether no recovery is unfinished and no deferral is
// pending.
func (w *world) quiet(ctx context.Context) bool {
	recs, err := w.store.Unfinished(ctx)
	if err != nil || len(recs) > 0 {
		return false
	}
	due, err := w.store.DueDeferrals(ctx, t0.Add(10*horizon))
	return err == nil && len(due) == 0
}

// unfinished describes the unfinished recoveries started before before.
func (w *world) unfinished(ctx context.Context, before time.Time) string {
	recs, err := w.store.Unfinished(ctx)
	if err != nil {
		return err.Error()
	}
	var s []string
	for _, r := range recs {
		if r.StartedAt.Before(before.Add(-max(policy.RecoveryCap(r)-policy.MaxRecoveryAge, 0))) {
			s = append(s, fmt.Sprintf("%s in phase %s (attempts %d, started +%v, next look +%v)", short(r.Node), r.Phase, r.Attempts, r.StartedAt.Sub(t0), r.NextLookAt.Sub(t0)))
		}
	}
	return strings.Join(s, "; ")
}

// queueAudit queues the admin-activity entries the sink routes (node
// creates and deletes, queued-resource deletes: ours and people's) that
// were written since the last look, AuditDelay after they were written;
// Bob's never reach the function.
func (w *world) queueAudit() {
	log := w.fake.AuditLog()
	for _, e := range log[min(w.audits, len(log)):] {
		if e.Principal == Bob || !slices.Contains(events.AdminMethods, e.Method) {
			continue
		}
		w.queue = append(w.queue, delivery{at: e.Time.Add(w.plan.AuditDelay), data: e.JSON, what: "audit " + e.Method + " " + short(e.Resource) + " by " + e.Principal})
	}
	w.audits = len(log)
}

// deliverDue delivers every queued message due at now, in order; one not
// acknowledged is delivered again a minute later, up to redeliveries.
func (w *world) deliverDue(ctx context.Context, now time.Time) {
	slices.SortStableFunc(w.queue, func(a, b delivery) int { return a.at.Compare(b.at) })
	var later []delivery
	for len(w.queue) > 0 {
		d := w.queue[0]
		w.queue = w.queue[1:]
		if d.at.After(now) {
			later = append(later, d)
			continue
		}
		mut := w.count(mutatingRPCs, "")
		recs := w.rec.len()
		code := w.deliver(ctx, d.data)
		if d.forged != nil {
			w.checkForged(d, mut, recs)
		}
		if d.attempts++; code >= 300 && d.attempts < redeliveries {
			d.at = now.Add(time.Minute)
			later = append(later, d)
		} else if code >= 300 {
			w.nacked++
		}
	}
	w.queue = later
}

// deliver posts data as a Pub/Sub push and returns the answer's status.
func (w *world) deliver(ctx context.Context, data []byte) int {
	before := w.count(allRPCs, "")
	body, _ := json.Marshal(map[string]any{
		"message":      map[string]any{"data": base64.StdEncoding.EncodeToString(data), "messageId": fmt.Sprint(w.res.Deliveries)},
		"subscription": "projects/acme-ops/subscriptions/tpu-autoheal-push",
	})
	// HandleMessage is what ServeHTTP calls with the body; called here with
	// a context the call budget can cancel.
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.budget.start(cancel)
	err := w.fn.HandleMessage(dctx, body)
	w.res.Deliveries++
	w.maxPerDelivery = max(w.maxPerDelivery, w.count(allRPCs, "")-before)
	if w.budget.wasCut() && len(w.cut) < 3 {
		w.cut = append(w.cut, fmt.Sprintf("a delivery at +%v made over %d calls and was cut", w.clock.now().Sub(t0), callBudget))
	}
	if err != nil {
		return 500
	}
	return 204
}

// sweep delivers Cloud Scheduler's sweep.
func (w *world) sweep(ctx context.Context) {
	a, b := w.fake.Count("nodes.list", parent(ZoneA)), w.fake.Count("nodes.list", parent(ZoneB))
	if code := w.deliver(ctx, []byte(events.SweepMessage)); code >= 300 {
		w.nacked++ // Cloud Scheduler does not retry: the next sweep comes
	}
	w.res.Sweeps++
	w.listPerSweep[ZoneA] = max(w.listPerSweep[ZoneA], w.fake.Count("nodes.list", parent(ZoneA))-a)
	w.listPerSweep[ZoneB] = max(w.listPerSweep[ZoneB], w.fake.Count("nodes.list", parent(ZoneB))-b)
}

// terminateEntry is a tpu.nodes.terminate system event about node.
func terminateEntry(insertID, node string, ts time.Time, principal, logName string) []byte {
	e := map[string]any{
		"protoPayload": map[string]any{
			"@type":              "type.googleapis.com/google.cloud.audit.AuditLog",
			"status":             map[string]any{},
			"authenticationInfo": map[string]any{"principalEmail": principal},
			"serviceName":        "tpu.googleapis.com",
			"methodName":         "tpu.nodes.terminate",
			"resourceName":       node,
			"metadata":           map[string]any{"terminateReason": "Terminated due to a maintenance event"},
		},
		"insertId":         insertID,
		"resource":         map[string]any{"type": "audited_resource", "labels": map[string]string{"project_id": Project, "service": "tpu.googleapis.com", "method": "tpu.nodes.terminate"}},
		"timestamp":        ts.UTC().Format(time.RFC3339Nano),
		"receiveTimestamp": ts.Add(time.Second).UTC().Format(time.RFC3339Nano),
		"severity":         "NOTICE",
	}
	if logName != "" {
		e["logName"] = logName
	}
	b, _ := json.Marshal(e)
	return b
}

// forgedEntry is f's entry.
func forgedEntry(i int, f ForgedEntry) []byte {
	at := t0.Add(f.At)
	id := fmt.Sprintf("forged-%d", i)
	switch f.Variant {
	case 0:
		return terminateEntry(id, f.Node, at, "system@google.com", events.AuditLogName(Project, events.LogSystemEvent)+"-copy")
	case 1:
		b, _ := json.Marshal(map[string]any{
			"protoPayload": map[string]any{
				"@type":              "type.googleapis.com/google.cloud.audit.AuditLog",
				"status":             map[string]any{},
				"authenticationInfo": map[string]any{"principalEmail": Mallory},
				"serviceName":        "tpu.googleapis.com",
				"methodName":         "google.cloud.tpu.v2.Tpu.DeleteNode",
				"resourceName":       f.Node,
				"request":            map[string]any{"@type": "type.googleapis.com/google.cloud.tpu.v2.DeleteNodeRequest", "name": f.Node},
			},
			"insertId":  id,
			"resource":  map[string]any{"type": "audited_resource", "labels": map[string]string{"project_id": Project, "service": "tpu.googleapis.com", "method": "google.cloud.tpu.v2.Tpu.DeleteNode"}},
			"timestamp": at.Format(time.RFC3339Nano),
			"severity":  "NOTICE",
			"logName":   "projects/" + Project + "/logs/syslog",
			"operation": map[string]any{"id": "projects/" + Project + "/locations/" + ZoneA + "/operations/forged", "producer": "tpu.googleapis.com", "first": true},
		})
		return b
	default:
		return terminateEntry(id, f.Node, at, "system@google.com", "")
	}
}
