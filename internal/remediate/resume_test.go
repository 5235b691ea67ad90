package remediate_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/googleapi"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/googleerr"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

func TestChipsOf(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		want int
	}{
		{"v2-8", 4}, {"v3-8", 4}, {"v3-2048", 1024}, {"v4-8", 4}, {"v4-128", 64}, {"v5p-16", 8}, {"v5p-12288", 6144},
		{"v5litepod-1", 1}, {"v5litepod-8", 8}, {"v5litepod-256", 256}, {"v5e-16", 16}, {"v6e-8", 8}, {"v6e-256", 256},
		{"", 0}, {"v4", 0}, {"v4-", 0}, {"v4-x", 0}, {"v4-0", 0}, {"v4--8", 0}, {"v4-1", 0}, {"v9-8", 0}, {"-8", 0},
	} {
		if got := remediate.ChipsOf(tc.typ); got != tc.want {
			t.Errorf("ChipsOf(%q) = %d, want %d", tc.typ, got, tc.want)
		}
	}
}

type fakeGuest struct {
	attrs []remediate.GuestAttribute
	err   error
	calls []string
}

var _ remediate.GuestAttributes = (*fakeGuest)(nil)

func (g *fakeGuest) GetGuestAttributes(ctx context.Context, node, queryPath string) ([]remediate.GuestAttribute, error) {
	g.calls = append(g.calls, node+" "+queryPath)
	return g.attrs, g.err
}

type sliceRecorder struct {
	recs []remediate.Record
	err  error
}

func (s *sliceRecorder) Record(ctx context.Context, r remediate.Record) error {
	if s.err != nil {
		return s.err
	}
	s.recs = append(s.recs, r)
	return nil
}

const resumeNode = "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-16"

var (
	firstEvent = time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC)
	// A v4-16 has 2 workers.
	healthyNode = &tpu.Node{Name: resumeNode, State: "READY", Health: "HEALTHY", AcceleratorType: "v4-16",
		Labels:           map[string]string{remediate.GenerationLabel: "3"},
		NetworkEndpoints: []*tpu.NetworkEndpoint{{IpAddress: "10.0.0.2"}, {IpAddress: "10.0.0.3"}}}
)

func resumed(worker, at, ckptTime string) remediate.GuestAttribute {
	return remediate.GuestAttribute{Worker: worker, Namespace: "autoheal", Key: "resumed",
		Value: `{"time":"` + at + `","checkpoint":"gs://b/ckpt-` + worker + `","checkpointTime":"` + ckptTime + `","attempt":1,"worker":` + worker + `}`}
}

type watchEnv struct {
	w     *remediate.ResumeWatcher
	guest *fakeGuest
	store *ledger.MemoryIncidents
	rec   *sliceRecorder
	now   time.Time
}

func newWatch(t *testing.T, attrs ...remediate.GuestAttribute) *watchEnv {
	t.Helper()
	e := &watchEnv{guest: &fakeGuest{attrs: attrs}, store: ledger.NewMemoryIncidents(), rec: &sliceRecorder{}}
	e.now = firstEvent.Add(20 * time.Minute)
	e.w = &remediate.ResumeWatcher{Guest: e.guest, Store: e.store, Recorder: e.rec, Now: func() time.Time { return e.now },
		Config: remediate.Config{ResumeWatch: 2 * time.Hour}}
	err := e.w.Observe(context.Background(), remediate.Record{Time: firstEvent.Add(5 * time.Second), InsertID: "e1", EventTime: firstEvent,
		Node: resumeNode, Zone: "us-central2-b", Cause: "maintenance", Action: remediate.ActionRecreate, AcceleratorType: "v4-16", Chips: 8})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *watchEnv) check(t *testing.T, node *tpu.Node) (remediate.Record, bool, error) {
	t.Helper()
	return e.w.CheckNode(context.Background(), node)
}

