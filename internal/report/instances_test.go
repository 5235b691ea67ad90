package report_test

import (
	"bytes"
	"encoding/csv"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/internal/report"
)

// testdata/instances.jsonl holds the records the Compute Engine backend
// (internal/computevm) wrote on the simulated Compute Engine, on its
// virtual clock, with sweeps of the zone at 04:00:00, 04:02:10, 04:03:10,
// 04:05:10, 04:30:10, 04:35:10, 04:36:10, 04:41:10 and 04:46:10:
//   - 04:01:00 a host error on slice-mig-w1, one VM of the 4-VM
//     tpu7x-standard-4t slice in the MIG slice-mig, which is stuck: record
//     (the MIG repairs it) until the stuck grace, then recreateInstances of
//     the 4 VMs at 04:35:10; every VM RUNNING at the sweep of 04:41:10;
//   - 04:02:00 a host error on reserved-1 (tpu7x-standard-4t, no
//     automaticRestart): start; PROVISIONING at 04:02:10, RUNNING at
//     04:03:10;
//   - 04:02:00 spot-delete (tpu7x-standard-4t, Spot, DELETE) preempted:
//     recreate (instances.insert from its saved spec); PROVISIONING until
//     the sweep of 04:05:10 finds it RUNNING;
//   - 04:02:00 and 04:03:00 alice stops trainer-a (tpu7x-standard-4t):
//     held, every sweep after;
//   - stopped-by-alice, stopped before the records start: held on every
//     sweep with no event, which opens no incident.
//
// Chips: tpu7x-standard-4t is 4 chips per VM; the slice has 4 VMs, 16.

const (
	vmSlice    = "projects/acme-ml/zones/us-central1-c/instanceGroupManagers/slice-mig"
	vmReserved = "projects/acme-ml/zones/us-central1-c/instances/reserved-1"
	vmSpot     = "projects/acme-ml/zones/us-central1-c/instances/spot-delete"
	vmTrainer  = "projects/acme-ml/zones/us-central1-c/instances/trainer-a"
)

// wantInstances are the incidents of testdata/instances.jsonl, worked out
// by hand.
var wantInstances = []report.JSONIncident{
	{
		// 04:01:00 → 04:41:10 is 2410 s; × 16 chips / 3600 = 10.7111.
		Node: vmSlice, Zone: "us-central1-c", AcceleratorType: "tpu7x-standard-4t", Chips: 16, Cause: "hardware",
		Start: at("04:01:00"), Detected: at("04:01:00"), Recovered: atp("04:41:10"),
		Outcome: "recreated by its MIG",
		Reason: "not RUNNING 34m10s after the stuck grace: " + vmSlice + " did not repair it: " +
			"projects/acme-ml/zones/us-central1-c/instances/slice-mig-w0, projects/acme-ml/zones/us-central1-c/instances/slice-mig-w1, " +
			"projects/acme-ml/zones/us-central1-c/instances/slice-mig-w2, projects/acme-ml/zones/us-central1-c/instances/slice-mig-w3",
		DowntimeSeconds: 2410, ChipHoursLost: 10.711,
		Phases: []report.JSONPhase{ph("wait", "04:01:00", "04:35:10"), ph("boot", "04:35:10", "04:41:10")},
	},
	{
		// 04:02:00 → 04:03:10 is 70 s; × 4 chips / 3600 = 0.0778.
		Node: vmReserved, Zone: "us-central1-c", AcceleratorType: "tpu7x-standard-4t", Chips: 4, Cause: "hardware",
		Start: at("04:02:00"), Detected: at("04:02:00"), Recovered: atp("04:03:10"),
		Outcome: "started", Reason: "TERMINATED by a system event: " + vmReserved,
		DowntimeSeconds: 70, ChipHoursLost: 0.078,
		Phases: []report.JSONPhase{ph("boot", "04:02:00", "04:03:10")},
	},
	{
		// 04:02:00 → 04:05:10 is 190 s; × 4 chips / 3600 = 0.2111.
		Node: vmSpot, Zone: "us-central1-c", AcceleratorType: "tpu7x-standard-4t", Chips: 4, Cause: "preemption",
		Start: at("04:02:00"), Detected: at("04:02:00"), Recovered: atp("04:05:10"),
		Outcome: "recreated", Reason: "NOT FOUND after a system event: recreated from the spec saved before it broke: " + vmSpot,
		DowntimeSeconds: 190, ChipHoursLost: 0.211,
		Phases: []report.JSONPhase{ph("boot", "04:02:00", "04:05:10")},
	},
	{
		// Held: a person's stop is never undone, and what happens to an
		// instance we leave alone counts no downtime.
		Node: vmTrainer, Zone: "us-central1-c", AcceleratorType: "tpu7x-standard-4t", Chips: 4, Cause: "user",
		Start: at("04:02:00"), Detected: at("04:02:00"),
		Outcome: "held", Reason: "a person stopped, suspended or deleted " + vmTrainer + " at 2026-11-20T04:02:00Z: never undone",
		Phases: []report.JSONPhase{},
	},
}

