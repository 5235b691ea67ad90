package remediate_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/api/googleapi"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/googleerr"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// acceptedThen503 accepts the first delete (node goes DELETING) but answers
// 503, as a lost response / gateway timeout would; a delete of a DELETING
// node is refused with 400 FAILED_PRECONDITION.
type acceptedThen503 struct {
	*scriptedTPU
	mu      sync.Mutex
	deletes int
}

func (a *acceptedThen503) DeleteNode(ctx context.Context, name string) (string, error) {
	a.mu.Lock()
	a.deletes++
	n := a.deletes
	a.mu.Unlock()
	a.scriptedTPU.mu.Lock()
	defer a.scriptedTPU.mu.Unlock()
	node, ok := a.nodes[name]
	if !ok {
		return "", scriptedNotFound()
	}
	a.log("delete " + name)
	if node.State == "DELETING" {
		return "", googleerr.FromAPI(&googleapi.Error{Code: http.StatusBadRequest, Message: "FAILED_PRECONDITION: node is being deleted"})
	}
	node.State = "DELETING"
	if n == 1 {
		return "", googleerr.FromAPI(&googleapi.Error{Code: http.StatusServiceUnavailable, Message: "backend timeout"})
	}
	return "op-del", nil
}

func TestAcceptedDeleteWhoseRetryIsRefusedIsStillRecreated(t *testing.T) {
	e := newScripted(t)
	w := &acceptedThen503{scriptedTPU: e.f}
	e.h.TPU = w
	e.f.set(sNode("a", "TERMINATED"))
	e.handle(t, sEvent("a", "ev1", e.clock.Now()))
	// The platform finishes the delete the first request started.
	e.f.remove(sName("a"))
	for i := 0; i < 12; i++ {
		e.clock.Advance(16 * time.Minute)
		e.sweep(t)
	}
	if got := e.f.count("create "); got == 0 {
		h, _ := e.store.History(context.Background(), sName("a"), sProject, "", e.clock.Now(), 24*time.Hour)
		t.Errorf("node a was deleted by our delete request and never recreated; recovery = %+v", h.Recovery)
	}
}

// failOnce fails the first Update that saves a reset recovery as saved.
type failOnce struct {
	*ledger.Memory
	mu   sync.Mutex
	done bool
}

func (f *failOnce) Update(ctx context.Context, rec remediate.Recovery) error {
	f.mu.Lock()
	if !f.done && rec.Action == remediate.ActionReset && rec.Phase == remediate.PhaseSaved {
		f.done = true
		f.mu.Unlock()
		return errors.New("firestore: unavailable")
	}
	f.mu.Unlock()
	return f.Memory.Update(ctx, rec)
}

func TestResetTakeoverThatFindsItsOwnMarkLooksAgainLater(t *testing.T) {
	e := newScripted(t)
	st := &failOnce{Memory: e.store}
	remediate.SetStore(e.h, st)
	n := sNode("s0", "PREEMPTED")
	n.QueuedResource = sQR
	e.f.set(n)
	e.f.setQRState("ACTIVE")
	r := e.handle(t, sEvent("s0", "ev1", e.clock.Now()))
	t.Logf("first: %s %q err=%q", r.Action, r.Reason, r.Err)
	// Pub/Sub redelivers (the first returned a transient error) after the lease.
	e.clock.Advance(16 * time.Minute)
	r = e.handle(t, sEvent("s0", "ev1", e.clock.Now()))
	t.Logf("redelivery: %s %q err=%q", r.Action, r.Reason, r.Err)
	for i := 0; i < 24; i++ { // 6 hours of default sweeps (no zones)
		e.clock.Advance(15 * time.Minute)
		e.sweep(t)
	}
	if got := e.f.count("reset "); got == 0 {
		t.Errorf("queued resource never reset: node %s still %s; the takeover closed its own recovery as another slice's", sName("s0"), e.f.node(sName("s0")).State)
	}
	for _, rec := range e.recs.list() {
		if strings.Contains(rec.Reason, "another slice") {
			t.Logf("record: %s %q", rec.Action, rec.Reason)
		}
	}
}

func TestDeferralOfANodeOptedOutIsDropped(t *testing.T) {
	e := newScripted(t)
	n := sNode("a", "READY")
	n.Health = "UNHEALTHY_MAINTENANCE"
	e.f.set(n)
	r := e.handle(t, sEvent("a", "ev1", e.clock.Now()))
	t.Logf("event: %s %q", r.Action, r.Reason)
	// The owner opts the node out while it is deferred.
	e.f.script(func(f *scriptedTPU) { delete(f.nodes[sName("a")].Labels, "tpu-autoheal") })
	skips := 0
	for i := 0; i < 24; i++ { // 2 hours of 5-minute sweeps
		e.clock.Advance(5 * time.Minute)
		res := e.sweep(t)
		for _, rec := range res.Records {
			if rec.Action == remediate.ActionSkip {
				skips++
			}
		}
	}
	if skips > 1 {
		t.Errorf("%d skip records for one opted-out node in 2 hours: its deferral is never cleared", skips)
	}
}

