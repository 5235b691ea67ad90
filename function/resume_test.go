package function_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// newEndpointHarness is the harness with the function building its own TPU
// clients (the v2 client and the maintenance client that reads guest
// attributes) against the simulated control plane, as deployed with
// AUTOHEAL_TPU_ENDPOINT: only the ledger, the incidents and the recorder
// are injected.
func newEndpointHarness(t *testing.T, now time.Time) (*harness, *ledger.MemoryIncidents) {
	t.Helper()
	fleet, err := tpufake.ReadFleet(bytes.NewReader(readTestdata(t, "fleet.json")))
	if err != nil {
		t.Fatal(err)
	}
	fake := tpufake.New(fleet)
	t.Cleanup(fake.Close)
	env := minimalEnv()
	env["AUTOHEAL_PROJECTS"] = "acme-ml"
	env["AUTOHEAL_ZONES"] = "us-central2-b"
	env["AUTOHEAL_TPU_ENDPOINT"] = fake.URL()
	cfg, err := load(t, env)
	if err != nil {
		t.Fatal(err)
	}
	recs, diag, incidents := &sliceRecorder{}, &syncBuffer{}, ledger.NewMemoryIncidents()
	clk := now
	fn, err := function.New(context.Background(), cfg,
		function.WithDiagnostics(diag),
		function.WithStore(ledger.NewMemory()),
		function.WithIncidents(incidents),
		function.WithRecorder(recs),
		function.WithClock(func() time.Time { return clk }),
	)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { fn.Close() })
	return &harness{fn: fn, tpu: fake, recs: recs, diag: diag, now: &clk}, incidents
}

func resumedOf(recs []remediate.Record) []remediate.Record {
	var out []remediate.Record
	for _, r := range recs {
		if r.Action == remediate.ActionResumed {
			out = append(out, r)
		}
	}
	return out
}

// TestResumedRecordAfterTheGuestsReport: terminate → recreate through the
// simulated TPU → the guests of all 16 workers of the v4-128 report
// autoheal/resumed → the next sweep writes one resumed record with the
// incident's figures, and later sweeps none.
func TestResumedRecordAfterTheGuestsReport(t *testing.T) {
	h, incidents := newEndpointHarness(t, eventTime.Add(time.Minute))
	if err := h.fn.HandleMessage(context.Background(), pushBody(readTestdata(t, "terminate-maintenance.json"))); err != nil {
		t.Fatal(err)
	}
	h.settle(t)
	var recovered bool
	for _, r := range h.recs.records() {
		recovered = recovered || r.Outcome == remediate.OutcomeRecovered
	}
	if !recovered {
		t.Fatalf("no recovered record: %v", actions(h.recs.records()))
	}
	if got := resumedOf(h.recs.records()); len(got) != 0 {
		t.Fatalf("resumed records before any guest reported: %+v", got)
	}
	if incs := incidents.All(); len(incs) != 1 || !incs[0].Open() || incs[0].HealthyAt.IsZero() {
		t.Fatalf("incidents = %+v; want one open, its node seen healthy", incs)
	}

	// Every worker resumed by 03:58 from the 03:30 checkpoint; worker 7
	// from the 03:20 one, worker 15 last, at 03:59.
	for w := range 16 {
		at, ckpt := "2026-11-20T03:58:00Z", "2026-11-20T03:30:00Z"
		if w == 15 {
			at = "2026-11-20T03:59:00Z"
		}
		if w == 7 {
			ckpt = "2026-11-20T03:20:00Z"
		}
		h.tpu.SetGuestAttribute(node, tpufake.GuestAttribute{Worker: fmt.Sprint(w), Namespace: "autoheal", Key: "resumed",
			Value: fmt.Sprintf(`{"time":%q,"checkpoint":"gs://acme-ckpt/llm/step-%d","checkpointTime":%q,"attempt":2,"worker":%d}`, at, w, ckpt, w)})
	}
	sweepAt := time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)
	*h.now = sweepAt
	if err := h.fn.HandleMessage(context.Background(), pushBody([]byte(events.SweepMessage))); err != nil {
		t.Fatal(err)
	}
	got := resumedOf(h.recs.records())
	if len(got) != 1 {
		t.Fatalf("resumed records = %+v, want 1", got)
	}
	r := got[0]
	// The first event 03:44:36.265703305 → 03:59:00; the 03:20 checkpoint
	// → the first event.
	toResume := 14*time.Minute + 23*time.Second + 734296695*time.Nanosecond
	lost := 24*time.Minute + 36*time.Second + 265703305*time.Nanosecond
	want := remediate.Record{
		Time: sweepAt, InsertID: "1x7kq2ed4a9f", EventTime: eventTime, Node: node, Zone: "us-central2-b", Cause: "maintenance",
		Action: remediate.ActionResumed, Outcome: remediate.OutcomeResumed, Generation: 1, AcceleratorType: "v4-128", Chips: 64,
		Reason: "training resumed on 16 of 16 workers 14m24s after the first event, from gs://acme-ckpt/llm/step-7 (progress lost 24m36s)",
		Steps: []remediate.Step{
			{Name: "resumed", Start: eventTime, Duration: toResume},
			{Name: "lost-progress", Start: time.Date(2026, 11, 20, 3, 20, 0, 0, time.UTC), Duration: lost},
		},
	}
	if len(r.Steps) != 3 || r.Steps[0].Name != "get-guest-attributes" || r.Steps[0].Err != "" {
		t.Fatalf("steps = %+v; want the guest attributes read, then the figures", r.Steps)
	}
	r.Steps = r.Steps[1:]
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("resumed record (-want +got):\n%s", diff)
	}
	if got := h.tpu.Count("nodes.getGuestAttributes", node); got < 2 {
		t.Errorf("nodes.getGuestAttributes calls = %d, want the read after the recovery and the sweep's", got)
	}

	h.settle(t)
	if got := resumedOf(h.recs.records()); len(got) != 1 {
		t.Errorf("%d resumed records after more sweeps, want 1", len(got))
	}
	if incs := incidents.All(); len(incs) != 1 || incs[0].Open() {
		t.Errorf("incidents = %+v; want the one, closed", incs)
	}
}

// Without a maintenance client (an injected TPU that cannot read guest
// attributes) the watch is off: no incident is opened.
func TestResumeWatchIsOffWithoutAGuestAttributesReader(t *testing.T) {
	h := newHarness(t, eventTime.Add(time.Minute), nil)
	if err := h.fn.HandleMessage(context.Background(), pushBody(readTestdata(t, "terminate-maintenance.json"))); err != nil {
		t.Fatal(err)
	}
	h.settle(t)
	if got := h.tpu.Count("nodes.getGuestAttributes", ""); got != 0 {
		t.Errorf("nodes.getGuestAttributes calls = %d, want 0", got)
	}
}
