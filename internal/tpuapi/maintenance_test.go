package tpuapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/googleapi"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

const maintFleet = `{"nodes": [
 {"name": "projects/p/locations/us-central2-b/nodes/llm", "state": "READY", "health": "HEALTHY",
  "acceleratorType": "v4-16", "labels": {"tpu-autoheal": "enabled"},
  "metadata": {"startup-script": "#!/bin/bash", "autoheal-train-cmd": "python3 train.py"},
  "networkEndpoints": [{"ipAddress": "10.0.0.2"}, {"ipAddress": "10.0.0.3"}],
  "upcomingMaintenance": {"type": "SCHEDULED", "maintenanceStatus": "PENDING", "canReschedule": true,
   "windowStartTime": "2026-12-08T02:00:00Z", "windowEndTime": "2026-12-08T06:00:00Z"},
  "guestAttributes": [{"worker": "1", "namespace": "autoheal", "key": "checkpoint", "value": "{\"notice\":\"2026-12-08T02:00:00Z\"}"},
                      {"worker": "1", "namespace": "other", "key": "x", "value": "y"}]},
 {"name": "projects/p/locations/us-central2-b/nodes/fixed", "state": "READY", "health": "HEALTHY",
  "upcomingMaintenance": {"type": "UNSCHEDULED", "maintenanceStatus": "PENDING", "canReschedule": false,
   "windowStartTime": "2026-12-02T02:00:00Z"}},
 {"name": "projects/p/locations/us-central2-b/nodes/qr-node", "state": "READY", "health": "HEALTHY",
  "queuedResource": "projects/p/locations/us-central2-b/queuedResources/qr",
  "upcomingMaintenance": {"type": "SCHEDULED", "maintenanceStatus": "PENDING", "canReschedule": true,
   "windowStartTime": "2026-12-09T02:00:00Z"}}
],
"queuedResources": [{"name": "projects/p/locations/us-central2-b/queuedResources/qr",
  "tpu": {"nodeSpec": [{"parent": "projects/p/locations/us-central2-b", "nodeId": "qr-node", "node": {"acceleratorType": "v5litepod-8"}}]},
  "state": {"state": "ACTIVE"}}]}`

const (
	mNode  = "projects/p/locations/us-central2-b/nodes/llm"
	mFixed = "projects/p/locations/us-central2-b/nodes/fixed"
	mQR    = "projects/p/locations/us-central2-b/queuedResources/qr"
	mQRNod = "projects/p/locations/us-central2-b/nodes/qr-node"
)

