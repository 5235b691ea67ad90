package remediate_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/api/googleapi"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/googleerr"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// These tests run a recovery into a failure, change the world the way a
// person or the platform would, and check what the sweep does after the
// lease: it may finish what it started, never touch what it did not.

func TestResumedRecoveryNeverDeletesANodeSomeoneElseCreated(t *testing.T) {
	e := newScripted(t)
	e.f.set(sNode("a", "TERMINATED"))
	e.f.createErr = googleerr.FromAPI(&googleapi.Error{Code: 429, Message: "RESOURCE_EXHAUSTED: stockout, insufficient capacity"})
	e.handle(t, sEvent("a", "ev1", e.clock.Now()))
	if e.f.node(sName("a")) != nil {
		t.Fatal("node still there after the recreate's delete; the scenario needs it deleted and the create failed")
	}
	// A person, seeing the node gone, creates it by hand: new id, no
	// generation label.
	e.f.script(func(f *scriptedTPU) { f.createErr = nil })
	theirs := sNode("a", "CREATING")
	theirs.Id = 777
	e.f.set(theirs)
	e.clock.Advance(16 * time.Minute)
	e.sweep(t, sZone)

	if got := e.f.count("delete " + sName("a") + " id=777"); got != 0 {
		t.Errorf("deletes of the node a person created (id 777) = %d, want 0", got)
	}
	if n := e.f.node(sName("a")); n == nil || n.Id != 777 {
		t.Errorf("node a = %+v; want the person's node id 777 left alone", n)
	}
	h, err := e.store.History(context.Background(), sName("a"), sProject, "", e.clock.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if h.Recovery == nil || h.Recovery.Unfinished() {
		t.Errorf("recovery = %+v; want it closed", h.Recovery)
	}
}

func TestResumedRecoveryNeverRecreatesANodeItNeverDeleted(t *testing.T) {
	e := newScripted(t)
	e.f.set(sNode("a", "TERMINATED"))
	e.f.deleteErr = googleerr.FromAPI(&googleapi.Error{Code: 400, Message: "FAILED_PRECONDITION"})
	e.handle(t, sEvent("a", "ev1", e.clock.Now()))
	e.f.script(func(f *scriptedTPU) { f.deleteErr = nil })
	e.f.remove(sName("a")) // a person deletes it: they want it gone
	e.clock.Advance(16 * time.Minute)
	e.sweep(t, sZone)

	if n := e.f.node(sName("a")); n != nil {
		t.Errorf("node a = %+v; want it left deleted (our delete never happened; a person deleted it)", n)
	}
	if got := e.f.count("create "); got != 0 {
		t.Errorf("creates = %d, want 0", got)
	}
}

func TestResumedRecoveryRecreatesTheNodeItDeleted(t *testing.T) {
	// The other side of the two tests above: a stockout after our own
	// delete is retried until the node is back.
	e := newScripted(t)
	e.f.set(sNode("a", "TERMINATED"))
	e.f.createErr = googleerr.FromAPI(&googleapi.Error{Code: 429, Message: "RESOURCE_EXHAUSTED: stockout"})
	e.handle(t, sEvent("a", "ev1", e.clock.Now()))
	e.f.script(func(f *scriptedTPU) { f.createErr = nil })
	e.clock.Advance(16 * time.Minute)
	e.sweep(t, sZone)
	if n := e.f.node(sName("a")); n == nil || n.State != "READY" || n.Labels[remediate.GenerationLabel] != "1" {
		t.Errorf("node a = %+v; want it recreated READY by generation 1", n)
	}
}

func TestUserTerminationDuringOurFailedRecoveryIsNeverUndone(t *testing.T) {
	e := newScripted(t)
	ctx := context.Background()
	e.f.set(sNode("a", "TERMINATED"))
	e.f.deleteErr = googleerr.FromAPI(&googleapi.Error{Code: 400, Message: "FAILED_PRECONDITION"})
	e.handle(t, sEvent("a", "ev1", e.clock.Now()))
	e.f.script(func(f *scriptedTPU) { f.deleteErr = nil })
	ev := sEvent("a", "ev-user", e.clock.Now())
	ev.Cause = events.CauseUser
	e.handle(t, ev)
	e.clock.Advance(16 * time.Minute)
	e.sweep(t, sZone)

	if got := e.f.count("delete " + sName("a")); got != 1 {
		t.Errorf("deletes = %d, want 1 (the failed one; none after the user's termination)", got)
	}
	h, err := e.store.History(ctx, sName("a"), sProject, "", e.clock.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if h.Recovery == nil || h.Recovery.Unfinished() {
		t.Errorf("recovery = %+v; want it closed", h.Recovery)
	}
	if h.Hold == nil {
		t.Errorf("hold cleared; want it kept while the node is the one the user terminated")
	}
}

func TestConfiguredMaxAttemptsAbandonsSooner(t *testing.T) {
	e := newScripted(t)
	e.h.Config.MaxAttempts = 2
	e.f.set(sNode("a", "TERMINATED"))
	e.f.createErr = googleerr.FromAPI(&googleapi.Error{Code: 403, Message: "PERMISSION_DENIED: iam.serviceAccounts.actAs"})
	e.sweep(t, sZone)
	for range 10 {
		e.clock.Advance(16 * time.Minute)
		e.sweep(t, sZone)
	}
	if got := e.f.count("create "); got != 2 {
		t.Errorf("create calls = %d, want 2 (Config.MaxAttempts, then abandoned)", got)
	}
}

func TestRecoveryThatCanNeverFinishIsAbandonedAndFreesTheProject(t *testing.T) {
	e := newScripted(t)
	for _, id := range []string{"a", "b", "c", "d"} {
		e.f.set(sNode(id, "TERMINATED"))
	}
	e.f.createErr = googleerr.FromAPI(&googleapi.Error{Code: 400, Message: "INVALID_ARGUMENT: runtime version rt is no longer supported"})
	e.sweep(t, sZone)
	for range 20 { // 5 hours of sweeps
		e.clock.Advance(16 * time.Minute)
		e.sweep(t, sZone)
	}
	if got, want := e.f.count("create "), 4*remediate.DefaultMaxAttempts; got != want {
		t.Errorf("create calls for 4 nodes over 5 h = %d, want %d (MaxAttempts each, then abandoned)", got, want)
	}
	un, err := e.store.Unfinished(context.Background())
	if err != nil || len(un) != 0 {
		t.Errorf("Unfinished = %v, %v; want none", un, err)
	}
	var abandoned []remediate.Record
	for _, r := range e.recs.list() {
		if r.Phase == remediate.PhaseAbandoned {
			abandoned = append(abandoned, r)
		}
	}
	if len(abandoned) != 4 {
		t.Fatalf("records with phase abandoned = %d, want 4", len(abandoned))
	}
	for _, r := range abandoned {
		if r.Err == "" || !strings.Contains(r.Err, "INVALID_ARGUMENT") || r.Spec == nil {
			t.Errorf("abandoned record of %s: err %q, spec %v; want the error and the spec", r.Node, r.Err, r.Spec)
		}
	}
	h, err := e.store.History(context.Background(), sName("a"), sProject, "", e.clock.Now(), 24*time.Hour)
	if err != nil || h.Recovery == nil || h.Recovery.Phase != remediate.PhaseAbandoned || h.Recovery.Spec == nil {
		t.Errorf("ledger recovery of a = %+v, %v; want abandoned with its spec kept", h.Recovery, err)
	}

	// The project is healed again.
	e.f.script(func(f *scriptedTPU) { f.createErr = nil })
	e.f.set(sNode("z", "TERMINATED"))
	e.clock.Advance(16 * time.Minute)
	last := e.handleSettled(t, sEvent("z", "evz", e.clock.Now()))
	if n := e.f.node(sName("z")); n == nil || n.State != "READY" {
		t.Errorf("node z = %+v after %s %q; want it recreated", n, last.Action, last.Reason)
	}
	// And the abandoned nodes stay as they are: NOT FOUND, not ours.
	if n := e.f.node(sName("a")); n != nil {
		t.Errorf("abandoned node a = %+v; want it left for a person", n)
	}
}

func TestStockoutIsRetriedBeyondMaxAttempts(t *testing.T) {
	e := newScripted(t)
	e.f.set(sNode("a", "TERMINATED"))
	e.f.createErr = googleerr.FromAPI(&googleapi.Error{Code: 429, Message: "RESOURCE_EXHAUSTED: stockout"})
	e.sweep(t, sZone)
	for range 2 * remediate.DefaultMaxAttempts {
		e.clock.Advance(16 * time.Minute)
		e.sweep(t, sZone)
	}
	if got := e.f.count("create "); got <= remediate.DefaultMaxAttempts {
		t.Errorf("create calls = %d; want more than MaxAttempts (%d): a stockout is retried", got, remediate.DefaultMaxAttempts)
	}
	e.f.script(func(f *scriptedTPU) { f.createErr = nil })
	e.clock.Advance(16 * time.Minute)
	e.sweep(t, sZone)
	if n := e.f.node(sName("a")); n == nil || n.State != "READY" {
		t.Errorf("node a = %+v; want it recreated once capacity is back", n)
	}
}

func TestOptInLabelRemovedDuringARecoveryClosesIt(t *testing.T) {
	e := newScripted(t)
	ctx := context.Background()
	e.f.set(sNode("a", "TERMINATED"))
	e.f.deleteErr = googleerr.FromAPI(&googleapi.Error{Code: 400, Message: "FAILED_PRECONDITION"})
	e.handle(t, sEvent("a", "ev1", e.clock.Now()))
	e.f.script(func(f *scriptedTPU) {
		f.deleteErr = nil
		delete(f.nodes[sName("a")].Labels, "tpu-autoheal")
	})
	e.clock.Advance(16 * time.Minute)
	e.sweep(t) // no zones: only the ledger's unfinished recoveries
	un, err := e.store.Unfinished(ctx)
	if err != nil || len(un) != 0 {
		t.Errorf("Unfinished = %+v, %v; want the recovery closed once the node opted out", un, err)
	}
	if got := e.f.count("delete "); got != 1 {
		t.Errorf("deletes = %d, want 1 (the failed one)", got)
	}
}

func TestTwoSlicesOfOneQueuedResourceResetItOnce(t *testing.T) {
	e := newScripted(t)
	for _, id := range []string{"s0", "s1"} {
		n := sNode(id, "PREEMPTED")
		n.QueuedResource, n.MultisliceNode = sQR, true
		e.f.set(n)
	}
	e.f.setQRState("ACTIVE")
	e.f.onReset = func(f *scriptedTPU) {
		// The reset brings both slices back.
		f.qrs[sQR].State.State = "ACTIVE"
		for _, id := range []string{"s0", "s1"} {
			f.nodes[sName(id)].State, f.nodes[sName(id)].Health = "READY", "HEALTHY"
		}
	}
	barrier := &sync.WaitGroup{}
	barrier.Add(2)
	e.f.qrBarrier = barrier
	var wg sync.WaitGroup
	recs := make([]remediate.Record, 2)
	for i, id := range []string{"s0", "s1"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs[i], _ = e.h.Handle(context.Background(), sEvent(id, "ev"+id, e.clock.Now()))
		}()
	}
	wg.Wait()
	e.f.script(func(f *scriptedTPU) { f.qrBarrier = nil })
	e.settle(t)
	if got := e.f.count("reset "); got != 1 {
		t.Errorf("queued resource resets = %d, want 1 for one incident", got)
	}
	var skipped int
	for _, r := range e.recs.list() {
		if r.Action == remediate.ActionSkip && strings.Contains(r.Reason, "reset recently") ||
			r.Outcome == remediate.OutcomeClosed && strings.Contains(r.Reason, "not reset") {
			skipped++
		}
	}
	if skipped != 1 {
		t.Errorf("records = %+v; want one slice's recovery closed without a reset (reset recently, or READY again by then)", e.recs.list())
	}
	_ = recs
	un, err := e.store.Unfinished(context.Background())
	if err != nil || len(un) != 0 {
		t.Errorf("Unfinished = %+v, %v; want both recoveries closed", un, err)
	}
}

func TestFailedResetIsNotRetriedWhileTheQueuedResourceIsProvisioning(t *testing.T) {
	e := newScripted(t)
	n := sNode("s0", "PREEMPTED")
	n.QueuedResource = sQR
	e.f.set(n)
	e.f.setQRState("ACTIVE")
	e.f.resetErr = googleerr.FromAPI(&googleapi.Error{Code: 400, Message: "FAILED_PRECONDITION: operation in progress"})
	e.handle(t, sEvent("s0", "ev1", e.clock.Now()))
	// The platform is re-provisioning the queued resource; the node is CREATING.
	e.f.script(func(f *scriptedTPU) {
		f.resetErr = nil
		f.qrs[sQR].State.State = "PROVISIONING"
		f.nodes[sName("s0")].State = "CREATING"
	})
	e.clock.Advance(16 * time.Minute)
	e.sweep(t, sZone)
	// The platform finishes: the node is back.
	e.f.script(func(f *scriptedTPU) {
		f.qrs[sQR].State.State = "ACTIVE"
		f.nodes[sName("s0")].State, f.nodes[sName("s0")].Health = "READY", "HEALTHY"
	})
	e.settle(t)
	if got := e.f.count("reset "); got != 1 {
		t.Errorf("queued resource resets = %d, want 1 (none while it is PROVISIONING)", got)
	}
	un, err := e.store.Unfinished(context.Background())
	if err != nil || len(un) != 0 {
		t.Errorf("Unfinished = %+v, %v; want the failed reset closed", un, err)
	}
}

func TestSweepRereadsAListedNodeBeforeActingOnIt(t *testing.T) {
	e := newScripted(t)
	e.f.set(sNode("a", "TERMINATED"))
	b := sNode("b", "PREEMPTED")
	b.QueuedResource = sQR
	e.f.set(b)
	e.f.setQRState("ACTIVE")
	// While a is recreated, b comes back by itself: the listing is stale.
	// (One worker: a is acted on before b is decided.)
	e.h.Workers = 1
	e.f.onGet = func(f *scriptedTPU, call int) {
		if call == 2 { // a read twice: by the sweep and by its recovery's first step
			f.nodes[sName("b")].State, f.nodes[sName("b")].Health = "READY", "HEALTHY"
		}
	}
	e.sweep(t, sZone)
	e.settle(t)
	if got := e.f.count("reset "); got != 0 {
		t.Errorf("queued resource resets = %d, want 0: node b is READY and HEALTHY by the time it is decided", got)
	}
	if got := e.f.count("create "); got != 1 {
		t.Errorf("creates = %d, want 1 (node a)", got)
	}
}

func TestGuardSkippedNodeIsRevisitedWhenTheGuardClears(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, e *sEnv) (release func())
		wait  time.Duration // how long the sweeps run
	}{
		{
			name: "in-flight cap",
			setup: func(t *testing.T, e *sEnv) func() {
				e.h.Config.MaxInFlight = 4
				var held []remediate.Recovery
				for _, id := range []string{"a", "b", "c", "d"} {
					rec, err := e.store.Claim(context.Background(), remediate.ClaimRequest{Node: sName(id), Project: sProject, Holder: "other",
						Now: e.clock.Now(), Action: remediate.ActionRecreate, Config: e.h.Config})
					if err != nil {
						t.Fatal(err)
					}
					held = append(held, rec)
				}
				return func() {
					for _, rec := range held {
						rec.Phase = remediate.PhaseRecovered
						if err := e.store.Update(context.Background(), rec); err != nil {
							t.Fatal(err)
						}
					}
				}
			},
			wait: time.Hour,
		},
		{
			name: "cooldown",
			setup: func(t *testing.T, e *sEnv) func() {
				// z was recreated 10 minutes ago and is down again.
				e.f.set(sNode("z", "TERMINATED"))
				e.handleSettled(t, sEvent("z", "ev-first", e.clock.Now()))
				e.clock.Advance(10 * time.Minute)
				n := e.f.node(sName("z"))
				n.State, n.Health = "TERMINATED", ""
				e.f.set(n)
				return func() {}
			},
			wait: time.Hour,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newScripted(t)
			release := tt.setup(t, e)
			if e.f.node(sName("z")) == nil {
				e.f.set(sNode("z", "TERMINATED"))
			}
			r := e.handle(t, sEvent("z", "evz", e.clock.Now()))
			if r.Action != remediate.ActionSkip || !strings.Contains(r.Reason, "guard") {
				t.Fatalf("event record = %s %q; want a guard skip", r.Action, r.Reason)
			}
			release()
			for elapsed := time.Duration(0); elapsed < tt.wait; elapsed += 5 * time.Minute {
				e.clock.Advance(5 * time.Minute)
				e.sweep(t) // as deployed by default: no zones listed
			}
			if n := e.f.node(sName("z")); n == nil || n.State != "READY" {
				t.Errorf("node z = %+v an hour after a guard skipped it; want it recreated once the guard cleared", n)
			}
		})
	}
}