func TestResumedRecordWhenEveryWorkerReportedAfterTheFirstEvent(t *testing.T) {
	e := newWatch(t,
		resumed("0", "2026-11-20T03:17:00Z", "2026-11-20T02:50:00Z"),
		resumed("1", "2026-11-20T03:18:00Z", "2026-11-20T02:52:00Z"),
		remediate.GuestAttribute{Worker: "0", Namespace: "autoheal", Key: "checkpoint", Value: `{}`}, // another key: ignored
	)
	got, wrote, err := e.check(t, healthyNode)
	if err != nil || !wrote {
		t.Fatalf("Check = %v, %v; want a record", wrote, err)
	}
	want := remediate.Record{
		Time: e.now, InsertID: "e1", EventTime: firstEvent, Node: resumeNode, Zone: "us-central2-b", Cause: "maintenance",
		Action: remediate.ActionResumed, Outcome: remediate.OutcomeResumed, Generation: 3, AcceleratorType: "v4-16", Chips: 8,
		Reason: "training resumed on 2 of 2 workers 18m0s after the first event, from gs://b/ckpt-0 (progress lost 10m0s)",
		Steps: []remediate.Step{
			{Name: "get-guest-attributes", Start: e.now},
			// 03:00 → 03:18, the later worker.
			{Name: "resumed", Start: firstEvent, Duration: 18 * time.Minute},
			// From the older checkpoint, 02:50, to the first event.
			{Name: "lost-progress", Start: firstEvent.Add(-10 * time.Minute), Duration: 10 * time.Minute},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]remediate.Record{want}, e.rec.recs); diff != "" {
		t.Errorf("recorded (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{resumeNode + " autoheal/"}, e.guest.calls); diff != "" {
		t.Errorf("guest attribute reads (-want +got):\n%s", diff)
	}
	// One record per incident: it is closed now.
	if _, wrote, err := e.check(t, healthyNode); wrote || err != nil {
		t.Errorf("second Check = %v, %v; want nothing", wrote, err)
	}
	if len(e.rec.recs) != 1 {
		t.Errorf("%d records, want 1", len(e.rec.recs))
	}
}

func TestStaleOrMissingReportsDoNotCloseTheIncident(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs []remediate.GuestAttribute
	}{
		{"no report", nil},
		{"one worker of two", []remediate.GuestAttribute{resumed("0", "2026-11-20T03:17:00Z", "")}},
		{"a report from before the first event", []remediate.GuestAttribute{
			resumed("0", "2026-11-20T03:17:00Z", ""), resumed("1", "2026-11-20T02:59:59Z", "")}},
		{"a report at the first event", []remediate.GuestAttribute{
			resumed("0", "2026-11-20T03:17:00Z", ""), resumed("1", "2026-11-20T03:00:00Z", "")}},
		{"an unreadable report", []remediate.GuestAttribute{
			resumed("0", "2026-11-20T03:17:00Z", ""), {Worker: "1", Namespace: "autoheal", Key: "resumed", Value: "{not json"}}},
		{"a worker the node does not have", []remediate.GuestAttribute{
			resumed("0", "2026-11-20T03:17:00Z", ""), resumed("2", "2026-11-20T03:17:00Z", "")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newWatch(t, tc.attrs...)
			if _, wrote, err := e.check(t, healthyNode); wrote || err != nil {
				t.Fatalf("Check = %v, %v; want nothing yet", wrote, err)
			}
			// The watch runs from when the node was first seen healthy.
			e.now = e.now.Add(2*time.Hour - time.Second)
			if _, wrote, err := e.check(t, healthyNode); wrote || err != nil {
				t.Fatalf("Check before the watch ran out = %v, %v; want nothing", wrote, err)
			}
			e.now = e.now.Add(time.Second)
			got, wrote, err := e.check(t, healthyNode)
			if err != nil || !wrote {
				t.Fatalf("Check after the watch = %v, %v; want the no-resume record", wrote, err)
			}
			if got.Action != remediate.ActionResumed || got.Outcome != "" || got.EventTime != firstEvent ||
				len(got.Reason) < len(remediate.ReasonNoResume) || got.Reason[:len(remediate.ReasonNoResume)] != remediate.ReasonNoResume {
				t.Errorf("record = %+v; want action resumed, no outcome, reason starting %q", got, remediate.ReasonNoResume)
			}
			if _, wrote, _ := e.check(t, healthyNode); wrote {
				t.Error("a second no-resume record")
			}
		})
	}
}

