package report_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/internal/report"
)

func buckets(infra, wasted float64) map[string]float64 {
	return map[string]float64{report.InfrastructureRecoveryBucket: infra, report.WastedProgressBucket: wasted}
}

func capacity(s float64) map[string]float64 { return map[string]float64{report.CapacityWaitBucket: s} }

// TestGoodputOfTheNightWorkedOutByHand: the night of testdata/night.jsonl
// (wantNight has each incident's times) in goodput terms, per job (no
// record names one: each node is its own job). Infrastructure recovery is
// each incident's downtime (no capacity wait that night); wasted progress
// is what the resume records reported.
//
//   - llm-v4-128, two incidents: 03:00:00 → resumed 03:18:00 = 1080 s, and
//     06:00:00 → READY 06:00:02 = 2 s: 1080 + 2 = 1082 s; progress lost 480 s
//     (checkpoint 02:52:00, event 03:00:00), the second unknown (1).
//   - v3-8-exp: 03:05:00 → resumed 03:12:00 = 420 s; lost 240 s.
//   - v4-16-repairing: 03:07:00 → READY 03:47:30 = 2430 s; lost unknown.
//   - v5p-16-abandoned: 03:09:00 → last record 03:40:05 = 1865 s; unknown.
//   - v4-32-not-opted-in was skipped: no cost tracked, no job.
func TestGoodputOfTheNightWorkedOutByHand(t *testing.T) {
	for _, file := range []string{"night.jsonl", "night-gcloud.json"} {
		t.Run(file, func(t *testing.T) {
			got := report.Goodput(report.Group(readFixture(t, file)))
			want := []report.JobGoodput{ // by job name
				{Job: nodeB, Nodes: []string{nodeB}, Incidents: 1, BadputSeconds: buckets(420, 240), AutohealBadputSeconds: capacity(0)},
				{Job: nodeA, Nodes: []string{nodeA}, Incidents: 2, BadputSeconds: buckets(1082, 480), AutohealBadputSeconds: capacity(0), WastedProgressUnknown: 1},
				{Job: nodeC, Nodes: []string{nodeC}, Incidents: 1, BadputSeconds: buckets(2430, 0), AutohealBadputSeconds: capacity(0), WastedProgressUnknown: 1},
				{Job: nodeD, Nodes: []string{nodeD}, Incidents: 1, BadputSeconds: buckets(1865, 0), AutohealBadputSeconds: capacity(0), WastedProgressUnknown: 1},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("goodput (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExclusionsOfTheNightWorkedOutByHand: one interval per counted
// incident, from its detection (first decision) to training resumed, else
// the node READY, else the last record; the skipped incident has none. The
// JSON is the array ml-goodput-measurement's exclusion query takes.
//
//	A   detected 03:00:05, resumed 03:18:00
//	B   detected 03:05:02, resumed 03:12:00
//	C   detected 03:07:01, READY 03:47:30 (no resume reported)
//	D   detected 03:09:01, abandoned: last record 03:40:05
//	A'  detected 06:00:02, READY 06:00:02 (healthy at the first look)
func TestExclusionsOfTheNightWorkedOutByHand(t *testing.T) {
	var buf bytes.Buffer
	if err := report.WriteExclusions(&buf, report.Group(readFixture(t, "night.jsonl"))); err != nil {
		t.Fatal(err)
	}
	var got []map[string]string
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("exclusions are not a JSON array of objects: %v\n%s", err, buf.String())
	}
	iv := func(s, e string) map[string]string {
		return map[string]string{"start_time_utc": "2026-11-20T" + s + "Z", "end_time_utc": "2026-11-20T" + e + "Z"}
	}
	want := []map[string]string{
		iv("03:00:05", "03:18:00"), iv("03:05:02", "03:12:00"), iv("03:07:01", "03:47:30"), iv("03:09:01", "03:40:05"), iv("06:00:02", "06:00:02"),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exclusions (-want +got):\n%s", diff)
	}
}

// TestCapacityWaitIsItsOwnPhaseAndBucket: testdata/stockout.jsonl, two
// nodes of job llama-pretrain (metadata autoheal-job) recreated at 04:00.
//
// llama-0: deleted 04:01:00 (wait-delete 04:00:08 + 52 s); the create of
// 04:01:00 is refused for capacity, seen at 04:01:31 (poll 04:01:30 + 1 s);
// the retry of 04:03:00 too, seen 04:03:31; the create of 04:07:00 gets
// the node: capacity wait 04:01:31 → 04:07:00 = 329 s. Created when its
// operation was seen done (04:12:00 + 1 s), READY 04:12:02, resumed
// 04:20:00 (1200 s after the event), from a checkpoint 300 s before it.
// Downtime 1200 s = capacity 329 s + infrastructure recovery 871 s.
//
// llama-1: deleted 04:01:00, READY 04:06:00 (wait-create 04:01:02 + 298 s),
// no resume reported: downtime 04:00:01 → 04:06:00 = 359 s, all recovery.
//
// Job llama-pretrain: 871 + 359 = 1230 s infrastructure recovery, 300 s
// wasted progress (one incident unknown), 329 s waiting for capacity.
func TestCapacityWaitIsItsOwnPhaseAndBucket(t *testing.T) {
	incs := report.Group(readFixture(t, "stockout.jsonl"))
	if len(incs) != 2 {
		t.Fatalf("%d incidents, want 2", len(incs))
	}
	j := report.JSONOf(incs[0])
	wantPhases := []report.JSONPhase{
		ph("detect", "04:00:00", "04:00:05"), ph("wait", "04:00:05", "04:00:06"), ph("delete", "04:00:06", "04:01:00"),
		ph("create", "04:01:00", "04:01:31"), ph("capacity", "04:01:31", "04:07:00"), ph("create", "04:07:00", "04:12:01"),
		ph("boot", "04:12:01", "04:12:02"), ph("resume", "04:12:02", "04:20:00"),
	}
	if diff := cmp.Diff(wantPhases, j.Phases); diff != "" {
		t.Errorf("llama-0 phases (-want +got):\n%s", diff)
	}
	if j.CapacityWaitSeconds != 329 || j.DowntimeSeconds != 1200 || j.Job != "llama-pretrain" {
		t.Errorf("llama-0: capacity wait %v s, downtime %v s, job %q; want 329, 1200, llama-pretrain", j.CapacityWaitSeconds, j.DowntimeSeconds, j.Job)
	}
	if s := report.Summarize(incs); s.CapacityWait != 329*time.Second || s.CapacityWaits != 1 {
		t.Errorf("summary capacity wait %s over %d incidents, want 5m29s over 1", s.CapacityWait, s.CapacityWaits)
	}
	got := report.Goodput(incs)
	want := []report.JobGoodput{{
		Job: "llama-pretrain", Incidents: 2, WastedProgressUnknown: 1,
		Nodes:         []string{"projects/acme-ml/locations/us-central2-b/nodes/llama-0", "projects/acme-ml/locations/us-central2-b/nodes/llama-1"},
		BadputSeconds: buckets(1230, 300), AutohealBadputSeconds: capacity(329),
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("goodput (-want +got):\n%s", diff)
	}
}

// TestHTMLShowsTheCapacityWaitInItsOwnColour: the page draws llama-0's
// capacity wait as a bar of its own colour, unlike any recovery phase's.
func TestHTMLShowsTheCapacityWaitInItsOwnColour(t *testing.T) {
	incs := report.Group(readFixture(t, "stockout.jsonl"))
	var buf bytes.Buffer
	if err := report.WriteHTML(&buf, incs, report.Summarize(incs), "stockout"); err != nil {
		t.Fatal(err)
	}
	colour := report.PhaseColors[report.PhaseCapacity]
	for phase, c := range report.PhaseColors {
		if phase != report.PhaseCapacity && c == colour {
			t.Errorf("capacity shares its colour %s with %s", colour, phase)
		}
	}
	if want := `data-phase="capacity"`; !strings.Contains(buf.String(), want) || !strings.Contains(buf.String(), `fill="`+colour+`"`) {
		t.Errorf("page has no capacity bar in %s", colour)
	}
}
