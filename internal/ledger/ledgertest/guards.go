package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

const zone = "us-central2-b"

// stormNode is the i-th node of the storm: all in zone, of project.
func stormNode(i int) string {
	return fmt.Sprintf("projects/%s/locations/%s/nodes/storm-%03d", project, zone, i)
}

// stormReq is a claim with the per-node and project guards off, so only the
// breaker can refuse it.
func stormReq(node, holder string, now time.Time, limit int, window time.Duration) remediate.ClaimRequest {
	r := req(node, holder, now)
	r.Zone = zone
	r.Config.MaxInFlight = 0
	r.Config.BreakerLimit = limit
	r.Config.BreakerWindow = window
	return r
}

func breakerErr(t *testing.T, err error) *remediate.BreakerOpenError {
	t.Helper()
	var open *remediate.BreakerOpenError
	if !errors.As(err, &open) {
		t.Fatalf("Claim: err = %v; want a *remediate.BreakerOpenError", err)
	}
	return open
}

// runGuards is the contract of the fleet-wide guards: the storm breaker,
// pauses and the hold TTL, and the batched Histories.
func runGuards(t *testing.T, newStore NewStore, opts Options) {
	ctx := context.Background()

	t.Run("storm: of many concurrent claims in one zone exactly the breaker's limit succeed and one trips it", func(t *testing.T) {
		s := newStore(t)
		var (
			wg            sync.WaitGroup
			mu            sync.Mutex
			wins, refused int
			tripped       []*remediate.BreakerOpenError
			unexpected    []error
			start         = make(chan struct{})
			limit, claims = opts.StormLimit, opts.StormClaims
			stores        = make([]remediate.Store, claims)
		)
		for i := range stores {
			stores[i] = s
			if opts.NewClaimant != nil && i < opts.Claimants {
				stores[i] = opts.NewClaimant(t, s)
			} else if opts.NewClaimant != nil {
				stores[i] = stores[i%opts.Claimants]
			}
		}
		for i := 0; i < claims; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := stores[i].Claim(ctx, stormReq(stormNode(i), fmt.Sprint("racer-", i), t0, limit, time.Hour))
				mu.Lock()
				defer mu.Unlock()
				var open *remediate.BreakerOpenError
				switch {
				case err == nil:
					wins++
				case errors.As(err, &open):
					refused++
					if open.Tripped {
						tripped = append(tripped, open)
					}
					if !strings.HasPrefix(err.Error(), "breaker open") {
						unexpected = append(unexpected, fmt.Errorf("reason %q does not start with \"breaker open\"", err))
					}
				default:
					unexpected = append(unexpected, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins != limit || refused != claims-limit || len(unexpected) != 0 {
			t.Errorf("%d concurrent claims in one zone, breaker limit %d: %d won, %d refused by the breaker, other errors %v; want %d won",
				claims, limit, wins, refused, unexpected, limit)
		}
		if len(tripped) != 1 {
			t.Fatalf("refusals with Tripped = %d; want exactly 1", len(tripped))
		}
		want := remediate.BreakerOpenError{Zone: zone, Started: limit, Limit: limit, Window: time.Hour, Until: t0.Add(time.Hour), Tripped: true}
		if diff := cmp.Diff(want, *tripped[0]); diff != "" {
			t.Errorf("the tripping refusal (-want +got):\n%s", diff)
		}
		if got := len(mustUnfinished(t, s)); got != limit {
			t.Errorf("unfinished recoveries after the storm = %d; want %d", got, limit)
		}
		open, err := s.OpenBreakers(ctx, t0, stormReq(nodeA, "x", t0, limit, time.Hour).Config)
		if err != nil {
			t.Fatalf("OpenBreakers: %v", err)
		}
		if len(open) != 1 || open[0].Zone != zone || open[0].Started != limit || !open[0].Tripped {
			t.Errorf("OpenBreakers = %+v; want zone %s open with %d starts, trip reported", open, zone, limit)
		}
	})

	t.Run("breaker slides: it closes when the oldest counted start leaves the window, and a new trip is reported again", func(t *testing.T) {
		s := newStore(t)
		const limit = 3
		w := time.Hour
		for i := 0; i < limit; i++ {
			mustClaim(t, s, stormReq(stormNode(i), "h", t0.Add(time.Duration(i)*10*time.Minute), limit, w))
		}
		// Open: the 4th start at t0+30m is refused and trips; the 5th is
		// refused without tripping again.
		_, err := s.Claim(ctx, stormReq(stormNode(3), "h", t0.Add(30*time.Minute), limit, w))
		if o := breakerErr(t, err); !o.Tripped || !o.Until.Equal(t0.Add(w)) || o.Started != limit {
			t.Errorf("first refusal = %+v; want Tripped, Until %v, Started %d", o, t0.Add(w), limit)
		}
		_, err = s.Claim(ctx, stormReq(stormNode(4), "h", t0.Add(59*time.Minute), limit, w))
		if o := breakerErr(t, err); o.Tripped {
			t.Errorf("second refusal of the same trip = %+v; want Tripped false", o)
		}
		// At t0+1h the start at t0 left the window: one more fits.
		mustClaim(t, s, stormReq(stormNode(5), "h", t0.Add(w), limit, w))
		_, err = s.Claim(ctx, stormReq(stormNode(6), "h", t0.Add(w+time.Minute), limit, w))
		if o := breakerErr(t, err); !o.Tripped || !o.Until.Equal(t0.Add(10*time.Minute+w)) {
			t.Errorf("refusal after the breaker closed and filled again = %+v; want a new trip until %v", o, t0.Add(10*time.Minute+w))
		}
	})

	t.Run("breaker reset closes it at once; other zones are not counted", func(t *testing.T) {
		s := newStore(t)
		const limit = 2
		for i := 0; i < limit; i++ {
			mustClaim(t, s, stormReq(stormNode(i), "h", t0, limit, time.Hour))
		}
		other := stormReq("projects/proj-a/locations/europe-west4-a/nodes/elsewhere", "h", t0, limit, time.Hour)
		other.Zone = "europe-west4-a"
		mustClaim(t, s, other)
		_, err := s.Claim(ctx, stormReq(stormNode(2), "h", t0, limit, time.Hour))
		breakerErr(t, err)
		if err := s.ResetBreaker(ctx, zone); err != nil {
			t.Fatalf("ResetBreaker: %v", err)
		}
		open, err := s.OpenBreakers(ctx, t0, stormReq(nodeA, "x", t0, limit, time.Hour).Config)
		if err != nil || len(open) != 0 {
			t.Errorf("OpenBreakers after reset = %+v, %v; want none", open, err)
		}
		mustClaim(t, s, stormReq(stormNode(2), "h", t0.Add(time.Second), limit, time.Hour))
		mustClaim(t, s, stormReq(stormNode(3), "h", t0.Add(time.Second), limit, time.Hour))
		_, err = s.Claim(ctx, stormReq(stormNode(4), "h", t0.Add(2*time.Second), limit, time.Hour))
		if o := breakerErr(t, err); !o.Tripped {
			t.Errorf("refusal after reset and refill = %+v; want a new trip", o)
		}
		if err := s.ResetBreaker(ctx, "never-seen-zone"); err != nil {
			t.Errorf("ResetBreaker of a zone never counted: %v; want nil", err)
		}
	})

	t.Run("takeover of an unfinished recovery is not blocked by an open breaker", func(t *testing.T) {
		s := newStore(t)
		const limit = 2
		r := mustClaim(t, s, stormReq(stormNode(0), "h1", t0, limit, time.Hour))
		r.Phase, r.Spec, r.UpdatedAt = remediate.PhaseDeleting, Spec(stormNode(0)), t0
		mustUpdate(t, s, r)
		mustClaim(t, s, stormReq(stormNode(1), "h1", t0, limit, time.Hour))
		_, err := s.Claim(ctx, stormReq(stormNode(2), "h1", t0.Add(2*time.Minute), limit, time.Hour))
		breakerErr(t, err)
		got, err := s.Claim(ctx, stormReq(stormNode(0), "h2", t0.Add(2*time.Minute), limit, time.Hour))
		if err != nil {
			t.Fatalf("takeover while the breaker is open: %v; want success", err)
		}
		if got.Phase != remediate.PhaseDeleting || got.Attempts != 2 {
			t.Errorf("takeover = phase %s attempts %d; want deleting, 2", got.Phase, got.Attempts)
		}
	})

	pauses := []struct {
		name    string
		pause   remediate.Pause
		covered []string
		free    []string
	}{
		{
			name:    "project pause covers every node of the project",
			pause:   remediate.Pause{Scope: remediate.PauseProject, Project: project},
			covered: []string{nodeA, nodeB, "projects/proj-a/locations/europe-west4-a/nodes/n"},
			free:    []string{nodeX},
		},
		{
			name:    "zone pause of a project covers that project's nodes in the zone",
			pause:   remediate.Pause{Scope: remediate.PauseZone, Project: project, Zone: zone},
			covered: []string{nodeA, nodeC},
			free:    []string{nodeX, "projects/proj-a/locations/europe-west4-a/nodes/n"},
		},
		{
			name:    "zone pause without a project covers every project's nodes in the zone",
			pause:   remediate.Pause{Scope: remediate.PauseZone, Zone: zone},
			covered: []string{nodeA, nodeX},
			free:    []string{"projects/proj-a/locations/europe-west4-a/nodes/n"},
		},
		{
			name:    "node pause covers only that node",
			pause:   remediate.Pause{Scope: remediate.PauseNode, Node: nodeA},
			covered: []string{nodeA},
			free:    []string{nodeB, nodeX},
		},
	}
	for _, tc := range pauses {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			a := s
			p := tc.pause
			p.Reason, p.By, p.Since = "region incident INC-42", "alice@example.com", t0
			if err := a.SetPause(ctx, p); err != nil {
				t.Fatalf("SetPause: %v", err)
			}
			for _, n := range tc.covered {
				h := historyOf(t, s, n, t0)
				if h.Pause == nil || cmp.Diff(p, *h.Pause) != "" {
					t.Errorf("History(%s).Pause = %+v; want %+v", n, h.Pause, p)
				}
				_, err := s.Claim(ctx, claimOf(n, t0))
				if !errors.Is(err, remediate.ErrPaused) || !strings.HasPrefix(fmt.Sprint(err), "paused by alice@example.com: region incident INC-42") {
					t.Errorf("Claim(%s) while paused: err = %v; want ErrPaused starting \"paused by alice@example.com: region incident INC-42\"", n, err)
				}
			}
			for _, n := range tc.free {
				if h := historyOf(t, s, n, t0); h.Pause != nil {
					t.Errorf("History(%s).Pause = %+v; want nil (not covered)", n, h.Pause)
				}
				if _, err := s.Claim(ctx, claimOf(n, t0)); err != nil {
					t.Errorf("Claim(%s) of a node the pause does not cover: %v", n, err)
				}
			}
			existed, err := a.ClearPause(ctx, remediate.Pause{Scope: p.Scope, Project: p.Project, Zone: p.Zone, Node: p.Node})
			if err != nil || !existed {
				t.Fatalf("ClearPause = %v, %v; want true, nil", existed, err)
			}
			for _, n := range tc.covered {
				if h := historyOf(t, s, n, t0); h.Pause != nil {
					t.Errorf("History(%s).Pause after resume = %+v; want nil", n, h.Pause)
				}
				if _, err := s.Claim(ctx, claimOf(n, t0)); err != nil {
					t.Errorf("Claim(%s) after resume: %v", n, err)
				}
			}
			if existed, err := a.ClearPause(ctx, p); err != nil || existed {
				t.Errorf("second ClearPause = %v, %v; want false, nil", existed, err)
			}
		})
	}

	t.Run("resume adds the paused time to the recoveries the pause held back, and no update changes it", func(t *testing.T) {
		s := newStore(t)
		a := s
		now := time.Now()
		held := mustClaim(t, s, req(nodeA, "h-a", now.Add(-3*time.Hour)))
		held.Phase, held.Spec, held.DeleteSent = remediate.PhaseDeleting, Spec(nodeA), true
		mustUpdate(t, s, held)
		mustClaim(t, s, req(nodeX, "h-x", now.Add(-3*time.Hour)))
		p := remediate.Pause{Scope: remediate.PauseProject, Project: project, Reason: "INC-7", By: "alice", Since: now.Add(-2 * time.Hour)}
		if err := a.SetPause(ctx, p); err != nil {
			t.Fatal(err)
		}
		if existed, err := a.ClearPause(ctx, p); err != nil || !existed {
			t.Fatalf("ClearPause = %v, %v; want true, nil", existed, err)
		}
		got := map[string]time.Duration{}
		for _, r := range mustUnfinished(t, s) {
			got[r.Node] = r.Paused
		}
		if d := got[nodeA]; d < 2*time.Hour || d > 2*time.Hour+time.Minute {
			t.Errorf("Paused of the held recovery = %v, want the pause's 2h", d)
		}
		if d := got[nodeX]; d != 0 {
			t.Errorf("Paused of a recovery the pause did not cover = %v, want 0", d)
		}
		// The holder's next save carries the Paused it read before the
		// resume (0): the store keeps its own.
		held.Phase, held.Paused = remediate.PhaseDeleted, 0
		mustUpdate(t, s, held)
		if h := historyOf(t, s, nodeA, now); h.Recovery == nil || h.Recovery.Paused < 2*time.Hour {
			t.Errorf("Paused after an update = %+v, want the store's 2h kept", h.Recovery)
		}
	})

	t.Run("overlapping pauses add each paused moment once, whichever is resumed first", func(t *testing.T) {
		for _, projectFirst := range []bool{true, false} {
			s := newStore(t)
			now := time.Now()
			mustClaim(t, s, req(nodeA, "h-a", now.Add(-3*time.Hour)))
			proj := remediate.Pause{Scope: remediate.PauseProject, Project: project, Reason: "INC-7", By: "alice", Since: now.Add(-2 * time.Hour)}
			node := remediate.Pause{Scope: remediate.PauseNode, Node: nodeA, Reason: "INC-8", By: "bob", Since: now.Add(-1 * time.Hour)}
			order := []remediate.Pause{proj, node}
			if !projectFirst {
				order = []remediate.Pause{node, proj}
			}
			for _, p := range order {
				if err := s.SetPause(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range order {
				if existed, err := s.ClearPause(ctx, p); err != nil || !existed {
					t.Fatalf("ClearPause(%s) = %v, %v; want true, nil", p.What(), existed, err)
				}
			}
			// Paused from now-2h (the project pause) to the resumes: 2h, not 2h + 1h.
			h := historyOf(t, s, nodeA, time.Now())
			if h.Recovery == nil {
				t.Fatal("no recovery after the resumes")
			}
			if d := h.Recovery.Paused; d < 2*time.Hour || d > 2*time.Hour+time.Minute {
				t.Errorf("project resumed first %v: Paused = %v, want 2h", projectFirst, d)
			}
		}
	})

	t.Run("history returns the narrowest pause and status lists them all", func(t *testing.T) {
		s := newStore(t)
		a := s
		proj := remediate.Pause{Scope: remediate.PauseProject, Project: project, Reason: "all", By: "bob", Since: t0}
		node := remediate.Pause{Scope: remediate.PauseNode, Node: nodeA, Reason: "this one", By: "carol", Since: t0.Add(time.Minute)}
		for _, p := range []remediate.Pause{proj, node} {
			if err := a.SetPause(ctx, p); err != nil {
				t.Fatalf("SetPause: %v", err)
			}
		}
		if h := historyOf(t, s, nodeA, t0); h.Pause == nil || h.Pause.Scope != remediate.PauseNode {
			t.Errorf("History(A).Pause = %+v; want the node pause", h.Pause)
		}
		if h := historyOf(t, s, nodeB, t0); h.Pause == nil || h.Pause.Scope != remediate.PauseProject {
			t.Errorf("History(B).Pause = %+v; want the project pause", h.Pause)
		}
		got, err := a.Pauses(ctx)
		if err != nil {
			t.Fatalf("Pauses: %v", err)
		}
		if diff := cmp.Diff([]remediate.Pause{node, proj}, got); diff != "" {
			t.Errorf("Pauses (-want +got):\n%s", diff)
		}
	})

	t.Run("a pause refuses the takeover of an unfinished recovery too", func(t *testing.T) {
		s := newStore(t)
		r := mustClaim(t, s, req(nodeA, "h1", t0))
		r.Phase, r.Spec, r.UpdatedAt = remediate.PhaseDeleted, Spec(nodeA), t0
		mustUpdate(t, s, r)
		if err := s.SetPause(ctx, remediate.Pause{Scope: remediate.PauseNode, Node: nodeA, Reason: "hands off", By: "dave", Since: t0}); err != nil {
			t.Fatalf("SetPause: %v", err)
		}
		if _, err := s.Claim(ctx, req(nodeA, "h2", t0.Add(time.Hour))); !errors.Is(err, remediate.ErrPaused) {
			t.Errorf("takeover while paused: err = %v; want ErrPaused", err)
		}
	})

	t.Run("bad pauses are refused with what was wrong", func(t *testing.T) {
		s := newStore(t)
		for _, p := range []remediate.Pause{
			{Scope: remediate.PauseProject},
			{Scope: remediate.PauseZone, Project: project},
			{Scope: remediate.PauseNode, Node: "llm-v4-a"},
			{Scope: "galaxy", Project: project},
		} {
			if err := s.SetPause(ctx, p); err == nil {
				t.Errorf("SetPause(%+v) = nil; want an error", p)
			}
		}
	})

	t.Run("a hold past its TTL, or dated far in the future, is ignored by history and listed as expired", func(t *testing.T) {
		s := newStore(t)
		a := s
		ttl := remediate.DefaultHoldTTL // stores under test use the default TTL
		old := remediate.Hold{Node: nodeA, Project: project, NodeID: 1, Since: t0, EventID: "user-stop", Reason: "terminated by a user"}
		forged := remediate.Hold{Node: nodeB, Project: project, NodeID: 2, Since: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), EventID: "forged", Reason: "terminated by a user"}
		for _, h := range []remediate.Hold{old, forged} {
			if err := s.SetHold(ctx, h); err != nil {
				t.Fatalf("SetHold: %v", err)
			}
		}
		if h := historyOf(t, s, nodeA, t0.Add(ttl-time.Second)); h.Hold == nil {
			t.Error("History.Hold just before the TTL = nil; want the hold")
		}
		if h := historyOf(t, s, nodeA, t0.Add(ttl)); h.Hold != nil {
			t.Errorf("History.Hold at the TTL = %+v; want nil", h.Hold)
		}
		if h := historyOf(t, s, nodeB, t0); h.Hold != nil {
			t.Errorf("History.Hold of a hold dated 9999 = %+v; want nil", h.Hold)
		}
		got, err := a.Holds(ctx, t0.Add(time.Hour))
		if err != nil {
			t.Fatalf("Holds: %v", err)
		}
		want := []ledger.HoldStatus{
			{Hold: old, Expires: t0.Add(ttl), Expired: false},
			{Hold: forged, Expires: t0.Add(time.Hour), Expired: true},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Holds (-want +got):\n%s", diff)
		}
	})

	t.Run("histories answers for many nodes what history answers for each", func(t *testing.T) {
		s := newStore(t)
		a := s
		finish(t, s, nodeA, "h1", t0)
		mustClaim(t, s, req(nodeB, "h2", t0.Add(time.Hour)))
		x := mustClaim(t, s, req(nodeX, "h3", t0.Add(time.Hour)))
		x.Phase, x.Spec, x.UpdatedAt = remediate.PhaseDeleted, Spec(nodeX), t0.Add(time.Hour)
		mustUpdate(t, s, x)
		d := remediate.Deferral{Node: nodeC, Project: project, Since: t0, Due: t0.Add(time.Hour), Reason: "unhealthy"}
		if err := s.SetDeferral(ctx, d); err != nil {
			t.Fatalf("SetDeferral: %v", err)
		}
		if err := s.SetHold(ctx, remediate.Hold{Node: nodeC, Project: project, NodeID: 7, Since: t0, Reason: "user"}); err != nil {
			t.Fatalf("SetHold: %v", err)
		}
		if err := a.SetPause(ctx, remediate.Pause{Scope: remediate.PauseNode, Node: nodeB, Reason: "r", By: "b", Since: t0}); err != nil {
			t.Fatalf("SetPause: %v", err)
		}
		nodes := []string{nodeA, nodeB, nodeC, nodeX}
		for i := 0; i < 150; i++ { // more than one page of a batched store
			nodes = append(nodes, stormNode(i))
		}
		now := t0.Add(2 * time.Hour)
		got, err := a.Histories(ctx, nodes, project, now, 24*time.Hour)
		if err != nil {
			t.Fatalf("Histories: %v", err)
		}
		if len(got) != len(nodes) {
			t.Errorf("Histories returned %d nodes; want %d", len(got), len(nodes))
		}
		for _, n := range nodes {
			want, err := s.History(ctx, n, project, "", now, 24*time.Hour)
			if err != nil {
				t.Fatalf("History: %v", err)
			}
			if want.Recovery != nil && !want.Recovery.Unfinished() {
				want.Recovery.Spec = nil // Histories leaves out the spec of a finished recovery
			}
			if diff := cmp.Diff(want, got[n]); diff != "" {
				t.Errorf("Histories[%s] (-History +Histories):\n%s", n, diff)
			}
		}
		if r := got[nodeX].Recovery; r == nil || cmp.Diff(Spec(nodeX), r.Spec) != "" {
			t.Errorf("Histories lost the spec of an unfinished recovery: %+v", r)
		}
		// Clearing a deferral and a hold is seen too.
		if err := s.ClearDeferral(ctx, nodeC); err != nil {
			t.Fatal(err)
		}
		if err := s.ClearHold(ctx, nodeC); err != nil {
			t.Fatal(err)
		}
		again, err := a.Histories(ctx, []string{nodeC}, project, now, 24*time.Hour)
		if err != nil {
			t.Fatalf("Histories: %v", err)
		}
		if again[nodeC].Deferral != nil || again[nodeC].Hold != nil {
			t.Errorf("Histories after clearing the deferral and hold = %+v; want neither", again[nodeC])
		}
		if got[nodeA].Recovery == nil || got[nodeB].Pause == nil || got[nodeC].Deferral == nil || got[nodeC].Hold == nil || got[nodeA].InFlight != 1 {
			t.Errorf("Histories lost state: A %+v, B %+v, C %+v", got[nodeA], got[nodeB], got[nodeC])
		}
	})
}

func historyOf(t *testing.T, s remediate.Store, node string, now time.Time) remediate.History {
	t.Helper()
	p, _ := remediate.NodeProjectZone(node)
	h, err := s.History(context.Background(), node, p, "", now, 24*time.Hour)
	if err != nil {
		t.Fatalf("History(%s): %v", node, err)
	}
	return h
}

func claimOf(node string, now time.Time) remediate.ClaimRequest {
	r := req(node, "h-"+node, now)
	r.Project, _ = remediate.NodeProjectZone(node)
	r.Config.MaxInFlight = 0
	return r
}
