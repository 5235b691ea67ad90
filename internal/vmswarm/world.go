package vmswarm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/seal"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// Options configure Run.
type Options struct {
	// Fleet is the simulated Compute Engine's fleet at the start
	// (computefake's testdata fleet: the names this package draws from).
	Fleet computefake.Fleet
	// Kinds are the kinds of fault drawn (nil: Enabled).
	Kinds []Kind
	// engine, when set, wraps what the Recovery calls (the checker's own
	// tests break the engine with it); afterSweep runs after every sweep.
	engine     func(computevm.Instances) computevm.Instances
	afterSweep func(context.Context, *computevm.Client)
}

// Result is what one run did and which invariants it broke.
type Result struct {
	Plan       Plan
	Violations []string
	// Calls is every Compute Engine request the Recovery made; Faults the
	// requests among them that got an injected fault; Deliveries the
	// entries handed to HandleEvent; Sweeps the sweeps; Crashes the
	// crashes that happened; Took the simulated time until quiescence.
	Calls, Faults, Deliveries, Sweeps, Crashes int
	Took                                       time.Duration
	// Trace is the schedule as it happened, the effects and the records,
	// for a failure.
	Trace string
}

// The run's schedule.
const (
	step = time.Minute
	// settle is how long after the last event and the end of the faults
	// the run may be quiescent; slowStep the step after busyFor.
	settle   = 30 * time.Minute
	busyFor  = 4 * time.Hour
	slowStep = time.Hour
	// pastWindow: after the faults end, a slice the faults made reach its
	// window cap is acted on again once the window has passed.
	pastWindow = 26 * time.Hour
	// redeliveries is how often Pub/Sub delivers what was not acknowledged,
	// a minute apart.
	redeliveries = 5
)

// t0 is when every run starts.
var t0 = time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)

// clock is the virtual clock the Recovery, the ledger and the fake share.
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

// recorder keeps the Recovery's records, for the trace only.
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

// delivery is an audit entry Pub/Sub has to deliver at at.
type delivery struct {
	at       time.Time
	data     []byte
	attempts int
	what     string
}

type world struct {
	plan   Plan
	opts   Options
	clock  *clock
	fake   *computefake.Server
	client *computevm.Client
	store  computevm.Store
	ledger *ledger.Memory
	sealer seal.Sealer
	crash  *crasher
	rec    *computevm.Recovery
	out    *recorder
	queue  []delivery
	audits int
	res    *Result
	// happened is the schedule as it happened, one line an event.
	happened []string
	// maxPerDelivery is the most calls one delivery or sweep made.
	maxPerDelivery int
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
	defer w.fake.Close()
	w.drive(ctx)
	w.check()
	return res
}

func newWorld(ctx context.Context, p Plan, opts Options, res *Result) (*world, error) {
	c := &clock{t: t0}
	fake := computefake.New(opts.Fleet, computefake.WithClock(c.now), computefake.WithPageSize(4), computefake.WithRequestLog(1<<15))
	client, err := computevm.NewFromOptions(ctx, fake.ClientOptions()...)
	if err != nil {
		fake.Close()
		return nil, err
	}
	w := &world{plan: p, opts: opts, clock: c, fake: fake, client: client, store: computevm.NewMemory(), ledger: ledger.NewMemory(ledger.WithClock(c.now)),
		sealer: seal.RandomLocalKeys(), crash: &crasher{}, out: &recorder{}, res: res}
	w.rec = w.newRecovery()
	return w, nil
}

// newRecovery is a new process of the function: nothing in memory, the
// same store, ledger and keys.
func (w *world) newRecovery() *computevm.Recovery {
	var compute computevm.Instances = crashCompute{i: w.client, c: w.crash}
	if w.opts.engine != nil {
		compute = w.opts.engine(compute)
	}
	return &computevm.Recovery{
		Compute: compute, Store: crashStore{s: w.store, c: w.crash},
		Ledger: crashLedger{Memory: w.ledger, c: w.crash}, Recorder: w.out,
		Config: remediate.DefaultConfig(), Policy: vmpolicy.DefaultConfig(), Holder: "vmswarm", Now: w.clock.now,
		Sealer: w.sealer,
	}
}

