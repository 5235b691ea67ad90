package ledgertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/policy"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// runEvidence: the evidence rule's ledger (policy/evidence.go). Evidence
// arrives while a recovery is held by someone else, so it is kept without
// the lease, and no holder's Update may drop it.
func runEvidence(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	alice := remediate.Evidence{InsertID: "admin-1", Change: events.ChangeDeleteNode, Principal: "alice@acme.example",
		Time: t0.Add(20 * time.Second), OperationID: "projects/proj-a/locations/us-central2-b/operations/op-alice", Last: true}
	keep := func(t *testing.T, s remediate.Store, node string, e remediate.Evidence) bool {
		t.Helper()
		kept, err := s.KeepEvidence(ctx, node, e)
		if err != nil {
			t.Fatalf("KeepEvidence(%s, %s): %v", node, e.InsertID, err)
		}
		return kept
	}

	t.Run("evidence: kept for an unfinished recovery while another holds it, once, through the holder's update and a takeover", func(t *testing.T) {
		s := newStore(t)
		r := mustClaim(t, s, req(nodeA, "h1", t0))
		first, again := keep(t, s, nodeA, alice), keep(t, s, nodeA, alice) // the same entry twice: kept, and still kept
		if !first || !again {
			t.Fatal("KeepEvidence for a held, unfinished recovery: kept = false; want true")
		}
		// The holder saves its progress from a copy read before the entry came.
		r.Phase, r.Spec, r.NodeID, r.DeleteSent = remediate.PhaseDeleting, Spec(nodeA), 4721934471238, true
		r.SentOps, r.DeleteAnswered, r.DeleteUnanswered = []string{"projects/proj-a/locations/us-central2-b/operations/op-del"}, true, true
		r.CreateSentAt, r.GoneAt = t0.Add(30*time.Second), t0.Add(40*time.Second)
		r.UpdatedAt = t0.Add(50 * time.Second)
		mustUpdate(t, s, r)
		h := mustHistory(t, s, nodeA, "", t0.Add(50*time.Second))
		if diff := cmp.Diff([]remediate.Evidence{alice}, h.Recovery.Evidence); diff != "" {
			t.Errorf("evidence after the holder's update (-want +got):\n%s", diff)
		}
		want := r
		want.Evidence = []remediate.Evidence{alice}
		want.LeaseUntil = h.Recovery.LeaseUntil
		if diff := cmp.Diff(want, *h.Recovery); diff != "" {
			t.Errorf("the evidence rule's fields after Update (-want +got):\n%s", diff)
		}
		at := h.Recovery.LeaseUntil.Add(time.Second)
		got := mustClaim(t, s, req(nodeA, "h2", at))
		if diff := cmp.Diff([]remediate.Evidence{alice}, got.Evidence); diff != "" {
			t.Errorf("evidence after a takeover (-want +got):\n%s", diff)
		}
	})

	t.Run("evidence: the recovery's seen-READY marker survives trimming past 32 entries; the oldest audit entries go", func(t *testing.T) {
		s := newStore(t)
		mustClaim(t, s, req(nodeA, "h1", t0))
		// The marker a paused look keeps (policy's seenReady), older than every audit entry.
		marker := remediate.Evidence{InsertID: "autoheal-seen-ready-gen-1", Change: events.Change("autoheal-seen-ready"), Time: t0.Add(time.Second), Last: true}
		if !policy.IsMarker(marker) {
			t.Fatal("the marker's shape is not policy's: update this test")
		}
		if !keep(t, s, nodeA, marker) {
			t.Fatal("KeepEvidence(marker): kept = false")
		}
		for i := 1; i <= 40; i++ {
			keep(t, s, nodeA, remediate.Evidence{InsertID: fmt.Sprintf("admin-%02d", i), Change: events.ChangeCreateNode,
				Principal: "alice@acme.example", Time: t0.Add(time.Duration(i) * time.Minute), Last: true})
		}
		h := mustHistory(t, s, nodeA, "", t0.Add(time.Hour))
		var got []string
		for _, e := range h.Recovery.Evidence {
			got = append(got, e.InsertID)
		}
		want := []string{"autoheal-seen-ready-gen-1"} // then the newest 32 of 40: admin-09 .. admin-40
		for i := 9; i <= 40; i++ {
			want = append(want, fmt.Sprintf("admin-%02d", i))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("evidence kept after 41 entries (-want +got):\n%s", diff)
		}
	})

	t.Run("evidence: not kept without an unfinished recovery", func(t *testing.T) {
		s := newStore(t)
		if keep(t, s, nodeA, alice) {
			t.Error("KeepEvidence for a node with no recovery: kept = true; want false")
		}
		finish(t, s, nodeA, "h1", t0)
		if keep(t, s, nodeA, alice) {
			t.Error("KeepEvidence for a finished recovery: kept = true; want false")
		}
	})
}
