package ledgertest

import (
	"context"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// runOldShapes checks that a recovery saved in an older shape (a phase of
// before Step, a DeleteSent never written) is read in today's, by every read
// the handler makes: History, Unfinished, and the claim of a takeover.
func runOldShapes(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	const op = "projects/proj-a/locations/us-central2-b/operations/operation-7"
	tests := []struct {
		name          string
		action        remediate.Action
		old           func(r *remediate.Recovery)
		wantPhase     remediate.Phase
		wantDeleteSet bool
	}{
		{"a recreate saved before DeleteSent existed, with its delete's operation, reads as deleting with its delete sent", remediate.ActionRecreate,
			func(r *remediate.Recovery) { r.Phase, r.DeleteOp = remediate.PhaseSaved, op }, remediate.PhaseDeleting, true},
		{"a recreate saved as saved with its delete sent reads as deleting", remediate.ActionRecreate,
			func(r *remediate.Recovery) { r.Phase, r.DeleteSent = remediate.PhaseSaved, true }, remediate.PhaseDeleting, true},
		{"a recreate creating, saved before DeleteSent existed, reads with its delete sent", remediate.ActionRecreate,
			func(r *remediate.Recovery) { r.Phase, r.CreateOp = remediate.PhaseCreating, op }, remediate.PhaseCreating, true},
		{"saved with no delete sent stays saved: a live phase", remediate.ActionRecreate,
			func(r *remediate.Recovery) { r.Phase = remediate.PhaseSaved }, remediate.PhaseSaved, false},
		{"a failed recreate stays failed: the node says where it resumes", remediate.ActionRecreate,
			func(r *remediate.Recovery) { r.Phase = remediate.PhaseFailed }, remediate.PhaseFailed, false},
		{"a reset saved before Step as creating, its operation in CreateOp, reads as resetting", remediate.ActionReset,
			func(r *remediate.Recovery) {
				r.Phase, r.CreateOp, r.QueuedResource = remediate.PhaseCreating, op, "qr-a"
			}, remediate.PhaseResetting, false},
		{"a reset saved before Step as deleting reads as resetting", remediate.ActionReset,
			func(r *remediate.Recovery) { r.Phase, r.QueuedResource = remediate.PhaseDeleting, "qr-a" }, remediate.PhaseResetting, false},
		{"a reset saved as failed without its queued resource stays failed: the state machine closes it", remediate.ActionReset,
			func(r *remediate.Recovery) { r.Phase = remediate.PhaseFailed }, remediate.PhaseFailed, false},
	}
	for _, tt := range tests {
		t.Run("old shape: "+tt.name, func(t *testing.T) {
			s := newStore(t)
			rq := req(nodeA, "h1", t0)
			rq.Action = tt.action
			r := mustClaim(t, s, rq)
			r.Spec, r.UpdatedAt = Spec(nodeA), t0
			tt.old(&r)
			mustUpdate(t, s, r)
			check := func(read string, got remediate.Recovery) {
				t.Helper()
				if got.Phase != tt.wantPhase || got.DeleteSent != tt.wantDeleteSet || got.Action != tt.action {
					t.Errorf("%s: %s phase %s DeleteSent %v; want %s phase %s DeleteSent %v",
						read, got.Action, got.Phase, got.DeleteSent, tt.action, tt.wantPhase, tt.wantDeleteSet)
				}
			}
			h := mustHistory(t, s, nodeA, "", t0)
			if h.Recovery == nil {
				t.Fatal("History: no recovery")
			}
			check("History", *h.Recovery)
			un, err := s.Unfinished(ctx)
			if err != nil || len(un) != 1 {
				t.Fatalf("Unfinished = %d recoveries, %v; want 1", len(un), err)
			}
			check("Unfinished", un[0])
			rq = req(nodeA, "h2", t0.Add(time.Hour)) // the lease ran out: a takeover
			rq.Action = tt.action
			check("takeover claim", mustClaim(t, s, rq))
		})
	}

	t.Run("old shape: done stays done, terminal", func(t *testing.T) {
		s := newStore(t)
		r := mustClaim(t, s, req(nodeA, "h1", t0))
		r.Phase, r.DeleteOp, r.UpdatedAt = remediate.PhaseDone, op, t0
		mustUpdate(t, s, r)
		if h := mustHistory(t, s, nodeA, "", t0); h.Recovery == nil || h.Recovery.Phase != remediate.PhaseDone {
			t.Errorf("History.Recovery = %+v; want done", h.Recovery)
		}
		if un, err := s.Unfinished(ctx); err != nil || len(un) != 0 {
			t.Errorf("Unfinished = %+v, %v; want none", un, err)
		}
	})
}