func TestCheckWaitsWhileTheNodeIsNotHealthy(t *testing.T) {
	e := newWatch(t, resumed("0", "2026-11-20T03:17:00Z", ""), resumed("1", "2026-11-20T03:17:00Z", ""))
	for _, n := range []*tpu.Node{
		{Name: resumeNode, State: "CREATING"},
		{Name: resumeNode, State: "READY", Health: "UNHEALTHY_MAINTENANCE"},
	} {
		if _, wrote, err := e.w.Check(context.Background(), n, mustOpen(t, e)); wrote || err != nil {
			t.Errorf("Check(%s %s) = %v, %v; want nothing", n.State, n.Health, wrote, err)
		}
	}
	if _, err := e.w.CheckOpen(context.Background(), func(context.Context, string) (*tpu.Node, error) {
		return nil, googleerr.FromAPI(&googleapi.Error{Code: http.StatusNotFound, Message: "not found"})
	}); err != nil {
		t.Errorf("CheckOpen with the node NOT FOUND: %v", err)
	}
	if len(e.guest.calls) != 0 || len(e.rec.recs) != 0 {
		t.Errorf("guest read %d times, %d records; want none while the node is down", len(e.guest.calls), len(e.rec.recs))
	}
	// Healthy a day later: the watch starts then, and the reports count.
	e.now = firstEvent.Add(24 * time.Hour)
	recs, err := e.w.CheckOpen(context.Background(), func(context.Context, string) (*tpu.Node, error) { return healthyNode, nil })
	if err != nil || len(recs) != 1 || recs[0].Outcome != remediate.OutcomeResumed {
		t.Fatalf("CheckOpen = %+v, %v; want one resumed record", recs, err)
	}
	// A fresh start: no checkpoint time, so no lost-progress step.
	if n := len(recs[0].Steps); n != 2 {
		t.Errorf("%d steps, want get-guest-attributes and resumed: %+v", n, recs[0].Steps)
	}
}

func TestAnIncidentWhoseNodeNeverComesBackIsClosedAfterTheMaxAge(t *testing.T) {
	e := newWatch(t)
	e.now = firstEvent.Add(remediate.IncidentMaxAge)
	got, wrote, err := e.w.Check(context.Background(), nil, mustOpen(t, e))
	if err != nil || !wrote || got.Outcome != "" || got.Action != remediate.ActionResumed {
		t.Fatalf("Check = %+v, %v, %v; want a no-resume record", got, wrote, err)
	}
	if open, _ := e.store.OpenIncidents(context.Background()); len(open) != 0 {
		t.Errorf("still open: %+v", open)
	}
}

func TestGuestAttributeErrorsAreRetriedUntilTheWatchRunsOut(t *testing.T) {
	e := newWatch(t)
	e.guest.err = errors.New("googleapi: Error 503: unavailable")
	if _, wrote, err := e.check(t, healthyNode); wrote || err == nil {
		t.Fatalf("Check = %v, %v; want the error, nothing written", wrote, err)
	}
	e.now = e.now.Add(2 * time.Hour)
	got, wrote, err := e.check(t, healthyNode)
	if err != nil || !wrote || got.Steps[0].Err == "" {
		t.Fatalf("Check after the watch = %+v, %v, %v; want a no-resume record with the failed step", got, wrote, err)
	}
}

func TestARecordLostToTheRecorderIsWrittenOnTheNextCheck(t *testing.T) {
	e := newWatch(t, resumed("0", "2026-11-20T03:17:00Z", ""), resumed("1", "2026-11-20T03:17:00Z", ""))
	e.rec.err = errors.New("logging unavailable")
	if _, _, err := e.check(t, healthyNode); err == nil {
		t.Fatal("Check with a failing recorder: no error")
	}
	e.rec.err = nil
	if _, wrote, err := e.check(t, healthyNode); !wrote || err != nil {
		t.Fatalf("Check = %v, %v; want the record now", wrote, err)
	}
}

