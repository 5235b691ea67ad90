package remediate_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// guestBoard is a GuestAttributes a test writes as the guests would.
type guestBoard struct {
	mu    sync.Mutex
	attrs map[string][]remediate.GuestAttribute // node → attributes
	reads int
}

func (g *guestBoard) GetGuestAttributes(ctx context.Context, node, queryPath string) ([]remediate.GuestAttribute, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reads++
	return append([]remediate.GuestAttribute(nil), g.attrs[node]...), nil
}

func (g *guestBoard) set(node string, attrs ...remediate.GuestAttribute) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.attrs == nil {
		g.attrs = map[string][]remediate.GuestAttribute{}
	}
	g.attrs[node] = attrs
}

// resumeEnv is the handler env with Handler.Resume wired as the function
// wires it: incidents open and close from the records, the watcher writes
// to the plain recorder.
type resumeEnv struct {
	*env
	guest     *guestBoard
	incidents *ledger.MemoryIncidents
}

// A v4-16: two workers in the simulated control plane.
func v416(state string) *tpu.Node {
	n := fullNode(state)
	n.AcceleratorType, n.AcceleratorConfig = "v4-16", nil
	return n
}

func newResumeEnv(t *testing.T, n *tpu.Node) *resumeEnv {
	t.Helper()
	e := &resumeEnv{env: newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{n}}), guest: &guestBoard{}, incidents: ledger.NewMemoryIncidents()}
	cfg := e.h.Config
	cfg.ResumeWatch = 2 * time.Hour
	w := &remediate.ResumeWatcher{Guest: e.guest, Store: e.incidents, Recorder: e.records, Config: cfg, Now: e.clock.Now}
	e.h.Resume = w
	e.h.Recorder = w.Recording(e.records, func(err error) { t.Errorf("observe: %v", err) })
	return e
}

func (e *resumeEnv) sweep(t *testing.T) remediate.SweepResult {
	t.Helper()
	res, err := e.h.Sweep(context.Background(), remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone}})
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	return res
}

func (e *resumeEnv) resumedRecords() []remediate.Record {
	var out []remediate.Record
	for _, r := range e.records.list() {
		if r.Action == remediate.ActionResumed {
			out = append(out, r)
		}
	}
	return out
}

// The terminate event is at 03:59 (start − 1m).
var terminatedAt = time.Date(2026, 11, 20, 3, 59, 0, 0, time.UTC)