func TestInstanceIncidentsWorkedOutByHand(t *testing.T) {
	var got []report.JSONIncident
	for _, in := range report.Group(readFixture(t, "instances.jsonl")) {
		got = append(got, report.JSONOf(in))
	}
	if diff := cmp.Diff(wantInstances, got); diff != "" {
		t.Errorf("incidents (-want +got):\n%s", diff)
	}
}

func TestInstanceIncidentsInTextCSVAndHTML(t *testing.T) {
	incs := report.Group(readFixture(t, "instances.jsonl"))
	sum := report.Summarize(incs)

	var text bytes.Buffer
	if err := report.WriteText(&text, incs, sum); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"slice-mig    tpu7x-standard-4t  16     hardware    2026-11-20 04:01:00  recreated by its MIG",
		"reserved-1   tpu7x-standard-4t  4      hardware    2026-11-20 04:02:00  started",
		"spot-delete  tpu7x-standard-4t  4      preemption  2026-11-20 04:02:00  recreated",
		"trainer-a    tpu7x-standard-4t  4      user        2026-11-20 04:02:00  held",
		"slice-mig    +0s       +34m10s  -        -        +40m10s  -        40m10s    -     10.71",
		"reserved-1   +0s       +0s      -        -        +1m10s   -        1m10s     -     0.08",
		"spot-delete  +0s       +0s      -        +0s      +3m10s   -        3m10s     -     0.21",
		"trainer-a    +0s       -        -        -        -        -        0s        -     0.00",
		// 2410 + 70 + 190 = 2670 s; 10.7111 + 0.0778 + 0.2111 = 11.00.
		"by outcome:       held 1, recreated 1, recreated by its MIG 1, started 1",
		"time to recover:  median 3m10s, p95 40m10s (3 incidents READY again)",
		"downtime:         44m30s in total; 11.00 chip-hours lost",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}

	rows := csvRows(t, incs)
	want := [][]string{
		{vmSlice, "us-central1-c", "tpu7x-standard-4t", "16", "hardware", "2026-11-20T04:01:00Z", "2026-11-20T04:01:00Z",
			"2026-11-20T04:35:10Z", "", "", "2026-11-20T04:41:10Z", "", "recreated by its MIG", "2410", "", "10.711", ""},
		{vmReserved, "us-central1-c", "tpu7x-standard-4t", "4", "hardware", "2026-11-20T04:02:00Z", "2026-11-20T04:02:00Z",
			"2026-11-20T04:02:00Z", "", "", "2026-11-20T04:03:10Z", "", "started", "70", "", "0.078", ""},
		{vmSpot, "us-central1-c", "tpu7x-standard-4t", "4", "preemption", "2026-11-20T04:02:00Z", "2026-11-20T04:02:00Z",
			"2026-11-20T04:02:00Z", "", "2026-11-20T04:02:00Z", "2026-11-20T04:05:10Z", "", "recreated", "190", "", "0.211", ""},
		{vmTrainer, "us-central1-c", "tpu7x-standard-4t", "4", "user", "2026-11-20T04:02:00Z", "2026-11-20T04:02:00Z",
			"", "", "", "", "", "held", "0", "", "0", ""},
	}
	if len(rows) != 1+len(want) {
		t.Fatalf("CSV has %d rows, want a header and %d", len(rows), len(want))
	}
	if diff := cmp.Diff(want, rows[1:]); diff != "" {
		t.Errorf("CSV rows (-want +got):\n%s", diff)
	}

	var page bytes.Buffer
	if err := report.WriteHTML(&page, incs, sum, "instances"); err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`<dd id="chip-hours">11.00</dd>`,
		`<dd id="downtime">44m30s</dd>`,
		`<td class="text" title="` + vmSlice + `">slice-mig</td><td class="text">tpu7x-standard-4t</td><td class="num">16</td>.*<td class="num">40m10s</td><td class="num">-</td><td class="num">10.71</td><td class="text">recreated by its MIG</td>`,
		`<td class="text" title="` + vmReserved + `">reserved-1</td><td class="text">tpu7x-standard-4t</td><td class="num">4</td>.*<td class="num">0.08</td><td class="text">started</td>`,
		`<td class="text" title="` + vmSpot + `">spot-delete</td>.*<td class="num">0.21</td><td class="text">recreated</td>`,
		`<td class="text" title="` + vmTrainer + `">trainer-a</td>.*<td class="num">0s</td><td class="num">-</td><td class="num">0.00</td><td class="text">held</td>`,
	} {
		if !regexp.MustCompile(re).MatchString(page.String()) {
			t.Errorf("HTML lacks %s", re)
		}
	}
}