func TestNodeChangedBetweenDecisionAndClaimIsNotRecreated(t *testing.T) {
	tests := []struct {
		name   string
		change func(n *tpu.Node)
		reason string
	}{
		{"opt-in label removed", func(n *tpu.Node) { delete(n.Labels, "tpu-autoheal") }, "no longer has label tpu-autoheal=enabled"},
		{"deleted by someone else", func(n *tpu.Node) { n.State = "DELETING" }, "DELETING"},
		{"now owned by a queued resource", func(n *tpu.Node) { n.QueuedResource = sQR }, "owned by queued resource"},
		{"recovered by itself", func(n *tpu.Node) { n.State, n.Health = "READY", "HEALTHY" }, "READY and HEALTHY by the time it was claimed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newScripted(t)
			e.f.set(sNode("a", "TERMINATED"))
			e.f.onGet = func(f *scriptedTPU, call int) {
				if call == 1 { // after the read Decide saw, before the claim's re-read
					tt.change(f.nodes[sName("a")])
				}
			}
			r := e.handle(t, sEvent("a", "ev1", e.clock.Now()))
			if got := e.f.count("delete "); got != 0 {
				t.Errorf("deletes = %d, want 0", got)
			}
			if r.Action != remediate.ActionRecord || !strings.Contains(r.Reason, tt.reason) || r.Phase != remediate.PhaseClosed {
				t.Errorf("record = %s %q phase %s; want record %q, recovery closed", r.Action, r.Reason, r.Phase, tt.reason)
			}
		})
	}
}

