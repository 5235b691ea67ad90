package remediate_test

import (
	"context"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// TestRecoveriesSavedInTodaysShapeAreFinished loads recoveries as the
// handler before Advance saved them (phases claimed, saved, deleting,
// deleted, creating, done, failed, abandoned; DeleteSent, operations from a
// process that is gone) and checks each is finished correctly.
func TestRecoveriesSavedInTodaysShapeAreFinished(t *testing.T) {
	spec := remediate.CleanSpec(fullNode("TERMINATED"))
	tests := []struct {
		name     string
		node     bool // the node still exists (TERMINATED)
		mod      func(r *remediate.Recovery)
		want     remediate.Phase
		wantNode string // READY, or "" for NOT FOUND
	}{
		{name: "claimed, node TERMINATED", node: true, mod: func(r *remediate.Recovery) { r.Phase = remediate.PhaseClaimed }, want: remediate.PhaseRecovered, wantNode: "READY"},
		{name: "saved, delete not sent, node TERMINATED", node: true, mod: func(r *remediate.Recovery) { r.Phase, r.Spec = remediate.PhaseSaved, spec }, want: remediate.PhaseRecovered, wantNode: "READY"},
		{name: "saved, delete not sent, node gone: someone else's", mod: func(r *remediate.Recovery) { r.Phase, r.Spec = remediate.PhaseSaved, spec }, want: remediate.PhaseClosed},
		{name: "saved with DeleteSent, node gone", mod: func(r *remediate.Recovery) { r.Phase, r.Spec, r.DeleteSent = remediate.PhaseSaved, spec, true }, want: remediate.PhaseRecovered, wantNode: "READY"},
		{name: "deleting with an operation of a gone process, node gone", mod: func(r *remediate.Recovery) {
			r.Phase, r.Spec, r.DeleteSent, r.DeleteOp = remediate.PhaseDeleting, spec, true, "projects/acme-ml/locations/us-central2-b/operations/operation-999"
		}, want: remediate.PhaseRecovered, wantNode: "READY"},
		{name: "deleted, node gone", mod: func(r *remediate.Recovery) { r.Phase, r.Spec, r.DeleteSent = remediate.PhaseDeleted, spec, true }, want: remediate.PhaseRecovered, wantNode: "READY"},
		{name: "creating, its operation unknown, node gone", mod: func(r *remediate.Recovery) {
			r.Phase, r.Spec, r.DeleteSent, r.CreateOp = remediate.PhaseCreating, spec, true, "projects/acme-ml/locations/us-central2-b/operations/operation-998"
		}, want: remediate.PhaseRecovered, wantNode: "READY"},
		{name: "failed after our delete, node gone", mod: func(r *remediate.Recovery) { r.Phase, r.Spec, r.DeleteSent = remediate.PhaseFailed, spec, true }, want: remediate.PhaseRecovered, wantNode: "READY"},
		{name: "done is terminal", mod: func(r *remediate.Recovery) { r.Phase, r.Spec = remediate.PhaseDone, spec }, want: remediate.PhaseDone},
		{name: "abandoned is terminal", mod: func(r *remediate.Recovery) { r.Phase, r.Spec = remediate.PhaseAbandoned, spec }, want: remediate.PhaseAbandoned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tpufake.Fleet{}
			if tt.node {
				f.Nodes = []*tpu.Node{fullNode("TERMINATED")}
			}
			e := newEnv(t, f)
			ctx := context.Background()
			old := start.Add(-2 * time.Hour)
			rec, err := e.store.Claim(ctx, remediate.ClaimRequest{Node: nodeName, Project: project, Holder: "gone-process", Now: old,
				Action: remediate.ActionRecreate, EventID: "e0", Config: e.h.Config})
			if err != nil {
				t.Fatal(err)
			}
			rec.NodeID, rec.UpdatedAt = 4721934471238, old
			tt.mod(&rec)
			if err := e.store.Update(ctx, rec); err != nil {
				t.Fatal(err)
			}
			e.settle(t)
			h, err := e.store.History(ctx, nodeName, project, "", e.clock.Now(), 24*time.Hour)
			if err != nil || h.Recovery == nil {
				t.Fatalf("History = %+v, %v", h, err)
			}
			if h.Recovery.Phase != tt.want {
				t.Errorf("phase = %s (%s), want %s", h.Recovery.Phase, h.Recovery.LastError, tt.want)
			}
			n := nodeOf(t, e.fake, nodeName)
			switch {
			case tt.wantNode == "" && tt.node:
			case tt.wantNode == "" && n != nil:
				t.Errorf("node = %s, want NOT FOUND (not ours to recreate)", n.State)
			case tt.wantNode != "" && (n == nil || n.State != tt.wantNode):
				t.Errorf("node = %+v, want %s", n, tt.wantNode)
			}
		})
	}
}
