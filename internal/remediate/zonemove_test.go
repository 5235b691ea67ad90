package remediate_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/record"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/report"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// fallbackEnv is one node, wave-00 in us-central2-b, asking for fallback
// (neither a data disk nor a reservation pins it unless edit adds one),
// with us-central2-b, -a and -c watched, K = k (0: the default), and
// us-central2-b refusing every create for capacity for outage, run until
// every recovery ended.
func fallbackEnv(t *testing.T, fallback string, k int, outage time.Duration, edit func(*env)) *env {
	t.Helper()
	f, names := waveFleet(1)
	f.Nodes[0].Metadata[remediate.StockoutMetadataKey] = fallback
	f.Nodes[0].DataDisks, f.Nodes[0].SchedulingConfig = nil, nil
	e := newClockedEnv(t, f, tpufake.WithRequestLog(1000))
	e.h.Config.Zones = []string{zone, "us-central2-a", "us-central2-c"}
	if k > 0 {
		e.h.Config.StockoutZoneAfter = k
	}
	if edit != nil {
		edit(e)
	}
	e.fake.Fail(tpufake.FailRule{RPC: "operation:nodes.create", Zone: zone, Status: "RESOURCE_EXHAUSTED", Until: start.Add(outage)})
	handleAll(t, e, names)
	if left, err := e.h.Drain(context.Background(), e.clock.Set, 500); err != nil || left != 0 {
		t.Fatalf("Drain = %d unfinished, %v", left, err)
	}
	return e
}

// zoneMoveEnv is fallbackEnv with an hour's outage: wave-00 moves.
func zoneMoveEnv(t *testing.T, fallback string) (*env, string) {
	t.Helper()
	return fallbackEnv(t, fallback, 0, time.Hour, nil), "wave-00"
}

// createZones is the zone of every create request, in order.
func createZones(e *env) []string {
	var zones []string
	for _, r := range e.fake.Requests() {
		if r.RPC == "nodes.create" {
			zones = append(zones, strings.Split(r.Name, "/")[3])
		}
	}
	return zones
}