func TestTakenOverRecoveryNeverDeletesANodeSomeoneElseCreated(t *testing.T) {
	// A recovery crashed (no failure saved) in phase saved or deleting;
	// meanwhile a person replaced the node (new id). The takeover must not
	// delete the person's node.
	tests := []struct {
		name  string
		phase remediate.Phase
		op    string
	}{
		{"crashed before requesting the delete", remediate.PhaseSaved, ""},
		{"crashed while the delete was running", remediate.PhaseDeleting, "op-del"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newScripted(t)
			ctx := context.Background()
			rec, err := e.store.Claim(ctx, remediate.ClaimRequest{Node: sName("a"), Project: sProject, Holder: "crashed",
				Now: e.clock.Now(), Action: remediate.ActionRecreate, Config: e.h.Config})
			if err != nil {
				t.Fatal(err)
			}
			rec.Phase, rec.Spec, rec.NodeID, rec.DeleteSent, rec.DeleteOp = tt.phase, sNode("a", ""), 1, tt.op != "", tt.op
			if err := e.store.Update(ctx, rec); err != nil {
				t.Fatal(err)
			}
			theirs := sNode("a", "CREATING")
			theirs.Id = 777
			e.f.set(theirs)
			e.clock.Advance(16 * time.Minute)
			e.sweep(t) // the ledger's unfinished recoveries only

			if got := e.f.count("delete "); got != 0 {
				t.Errorf("deletes = %d, want 0: node a is id 777, not id 1 whose spec was saved", got)
			}
			un, err := e.store.Unfinished(ctx)
			if err != nil || len(un) != 0 {
				t.Errorf("Unfinished = %+v, %v; want the recovery closed", un, err)
			}
		})
	}
}