func startMaint(t *testing.T, opts ...tpufake.Option) (*tpufake.Server, *tpuapi.Maintenance) {
	t.Helper()
	f, err := tpufake.ReadFleet(strings.NewReader(maintFleet))
	if err != nil {
		t.Fatal(err)
	}
	s := tpufake.New(f, opts...)
	t.Cleanup(s.Close)
	m, err := tpuapi.NewMaintenanceFromOptions(context.Background(), s.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	return s, m
}

func TestPatchNodeMetadataSendsOnlyMetadata(t *testing.T) {
	s, m := startMaint(t)
	ctx := context.Background()
	before, err := m.GetNode(ctx, mNode)
	if err != nil {
		t.Fatal(err)
	}
	md := map[string]string{"startup-script": "#!/bin/bash", "autoheal-train-cmd": "python3 train.py", remediate.NoticeMetadataKey: `{"notice":"x"}`}
	op, err := m.PatchNodeMetadata(ctx, mNode, md)
	if err != nil || op == "" {
		t.Fatalf("patch: %q, %v", op, err)
	}
	var req tpufake.Request
	for _, r := range s.Requests() {
		if r.RPC == "nodes.patch" {
			req = r
		}
	}
	if req.Method != http.MethodPatch {
		t.Fatalf("no PATCH request logged: %+v", s.Requests())
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(req.Body, &body); err != nil {
		t.Fatal(err)
	}
	if len(body) != 1 || body["metadata"] == nil {
		t.Errorf("patch body %s: want only metadata", req.Body)
	}
	after, _ := m.GetNode(ctx, mNode)
	if diff := cmp.Diff(md, after.Metadata); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	after.Metadata, before.Metadata = nil, nil
	after.ServerResponse, before.ServerResponse = googleapi.ServerResponse{}, googleapi.ServerResponse{}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("other fields changed (-before +after):\n%s", diff)
	}
}

func TestPatchOfAnotherFieldIsRefused(t *testing.T) {
	s, _ := startMaint(t)
	svc, err := s.Service(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.Projects.Locations.Nodes.Patch(mNode, &tpu.Node{Labels: map[string]string{"a": "b"}}).UpdateMask("labels").Do()
	if herr, ok := err.(*googleapi.Error); !ok || herr.Code != 400 {
		t.Errorf("patch labels: %v, want INVALID_ARGUMENT", err)
	}
}

func TestGuestAttributesAreReadPerWorker(t *testing.T) {
	s, m := startMaint(t)
	ctx := context.Background()
	got, err := m.GetGuestAttributes(ctx, mNode, remediate.CheckpointQueryPath)
	if err != nil {
		t.Fatal(err)
	}
	want := []remediate.GuestAttribute{{Worker: "1", Namespace: "autoheal", Key: "checkpoint", Value: `{"notice":"2026-12-08T02:00:00Z"}`}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("from the fleet file (-want +got):\n%s", diff)
	}
	s.SetGuestAttribute(mNode, tpufake.GuestAttribute{Worker: "0", Namespace: "autoheal", Key: "checkpoint", Value: "w0"})
	got, err = m.GetGuestAttributes(ctx, mNode, "autoheal/")
	if err != nil {
		t.Fatal(err)
	}
	want = []remediate.GuestAttribute{{Worker: "0", Namespace: "autoheal", Key: "checkpoint", Value: "w0"}, want[0]}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after SetGuestAttribute (-want +got):\n%s", diff)
	}
}

func TestPerformMaintenanceTakesTheNodeThroughMaintenance(t *testing.T) {
	s, m := startMaint(t, tpufake.WithOperationPolls(1))
	ctx := context.Background()
	op, err := m.PerformMaintenance(ctx, mNode)
	if err != nil || op == "" {
		t.Fatalf("perform maintenance: %q, %v", op, err)
	}
	n, _ := m.GetNode(ctx, mNode)
	if n.State != "REPAIRING" || n.UpcomingMaintenance == nil || n.UpcomingMaintenance.MaintenanceStatus != "ONGOING" {
		t.Errorf("during: %s, %+v; want REPAIRING with the notice ONGOING", n.State, n.UpcomingMaintenance)
	}
	if _, err := m.PerformMaintenance(ctx, mNode); err == nil {
		t.Error("a second performMaintenance while ONGOING was accepted")
	}
	c, _ := tpuapi.NewFromOptions(ctx, s.ClientOptions()...)
	for i := 0; ; i++ {
		done, err := c.GetOperation(ctx, op)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		if i == 1000 {
			t.Fatalf("operation %s not done after 1000 polls", op)
		}
	}
	n, _ = m.GetNode(ctx, mNode)
	if n.State != "READY" || n.Health != "HEALTHY" || n.UpcomingMaintenance != nil {
		t.Errorf("after: %s %s %+v; want READY HEALTHY without upcoming maintenance", n.State, n.Health, n.UpcomingMaintenance)
	}
	if got := s.Count("nodes.performMaintenance", mNode); got != 2 {
		t.Errorf("%d performMaintenance requests logged, want 2", got)
	}
}

func TestMaintenanceCanLeaveTheNodeTerminated(t *testing.T) {
	s, m := startMaint(t)
	ctx := context.Background()
	s.SetMaintenanceOutcome(mNode, "TERMINATED")
	if _, err := m.PerformMaintenance(ctx, mNode); err != nil {
		t.Fatal(err)
	}
	if !s.EndMaintenance(mNode) {
		t.Fatal("no maintenance under way")
	}
	n, _ := m.GetNode(ctx, mNode)
	if n.State != "TERMINATED" || n.UpcomingMaintenance != nil || !strings.Contains(n.HealthDescription, "maintenance event at") {
		t.Errorf("after: %s %+v %q; want TERMINATED after a maintenance event", n.State, n.UpcomingMaintenance, n.HealthDescription)
	}
}

func TestPerformMaintenanceNeedsAReschedulablePendingNotice(t *testing.T) {
	_, m := startMaint(t)
	_, err := m.PerformMaintenance(context.Background(), mFixed)
	if herr, ok := asGoogleAPI(err); !ok || herr.Code != 400 || !strings.Contains(herr.Message, "rescheduled") {
		t.Errorf("got %v, want FAILED_PRECONDITION", err)
	}
	if !remediate.IsNotFound(func() error { _, err := m.PerformMaintenance(context.Background(), mFixed+"-x"); return err }()) {
		t.Error("unknown node: want NOT FOUND")
	}
}

func TestPerformMaintenanceOfAQueuedResourceNode(t *testing.T) {
	s, m := startMaint(t, tpufake.WithOperationPolls(0))
	ctx := context.Background()
	if _, err := m.PerformMaintenanceQueuedResource(ctx, mQR, []string{mNode}); err == nil {
		t.Error("a node of no queued resource was accepted")
	}
	if _, err := m.PerformMaintenanceQueuedResource(ctx, mQR, []string{mQRNod}); err != nil {
		t.Fatal(err)
	}
	n, _ := m.GetNode(ctx, mQRNod)
	if n.State != "READY" || n.UpcomingMaintenance != nil {
		t.Errorf("after: %s %+v; want READY, notice cleared", n.State, n.UpcomingMaintenance)
	}
	if got := s.Count("queuedResources.performMaintenanceQueuedResource", mQR); got != 2 {
		t.Errorf("%d requests, want 2", got)
	}
}

func asGoogleAPI(err error) (*googleapi.Error, bool) {
	var herr *googleapi.Error
	ok := errors.As(err, &herr)
	return herr, ok
}