// TestZoneFallbackRecreatesInTheSecondZoneAfterKStockouts: a node asking
// for zones:us-central2-a,us-central2-c whose home zone refuses every
// create is created three times in its home zone (K=3, the default), then
// in the first zone of its seeded order (us-central2-c for wave-00 with
// seed 23), where it recovers. The third stockout's record says it moves,
// the recovered record says where it went, the ledger keeps the recovery
// under the home zone's name pointing to the new one, and the home zone
// holds no node.
func TestZoneFallbackRecreatesInTheSecondZoneAfterKStockouts(t *testing.T) {
	e, name := zoneMoveEnv(t, "zones:us-central2-a,us-central2-c")
	home := fmt.Sprintf("projects/%s/locations/%s/nodes/%s", project, zone, name)
	const moved = "projects/acme-ml/locations/us-central2-c/nodes/wave-00"

	if got, want := strings.Join(createZones(e), " "), "us-central2-b us-central2-b us-central2-b us-central2-c"; got != want {
		t.Errorf("creates in %s, want %s", got, want)
	}
	var fallbacks []string
	var last remediate.Record
	for _, r := range e.records.list() {
		if r.Refusal != nil {
			fallbacks = append(fallbacks, r.Refusal.Fallback)
			if r.Refusal.Zone != zone {
				t.Errorf("refusal in %s, want %s", r.Refusal.Zone, zone)
			}
		}
		last = r
	}
	want := []string{
		"zones:us-central2-a,us-central2-c: accepted: another zone after 3 stockouts in us-central2-b (1 so far)",
		"zones:us-central2-a,us-central2-c: accepted: another zone after 3 stockouts in us-central2-b (2 so far)",
		"zones:us-central2-a,us-central2-c: 3 stockouts in us-central2-b: creating next in us-central2-c",
	}
	if strings.Join(fallbacks, "\n") != strings.Join(want, "\n") {
		t.Errorf("stockout records' fallback:\n%s\nwant\n%s", strings.Join(fallbacks, "\n"), strings.Join(want, "\n"))
	}
	if last.Outcome != remediate.OutcomeRecovered || last.ZoneMovedTo != moved || last.Node != home {
		t.Errorf("last record: node %s outcome %q zoneMovedTo %q; want %s recovered, moved to %s", last.Node, last.Outcome, last.ZoneMovedTo, home, moved)
	}

	h, err := e.store.History(context.Background(), home, project, "", e.clock.Now(), 24*time.Hour)
	if err != nil || h.Recovery == nil {
		t.Fatalf("History(%s) = %+v, %v; want the recovery", home, h, err)
	}
	if r := h.Recovery; r.Phase != remediate.PhaseRecovered || r.ZoneMoveNode != moved || r.Stockouts != 3 || r.ZoneMoveStockouts != 3 {
		t.Errorf("home recovery: phase %s, zoneMoveNode %q, stockouts %d/%d; want recovered, %s, 3/3", r.Phase, r.ZoneMoveNode, r.Stockouts, r.ZoneMoveStockouts, moved)
	}
	if h, _ := e.store.History(context.Background(), moved, project, "", e.clock.Now(), 24*time.Hour); h.Recovery != nil {
		t.Errorf("a recovery under %s too: %+v; want only the home zone's", moved, *h.Recovery)
	}
	// The report, from the records as written: the incident says where
	// the node went.
	var lines []byte
	for _, r := range e.records.list() {
		b, err := record.StdoutLine(r, "tpu-autoheal", "", "", func() time.Time { return r.Time })
		if err != nil {
			t.Fatalf("StdoutLine: %v", err)
		}
		lines = append(lines, b...)
	}
	recs, err := report.ReadAll(lines)
	if err != nil {
		t.Fatalf("report.ReadAll: %v", err)
	}
	incs := report.Group(recs)
	if len(incs) != 1 || incs[0].ZoneMovedTo != moved || incs[0].Node != home || incs[0].Outcome != "recreated" {
		t.Fatalf("incidents %+v, want one of %s, recreated, moved to %s", incs, home, moved)
	}
	var text bytes.Buffer
	if err := report.WriteText(&text, incs, report.Summarize(incs)); err != nil {
		t.Fatal(err)
	}
	if want := "wave-00 was created in another zone (autoheal-stockout zones:): now " + moved + "\n"; !strings.Contains(text.String(), want) {
		t.Errorf("report text:\n%s\nwant it to say %q", text.String(), want)
	}
	if got := report.JSONOf(incs[0]).ZoneMovedTo; got != moved {
		t.Errorf("report JSON zoneMovedTo %q, want %s", got, moved)
	}

	var nodes []string
	for _, n := range e.fake.Fleet().Nodes {
		nodes = append(nodes, n.Name+" "+n.State+" gen="+n.Labels[remediate.GenerationLabel])
	}
	if got, want := strings.Join(nodes, ", "), moved+" READY gen=1"; got != want {
		t.Errorf("fleet %s, want %s", got, want)
	}
	if got := e.fake.Fleet().Nodes[0].Labels[remediate.ZoneMoveLabel]; got != zone {
		t.Errorf("moved node's label %s=%q, want %s", remediate.ZoneMoveLabel, got, zone)
	}
}