func TestRecoveredNodeGetsOneResumedRecordOnceEveryWorkerReports(t *testing.T) {
	e := newResumeEnv(t, v416("TERMINATED"))
	rec, err := e.handleSettled(t, terminate("e1"))
	if err != nil || rec.Outcome != remediate.OutcomeRecovered {
		t.Fatalf("Handle = %s %s (%s), %v; want recovered", rec.Action, rec.Outcome, rec.Reason, err)
	}
	recoveredAt := rec.Time
	// The recovery's last record checked the incident: the watch runs from
	// then, and nothing is reported yet.
	incs := e.incidents.All()
	if len(incs) != 1 || !incs[0].Open() || !incs[0].HealthyAt.Equal(recoveredAt) || !incs[0].FirstEvent.Equal(terminatedAt) {
		t.Fatalf("incidents = %+v; want one open since %s, healthy at %s", incs, terminatedAt, recoveredAt)
	}
	if got := e.resumedRecords(); len(got) != 0 {
		t.Fatalf("resumed records before any report: %+v", got)
	}
	if e.guest.reads != 1 {
		t.Errorf("guest read %d times after the recovery, want 1", e.guest.reads)
	}

	// Training starts on worker 0 at 04:10 from the 03:40 checkpoint, on
	// worker 1 at 04:12:30 from the 03:45 one.
	e.guest.set(nodeName,
		resumed("0", "2026-11-20T04:10:00Z", "2026-11-20T03:40:00Z"),
		resumed("1", "2026-11-20T04:12:30Z", "2026-11-20T03:45:00Z"))
	sweepAt := time.Date(2026, 11, 20, 4, 15, 0, 0, time.UTC)
	e.clock.Set(sweepAt)
	res := e.sweep(t)

	want := remediate.Record{
		Time: sweepAt, InsertID: "e1", EventTime: terminatedAt, Node: nodeName, Zone: zone, Cause: "maintenance",
		Action: remediate.ActionResumed, Outcome: remediate.OutcomeResumed, Generation: 1, AcceleratorType: "v4-16", Chips: 8,
		Reason: "training resumed on 2 of 2 workers 13m30s after the first event, from gs://b/ckpt-0 (progress lost 19m0s)",
		Steps: []remediate.Step{
			{Name: "get-guest-attributes", Start: sweepAt},
			// 03:59 → 04:12:30, the later worker.
			{Name: "resumed", Start: terminatedAt, Duration: 13*time.Minute + 30*time.Second},
			// The older checkpoint, 03:40, → the first event.
			{Name: "lost-progress", Start: time.Date(2026, 11, 20, 3, 40, 0, 0, time.UTC), Duration: 19 * time.Minute},
		},
	}
	if diff := cmp.Diff([]remediate.Record{want}, e.resumedRecords()); diff != "" {
		t.Errorf("resumed records (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]remediate.Record{want}, res.Records); diff != "" {
		t.Errorf("sweep result records (-want +got):\n%s", diff)
	}
	// Closed: later sweeps and events write no second one.
	e.clock.Advance(time.Minute)
	e.sweep(t)
	if _, err := e.h.Handle(context.Background(), terminate("e1")); err != nil {
		t.Fatalf("redelivery: %v", err)
	}
	if got := len(e.resumedRecords()); got != 1 {
		t.Errorf("%d resumed records after more sweeps and a redelivery, want 1", got)
	}
	if incs := e.incidents.All(); len(incs) != 1 || incs[0].Open() {
		t.Errorf("incidents = %+v; want the one, closed", incs)
	}
}

func TestNodeThatRecoveredByItselfIsClosedWhenItsGuestReports(t *testing.T) {
	n := v416("READY")
	n.Health = "HEALTHY"
	n.NetworkEndpoints = []*tpu.NetworkEndpoint{{IpAddress: "10.0.0.2"}, {IpAddress: "10.0.0.3"}}
	e := newResumeEnv(t, n)
	e.guest.set(nodeName,
		resumed("0", "2026-11-20T03:59:40Z", ""),
		resumed("1", "2026-11-20T03:59:50Z", ""))
	rec, err := e.h.Handle(context.Background(), terminate("e1"))
	if err != nil || rec.Action != remediate.ActionRecord {
		t.Fatalf("Handle = %s (%s), %v; want record (recovered by itself)", rec.Action, rec.Reason, err)
	}
	// The event's own record opened the incident and the hook closed it.
	got := e.resumedRecords()
	if len(got) != 1 {
		t.Fatalf("resumed records = %+v, want 1", got)
	}
	if want := "training resumed on 2 of 2 workers 50s after the first event, from no checkpoint (progress lost unknown)"; got[0].Reason != want || got[0].Outcome != remediate.OutcomeResumed {
		t.Errorf("resumed record = %s %q, want resumed %q", got[0].Outcome, got[0].Reason, want)
	}
	e.sweep(t)
	if got := len(e.resumedRecords()); got != 1 {
		t.Errorf("%d resumed records after a sweep, want 1", got)
	}
}

func TestStaleReportDoesNotCloseAndTheWatchEndsWithNoResumeReported(t *testing.T) {
	e := newResumeEnv(t, v416("TERMINATED"))
	// Both workers last reported at 03:30, before the 03:59 event: the
	// training that ran before the maintenance.
	e.guest.set(nodeName,
		resumed("0", "2026-11-20T03:30:00Z", "2026-11-20T03:00:00Z"),
		resumed("1", "2026-11-20T03:30:00Z", "2026-11-20T03:00:00Z"))
	rec, err := e.handleSettled(t, terminate("e1"))
	if err != nil || rec.Outcome != remediate.OutcomeRecovered {
		t.Fatalf("Handle = %s %s (%s), %v; want recovered", rec.Action, rec.Outcome, rec.Reason, err)
	}
	healthyAt := rec.Time
	e.clock.Set(healthyAt.Add(2*time.Hour - time.Second))
	e.sweep(t)
	if got := e.resumedRecords(); len(got) != 0 {
		t.Fatalf("records within the watch from stale reports: %+v", got)
	}
	if incs := e.incidents.All(); len(incs) != 1 || !incs[0].Open() {
		t.Fatalf("incidents = %+v; want one open", incs)
	}

	e.clock.Set(healthyAt.Add(2 * time.Hour))
	e.sweep(t)
	e.clock.Advance(time.Hour)
	e.sweep(t)
	got := e.resumedRecords()
	if len(got) != 1 {
		t.Fatalf("records after the watch = %+v, want one", got)
	}
	wantReason := "no resume reported within 2h0m0s of the node being healthy: 0 of 2 workers reported autoheal/resumed after the first event"
	if got[0].Reason != wantReason || got[0].Outcome != "" || !got[0].Time.Equal(healthyAt.Add(2*time.Hour)) || got[0].InsertID != "e1" {
		t.Errorf("record = %s at %s outcome %q reason %q; want %q at %s, no outcome", got[0].InsertID, got[0].Time, got[0].Outcome, got[0].Reason, wantReason, healthyAt.Add(2*time.Hour))
	}
	if incs := e.incidents.All(); len(incs) != 1 || incs[0].Open() || !strings.HasPrefix(incs[0].CloseReason, "no resume reported") {
		t.Errorf("incidents = %+v; want the one closed with no resume reported", incs)
	}
}

func TestHandlerWithoutResumeReadsNoGuestAttributes(t *testing.T) {
	e := newResumeEnv(t, v416("TERMINATED"))
	e.h.Resume = nil
	if _, err := e.handleSettled(t, terminate("e1")); err != nil {
		t.Fatal(err)
	}
	e.sweep(t)
	if e.guest.reads != 0 || len(e.resumedRecords()) != 0 {
		t.Errorf("guest reads %d, resumed records %d; want none with Resume nil", e.guest.reads, len(e.resumedRecords()))
	}
}

// An incident opened before the maintenance (a prepare record) is not
// timed out while the maintenance is still ahead of the node: the watch
// starts once it is behind it.
func TestWatchStartsOnlyOnceTheMaintenanceIsBehindTheNode(t *testing.T) {
	e := newWatch(t) // no reports
	pending := *healthyNode
	pending.UpcomingMaintenance = &tpu.UpcomingMaintenance{MaintenanceStatus: "PENDING", Type: "SCHEDULED"}
	for _, d := range []time.Duration{0, 3 * time.Hour, 6 * time.Hour} {
		e.now = firstEvent.Add(20*time.Minute + d)
		if r, wrote, err := e.check(t, &pending); wrote || err != nil {
			t.Fatalf("Check at +%s with maintenance pending = %v (%q), %v; want nothing", d, wrote, r.Reason, err)
		}
	}
	if incs := e.store.All(); len(incs) != 1 || !incs[0].HealthyAt.IsZero() {
		t.Fatalf("incidents = %+v; want one, not yet healthy", incs)
	}
	behind := firstEvent.Add(7 * time.Hour)
	e.now = behind
	if _, wrote, err := e.check(t, healthyNode); wrote || err != nil {
		t.Fatalf("Check once the maintenance is behind = %v, %v; want nothing yet", wrote, err)
	}
	e.now = behind.Add(2 * time.Hour)
	r, wrote, err := e.check(t, healthyNode)
	if err != nil || !wrote || r.Reason != "no resume reported within 2h0m0s of the node being healthy: 0 of 2 workers reported autoheal/resumed after the first event" {
		t.Fatalf("Check 2h after = %v %q, %v; want the no-resume record", wrote, r.Reason, err)
	}
}

// A complete report closes the incident even with maintenance pending.
func TestReportClosesTheIncidentWithMaintenancePending(t *testing.T) {
	e := newWatch(t, resumed("0", "2026-11-20T03:17:00Z", ""), resumed("1", "2026-11-20T03:18:00Z", ""))
	pending := *healthyNode
	pending.UpcomingMaintenance = &tpu.UpcomingMaintenance{MaintenanceStatus: "PENDING"}
	r, wrote, err := e.check(t, &pending)
	if err != nil || !wrote || r.Outcome != remediate.OutcomeResumed {
		t.Fatalf("Check = %v %s, %v; want the resumed record", wrote, r.Outcome, err)
	}
}