func TestObserveOpensAndClosesIncidents(t *testing.T) {
	ctx := context.Background()
	rec := func(action remediate.Action, outcome remediate.Outcome, insertID string) remediate.Record {
		r := remediate.Record{Time: firstEvent, Node: resumeNode, Action: action, Outcome: outcome, InsertID: insertID}
		if insertID != "" {
			r.EventTime = firstEvent
		}
		return r
	}
	for _, tc := range []struct {
		name string
		recs []remediate.Record
		open bool
	}{
		{"recreate opens", []remediate.Record{rec(remediate.ActionRecreate, "", "e1")}, true},
		{"a sweep's defer opens", []remediate.Record{rec(remediate.ActionDefer, "", "")}, true},
		{"an event's record opens (recovered by itself)", []remediate.Record{rec(remediate.ActionRecord, remediate.OutcomeClosed, "e1")}, true},
		{"a sweep's record does not", []remediate.Record{rec(remediate.ActionRecord, "", "")}, false},
		{"a skip does not", []remediate.Record{rec(remediate.ActionSkip, remediate.OutcomeClosed, "e1")}, false},
		{"a reject does not", []remediate.Record{rec(remediate.ActionReject, "", "e1")}, false},
		{"a dry run does not", []remediate.Record{func() remediate.Record { r := rec(remediate.ActionRecreate, "", "e1"); r.DryRun = true; return r }()}, false},
		{"abandoned closes", []remediate.Record{rec(remediate.ActionRecreate, "", "e1"), rec(remediate.ActionRecreate, remediate.OutcomeAbandoned, "")}, false},
		{"a guard's skip closes", []remediate.Record{rec(remediate.ActionDefer, "", "e1"), rec(remediate.ActionSkip, remediate.OutcomeClosed, "e2")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ledger.NewMemoryIncidents()
			w := &remediate.ResumeWatcher{Store: s, Now: func() time.Time { return firstEvent }}
			for _, r := range tc.recs {
				if err := w.Observe(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			_, open, err := s.OpenIncidentOf(ctx, resumeNode)
			if err != nil || open != tc.open {
				t.Errorf("open = %v, %v; want %v", open, err, tc.open)
			}
		})
	}
}

func mustOpen(t *testing.T, e *watchEnv) remediate.Incident {
	t.Helper()
	inc, ok, err := e.store.OpenIncidentOf(context.Background(), resumeNode)
	if err != nil || !ok {
		t.Fatalf("no open incident: %v", err)
	}
	return inc
}

func TestRecordingObservesWhatItRecords(t *testing.T) {
	ctx := context.Background()
	s := ledger.NewMemoryIncidents()
	inner := &sliceRecorder{}
	w := &remediate.ResumeWatcher{Store: s, Recorder: inner, Now: time.Now}
	var errs []error
	rec := w.Recording(inner, func(err error) { errs = append(errs, err) })
	r := remediate.Record{Time: firstEvent, InsertID: "e1", EventTime: firstEvent, Node: resumeNode, Action: remediate.ActionRecreate}
	if err := rec.Record(ctx, r); err != nil {
		t.Fatal(err)
	}
	if len(inner.recs) != 1 {
		t.Errorf("%d records written, want 1", len(inner.recs))
	}
	if _, open, _ := s.OpenIncidentOf(ctx, resumeNode); !open {
		t.Error("no incident opened")
	}
	inner.err = errors.New("logging down")
	r.Node = "projects/p/locations/z/nodes/other"
	if err := rec.Record(ctx, r); err == nil {
		t.Error("a failed write was not returned")
	}
	if _, open, _ := s.OpenIncidentOf(ctx, r.Node); open {
		t.Error("an incident opened for a record that was not written")
	}
	if len(errs) != 0 {
		t.Errorf("observe errors: %v", errs)
	}
}