// calledMethods are every method the Recovery calls of the fake.
var calledMethods = []string{
	"instances.get", "instances.list", "instances.aggregatedList", "instances.insert", "instances.delete", "instances.start", "instances.stop",
	"instances.setMetadata", "instances.setLabels", "instances.performMaintenance", "instances.getGuestAttributes", "instances.reportHostAsFaulty",
	"zoneOperations.get", "zoneOperations.wait", "instanceGroupManagers.get", "instanceGroupManagers.listManagedInstances", "instanceGroupManagers.recreateInstances",
}

// mutatingMethods are the calls that change something.
var mutatingMethods = []string{
	"instances.insert", "instances.delete", "instances.start", "instances.stop", "instances.setMetadata", "instances.setLabels",
	"instances.performMaintenance", "instances.reportHostAsFaulty", "instanceGroupManagers.recreateInstances",
}

func (w *world) count(methods []string, resource string) int {
	n := 0
	for _, m := range methods {
		n += w.fake.Count(m, resource)
	}
	return n
}

// drive runs the schedule until quiescence or the horizon.
func (w *world) drive(ctx context.Context) {
	w.sweep(ctx) // the specs are saved before the night
	w.fake.FailRandomly(computefake.Chaos{Seed: w.plan.Seed, Rate: w.plan.Rate, Kinds: w.plan.Calls})
	w.crash.mu.Lock()
	w.crash.plan = w.plan.Crashes
	w.crash.mu.Unlock()
	last := w.plan.FaultsFor
	events := slices.Clone(w.plan.Events)
	for _, e := range events {
		last = max(last, e.At+e.For)
	}
	quietFrom := t0.Add(last + settle)
	horizon := t0.Add(max(last, w.plan.FaultsFor) + pastWindow)
	faulty := true
	nextSweep := t0.Add(w.plan.SweepEvery)
	confirmed, mutations, fleet := 0, -1, ""
	for {
		now := w.clock.now()
		if faulty && !now.Before(t0.Add(w.plan.FaultsFor)) {
			faulty = false
			w.fake.FailRandomly(computefake.Chaos{Seed: w.plan.Seed, Rate: 0})
		}
		for len(events) > 0 && !now.Before(t0.Add(events[0].At)) {
			e := events[0]
			events = events[1:]
			if follow, ok := w.happen(e); ok {
				events = append(events, follow)
				slices.SortStableFunc(events, func(a, b Event) int { return int(a.At - b.At) })
			}
		}
		w.queueAudit()
		w.deliverDue(ctx, now)
		if !now.Before(nextSweep) {
			w.sweep(ctx)
			nextSweep = now.Add(w.plan.SweepEvery)
		}
		if !now.Before(quietFrom) && len(w.queue) == 0 && len(events) == 0 {
			// Quiet once two sweeps an hour apart changed nothing and made
			// no call that changes anything, and no VM is left down that
			// must run: else on until the horizon (a slice at its window
			// cap is acted on again a day later).
			m, f := w.count(mutatingMethods, ""), w.fleetState()
			if m == mutations && f == fleet && len(w.lost()) == 0 {
				confirmed++
			} else {
				confirmed = 0
			}
			mutations, fleet = m, f
			if confirmed == 2 || !now.Before(horizon) {
				break
			}
			w.clock.set(now.Add(slowStep))
			w.sweep(ctx)
			continue
		}
		if !now.Before(horizon) {
			break
		}
		d := step
		if now.Sub(t0) >= busyFor && len(w.queue) == 0 {
			d = slowStep
			nextSweep = now.Add(d)
		}
		w.clock.set(now.Add(d))
	}
	w.res.Took = w.clock.now().Sub(t0)
	w.res.Calls = w.count(calledMethods, "")
	w.res.Crashes = w.crash.crashes
	for _, r := range w.fake.Requests() {
		if r.Fault != "" {
			w.res.Faults++
		}
	}
}

// fleetState is every instance's status and id, one string.
func (w *world) fleetState() string {
	var b strings.Builder
	for _, in := range w.fake.Fleet().Instances {
		fmt.Fprintf(&b, "%s=%s/%d/%v;", in.Name, in.Status, in.Id, in.Labels["tpu-autoheal"])
	}
	return b.String()
}

