package ledger_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// runNoticeContract is what every remediate.NoticeStore must do.
func runNoticeContract(t *testing.T, newStore func(t *testing.T) remediate.NoticeStore) {
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	key := remediate.NoticeKey{Node: "projects/p/locations/us-central2-b/nodes/llm", WindowStart: "2026-12-08T02:00:00Z"}

	t.Run("a step is claimed once per notice", func(t *testing.T) {
		s := newStore(t)
		first, err := s.ClaimNotice(ctx, key, remediate.NoticeStepPrepare, at)
		if err != nil || !first {
			t.Fatalf("first claim: %t, %v; want true", first, err)
		}
		again, err := s.ClaimNotice(ctx, key, remediate.NoticeStepPrepare, at.Add(time.Minute))
		if err != nil || again {
			t.Fatalf("second claim: %t, %v; want false", again, err)
		}
		got, err := s.NoticeSteps(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]time.Time{remediate.NoticeStepPrepare: at}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("steps (-want +got):\n%s", diff)
		}
	})

	t.Run("another window of the same node is another notice", func(t *testing.T) {
		s := newStore(t)
		mustClaimNotice(t, s, key, remediate.NoticeStepMaintain, at, true)
		other := key
		other.WindowStart = "2026-12-15T02:00:00Z"
		mustClaimNotice(t, s, other, remediate.NoticeStepMaintain, at, true)
		got, err := s.NoticeSteps(ctx, remediate.NoticeKey{Node: key.Node, WindowStart: "2027-01-01T00:00:00Z"})
		if err != nil || len(got) != 0 {
			t.Errorf("unknown notice: %v, %v; want no steps", got, err)
		}
	})

	t.Run("a key with the node id and the old key by name are different notices, both readable", func(t *testing.T) {
		s := newStore(t)
		old := key // claimed before node ids were part of the key
		byID := remediate.NoticeKey{Node: key.Node, NodeID: 4242, WindowStart: key.WindowStart}
		mustClaimNotice(t, s, old, remediate.NoticeStepPrepare, at, true)
		if got, err := s.NoticeSteps(ctx, byID); err != nil || len(got) != 0 {
			t.Errorf("steps under the id key = %v, %v; want none (the old document is not under it)", got, err)
		}
		if got, err := s.NoticeSteps(ctx, byID.ByName()); err != nil || !got[remediate.NoticeStepPrepare].Equal(at) {
			t.Errorf("steps under the old key = %v, %v; want prepare at %s", got, err, at)
		}
		mustClaimNotice(t, s, byID, remediate.NoticeStepPrepare, at, true)
		mustClaimNotice(t, s, remediate.NoticeKey{Node: key.Node, NodeID: 4243, WindowStart: key.WindowStart}, remediate.NoticeStepPrepare, at, true)
	})

	t.Run("a released claim can be taken again", func(t *testing.T) {
		s := newStore(t)
		mustClaimNotice(t, s, key, remediate.NoticeStepMaintain, at, true)
		if err := s.ReleaseNotice(ctx, key, remediate.NoticeStepMaintain); err != nil {
			t.Fatal(err)
		}
		if err := s.ReleaseNotice(ctx, key, remediate.NoticeStepMaintain); err != nil {
			t.Fatalf("releasing an absent claim: %v", err)
		}
		mustClaimNotice(t, s, key, remediate.NoticeStepMaintain, at, true)
	})

	t.Run("a claim without a node is refused", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.ClaimNotice(ctx, remediate.NoticeKey{WindowStart: key.WindowStart}, remediate.NoticeStepPrepare, at); err == nil {
			t.Error("want an error")
		}
	})

	t.Run("of concurrent claims exactly one is first", func(t *testing.T) {
		s := newStore(t)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				first, err := s.ClaimNotice(ctx, key, remediate.NoticeStepMaintain, at)
				if err != nil {
					t.Error(err)
				}
				if first {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if got := wins.Load(); got != 1 {
			t.Errorf("%d claims were first, want 1", got)
		}
	})
}

func mustClaimNotice(t *testing.T, s remediate.NoticeStore, key remediate.NoticeKey, step string, at time.Time, want bool) {
	t.Helper()
	got, err := s.ClaimNotice(context.Background(), key, step, at)
	if err != nil || got != want {
		t.Fatalf("claim %s %+v: %t, %v; want %t", step, key, got, err, want)
	}
}

func TestMemoryNoticesMeetContract(t *testing.T) {
	runNoticeContract(t, func(t *testing.T) remediate.NoticeStore { return ledger.NewMemoryNotices() })
}
