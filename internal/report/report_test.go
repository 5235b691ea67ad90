package report_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/internal/report"
)

// testdata/night.jsonl is written by hand: the records of a night with six
// incidents on five nodes, at known times (see the comments in the
// expectations). testdata/night-gcloud.json holds the same records as a
// `gcloud logging read --format=json` export.

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, "2026-11-20T"+s+"Z")
	if err != nil {
		panic(err)
	}
	return t
}

func atp(s string) *time.Time { t := at(s); return &t }

func secs(x float64) *float64 { return &x }

const (
	nodeA = "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128"
	nodeB = "projects/acme-ml/locations/europe-west4-a/nodes/v3-8-exp"
	nodeC = "projects/acme-ml/locations/us-central2-b/nodes/v4-16-repairing"
	nodeD = "projects/acme-ml/locations/us-east5-a/nodes/v5p-16-abandoned"
	nodeE = "projects/acme-ml/locations/us-central2-b/nodes/v4-32-not-opted-in"
)

func ph(name, start, end string) report.JSONPhase {
	return report.JSONPhase{Phase: name, Start: at(start), End: at(end)}
}

// wantNight are the incidents of testdata/night.jsonl, worked out by hand.
var wantNight = []report.JSONIncident{
	{
		// Recreated: claimed at save-spec 03:00:06, deleted at the end of
		// wait-delete (03:00:08 + 118s), created at the end of wait-create
		// (03:02:10 + 470s), training resumed 1080s after the event, from a
		// checkpoint 480s older than it. 18 min × 64 chips = 19.2.
		Node: nodeA, Zone: "us-central2-b", AcceleratorType: "v4-128", Chips: 64, Cause: "maintenance",
		Start: at("03:00:00"), Detected: at("03:00:05"), Recovered: atp("03:10:00"), Resumed: atp("03:18:00"),
		Outcome: "recreated", Reason: "TERMINATED (maintenance): recreate",
		DowntimeSeconds: 1080, LostProgressSeconds: secs(480), ChipHoursLost: 19.2,
		Phases: []report.JSONPhase{
			ph("detect", "03:00:00", "03:00:05"), ph("wait", "03:00:05", "03:00:06"), ph("delete", "03:00:06", "03:02:06"),
			ph("create", "03:02:06", "03:10:00"), ph("resume", "03:10:00", "03:18:00"),
		},
	},
	{
		// Recovered by itself, seen healthy at the first decision; resumed
		// 420s after the event. 7 min × 4 chips = 0.4667.
		Node: nodeB, Zone: "europe-west4-a", AcceleratorType: "v3-8", Chips: 4, Cause: "maintenance",
		Start: at("03:05:00"), Detected: at("03:05:02"), Recovered: atp("03:05:02"), Resumed: atp("03:12:00"),
		Outcome:         "recovered by itself",
		DowntimeSeconds: 420, LostProgressSeconds: secs(240), ChipHoursLost: 0.467,
		Phases: []report.JSONPhase{ph("detect", "03:05:00", "03:05:02"), ph("resume", "03:05:02", "03:12:00")},
	},
	{
		// Deferred, reset by a sweep at 03:37:31, reset done at
		// 03:37:34 + 596s; no resume reported. 40.5 min × 8 chips = 5.4.
		Node: nodeC, Zone: "us-central2-b", AcceleratorType: "v4-16", Chips: 8, Cause: "unknown",
		Start: at("03:07:00"), Detected: at("03:07:01"), Recovered: atp("03:47:30"),
		Outcome: "reset", Reason: "REPAIRING for 30m30s >= grace 30m0s: reset queued resource",
		DowntimeSeconds: 2430, ChipHoursLost: 5.4,
		Phases: []report.JSONPhase{ph("detect", "03:07:00", "03:07:01"), ph("wait", "03:07:01", "03:37:31"), ph("reset", "03:37:31", "03:47:30")},
	},
	{
		// Abandoned: deleted at 03:09:04 + 60s, the create never worked;
		// down until the last record, 03:40:05. 1865 s × 8 chips = 4.144.
		Node: nodeD, Zone: "us-east5-a", AcceleratorType: "v5p-16", Chips: 8, Cause: "maintenance",
		Start: at("03:09:00"), Detected: at("03:09:01"),
		Outcome: "abandoned", Reason: "abandoned after 5 attempts: create rejected INVALID_ARGUMENT",
		DowntimeSeconds: 1865, ChipHoursLost: 4.144,
		Phases: []report.JSONPhase{ph("detect", "03:09:00", "03:09:01"), ph("wait", "03:09:01", "03:09:02"), ph("delete", "03:09:02", "03:10:04")},
	},
	{
		// Skipped: two workers' entries, one incident, no cost tracked.
		Node: nodeE, Zone: "us-central2-b", AcceleratorType: "v4-32", Chips: 16, Cause: "maintenance",
		Start: at("03:11:00"), Detected: at("03:11:01"),
		Outcome: "skipped: not opted in", Reason: "not opted in: label tpu-autoheal=enabled missing",
		Phases: []report.JSONPhase{ph("detect", "03:11:00", "03:11:01")},
	},
	{
		// A second event on A hours after the first incident ended: a new
		// incident; the node was healthy 2 s after. 2 s × 64 chips = 0.036.
		Node: nodeA, Zone: "us-central2-b", AcceleratorType: "v4-128", Chips: 64, Cause: "maintenance",
		Start: at("06:00:00"), Detected: at("06:00:02"), Recovered: atp("06:00:02"),
		Outcome:         "recovered by itself",
		DowntimeSeconds: 2, ChipHoursLost: 0.036,
		Phases: []report.JSONPhase{ph("detect", "06:00:00", "06:00:02")},
	},
}