// A MIG's record carries the chips of the VMs it observed; the incident
// counts the most any record gives, so a record that could read only one
// VM of the slice does not make it smaller. A record without a count (an
// older record) counts the machine type's chips of one VM.
func TestASliceCountsTheChipsOfItsVMs(t *testing.T) {
	t0 := at("04:00:00")
	recs := []report.Record{
		{Time: t0, EventTime: t0, InsertID: "e", Node: vmSlice, Action: "record", AcceleratorType: "tpu7x-standard-4t", Chips: 4, Cause: "hardware",
			Reason: "owned by " + vmSlice + ": the MIG repairs it"},
		{Time: t0.Add(time.Minute), Node: vmSlice, Action: "record", AcceleratorType: "tpu7x-standard-4t", Chips: 16,
			Reason: "every instance is RUNNING"},
	}
	in := report.Group(recs)[0]
	if in.Chips != 16 || in.Outcome != report.OutcomeSelf || in.Downtime != time.Minute {
		t.Errorf("chips %d, outcome %q, downtime %v; want 16 (4 VMs × 4), recovered by itself, 1m", in.Chips, in.Outcome, in.Downtime)
	}
	recs[0].Chips, recs[1].Chips = 0, 0
	if in := report.Group(recs)[0]; in.Chips != 4 {
		t.Errorf("without counts: chips %d, want 4 (one tpu7x-standard-4t VM)", in.Chips)
	}
}

// An instance's record decision is not "healthy again" unless every VM is
// RUNNING: the MIG repairing it leaves the incident open.
func TestAnInstanceRecordIsHealthyOnlyWhenEveryVMRuns(t *testing.T) {
	t0 := at("04:00:00")
	recs := []report.Record{{Time: t0, EventTime: t0, InsertID: "e", Node: vmSlice, Action: "record", AcceleratorType: "tpu7x-standard-4t", Chips: 16,
		Cause: "hardware", Reason: "owned by " + vmSlice + ": the MIG repairs it (watched until 2026-11-20T04:30:00Z)"}}
	if in := report.Group(recs)[0]; in.Outcome != report.OutcomeOpen || !in.Recovered.IsZero() {
		t.Errorf("outcome %q, recovered %v; want open, not recovered", in.Outcome, in.Recovered)
	}
}

func TestIsInstance(t *testing.T) {
	for name, want := range map[string]bool{
		vmSlice:                                  true,
		vmReserved:                               true,
		nodeA:                                    false,
		"projects/p/zones/z/disks/d":             false,
		"projects/p/zones/z/instances/i/extra/x": false,
		"us-central1-c/instanceGroupManagers/m":  false,
		"projects/p/locations/z/instances/looks-a": false,
	} {
		if got := report.IsInstance(name); got != want {
			t.Errorf("IsInstance(%q) = %v, want %v", name, got, want)
		}
	}
}