// happen makes e happen now, if it can; a MIG stuck for a while returns
// its unsticking to schedule.
func (w *world) happen(e Event) (Event, bool) {
	now := w.clock.now()
	var err error
	switch e.Kind {
	case HostError:
		_, err = w.fake.HostError(e.Target)
	case Preempt:
		_, err = w.fake.Preempt(e.Target)
	case Maintenance:
		if e.StaysDown {
			err = w.fake.SetMaintenanceOutcome(e.Target, "TERMINATED")
		}
		if err == nil {
			_, err = w.fake.ScheduleMaintenance(e.Target, computefake.Maintenance{WindowStart: now.Add(e.For), WindowEnd: now.Add(e.For + time.Hour)})
		}
	case PersonStop:
		_, err = w.fake.PersonStop(e.Target, e.By)
	case PersonDel:
		_, err = w.fake.PersonDelete(e.Target, e.By)
	case PersonStart:
		_, err = w.fake.PersonStart(e.Target, e.By)
	case PersonLabel:
		_, err = w.fake.PersonRelabel(e.Target, e.By, map[string]string{"team": "llm"})
	case MIGStuck:
		err = w.fake.SetMIGStuck(e.Target, e.For >= 0)
	}
	line := fmt.Sprintf("+%v %s", now.Sub(t0), e)
	if e.Kind == MIGStuck && e.For < 0 {
		line = fmt.Sprintf("+%v %s repairs again", now.Sub(t0), short(e.Target))
	}
	if err != nil {
		line += fmt.Sprintf(" (did not happen: %v)", err)
	}
	w.happened = append(w.happened, line)
	if e.Kind == MIGStuck && e.For > 0 && err == nil {
		return Event{At: e.At + e.For, Kind: MIGStuck, Target: e.Target, For: -1}, true
	}
	return Event{}, false
}

// queueAudit queues the audit entries written since the last look,
// AuditDelay after they were written; Bob's never reach the function.
func (w *world) queueAudit() {
	log := w.fake.AuditEntries()
	for _, e := range log[min(w.audits, len(log)):] {
		if e.ProtoPayload.AuthenticationInfo.PrincipalEmail == Bob {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, e.Timestamp)
		if err != nil {
			at = w.clock.now()
		}
		w.queue = append(w.queue, delivery{at: at.Add(w.plan.AuditDelay), data: e.JSON(),
			what: e.ProtoPayload.MethodName + " " + short(e.ProtoPayload.ResourceName) + " by " + e.ProtoPayload.AuthenticationInfo.PrincipalEmail})
	}
	w.audits = len(log)
}

// deliverDue delivers every queued entry due at now, in order; one not
// acknowledged is delivered again a minute later, up to redeliveries.
func (w *world) deliverDue(ctx context.Context, now time.Time) {
	slices.SortStableFunc(w.queue, func(a, b delivery) int { return a.at.Compare(b.at) })
	var later []delivery
	for _, d := range w.queue {
		if d.at.After(now) {
			later = append(later, d)
			continue
		}
		ev, err := events.Parse(d.data, events.Options{})
		if err != nil || ev.Kind != events.KindInstance {
			continue // not routed to the instance path
		}
		before := w.count(calledMethods, "")
		_, err = w.rec.HandleEvent(ctx, ev)
		w.res.Deliveries++
		w.maxPerDelivery = max(w.maxPerDelivery, w.count(calledMethods, "")-before)
		if w.crash.restart() {
			w.rec = w.newRecovery()
			err = errCrashed // nothing was acknowledged
		}
		if d.attempts++; err != nil && d.attempts < redeliveries {
			d.at = now.Add(time.Minute)
			later = append(later, d)
		}
	}
	w.queue = later
}

// sweep is Cloud Scheduler's sweep of both zones.
func (w *world) sweep(ctx context.Context) {
	before := w.count(calledMethods, "")
	_, _ = w.rec.Sweep(ctx, []string{Project}, []string{ZoneC, ZoneE})
	w.res.Sweeps++
	if w.opts.afterSweep != nil {
		w.opts.afterSweep(ctx, w.client)
	}
	w.maxPerDelivery = max(w.maxPerDelivery, w.count(calledMethods, "")-before)
	if w.crash.restart() {
		w.rec = w.newRecovery()
	}
}