func readFixture(t *testing.T, name string) []report.Record {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := report.ReadAll(b)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestNightGivesTheIncidentsWorkedOutByHand(t *testing.T) {
	for _, file := range []string{"night.jsonl", "night-gcloud.json"} {
		t.Run(file, func(t *testing.T) {
			var got []report.JSONIncident
			for _, in := range report.Group(readFixture(t, file)) {
				got = append(got, report.JSONOf(in))
			}
			if diff := cmp.Diff(wantNight, got); diff != "" {
				t.Errorf("incidents (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNightSummary(t *testing.T) {
	got := report.Summarize(report.Group(readFixture(t, "night.jsonl")))
	want := report.Summary{
		Incidents: 6,
		From:      at("03:00:00"),
		To:        at("06:00:02"), // A2's record; C's watch record at 05:47:30 is earlier
		ByCause:   []report.Count{{Key: "maintenance", N: 5}, {Key: "unknown", N: 1}},
		ByOutcome: []report.Count{
			{Key: "recovered by itself", N: 2}, {Key: "abandoned", N: 1}, {Key: "recreated", N: 1},
			{Key: "reset", N: 1}, {Key: "skipped: not opted in", N: 1},
		},
		// READY − first event: 2s, 2s, 600s, 2430s; nearest rank.
		Recovered:     4,
		RecoverMedian: 2 * time.Second,
		RecoverP95:    2430 * time.Second,
		Resumed:       2,
		// 1080 + 420 + 2430 + 1865 + 0 + 2 seconds.
		Downtime:          5797 * time.Second,
		LostProgress:      720 * time.Second,
		LostProgressKnown: 2,
	}
	// 19.2 + 0.46667 + 5.4 + 4.14444 + 0 + 0.03556
	if d := got.ChipHoursLost - 29.246667; d > 1e-5 || d < -1e-5 {
		t.Errorf("ChipHoursLost = %v, want 29.246667", got.ChipHoursLost)
	}
	got.ChipHoursLost = 0
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

func TestPercentileNearestRank(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, tc := range []struct {
		p    int
		want time.Duration
	}{{50, 5}, {95, 10}, {90, 9}, {10, 1}, {0, 1}, {100, 10}} {
		if got := report.Percentile(ds, tc.p); got != tc.want {
			t.Errorf("Percentile(1..10, %d) = %d, want %d", tc.p, got, tc.want)
		}
	}
	if got := report.Percentile(nil, 50); got != 0 {
		t.Errorf("Percentile(nil) = %v, want 0", got)
	}
}

func TestTextFitsIn120ColumnsAndShowsTheFigures(t *testing.T) {
	incs := report.Group(readFixture(t, "night.jsonl"))
	var b bytes.Buffer
	if err := report.WriteText(&b, incs, report.Summarize(incs)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for i, l := range strings.Split(out, "\n") {
		if n := len([]rune(l)); n > 120 {
			t.Errorf("line %d is %d columns: %q", i+1, n, l)
		}
	}
	for _, want := range []string{
		"llm-v4-128          +5s       +6s      +2m06s   +10m     +10m     +18m     18m       8m    19.20",
		"v5p-16-abandoned    +1s       +2s      +1m04s   -        -        -        31m05s    -     4.14",
		"time to recover:  median 2s, p95 40m30s (4 incidents READY again)",
		"downtime:         1h36m in total; 29.25 chip-hours lost",
		"training resumed: 2 of 6 incidents; progress lost 12m (2 incidents reported a checkpoint)",
		"by outcome:       recovered by itself 2, abandoned 1, recreated 1, reset 1, skipped: not opted in 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
}

func TestCSVHasOneRowPerIncident(t *testing.T) {
	incs := report.Group(readFixture(t, "night.jsonl"))
	rows := csvRows(t, incs)
	if len(rows) != 7 {
		t.Fatalf("got %d rows, want a header and 6", len(rows))
	}
	want := []string{nodeC, "us-central2-b", "v4-16", "8", "unknown", "2026-11-20T03:07:00Z", "2026-11-20T03:07:01Z",
		"2026-11-20T03:37:31Z", "", "", "2026-11-20T03:47:30Z", "", "reset", "2430", "", "5.4", ""}
	if diff := cmp.Diff(want, rows[3]); diff != "" {
		t.Errorf("row of %s (-want +got):\n%s", nodeC, diff)
	}
}

func TestJSONFieldNames(t *testing.T) {
	incs := report.Group(readFixture(t, "night.jsonl"))
	var b bytes.Buffer
	if err := report.WriteJSON(&b, incs[:1]); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"node", "acceleratorType", "chips", "cause", "start", "detected", "recovered", "resumed",
		"outcome", "downtimeSeconds", "lostProgressSeconds", "chipHoursLost", "phases"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b.String())
		}
	}
	p := m["phases"].([]any)[0].(map[string]any)
	if diff := cmp.Diff(map[string]any{"phase": "detect", "start": "2026-11-20T03:00:00Z", "end": "2026-11-20T03:00:05Z"}, p); diff != "" {
		t.Errorf("first phase (-want +got):\n%s", diff)
	}
}

func TestBadInputIsAnErrorNamingWhatWasWrong(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"not json", "hello", `want JSON objects`},
		{"truncated object", `{"action":"record","timestamp":"2026-11-20T03:00:00Z"`, "object 1"},
		{"bad time", `{"action":"record","node":"n","timestamp":"yesterday"}`, `timestamp "yesterday" is not an RFC 3339 time`},
		{"no time", `{"action":"record","node":"n"}`, "has no timestamp"},
		{"unclosed array", `[{"timestamp":"2026-11-20T03:00:00Z","jsonPayload":{"action":"record","node":"n"}}`, "after 1 entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := report.ReadAll([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadAll(%q) = %v, want an error containing %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestEmptyInputHasNoIncidents(t *testing.T) {
	for _, in := range []string{"", "[]", " \n"} {
		recs, err := report.ReadAll([]byte(in))
		if err != nil || len(recs) != 0 {
			t.Errorf("ReadAll(%q) = %d records, %v; want none", in, len(recs), err)
		}
	}
}

func TestHTMLIsSelfContained(t *testing.T) {
	incs := report.Group(readFixture(t, "night.jsonl"))
	var b bytes.Buffer
	if err := report.WriteHTML(&b, incs, report.Summarize(incs), "night"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, bad := range []string{"<script", "http://", "https://", "<link", "@import", "url("} {
		if bad == "http://" {
			// The SVG namespace is a name, not a fetch.
			out = strings.ReplaceAll(out, `xmlns="http://www.w3.org/2000/svg"`, "")
		}
		if strings.Contains(out, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	if got := strings.Count(out, `<g class="timeline-row"`); got != 6 {
		t.Errorf("%d timeline rows, want 6", got)
	}
}

func TestHTMLDrawsTheCostliestIncidentsOfAHugeNight(t *testing.T) {
	var recs []report.Record
	t0 := at("00:00:00")
	for i := 0; i < 600; i++ {
		node := "projects/p/locations/z/nodes/n" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + time.Duration(i).String()
		// Incident i is down i minutes: the 100 shortest are left out.
		start := t0.Add(time.Duration(i) * time.Second)
		recs = append(recs,
			report.Record{Time: start, EventTime: start, InsertID: node, Node: node, Action: "defer", AcceleratorType: "v4-8"},
			report.Record{Time: start.Add(time.Duration(i+1) * time.Minute), Node: node, Action: "recreate", Outcome: "recovered", Phase: "done"},
		)
	}
	incs := report.Group(recs)
	var b bytes.Buffer
	if err := report.WriteHTML(&b, incs, report.Summarize(incs), "huge"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if got := strings.Count(out, `<g class="timeline-row"`); got != report.MaxHTMLIncidents {
		t.Errorf("%d rows, want %d", got, report.MaxHTMLIncidents)
	}
	if !strings.Contains(out, "100 incidents with the least chip-hours lost are not drawn") {
		t.Error("the page does not say what it left out")
	}
	if !strings.Contains(out, `<dd id="incidents">600</dd>`) {
		t.Error("the summary does not count every incident")
	}
	if strings.Contains(out, `data-node="projects/p/locations/z/nodes/na0s"`) {
		t.Error("the shortest incident is drawn")
	}
}

func TestAMaintenanceNoticeIsNotDowntime(t *testing.T) {
	const node = "projects/p/locations/z/nodes/n"
	notice, outage := at("01:00:00"), at("03:00:00")
	recs := []report.Record{
		// The notice: the guest checkpointed at 01:00.
		{Time: notice, EventTime: notice, InsertID: "notice", Node: node, Action: "prepare", Outcome: "prepared", AcceleratorType: "v5p-16"},
		// The maintenance two hours later; the node is READY again 10 minutes after.
		{Time: outage, EventTime: outage, InsertID: "m", Node: node, Action: "recreate", Outcome: "recovered", Phase: "done",
			Steps: []report.Step{{Name: "delete", Start: outage, Duration: time.Minute}, {Name: "create", Start: outage.Add(time.Minute), Duration: 9 * time.Minute}}},
	}
	incs := report.Group(recs)
	if len(incs) != 1 {
		t.Fatalf("%d incidents, want 1", len(incs))
	}
	in := incs[0]
	if in.Start != notice || in.Downtime != 10*time.Minute || in.Outcome != "recreated" || in.ChipHoursLost() != 10.0/60*8 {
		t.Errorf("incident = start %v, downtime %v, outcome %q, %v chip-hours; want start at the notice, 10m down from the outage, recreated, 1.33",
			in.Start, in.Downtime, in.Outcome, in.ChipHoursLost())
	}
	only := report.Group(recs[:1])[0]
	if only.Outcome != "prepared" || only.Downtime != 0 {
		t.Errorf("notice alone = %q, %v down; want prepared, 0", only.Outcome, only.Downtime)
	}
}

func TestDur(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {1499 * time.Millisecond, "1s"}, {45 * time.Second, "45s"}, {12*time.Minute + 30*time.Second, "12m30s"},
		{18 * time.Minute, "18m"}, {time.Hour + 2*time.Minute + 59*time.Second, "1h02m"}, {51*time.Hour + 10*time.Minute, "2d03h"},
		{-90 * time.Second, "-1m30s"}, {math.MinInt64, "-106751d23h"}, {math.MaxInt64, "106751d23h"},
	} {
		if got := report.Dur(tc.d); got != tc.want {
			t.Errorf("Dur(%d) = %q, want %q", int64(tc.d), got, tc.want)
		}
	}
}

func TestStepsOfTheRecoveryStateMachine(t *testing.T) {
	// The rewritten handler polls operations with poll-operation steps and
	// may spread one recovery over several records (a sweep finishing it).
	const node = "projects/p/locations/z/nodes/n"
	t0 := at("03:00:00")
	step := func(name, start string, secs int) report.Step {
		return report.Step{Name: name, Start: at(start), Duration: time.Duration(secs) * time.Second}
	}
	recs := []report.Record{
		{Time: t0.Add(2 * time.Second), EventTime: t0, InsertID: "e", Node: node, Action: "recreate", Phase: "creating", AcceleratorType: "v4-8",
			Steps: []report.Step{step("get", "03:00:02", 1), step("delete", "03:00:03", 1), step("poll-operation", "03:00:04", 56), step("create", "03:01:00", 2)}},
		{Time: at("03:05:00"), Node: node, Action: "recreate", Phase: "recovered", Outcome: "recovered",
			Steps: []report.Step{step("get", "03:05:00", 1), step("poll-operation", "03:05:01", 299)}},
	}
	// The second record's poll is for the create the first one requested:
	// the create's operation ended, and the node was READY, at 03:10.
	in := report.Group(recs)[0]
	want := struct{ Claimed, Deleted, Created, Recovered time.Time }{at("03:00:03"), at("03:01:00"), at("03:10:00"), at("03:10:00")}
	got := struct{ Claimed, Deleted, Created, Recovered time.Time }{in.Claimed, in.Deleted, in.Created, in.Recovered}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("milestones (-want +got):\n%s", diff)
	}
	if in.Outcome != "recreated" || in.Downtime != 10*time.Minute || in.Chips != 4 {
		t.Errorf("outcome %q, downtime %v, chips %d; want recreated, 10m, 4", in.Outcome, in.Downtime, in.Chips)
	}
}

func TestTextOfLongNamesFitsIn120Columns(t *testing.T) {
	long := "projects/p/locations/us-central2-b/nodes/" + strings.Repeat("very-long-node-name-", 4)
	t0 := at("03:00:00")
	recs := []report.Record{
		{Time: t0, EventTime: t0, InsertID: "a", Node: long, Action: "skip", Cause: "maintenance", AcceleratorType: "v5litepod-256",
			Reason: "a guard with a very long name that goes on and on: and its details"},
		{Time: t0.Add(30 * time.Hour), EventTime: t0.Add(30 * time.Hour), InsertID: "b", Node: long + "2", Action: "defer", Cause: "preemption", AcceleratorType: "v5litepod-256"},
		{Time: t0.Add(300 * time.Hour), Node: long + "2", Action: "recreate", Outcome: "abandoned", Phase: "abandoned",
			Steps: []report.Step{{Name: "delete", Start: t0.Add(299 * time.Hour), Duration: time.Hour}}},
	}
	for i := 0; i < 12; i++ { // many outcomes: the breakdown wraps
		at := t0.Add(time.Duration(400+i) * time.Hour)
		recs = append(recs, report.Record{Time: at, EventTime: at, InsertID: "s", Node: long + "3", Action: "skip",
			Reason: fmt.Sprintf("guard number %d with a long name: details", i)})
	}
	incs := report.Group(recs)
	var b bytes.Buffer
	if err := report.WriteText(&b, incs, report.Summarize(incs)); err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(b.String(), "\n") {
		if n := len([]rune(l)); n > 120 {
			t.Errorf("line %d is %d columns: %q", i+1, n, l)
		}
	}
	if !strings.Contains(b.String(), "skipped: guard number 11 with a long name 1") {
		t.Errorf("breakdown lost an outcome:\n%s", b.String())
	}
}

func TestAComputeEngineMachineTypeCountsItsChips(t *testing.T) {
	// A record of the instance path names the machine type and may carry
	// no chip count (an older record): tpu7x-standard-4t is 4 chips.
	const vm = "projects/p/zones/z/instances/trainer-a"
	t0 := at("03:00:00")
	recs := []report.Record{{Time: t0, EventTime: t0, InsertID: "e", Node: vm, Action: "start", AcceleratorType: "tpu7x-standard-4t", Cause: "hardware"}}
	if in := report.Group(recs)[0]; in.Chips != 4 {
		t.Errorf("chips = %d, want 4 (ChipsPerVM of tpu7x-standard-4t)", in.Chips)
	}
}