// TestZoneFallbackNextIncidentStartsWhereTheNodeIs: once moved, the node's
// next incident is about the node where it is: it is recreated there, under
// that zone's name, and the home zone's recovery is left as it ended.
func TestZoneFallbackNextIncidentStartsWhereTheNodeIs(t *testing.T) {
	e, _ := zoneMoveEnv(t, "zones:us-central2-a,us-central2-c")
	const moved = "projects/acme-ml/locations/us-central2-c/nodes/wave-00"
	n := e.fake.Fleet().Nodes[0]
	n.State = "PREEMPTED"
	e.fake.SetNode(n)
	e.clock.Set(e.clock.Now().Add(2 * time.Hour)) // past the cooldown
	ev := events.Event{InsertID: "next-incident", Time: e.clock.Now(), Method: events.MethodTerminate,
		Node: events.NodeRef{Project: project, Zone: "us-central2-c", Node: "wave-00"}, Cause: events.CausePreemption}
	if _, err := e.h.Handle(context.Background(), ev); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if left, err := e.h.Drain(context.Background(), e.clock.Set, 100); err != nil || left != 0 {
		t.Fatalf("Drain = %d unfinished, %v", left, err)
	}
	if got, want := strings.Join(createZones(e), " "), "us-central2-b us-central2-b us-central2-b us-central2-c us-central2-c"; got != want {
		t.Errorf("creates in %s, want %s", got, want)
	}
	h, err := e.store.History(context.Background(), moved, project, "", e.clock.Now(), 24*time.Hour)
	if err != nil || h.Recovery == nil {
		t.Fatalf("History(%s) = %+v, %v; want the second incident's recovery", moved, h, err)
	}
	if r := h.Recovery; r.Phase != remediate.PhaseRecovered || r.ZoneMoveNode != "" || r.Stockouts != 0 {
		t.Errorf("second recovery: phase %s, zoneMoveNode %q, stockouts %d; want recovered where it is, no move, no stockout", r.Phase, r.ZoneMoveNode, r.Stockouts)
	}
	home := "projects/acme-ml/locations/us-central2-b/nodes/wave-00"
	if h, _ := e.store.History(context.Background(), home, project, "", e.clock.Now(), 24*time.Hour); h.Recovery == nil || h.Recovery.ZoneMoveNode != moved {
		t.Errorf("home recovery %+v, want it kept, pointing to %s", h.Recovery, moved)
	}
	if nodes := e.fake.Fleet().Nodes; len(nodes) != 1 || nodes[0].Name != moved || nodes[0].State != "READY" {
		t.Errorf("fleet %+v, want %s READY alone", nodes, moved)
	} else if l, ok := nodes[0].Labels[remediate.ZoneMoveLabel]; ok {
		t.Errorf("recreated where it is, still labelled %s=%s; want the label gone", remediate.ZoneMoveLabel, l)
	}
}

// TestZoneMovedNodeIsTheHomeRecoverysWhileItRuns: while the recovery that
// moved a node is unfinished, a decision about the moved node under its
// own name (here a preemption of it while the home recovery waits for it)
// is skipped as a recovery in flight: one node is never recovered by two
// recoveries under two keys.
func TestZoneMovedNodeIsTheHomeRecoverysWhileItRuns(t *testing.T) {
	const home = "projects/acme-ml/locations/us-central2-b/nodes/wave-00"
	const moved = "projects/acme-ml/locations/us-central2-c/nodes/wave-00"
	f, _ := waveFleet(1)
	f.Nodes[0].Name, f.Nodes[0].State = moved, "PREEMPTED"
	f.Nodes[0].Labels[remediate.ZoneMoveLabel] = zone
	f.Nodes[0].Labels[remediate.GenerationLabel] = "1"
	e := newClockedEnv(t, f, tpufake.WithRequestLog(1000))
	ctx := context.Background()
	rec, err := e.store.Claim(ctx, remediate.ClaimRequest{Node: home, Project: project, Zone: zone, Holder: "other", Now: start,
		Action: remediate.ActionRecreate, Config: e.h.Config})
	if err != nil {
		t.Fatal(err)
	}
	rec.Phase, rec.DeleteSent, rec.Stockouts, rec.ZoneMoveNode, rec.ZoneMoveStockouts = remediate.PhaseCreated, true, 3, moved, 3
	rec.NextLookAt = start.Add(time.Hour)
	if err := e.store.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	ev := events.Event{InsertID: "moved-preempted", Time: start, Method: events.MethodTerminate,
		Node: events.NodeRef{Project: project, Zone: "us-central2-c", Node: "wave-00"}, Cause: events.CausePreemption}
	r, err := e.h.Handle(ctx, ev)
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if want := "recovery in flight: " + home + " gen 1 (created) moved it here from us-central2-b"; r.Action != remediate.ActionSkip || r.Reason != want {
		t.Errorf("record %s %q, want skip %q", r.Action, r.Reason, want)
	}
	if h, _ := e.store.History(ctx, moved, project, "", start, 24*time.Hour); h.Recovery != nil {
		t.Errorf("a recovery under %s: %+v; want none", moved, *h.Recovery)
	}
	if got := e.fake.Count("nodes.delete", moved) + e.fake.Count("nodes.create", moved); got != 0 {
		t.Errorf("%d deletes and creates of %s, want none", got, moved)
	}
}

