// Regression tests of issue 18's loop bounds, over-size spec and
// maintenance: a repeating page token, a zone hint over it, a spec over the
// ledger's document limit, a node in the maintenance tpu-autoheal started,
// a replacement node's notice. The world they run in (newWorld, the
// records, requireNotLost) is in evidence_uncertainty_test.go.
//
//	go test ./function -run Uncertain
package function_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

const uZone2 = "us-east5-a"

// deliverAsPubSub delivers data as a push subscription does: a delivery
// not acknowledged is redelivered a minute later, up to max deliveries (the
// dead-letter policy's). It returns how many deliveries it took and the last
// answer.
func (w *uworld) deliverAsPubSub(data []byte, max int) (deliveries, code int) {
	for deliveries = 1; ; deliveries++ {
		if code = w.deliver(data); code < 300 || deliveries == max {
			return deliveries, code
		}
		w.clock.add(time.Minute)
	}
}

// deliverWithin hands data to the function under a deadline of d (wall
// clock): how long the instance has for the request.
func (w *uworld) deliverWithin(data []byte, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return w.fn.HandleMessage(ctx, push(data))
}

// errorRecords is how many of node's records are ERROR.
func (w *uworld) errorRecords(node string) int {
	n := 0
	for _, r := range w.recordsOf(node) {
		if r.Severity == "ERROR" {
			n++
		}
	}
	return n
}

// --- Every loop bounded ---

// uZoneFleet: five opted-in healthy nodes in the first zone (three pages of
// two), and a TERMINATED one in the second.
func uZoneFleet() (tpufake.Fleet, string) {
	var nodes []*tpu.Node
	for i := range 5 {
		nodes = append(nodes, uNodeSpec(fmt.Sprintf("%s/nodes/ok-%d", uParent, i), "READY", "HEALTHY"))
	}
	broken := "projects/" + uProject + "/locations/" + uZone2 + "/nodes/broken-v4-32"
	return uFleet(append(nodes, uNodeSpec(broken, "TERMINATED", "UNHEALTHY_MAINTENANCE"))...), broken
}

func TestUncertainRepeatingPageTokenEndsTheZonesListing(t *testing.T) {
	fleet, broken := uZoneFleet()
	w := newWorld(t, fleet, map[string]string{"AUTOHEAL_ZONES": uZone + "," + uZone2}, tpufake.WithPageSize(2))
	// The first zone's last page points back at its first page, always.
	w.fake.Fail(tpufake.FailRule{RPC: "nodes.list", Name: uParent, Page: tpufake.PageLoopToFirst})
	const sweeps = 3
	for range sweeps {
		w.clock.add(time.Minute)
		// The deadline only keeps a looping sweep from running forever.
		if err := w.deliverWithin([]byte(events.SweepMessage), 2*time.Second); err != nil {
			t.Logf("sweep: %v", err)
		}
	}
	if got, bound := w.fake.Count("nodes.list", uParent), sweeps*(3+1); got > bound {
		t.Errorf("%d listings of %s in %d sweeps, want at most %d (3 pages and the repeated token, each sweep)", got, uParent, sweeps, bound)
	}
	if got := w.fake.Count("nodes.delete", broken); got != 1 {
		t.Errorf("%d deletes of %s, want 1: the sweep went on to the next zone and found it TERMINATED", got, broken)
	}
	warned := false
	for _, r := range w.records() {
		if r.Severity == "WARNING" && strings.Contains(r.Reason+r.Error+r.Zone, uZone) && strings.Contains(strings.ToLower(r.Reason+r.Error), "token") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no WARNING record names %s and its repeated page token", uZone)
	}
}

func TestUncertainZoneHintOverARepeatingPageTokenIsAnsweredInTime(t *testing.T) {
	fleet, _ := uZoneFleet()
	w := newWorld(t, fleet, nil, tpufake.WithPageSize(2))
	w.fake.Fail(tpufake.FailRule{RPC: "nodes.list", Name: uParent, Page: tpufake.PageLoopToFirst})
	hint, err := os.ReadFile("../testdata/entries/compute-preempted.json")
	if err != nil {
		t.Fatal(err)
	}
	w.clock.t = time.Date(2026, 11, 20, 4, 11, 0, 0, time.UTC) // the entry's time
	start := time.Now()
	err = w.deliverWithin(hint, 10*time.Second)
	if err != nil {
		t.Errorf("zone hint over a looping zone: %v (after %v), want it answered", err, time.Since(start).Round(time.Millisecond))
	}
	if got := w.fake.Count("nodes.list", uParent); got > 3+1 {
		t.Errorf("%d listings of %s for one zone hint, want at most 4 (3 pages and the repeated token)", got, uParent)
	}
}

