package remediate_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

const (
	otherName = "projects/acme-ml/locations/us-central2-b/nodes/not-opted-in"
	window    = "2026-11-27T02:00:00Z"
)

func noticeNode(name string, optedIn bool) *tpu.Node {
	n := &tpu.Node{
		Name: name, State: "READY", Health: "HEALTHY", AcceleratorType: "v4-16",
		Labels:           map[string]string{},
		Metadata:         map[string]string{"autoheal-train-cmd": "python3 train.py", "team-key": "kept"},
		NetworkEndpoints: []*tpu.NetworkEndpoint{{IpAddress: "10.0.0.2"}, {IpAddress: "10.0.0.3"}},
		UpcomingMaintenance: &tpu.UpcomingMaintenance{
			MaintenanceStatus: "PENDING", Type: "SCHEDULED", CanReschedule: true,
			WindowStartTime: window, WindowEndTime: "2026-11-27T06:00:00Z",
		},
	}
	if optedIn {
		n.Labels["tpu-autoheal"] = "enabled"
	}
	return n
}

// newMaintEnv is newEnv with the Maintainer hooked in, in mode.
func newMaintEnv(t *testing.T, mode string) *env {
	t.Helper()
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{noticeNode(nodeName, true), noticeNode(otherName, false)}}, tpufake.WithOperationPolls(1))
	m, err := tpuapi.NewMaintenanceFromOptions(context.Background(), e.fake.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	e.h.Config.MaintenanceMode = mode
	e.h.Maintenance = &remediate.Maintainer{TPU: m, Notices: ledger.NewMemoryNotices(), Config: e.h.Config, Now: e.clock.Now}
	return e
}

func sweepZone(t *testing.T, e *env) remediate.SweepResult {
	t.Helper()
	res, err := e.h.Sweep(context.Background(), remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func actions(rs []remediate.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r.Action)+" "+r.Node)
	}
	return out
}

func TestSweepPreparesThenMaintainsOnceTheGuestCheckpointed(t *testing.T) {
	e := newMaintEnv(t, remediate.MaintenanceEarly)
	res := sweepZone(t, e)
	if len(res.Records) != 1 || res.Records[0].Action != remediate.ActionPrepare || res.Records[0].Outcome != remediate.OutcomePrepared {
		t.Fatalf("first sweep: %v, want one prepare of %s", actions(res.Records), nodeName)
	}
	if got := e.fake.Count("nodes.patch", nodeName); got != 1 {
		t.Errorf("%d patches of %s, want 1", got, nodeName)
	}
	n := nodeOf(t, e.fake, nodeName)
	var notice remediate.MaintenanceNotice
	if err := json.Unmarshal([]byte(n.Metadata[remediate.NoticeMetadataKey]), &notice); err != nil || notice.Notice != window {
		t.Fatalf("notice %q: %v", n.Metadata[remediate.NoticeMetadataKey], err)
	}
	if n.Metadata["team-key"] != "kept" {
		t.Errorf("metadata %v: other keys lost", n.Metadata)
	}

	e.clock.Advance(5 * time.Minute)
	if res := sweepZone(t, e); len(res.Records) != 0 || e.fake.Count("nodes.performMaintenance", "") != 0 {
		t.Fatalf("no checkpoint yet: %v, %d performMaintenance; want a quiet wait", actions(res.Records), e.fake.Count("nodes.performMaintenance", ""))
	}
	report, _ := json.Marshal(remediate.CheckpointReport{Notice: window, Checkpoint: "gs://ckpt/step-42", Time: "2026-11-20T04:05:00Z"})
	for _, w := range []string{"0", "1"} {
		e.fake.SetGuestAttribute(nodeName, tpufake.GuestAttribute{Worker: w, Namespace: "autoheal", Key: "checkpoint", Value: string(report)})
	}
	e.clock.Advance(time.Minute)
	res = sweepZone(t, e)
	if len(res.Records) != 1 || res.Records[0].Action != remediate.ActionMaintain {
		t.Fatalf("after the checkpoint: %v, want one maintain", actions(res.Records))
	}
	if got := e.fake.Count("nodes.performMaintenance", nodeName); got != 1 {
		t.Errorf("%d performMaintenance, want 1", got)
	}
	for range 2 {
		sweepZone(t, e)
	}
	if e.fake.Count("nodes.patch", "") != 1 || e.fake.Count("nodes.performMaintenance", "") != 1 || e.fake.Count("nodes.getGuestAttributes", otherName) != 0 {
		t.Errorf("after more sweeps: %d patches, %d performMaintenance, %d guest reads of the node not opted in; want 1, 1, 0",
			e.fake.Count("nodes.patch", ""), e.fake.Count("nodes.performMaintenance", ""), e.fake.Count("nodes.getGuestAttributes", otherName))
	}
}

func TestModeOffRecordsTheNoticeOnceAndPatchesNothing(t *testing.T) {
	e := newMaintEnv(t, remediate.MaintenanceOff)
	sweepZone(t, e)
	sweepZone(t, e)
	var notes int
	for _, r := range e.records.list() {
		if r.Node == nodeName && strings.Contains(r.Reason, "mode off") {
			notes++
		}
	}
	if notes != 1 || e.fake.Count("nodes.patch", "") != 0 {
		t.Errorf("%d records of the notice, %d patches; want 1, 0", notes, e.fake.Count("nodes.patch", ""))
	}
}

func TestZoneHintPreparesTheOptedInNodesOfTheZone(t *testing.T) {
	e := newMaintEnv(t, remediate.MaintenancePrepare)
	hint := events.Event{InsertID: "ce-1", Method: "compute.instances.upcomingMaintenance", Worker: "0",
		Node: events.NodeRef{Project: project, Zone: zone}, Cause: events.CauseMaintenance}
	res, err := e.h.HandleZoneHint(context.Background(), hint)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.fake.Count("nodes.patch", nodeName); got != 1 || e.fake.Count("nodes.patch", otherName) != 0 {
		t.Errorf("patches: %d of %s, %d of the node not opted in; want 1, 0", got, nodeName, e.fake.Count("nodes.patch", otherName))
	}
	last := res.Records[len(res.Records)-1]
	if res.Nodes != 1 || last.Action != remediate.ActionRecord || !strings.Contains(last.Reason, "looked at 1 opted-in nodes") {
		t.Errorf("hint: %d nodes, record %s %q", res.Nodes, last.Action, last.Reason)
	}
	if _, err := e.h.HandleZoneHint(context.Background(), hint); err != nil {
		t.Fatal(err)
	}
	if got := e.fake.Count("nodes.patch", ""); got != 1 {
		t.Errorf("a redelivered hint patched again: %d patches", got)
	}
}

// A sweep that sees both a maintenance event in healthDescription and a
// notice to record once writes that record once, not twice.
func TestSweepRecordsAMaintenanceObservationOnce(t *testing.T) {
	e := newMaintEnv(t, remediate.MaintenancePrepare)
	n := nodeOf(t, e.fake, nodeName)
	n.HealthDescription = "The TPU had a maintenance event at 2026-11-20T03:00:00Z"
	n.UpcomingMaintenance.WindowStartTime = ""
	e.fake.SetNode(n)
	sweepZone(t, e)
	seen := map[string]int{}
	for _, r := range e.records.list() {
		if r.Node == nodeName {
			seen[r.InsertID+" "+r.Reason]++
		}
	}
	for k, c := range seen {
		if c > 1 {
			t.Errorf("record %q written %d times, want once", k, c)
		}
	}
	if len(seen) == 0 {
		t.Fatal("no record of the node")
	}
}