// TestZoneFallbackRefusedStaysHome: a zones: fallback the node cannot use
// is refused with a record on every stockout, and every create stays in
// the home zone, more than K times.
func TestZoneFallbackRefusedStaysHome(t *testing.T) {
	for _, tt := range []struct {
		name, fallback string
		edit           func(e *env)
		want           string
	}{
		{"a zone of another region", "zones:europe-west4-a", nil,
			"zones: refused: europe-west4-a is in region europe-west4, not the node's region us-central2 (same region only): waiting in us-central2-b"},
		{"a zone not in AUTOHEAL_ZONES", "zones:us-central2-d", nil,
			"zones: refused: us-central2-d is not in AUTOHEAL_ZONES (us-central2-b,us-central2-a,us-central2-c): waiting in us-central2-b"},
		{"zonal data disks", "zones:us-central2-a", func(e *env) {
			n := e.fake.Fleet().Nodes[0]
			n.DataDisks = fullNode("TERMINATED").DataDisks
			e.fake.SetNode(n)
		}, "zones: refused: its spec attaches zonal data disks (pinned to us-central2-b): waiting in us-central2-b"},
		{"a reservation", "zones:us-central2-a", func(e *env) {
			n := e.fake.Fleet().Nodes[0]
			n.SchedulingConfig = fullNode("TERMINATED").SchedulingConfig
			e.fake.SetNode(n)
		}, "zones: refused: its spec creates it under a reservation (pinned to us-central2-b): waiting in us-central2-b"},
		{"only the home zone listed", "zones:us-central2-b", nil,
			"zones:us-central2-b: no zone but us-central2-b listed: waiting in us-central2-b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := fallbackEnv(t, tt.fallback, 0, 20*time.Minute, tt.edit)
			refusals := 0
			for _, r := range e.records.list() {
				if r.Refusal == nil {
					if r.ZoneMovedTo != "" {
						t.Errorf("record says moved to %s", r.ZoneMovedTo)
					}
					continue
				}
				refusals++
				if r.Refusal.Fallback != tt.want {
					t.Errorf("fallback %q\nwant     %q", r.Refusal.Fallback, tt.want)
				}
			}
			// 20 minutes of stockouts: back-offs of 1–2, 2–4, 4–8 and
			// 7.5–15 min reach past it only after the fourth.
			if refusals < 4 {
				t.Errorf("%d stockout records, want at least 4 (more than K=3)", refusals)
			}
			for _, z := range createZones(e) {
				if z != zone {
					t.Errorf("a create in %s, want only %s", z, zone)
				}
			}
			if n := e.fake.Fleet().Nodes[0]; n.State != "READY" || !strings.Contains(n.Name, "/"+zone+"/") {
				t.Errorf("node %s %s, want READY in %s", n.Name, n.State, zone)
			}
		})
	}
}

// TestZoneFallbackAfterKFromConfig: AUTOHEAL_STOCKOUT_ZONE_AFTER (here 1)
// is how many stockouts the home zone takes before the move.
func TestZoneFallbackAfterKFromConfig(t *testing.T) {
	e := fallbackEnv(t, "zones:us-central2-a", 1, time.Hour, nil)
	if got, want := strings.Join(createZones(e), " "), "us-central2-b us-central2-a"; got != want {
		t.Errorf("creates in %s, want %s", got, want)
	}
}

