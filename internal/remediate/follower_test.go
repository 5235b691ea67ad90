package remediate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// hookStore is the memory ledger with a hook run just before the follower
// lease is released: the moment a follower ends its window.
type hookStore struct {
	*ledger.Memory
	afterTake, beforeRelease func()
}

func (s *hookStore) TakeFollower(ctx context.Context, holder string, now, until time.Time) (bool, error) {
	ok, err := s.Memory.TakeFollower(ctx, holder, now, until)
	if f := s.afterTake; f != nil {
		s.afterTake = nil
		f()
	}
	return ok, err
}

func (s *hookStore) ReleaseFollower(ctx context.Context, holder string) error {
	if f := s.beforeRelease; f != nil {
		s.beforeRelease = nil
		f()
	}
	return s.Memory.ReleaseFollower(ctx, holder)
}

// followEnv is a handler on a virtual clock over a fleet whose deletes run
// for an hour, so a delivery leaves its recovery in deleting with a next
// look LookAgain ahead; and a recovery of another node (far) waiting ten
// minutes, so that a follower has something unfinished to hold the lease
// for and ends its window at once, without sleeping.
func followEnv(t *testing.T) (*remediate.Handler, *hookStore, *tpufake.Server, *clock) {
	t.Helper()
	clk := &clock{now: start}
	fake := tpufake.New(tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED"), sweptNode("far", "TERMINATED", "")}},
		tpufake.WithClock(clk.Now), tpufake.WithOperationDelay("delete", time.Hour))
	t.Cleanup(fake.Close)
	svc, err := fake.Service(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	store := &hookStore{Memory: ledger.NewMemory(ledger.WithClock(clk.Now))}
	cfg := remediate.DefaultConfig()
	cfg.StartupScript = script
	h := remediate.Filled(&remediate.Handler{TPU: tpuapi.New(svc), Store: store, Lease: store, Histories: store, Recorder: &records{}, Config: cfg, Now: clk.Now, Holder: "test"})

	far := sweptNode("far", "TERMINATED", "").Name
	rec, err := store.Claim(context.Background(), remediate.ClaimRequest{
		Node: far, Project: project, Zone: zone, Holder: "earlier", Now: start, Action: remediate.ActionRecreate, Config: cfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	rec.Phase, rec.NextLookAt, rec.UpdatedAt = remediate.PhaseDeleted, start.Add(10*time.Minute), start
	rec.LastError = "create (exhausted): stockout"
	if err := store.Update(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	return h, store, fake, clk
}

// The race the kick must survive: a delivery starts a recovery just as the
// follower ends its window. The delivery sees the lease held and does not
// kick; the follower, looking at the unfinished recoveries after releasing
// the lease, sees the new one and chains. Without that last look the new
// recovery would wait up to a minute for the next sweep.
func TestFollowerEndingAsADeliveryStartsARecoveryChains(t *testing.T) {
	h, store, _, _ := followEnv(t)
	ctx := context.Background()
	var delivered remediate.Record
	var kicked bool
	store.beforeRelease = func() {
		r, err := h.Handle(ctx, terminate("wave-1"))
		if err != nil {
			t.Errorf("Handle: %v", err)
		}
		delivered, kicked = r, h.KickWanted(ctx, r)
	}
	res, err := h.Follow(ctx, 50*time.Second)
	if err != nil {
		t.Fatalf("Follow: %v", err)
	}
	if !remediate.LeftForLater(delivered) {
		t.Fatalf("the delivery's record (%s, phase %q) did not leave a recovery for later; the race did not happen", delivered.Action, delivered.Phase)
	}
	if kicked {
		t.Errorf("the delivery kicked while the follower held the lease")
	}
	if !res.Followed || !res.Chain {
		t.Errorf("Follow = followed %v, chain %v; want the ending follower to chain for the delivery's recovery", res.Followed, res.Chain)
	}
	if held, _ := store.FollowerHeld(ctx, h.Now()); held {
		t.Errorf("the follower lease is still held after Follow returned")
	}
}

func TestFollow(t *testing.T) {
	ctx := context.Background()
	t.Run("a follower ending with only a far-off look does not chain", func(t *testing.T) {
		h, _, _, _ := followEnv(t)
		res, err := h.Follow(ctx, 50*time.Second)
		if err != nil {
			t.Fatalf("Follow: %v", err)
		}
		if !res.Followed || res.Chain {
			t.Errorf("Follow = followed %v, chain %v; want followed, no chain (the look is 10 minutes away)", res.Followed, res.Chain)
		}
	})
	t.Run("a follower ending with a look due within the next window chains", func(t *testing.T) {
		h, store, _, clk := followEnv(t)
		if _, err := h.Handle(ctx, terminate("wave-1")); err != nil {
			t.Fatal(err)
		}
		// The window is over as soon as the lease is taken (the virtual
		// clock jumps past it), with the delivery's look LookAgain after
		// the delivery: due within the next window.
		store.afterTake = func() { clk.Advance(51 * time.Second) }
		res, err := h.Follow(ctx, 50*time.Second)
		if err != nil {
			t.Fatalf("Follow: %v", err)
		}
		if !res.Followed || !res.Chain {
			t.Errorf("Follow = followed %v, chain %v; want a chain for the look due in %v", res.Followed, res.Chain, remediate.LookAgain)
		}
	})
	t.Run("a run that finds the lease held does not follow", func(t *testing.T) {
		h, store, fake, _ := followEnv(t)
		if _, err := h.Handle(ctx, terminate("wave-1")); err != nil {
			t.Fatal(err)
		}
		if ok, err := store.TakeFollower(ctx, "other", h.Now(), h.Now().Add(time.Hour)); err != nil || !ok {
			t.Fatalf("TakeFollower: %v, %v", ok, err)
		}
		gets := fake.Count("nodes.get", "")
		res, err := h.Follow(ctx, 50*time.Second)
		if err != nil {
			t.Fatalf("Follow: %v", err)
		}
		if res.Followed || res.Chain {
			t.Errorf("Follow = followed %v, chain %v; want neither while another follower holds the lease", res.Followed, res.Chain)
		}
		if got := fake.Count("nodes.get", ""); got != gets {
			t.Errorf("nodes.get calls went from %d to %d: a run without the lease looked at nodes", gets, got)
		}
	})
	t.Run("nothing unfinished: no lease is taken, so a delivery kicks", func(t *testing.T) {
		clk := &clock{now: start}
		fake := tpufake.New(tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}}, tpufake.WithClock(clk.Now), tpufake.WithOperationDelay("delete", time.Hour))
		t.Cleanup(fake.Close)
		svc, err := fake.Service(ctx)
		if err != nil {
			t.Fatal(err)
		}
		store := ledger.NewMemory(ledger.WithClock(clk.Now))
		cfg := remediate.DefaultConfig()
		cfg.StartupScript = script
		h := remediate.Filled(&remediate.Handler{TPU: tpuapi.New(svc), Store: store, Lease: store, Histories: store, Recorder: &records{}, Config: cfg, Now: clk.Now, Holder: "test"})
		res, err := h.Follow(ctx, 50*time.Second)
		if err != nil || res.Followed || res.Chain {
			t.Fatalf("Follow with nothing unfinished = followed %v, chain %v, %v; want neither", res.Followed, res.Chain, err)
		}
		r, err := h.Handle(ctx, terminate("wave-1"))
		if err != nil {
			t.Fatal(err)
		}
		if !h.KickWanted(ctx, r) {
			t.Errorf("KickWanted after a delivery that started a recovery (%s, %s) = false", r.Action, r.Phase)
		}
	})
	t.Run("a ledger that fails is an error, and no lease is left", func(t *testing.T) {
		h, store, _, _ := followEnv(t)
		remediate.SetStore(h, failingUnfinished{store})
		if _, err := h.Follow(ctx, 50*time.Second); err == nil {
			t.Errorf("Follow over a failing ledger: nil error")
		}
		if held, _ := store.FollowerHeld(ctx, h.Now()); held {
			t.Errorf("follower lease held after a failed Follow")
		}
	})
}

type failingUnfinished struct{ *hookStore }

func (failingUnfinished) Unfinished(context.Context) ([]remediate.Recovery, error) {
	return nil, errors.New("firestore: unavailable")
}

func TestKickWanted(t *testing.T) {
	ctx := context.Background()
	rec := func(a remediate.Action, p remediate.Phase) remediate.Record {
		return remediate.Record{Node: nodeName, Action: a, Phase: p}
	}
	dry := rec(remediate.ActionRecreate, remediate.PhaseDeleting)
	dry.DryRun = true
	for _, tc := range []struct {
		name string
		r    remediate.Record
		held bool
		want bool
	}{
		{"a recreate left deleting kicks", rec(remediate.ActionRecreate, remediate.PhaseDeleting), false, true},
		{"a recreate left creating kicks", rec(remediate.ActionRecreate, remediate.PhaseCreating), false, true},
		{"a reset left resetting kicks", rec(remediate.ActionReset, remediate.PhaseResetting), false, true},
		{"no kick while a follower holds the lease", rec(remediate.ActionRecreate, remediate.PhaseDeleting), true, false},
		{"a healthy node's record does not kick", rec(remediate.ActionRecord, ""), false, false},
		{"a duplicate skipped while its recovery is in flight does not kick", rec(remediate.ActionSkip, remediate.PhaseDeleting), false, false},
		{"a recovery that ended does not kick", rec(remediate.ActionRecreate, remediate.PhaseRecovered), false, false},
		{"an abandoned recovery does not kick", rec(remediate.ActionRecreate, remediate.PhaseAbandoned), false, false},
		{"a dry run does not kick", dry, false, false},
		{"a deferral does not kick", rec(remediate.ActionDefer, ""), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := ledger.NewMemory()
			h := remediate.Filled(&remediate.Handler{Store: store, Lease: store, Now: func() time.Time { return start }})
			if tc.held {
				if ok, err := store.TakeFollower(ctx, "other", start, start.Add(time.Minute)); !ok || err != nil {
					t.Fatal(ok, err)
				}
			}
			if got := h.KickWanted(ctx, tc.r); got != tc.want {
				t.Errorf("KickWanted = %v, want %v", got, tc.want)
			}
		})
	}
}

// While a follow kick's run holds the lease, a sweep lists and takes first
// steps but does not follow: the node stays deleting, where a following
// sweep would have finished it (TestSweepFollowsARecoveryToItsEnd).
func TestSweepDoesNotFollowWhileAnotherFollowerHoldsTheLease(t *testing.T) {
	fake := tpufake.New(tpufake.Fleet{Nodes: []*tpu.Node{sweptNode("w", "TERMINATED", "")}},
		tpufake.WithOperationDelay("delete", 100*time.Millisecond), tpufake.WithOperationDelay("create", 100*time.Millisecond))
	t.Cleanup(fake.Close)
	svc, err := fake.Service(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cfg := remediate.DefaultConfig()
	cfg.StartupScript = script
	cfg.LookAgain = 50 * time.Millisecond
	store := ledger.NewMemory()
	if ok, err := store.TakeFollower(context.Background(), "kick", time.Now(), time.Now().Add(time.Hour)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	h := remediate.Filled(&remediate.Handler{TPU: tpuapi.New(svc), Store: store, Lease: store, Histories: store, Recorder: &records{}, Config: cfg, Holder: "test"})
	res, err := h.Sweep(context.Background(), remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone}, Follow: time.Minute})
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	// What the sweep did, not what the wall clock did since: the delete
	// issued and never looked at again (a follower polls its operation
	// 50 ms later), the recovery left deleting for the lease holder.
	if got := fake.Count("operations.get", ""); got != 0 {
		t.Errorf("operations.get after the sweep: %d polls, want 0 (not followed)", got)
	}
	if got := fake.Count("nodes.delete", ""); got != 1 {
		t.Errorf("nodes.delete after the sweep: %d, want 1 (the sweep's first step)", got)
	}
	recs, err := store.Unfinished(context.Background())
	if err != nil || len(recs) != 1 || recs[0].Phase != remediate.PhaseDeleting {
		t.Errorf("unfinished recoveries after the sweep = %+v, %v; want one, deleting", recs, err)
	}
	if res.Chain {
		t.Errorf("a sweep that did not hold the lease chains")
	}
}

// A wave's recoveries come due seconds apart: a follower must take each one
// when its own look comes due, not only the first. (It once marked every
// listed recovery as looked at when it took the first due one, so the
// others seemed stuck and waited for the next sweep: a wave landing just
// after a sweep took 2.5 recreate times.) On the wall clock, about 2 s.
func TestFollowTakesEachRecoveryWhenItsLookComesDue(t *testing.T) {
	ctx := context.Background()
	var nodes []*tpu.Node
	for _, id := range []string{"a", "b"} {
		n := sweptNode(id, "READY", "HEALTHY")
		n.Labels[remediate.GenerationLabel] = "1"
		nodes = append(nodes, n)
	}
	fake := tpufake.New(tpufake.Fleet{Nodes: nodes})
	t.Cleanup(fake.Close)
	svc, err := fake.Service(ctx)
	if err != nil {
		t.Fatal(err)
	}
	store := ledger.NewMemory()
	cfg := remediate.DefaultConfig()
	cfg.StartupScript = script
	now := time.Now()
	for i, n := range nodes {
		rec, err := store.Claim(ctx, remediate.ClaimRequest{Node: n.Name, Project: project, Zone: zone, Holder: "delivery", Now: now, Action: remediate.ActionRecreate, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		// a is due now; b 1.5 s later, after the follower's first round.
		rec.Phase, rec.UpdatedAt, rec.NextLookAt = remediate.PhaseCreated, now, now.Add(time.Duration(i)*1500*time.Millisecond)
		if err := store.Update(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	h := remediate.Filled(&remediate.Handler{TPU: tpuapi.New(svc), Store: store, Lease: store, Histories: store, Recorder: &records{}, Config: cfg, Holder: "test"})
	if _, err := h.Follow(ctx, 10*time.Second); err != nil {
		t.Fatalf("Follow: %v", err)
	}
	left, err := store.Unfinished(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range left {
		t.Errorf("%s still %s after following (next look %v): the follower did not take it when it came due", rec.Node, rec.Phase, rec.NextLookAt.Sub(now))
	}
}

// One kick for a wave, not one per pod: while a published kick has not
// been answered, other deliveries do not publish; a follow run answering
// it clears it, and a kick never answered goes stale after KickPending.
func TestOneKickIsPendingAtATime(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: start}
	store := ledger.NewMemory(ledger.WithClock(clk.Now))
	h := remediate.Filled(&remediate.Handler{Store: store, Lease: store, Now: clk.Now, Config: remediate.DefaultConfig(), Holder: "test"})
	left := remediate.Record{Node: nodeName, Action: remediate.ActionRecreate, Phase: remediate.PhaseDeleting}
	if !h.KickWanted(ctx, left) {
		t.Fatal("first delivery: KickWanted = false")
	}
	if h.KickWanted(ctx, left) {
		t.Error("second delivery while the first kick is pending: KickWanted = true")
	}
	if h.ChainWanted(ctx) {
		t.Error("a chain while a kick is pending: ChainWanted = true")
	}
	if _, err := h.Follow(ctx, 50*time.Second); err != nil { // the kick's run: nothing to follow here
		t.Fatal(err)
	}
	if !h.KickWanted(ctx, left) {
		t.Error("after a follow run answered the kick: KickWanted = false")
	}
	clk.Advance(remediate.KickPending)
	if !h.KickWanted(ctx, left) {
		t.Error("a kick pending for KickPending without an answer still blocks kicks")
	}
	h.KickFailed(ctx)
	if !h.KickWanted(ctx, left) {
		t.Error("after a failed publish: KickWanted = false")
	}
}

// The other race: a delivery that does not kick because a kick is pending
// is followed by that kick's run, which looks for recoveries only after it
// cleared the pending mark.
func TestPendingKicksRunFollowsTheDeliveryThatDidNotKick(t *testing.T) {
	h, store, _, clk := followEnv(t)
	ctx := context.Background()
	if !h.KickWanted(ctx, remediate.Record{Node: "another", Action: remediate.ActionRecreate, Phase: remediate.PhaseDeleting}) {
		t.Fatal("the first delivery's KickWanted = false")
	}
	r, err := h.Handle(ctx, terminate("wave-2"))
	if err != nil {
		t.Fatal(err)
	}
	if !remediate.LeftForLater(r) {
		t.Fatalf("the delivery (%s, %q) left nothing for later", r.Action, r.Phase)
	}
	if h.KickWanted(ctx, r) {
		t.Fatal("a delivery kicked while a kick was pending")
	}
	var saw []string
	store.afterTake = func() {
		recs, _ := store.Unfinished(ctx)
		for _, rec := range recs {
			saw = append(saw, rec.Node)
		}
		clk.Advance(51 * time.Second) // the window ends at once
	}
	res, err := h.Follow(ctx, 50*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Followed || !res.Chain {
		t.Errorf("the pending kick's run: followed %v, chain %v; want it to hold the lease and chain for %s", res.Followed, res.Chain, nodeName)
	}
	found := false
	for _, n := range saw {
		found = found || n == nodeName
	}
	if !found {
		t.Errorf("the run followed %v, not the delivery's %s", saw, nodeName)
	}
}
