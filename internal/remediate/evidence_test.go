package remediate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// TestEvidenceIsKeptForTheRecoveryItIsAbout: an admin-activity entry about
// a node with an unfinished recovery is kept in that recovery's ledger (a
// queued resource's delete: in the recovery resetting it), recorded as a
// skip naming the recovery, and never acted on; one about a node with no
// recovery is only recorded.
func TestEvidenceIsKeptForTheRecoveryItIsAbout(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)
	const (
		project = "acme-ml"
		zone    = "us-west4-a"
		qr      = "projects/acme-ml/locations/us-west4-a/queuedResources/qr-1"
		slice   = "projects/acme-ml/locations/us-west4-a/nodes/qr-1"
		other   = "projects/acme-ml/locations/us-west4-a/nodes/other"
	)
	store := ledger.NewMemory(ledger.WithClock(func() time.Time { return now }))
	recs := &records{}
	h := remediate.Filled(&remediate.Handler{Store: store, Lease: store, Histories: store, Recorder: recs, Config: remediate.DefaultConfig(), Now: func() time.Time { return now }, Holder: "h"})
	r, err := store.Claim(ctx, remediate.ClaimRequest{Node: slice, Project: project, Zone: zone, Holder: "h", Now: now, Action: remediate.ActionReset, Config: remediate.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	r.Phase, r.QueuedResource = remediate.PhaseResetting, qr
	if err := store.Update(ctx, r); err != nil {
		t.Fatal(err)
	}

	qrDelete := events.Event{InsertID: "admin-qr", Time: now, Kind: events.KindAdminActivity, Principal: "alice@acme.example",
		Method: "google.cloud.tpu.v2.Tpu.DeleteQueuedResource", Node: events.NodeRef{Project: project, Zone: zone},
		Admin: &events.AdminActivity{Change: events.ChangeDeleteQueuedResource, QueuedResource: qr, OperationID: "op-qr", First: true}}
	rec, err := h.Evidence(ctx, qrDelete)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Action != remediate.ActionSkip || rec.Node != slice || !strings.Contains(rec.Reason, "kept in the ledger") {
		t.Errorf("record = %s %s %q; want a skip of %s saying the entry is kept", rec.Action, rec.Node, rec.Reason, slice)
	}
	hist, err := store.History(ctx, slice, project, "", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := hist.Recovery.Evidence; len(got) != 1 || got[0].Principal != "alice@acme.example" || got[0].QueuedResource != qr || got[0].OperationID != "op-qr" {
		t.Errorf("kept evidence = %+v; want alice's delete of %s", got, qr)
	}

	nodeDelete := events.Event{InsertID: "admin-node", Time: now, Kind: events.KindAdminActivity, Principal: "alice@acme.example",
		Method: "google.cloud.tpu.v2.Tpu.DeleteNode", Node: events.NodeRef{Project: project, Zone: zone, Node: "other"},
		Admin: &events.AdminActivity{Change: events.ChangeDeleteNode, OperationID: "op-n", First: true}}
	rec, err = h.Evidence(ctx, nodeDelete)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Action != remediate.ActionSkip || rec.Node != other || strings.Contains(rec.Reason, "kept in the ledger") {
		t.Errorf("record of an entry about a node with no recovery = %s %s %q; want a skip, not kept", rec.Action, rec.Node, rec.Reason)
	}
	if got := len(recs.list()); got != 2 {
		t.Errorf("%d records, want one per entry", got)
	}
}