// TestZoneFallbackWaveSpreadsOverTheListedZones: a wave of 32 nodes asking
// for zones:us-central2-a,us-central2-c while their home zone has no
// capacity for an hour is recreated in both zones (each node's order is
// its own), every node exactly once, with its creates there spread out (no
// second of the clock sees more than 4), all within the hour.
func TestZoneFallbackWaveSpreadsOverTheListedZones(t *testing.T) {
	const n = 32
	f, names := waveFleet(n)
	for _, node := range f.Nodes {
		node.Metadata[remediate.StockoutMetadataKey] = "zones:us-central2-a,us-central2-c"
		node.DataDisks, node.SchedulingConfig = nil, nil
	}
	e := newClockedEnv(t, f, tpufake.WithRequestLog(10000))
	e.h.Config.Zones = []string{zone, "us-central2-a", "us-central2-c"}
	outage := start.Add(time.Hour)
	e.fake.Fail(tpufake.FailRule{RPC: "operation:nodes.create", Zone: zone, Status: "RESOURCE_EXHAUSTED", Until: outage})
	handleAll(t, e, names)
	if left, err := e.h.Drain(context.Background(), e.clock.Set, 5000); err != nil || left != 0 {
		t.Fatalf("Drain = %d unfinished, %v", left, err)
	}
	perZone := map[string]int{}
	names32 := map[string]int{}
	for _, node := range e.fake.Fleet().Nodes {
		p := strings.Split(node.Name, "/")
		perZone[p[3]]++
		names32[p[5]]++
		if node.State != "READY" {
			t.Errorf("%s %s, want READY", node.Name, node.State)
		}
	}
	if len(names32) != n || len(e.fake.Fleet().Nodes) != n {
		t.Errorf("%d nodes of %d names, want %d nodes, one per name", len(e.fake.Fleet().Nodes), len(names32), n)
	}
	t.Logf("nodes per zone after the wave (seed 23): %v", perZone)
	if perZone[zone] != 0 || perZone["us-central2-a"] != 17 || perZone["us-central2-c"] != 15 {
		t.Errorf("nodes per zone %v, want us-central2-a 17, us-central2-c 15 (seed 23), none at home", perZone)
	}
	perSecond := map[int64]int{}
	worst := 0
	var last time.Time
	for _, r := range e.fake.Requests() {
		if r.RPC != "nodes.create" || strings.Contains(r.Name, "/"+zone+"/") {
			continue
		}
		perSecond[r.Time.Unix()]++
		worst = max(worst, perSecond[r.Time.Unix()])
		if r.Time.After(last) {
			last = r.Time
		}
	}
	t.Logf("creates in the other zones: at most %d in one second, the last at +%s", worst, last.Sub(start))
	if worst > 4 || !last.Before(outage) {
		t.Errorf("creates elsewhere: %d in one second, the last at %s; want at most 4, before %s", worst, last, outage)
	}
}