func TestDeferralOfANodeAUserTerminatedIsDropped(t *testing.T) {
	e := newScripted(t)
	n := sNode("a", "READY")
	n.Health = "UNHEALTHY_MAINTENANCE"
	e.f.set(n)
	e.handle(t, sEvent("a", "ev1", e.clock.Now()))
	// The owner terminates it by hand.
	e.f.script(func(f *scriptedTPU) { f.nodes[sName("a")].State, f.nodes[sName("a")].Health = "TERMINATED", "" })
	ev := sEvent("a", "ev-user", e.clock.Now())
	ev.Cause = "user"
	r := e.handle(t, ev)
	t.Logf("user event: %s %q", r.Action, r.Reason)
	skips := 0
	for i := 0; i < 24; i++ {
		e.clock.Advance(5 * time.Minute)
		res := e.sweep(t)
		for _, rec := range res.Records {
			if rec.Action == remediate.ActionSkip {
				skips++
			}
		}
	}
	if skips > 1 {
		t.Errorf("%d skip records in 2 hours for one held node: its deferral is never cleared", skips)
	}
}

type list403 struct{ *scriptedTPU }

func (l list403) ListNodes(ctx context.Context, parent, token string) ([]*tpu.Node, string, error) {
	return nil, "", googleerr.FromAPI(&googleapi.Error{Code: 403, Message: "PERMISSION_DENIED: tpu.nodes.list"})
}

func TestSweepRecordsALocationItCannotList(t *testing.T) {
	e := newScripted(t)
	e.h.TPU = list403{e.f}
	e.f.set(sNode("a", "TERMINATED"))
	res, err := e.h.Sweep(context.Background(), remediate.SweepOptions{Projects: []string{sProject}, Zones: []string{sZone}})
	if err != nil || len(res.Errors) != 1 {
		t.Fatalf("Sweep = %v, errors %q; want nil and the one location that could not be listed", err, res.Errors)
	}
	var got []remediate.Record
	for _, r := range e.recs.list() {
		if r.Zone == sZone && strings.Contains(r.Err, "PERMISSION_DENIED") {
			got = append(got, r)
		}
	}
	if len(got) != 1 {
		t.Errorf("records naming the unlistable zone with its error = %d (all: %+v); want 1: a sweep that sees nothing must not look fine", len(got), e.recs.list())
	}
}

// deleteOpFails accepts the delete request but the operation fails; the node
// is left as it was.
type deleteOpFails struct{ *scriptedTPU }

func (d deleteOpFails) DeleteNode(ctx context.Context, name string) (string, error) {
	d.scriptedTPU.mu.Lock()
	defer d.scriptedTPU.mu.Unlock()
	if _, ok := d.nodes[name]; !ok {
		return "", scriptedNotFound()
	}
	d.log("delete " + name)
	return "op-del-bad", nil
}

func (d deleteOpFails) GetOperation(ctx context.Context, op string) (bool, error) {
	if op == "op-del-bad" {
		return true, googleerr.FromAPI(&googleapi.Error{Code: 400, Message: "FAILED_PRECONDITION: delete failed"})
	}
	return true, nil
}

// TestNodeGoneAfterOurFailedDeleteOperationIsRecreated: a delete whose
// operation ended in error may have taken effect all the same; a node then
// NOT FOUND, with no evidence of anyone else, is ours to create again (the
// evidence rule). Before it, such a node was taken for a person's delete
// and never recreated: lost.
func TestNodeGoneAfterOurFailedDeleteOperationIsRecreated(t *testing.T) {
	e := newScripted(t)
	e.h.TPU = deleteOpFails{e.f}
	e.f.set(sNode("a", "TERMINATED"))
	e.handle(t, sEvent("a", "ev1", e.clock.Now()))
	e.f.remove(sName("a")) // the failed operation deleted it after all
	e.clock.Advance(16 * time.Minute)
	e.sweep(t)
	if got := e.f.count("create "); got != 1 {
		t.Errorf("creates = %d, want 1: our delete sent, the node is ours to recreate", got)
	}
}

// TestNodeAPersonDeletesAfterOurFailedDeleteIsNotRecreated: the same, but
// the person's delete is in evidence (their admin-activity entry, kept for
// the recovery): not recreated, and the record names them.
func TestNodeAPersonDeletesAfterOurFailedDeleteIsNotRecreated(t *testing.T) {
	e := newScripted(t)
	e.h.TPU = deleteOpFails{e.f}
	e.f.set(sNode("a", "TERMINATED"))
	r := e.handle(t, sEvent("a", "ev1", e.clock.Now()))
	t.Logf("event: %s phase=%s err=%q", r.Action, r.Phase, r.Err)
	e.f.remove(sName("a")) // a person deletes it while our failed delete's operation is not looked at yet
	e.clock.Advance(time.Minute)
	ev := events.Event{InsertID: "admin-1", Time: e.clock.Now(), Kind: events.KindAdminActivity, Principal: "alice@acme.example",
		Method: "google.cloud.tpu.v2.Tpu.DeleteNode", Node: events.NodeRef{Project: sProject, Zone: sZone, Node: "a"},
		Admin: &events.AdminActivity{Change: events.ChangeDeleteNode, OperationID: "projects/acme-ml/locations/us-central2-b/operations/op-alice", First: true}}
	if _, err := e.h.Evidence(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(15 * time.Minute)
	e.sweep(t)
	if got := e.f.count("create "); got != 0 {
		t.Errorf("creates = %d: the node a person deleted (in evidence) was recreated", got)
	}
	named := false
	for _, r := range e.recs.list() {
		named = named || r.Outcome == remediate.OutcomeClosed && strings.Contains(r.Reason, "alice@acme.example")
	}
	if !named {
		t.Errorf("no record closes the recovery naming the person's delete; records: %+v", e.recs.list())
	}
}