func TestUncertainOverSizeSpecIsRefusedBeforeAnyDelete(t *testing.T) {
	n := uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")
	n.Metadata["big"] = strings.Repeat("x", 1200<<10) // over Firestore's 1 MiB document limit
	w := newWorld(t, uFleet(n), nil)
	if n, code := w.deliverAsPubSub(uEntry("terminate-1", uNode, uT0, "system@google.com", ""), 5); n > 1 {
		t.Errorf("%d deliveries (the last answered %d), want the first acknowledged: it can never succeed", n, code)
	}
	w.sweeps(3)
	if got := w.fake.Count("nodes.delete", uNode); got != 0 {
		t.Errorf("%d deletes of a node whose spec cannot be saved (the ledger's document limit), want 0", got)
	}
	if errs := w.errorRecords(uNode); errs != 1 {
		t.Errorf("%d ERROR records, want exactly 1 saying the spec is too large; records:%s", errs, w.history(uNode))
	}
}

// --- Maintenance ---

// uMaintenanceNode is an opted-in node with a PENDING, reschedulable notice
// for the window starting at start.
func uMaintenanceNode(start time.Time, mode string) *tpu.Node {
	n := uNodeSpec(uNode, "READY", "HEALTHY")
	if mode != "" {
		n.Labels["tpu-autoheal-maintenance"] = mode
	}
	n.UpcomingMaintenance = &tpu.UpcomingMaintenance{
		Type: "SCHEDULED", MaintenanceStatus: "PENDING", CanReschedule: true,
		WindowStartTime: start.Format(time.RFC3339), WindowEndTime: start.Add(4 * time.Hour).Format(time.RFC3339),
		LatestWindowStartTime: start.Format(time.RFC3339),
	}
	return n
}

// sentNotice is the notice tpu-autoheal wrote to the node's metadata (the
// guest contract: metadata autoheal-maintenance, {"notice": ...}), or "".
func sentNotice(n *tpu.Node) string {
	if n == nil {
		return ""
	}
	var v struct {
		Notice string `json:"notice"`
	}
	if json.Unmarshal([]byte(n.Metadata["autoheal-maintenance"]), &v) != nil {
		return ""
	}
	return v.Notice
}

// reportCheckpoint is the guest's answer on every worker (the guest
// contract: guest attribute autoheal/checkpoint echoing the notice).
func (w *uworld) reportCheckpoint(node, notice string, workers int) {
	report, _ := json.Marshal(map[string]string{"notice": notice, "checkpoint": "gs://acme-ml/ckpt/step-9000", "time": w.clock.now().Format(time.RFC3339)})
	for i := range workers {
		w.fake.SetGuestAttribute(node, tpufake.GuestAttribute{Worker: fmt.Sprint(i), Namespace: "autoheal", Key: "checkpoint", Value: string(report)})
	}
}

func TestUncertainNodeInTheMaintenanceItStartedIsNotDeleted(t *testing.T) {
	window := uT0.Add(7 * 24 * time.Hour)
	w := newWorld(t, uFleet(uMaintenanceNode(window, "early")), map[string]string{"AUTOHEAL_MAINTENANCE": "early"},
		tpufake.WithOperationDelay("performMaintenance", 40*time.Minute),
		tpufake.WithMaintenanceNodeState("READY", "UNHEALTHY_MAINTENANCE"))
	w.sweeps(1)
	notice := sentNotice(w.node(uNode))
	if notice == "" {
		t.Fatalf("no notice written after a sweep; records:%s", w.history(uNode))
	}
	w.reportCheckpoint(uNode, notice, 4)
	w.sweeps(2)
	if got := w.fake.Count("nodes.performMaintenance", uNode); got != 1 {
		t.Fatalf("%d performMaintenance calls, want 1 (maintenance started early); records:%s", got, w.history(uNode))
	}
	before := w.node(uNode).Id
	w.sweeps(60) // the 40 minutes of maintenance, ONGOING, and 20 after
	if got := w.fake.Count("nodes.delete", uNode); got != 0 {
		t.Errorf("%d deletes of a node in the maintenance tpu-autoheal started (ONGOING, within its bound), want 0; records:%s", got, w.history(uNode))
	}
	if n := w.node(uNode); n == nil || n.Id != before || n.State != "READY" || n.Health != "HEALTHY" {
		t.Errorf("after its maintenance: %+v, want the same node READY and HEALTHY", n)
	}
}

func TestUncertainReplacementNodeGetsItsOwnNotice(t *testing.T) {
	window := uT0.Add(7 * 24 * time.Hour)
	w := newWorld(t, uFleet(uMaintenanceNode(window, "")), nil)
	w.sweeps(1)
	if sentNotice(w.node(uNode)) == "" {
		t.Fatalf("no notice written to the first node; records:%s", w.history(uNode))
	}
	// A person recreates the node (a new id) from their own spec: no
	// notice in its metadata, and the same maintenance window ahead of it.
	if _, err := w.fake.Act(tpufake.Act{Kind: tpufake.ActRecreate, Target: uNode, Principal: "alice@acme.example"}); err != nil {
		t.Fatal(err)
	}
	replacement := w.node(uNode)
	delete(replacement.Metadata, "autoheal-maintenance")
	replacement.UpcomingMaintenance = uMaintenanceNode(window, "").UpcomingMaintenance
	w.fake.SetNode(replacement)
	w.sweeps(3)
	if n := w.node(uNode); sentNotice(n) == "" {
		t.Errorf("the replacement node (id %d) was never asked to checkpoint for its maintenance; records:%s", n.Id, w.history(uNode))
	}
}