// TestZoneMovedNodeDeletedByAPersonIsNamed: a person's delete of the node
// a zones: fallback created elsewhere (their admin-activity entry names
// the moved node) is kept as the home recovery's evidence: the recovery
// closes naming them and never creates the node again.
func TestZoneMovedNodeDeletedByAPersonIsNamed(t *testing.T) {
	const home = "projects/acme-ml/locations/us-central2-b/nodes/wave-00"
	const moved = "projects/acme-ml/locations/us-central2-c/nodes/wave-00"
	e := newClockedEnv(t, tpufake.Fleet{}, tpufake.WithRequestLog(1000))
	ctx := context.Background()
	rec, err := e.store.Claim(ctx, remediate.ClaimRequest{Node: home, Project: project, Zone: zone, Holder: "other", Now: start,
		Action: remediate.ActionRecreate, Config: e.h.Config})
	if err != nil {
		t.Fatal(err)
	}
	spec := fullNode("TERMINATED")
	spec.Name, spec.DataDisks, spec.SchedulingConfig = "", nil, nil
	rec.Spec = remediate.CleanSpec(spec)
	rec.Phase, rec.DeleteSent, rec.DeleteAnswered, rec.Stockouts = remediate.PhaseCreated, true, true, 3
	rec.ZoneMoveNode, rec.ZoneMoveStockouts, rec.CreateSentAt = moved, 3, start
	if err := e.store.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	e.clock.Set(start.Add(time.Minute))
	ev := events.Event{InsertID: "admin-alice", Time: e.clock.Now(), Kind: events.KindAdminActivity, Principal: "alice@acme.example",
		Method: "google.cloud.tpu.v2.Tpu.DeleteNode", Node: events.NodeRef{Project: project, Zone: "us-central2-c", Node: "wave-00"},
		Admin: &events.AdminActivity{Change: events.ChangeDeleteNode, OperationID: "projects/acme-ml/locations/us-central2-c/operations/op-alice", First: true}}
	r, err := e.h.Evidence(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if want := "kept in the ledger for the unfinished recovery of " + home; !strings.Contains(r.Reason, want) {
		t.Errorf("evidence record %q, want it to say %q", r.Reason, want)
	}
	e.clock.Set(start.Add(20 * time.Minute)) // the home recovery's lease is over
	if left, err := e.h.Drain(ctx, e.clock.Set, 50); err != nil || left != 0 {
		t.Fatalf("Drain = %d unfinished, %v", left, err)
	}
	h, err := e.store.History(ctx, home, project, "", e.clock.Now(), 24*time.Hour)
	if err != nil || h.Recovery == nil {
		t.Fatalf("History = %+v, %v", h, err)
	}
	if got := h.Recovery; got.Phase != remediate.PhaseClosed || !strings.Contains(got.LastError, "alice@acme.example") {
		t.Errorf("home recovery %s: %q; want closed naming alice@acme.example", got.Phase, got.LastError)
	}
	if got := e.fake.Count("nodes.create", ""); got != 0 {
		t.Errorf("%d creates, want none: a person deleted the moved node", got)
	}
}

// TestZoneMovedNodesTrainingResumedIsSeen: the incident of a node a zones:
// fallback moved is keyed by its home name, as its recovery is; the sweep
// that looks at open incidents reads the node where it went, and the
// guest's report there closes the incident with one resumed record about
// the home name.
func TestZoneMovedNodesTrainingResumedIsSeen(t *testing.T) {
	const home = "projects/acme-ml/locations/us-central2-b/nodes/wave-00"
	const moved = "projects/acme-ml/locations/us-central2-c/nodes/wave-00"
	guest := &guestBoard{}
	incidents := ledger.NewMemoryIncidents()
	e := fallbackEnv(t, "zones:us-central2-a,us-central2-c", 0, time.Hour, func(e *env) {
		n := e.fake.Fleet().Nodes[0]
		n.AcceleratorType, n.AcceleratorConfig = "v4-8", nil // one worker
		e.fake.SetNode(n)
		cfg := e.h.Config
		cfg.ResumeWatch = 2 * time.Hour
		w := &remediate.ResumeWatcher{Guest: guest, Store: incidents, Recorder: e.records, Config: cfg, Now: e.clock.Now}
		e.h.Resume = w
		e.h.Recorder = w.Recording(e.records, func(err error) { t.Errorf("observe: %v", err) })
	})
	if incs := incidents.All(); len(incs) != 1 || incs[0].Node != home || !incs[0].Open() || incs[0].HealthyAt.IsZero() {
		t.Fatalf("incidents %+v, want one of %s, open, healthy (the recovered record's check found the moved node)", incs, home)
	}
	guest.set(moved, resumed("0", e.clock.Now().Add(2*time.Minute).Format(time.RFC3339), "2026-11-20T03:30:00Z"))
	e.clock.Set(e.clock.Now().Add(5 * time.Minute))
	if _, err := e.h.Sweep(context.Background(), remediate.SweepOptions{Projects: []string{project}, Zones: e.h.Config.Zones}); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	var resumedRecs []remediate.Record
	for _, r := range e.records.list() {
		if r.Action == remediate.ActionResumed {
			resumedRecs = append(resumedRecs, r)
		}
	}
	if len(resumedRecs) != 1 || resumedRecs[0].Node != home || !strings.HasPrefix(resumedRecs[0].Reason, "training resumed on 1 of 1 workers") {
		t.Errorf("resumed records %+v, want one about %s, training resumed on 1 of 1 workers", resumedRecs, home)
	}
	if incs := incidents.All(); len(incs) != 1 || incs[0].Open() {
		t.Errorf("incidents %+v, want the one, closed", incs)
	}
}