// zoneMoved are the records of a recovery an autoheal-stockout zones:
// fallback sent to another zone (as internal/remediate writes them: every
// record after the move carries zoneMovedTo), and a node that stayed.
const zoneMoved = `{"timestamp":"2026-11-20T05:00:01Z","insertId":"z1","eventTime":"2026-11-20T05:00:00Z","action":"recreate","node":"projects/acme-ml/locations/us-central2-b/nodes/wave-00","zone":"us-central2-b","cause":"preemption","acceleratorType":"v5litepod-8","phase":"deleted"}
{"timestamp":"2026-11-20T05:06:00Z","action":"recreate","node":"projects/acme-ml/locations/us-central2-b/nodes/wave-00","zone":"us-central2-b","phase":"creating","zoneMovedTo":"projects/acme-ml/locations/us-central2-c/nodes/wave-00"}
{"timestamp":"2026-11-20T05:10:00Z","action":"recreate","node":"projects/acme-ml/locations/us-central2-b/nodes/wave-00","zone":"us-central2-b","phase":"recovered","outcome":"recovered","zoneMovedTo":"projects/acme-ml/locations/us-central2-c/nodes/wave-00"}
{"timestamp":"2026-11-20T05:01:00Z","insertId":"z2","eventTime":"2026-11-20T05:01:00Z","action":"record","node":"projects/acme-ml/locations/us-central2-b/nodes/wave-01","zone":"us-central2-b","cause":"maintenance","acceleratorType":"v5litepod-8"}
`

// The CSV and the HTML page say where a zones: fallback moved a node, as
// the text and JSON do.
func TestCSVAndHTMLSayWhereAZoneMoveSentTheNode(t *testing.T) {
	const moved = "projects/acme-ml/locations/us-central2-c/nodes/wave-00"
	recs, err := report.ReadAll([]byte(zoneMoved))
	if err != nil {
		t.Fatal(err)
	}
	incs := report.Group(recs)
	if len(incs) != 2 {
		t.Fatalf("%d incidents, want 2", len(incs))
	}
	rows := csvRows(t, incs)
	col := len(report.CSVHeader) - 1
	if report.CSVHeader[col] != "zoneMovedTo" {
		t.Fatalf("last CSV column %q, want zoneMovedTo", report.CSVHeader[col])
	}
	if got := []string{rows[1][0], rows[1][col], rows[2][0], rows[2][col]}; !cmp.Equal(got, []string{
		"projects/acme-ml/locations/us-central2-b/nodes/wave-00", moved, "projects/acme-ml/locations/us-central2-b/nodes/wave-01", ""}) {
		t.Errorf("CSV node and zoneMovedTo cells = %q", got)
	}

	var page bytes.Buffer
	if err := report.WriteHTML(&page, incs, report.Summarize(incs), "moved"); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	want := `<td class="text">recreated<br><span class="moved" title="` + moved + `">created in us-central2-c</span></td></tr>`
	if !strings.Contains(html, want) {
		t.Errorf("HTML lacks %s", want)
	}
	if n := strings.Count(html, `class="moved"`); n != 1 {
		t.Errorf("HTML has %d moved notes, want 1 (wave-01 stayed)", n)
	}
}

// csvRows are the rows of the incidents' CSV, the header first.
func csvRows(t *testing.T, incs []report.Incident) [][]string {
	t.Helper()
	var b bytes.Buffer
	if err := report.WriteCSV(&b, incs); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// A host reported faulty: the outcome says so; the instance is held (the
// repair takes days) and READY when a record finds it RUNNING again.
func TestAReportedFaultyHostIsItsOutcome(t *testing.T) {
	t0 := at("04:00:00")
	recs := []report.Record{
		{Time: t0, EventTime: t0, InsertID: "e", Node: vmReserved, Action: "reportHostAsFaulty", AcceleratorType: "tpu7x-standard-4t", Chips: 4,
			Cause: "hardware", Reason: "3 host errors within 168h0m0s", Steps: []report.Step{{Name: "reportHostAsFaulty", Start: t0}}},
		{Time: t0.Add(5 * time.Minute), Node: vmReserved, Action: "held", Chips: 4,
			Reason: "the host of " + vmReserved + " was reported faulty at 2026-11-20T04:00:00Z: held until it is RUNNING again (the repair takes days)"},
		{Time: t0.Add(48 * time.Hour), Node: vmReserved, Action: "record", Chips: 4, Reason: "every instance is RUNNING"},
	}
	in := report.Group(recs)[0]
	// 48 h × 4 chips = 192 chip-hours.
	if in.Outcome != report.OutcomeReportedFaulty || in.Downtime != 48*time.Hour || in.ChipHoursLost() != 192 {
		t.Errorf("outcome %q, downtime %v, chip-hours %v; want reported faulty, 48h, 192", in.Outcome, in.Downtime, in.ChipHoursLost())
	}
}
