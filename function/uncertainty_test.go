//go:build uncertainty

// Regression tests for recovery under uncertainty not yet passing, built
// with the uncertainty tag; the world they run in, and why, is in
// uncertainty_world_test.go:
//
//	go test -tags uncertainty ./function -run Uncertain
package function_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// --- A delete whose outcome the recovery cannot see ---

func TestUncertainDeleteOperationErrorNodeStaysDeleting(t *testing.T) {
	w := newWorld(t, uFleet(uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")), nil)
	// The delete's operation ends in error, the node stays DELETING for
	// three minutes, then it is gone.
	w.fake.Fail(tpufake.FailRule{RPC: "operation:nodes.delete", Name: uNode, Times: 1, Status: "INTERNAL",
		Effect: tpufake.EffectLater, EffectDelay: 3 * time.Minute})
	w.startRecovery(uNode)
	w.sweeps(20)
	w.requireNotLost(uNode)
}

func TestUncertainDeleteStuckDeletingIsAbandonedWithAnError(t *testing.T) {
	w := newWorld(t, uFleet(uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")), nil)
	// The delete's operation ends in error and the node never leaves
	// DELETING: waited for, within a bound, then abandoned with the spec.
	w.fake.Fail(tpufake.FailRule{RPC: "operation:nodes.delete", Name: uNode, Times: 1, Status: "INTERNAL", Effect: tpufake.EffectStuck})
	w.startRecovery(uNode)
	for range 25 * 12 { // 25 hours, a sweep every 5 minutes: past the recovery's 24 h cap
		w.clock.add(4 * time.Minute)
		w.sweeps(1)
	}
	w.requireNotLost(uNode)
	for _, r := range w.recordsOf(uNode) {
		if r.Outcome == "closed" {
			t.Errorf("closed with no evidence of anyone else (%s); records:%s", r.Reason, w.history(uNode))
		}
	}
}

func TestUncertainDeleteOperationErrorButNodeDeleted(t *testing.T) {
	w := newWorld(t, uFleet(uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")), nil)
	// The operation ends in error after the node was deleted.
	w.fake.Fail(tpufake.FailRule{RPC: "operation:nodes.delete", Name: uNode, Times: 1, Status: "INTERNAL", Effect: tpufake.EffectNow})
	w.startRecovery(uNode)
	w.sweeps(20)
	w.requireNotLost(uNode)
}

func TestUncertainDelete500LandsLater(t *testing.T) {
	// DELETE answers 500 and the delete lands 2 s later: the next read still
	// shows the node as it was.
	w := newWorld(t, uFleet(uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")), nil,
		tpufake.WithOperationDelay("delete", 20*time.Second))
	w.fake.Fail(tpufake.FailRule{RPC: "nodes.delete", Name: uNode, Times: 1, Code: 500, Effect: tpufake.EffectLater, EffectDelay: 2 * time.Second})
	w.startRecovery(uNode)
	w.sweeps(20)
	w.requireNotLost(uNode)
}

func TestUncertainDeleteHangsPastTheDeadlineThenLands(t *testing.T) {
	w := newWorld(t, uFleet(uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")), nil,
		tpufake.WithOperationDelay("delete", 20*time.Second))
	// DELETE hangs until the caller gives up (the call's own deadline, 30 s
	// of wall clock: this test waits for it) and lands 40 s after it was
	// sent, on the control plane's clock: past the call's deadline, before
	// the recovery's next look.
	w.fake.Fail(tpufake.FailRule{RPC: "nodes.delete", Name: uNode, Times: 1, Hang: true, Effect: tpufake.EffectLater, EffectDelay: 40 * time.Second})
	w.deliver(uEntry("terminate-1", uNode, uT0, "system@google.com", ""))
	w.fake.WaitIdle()
	w.sweeps(20)
	w.requireNotLost(uNode)
}

// --- A person acting during the recovery ---

func TestUncertainPersonDeletesTheNodeOurCreateMadeNotCreatedTwice(t *testing.T) {
	w := newWorld(t, uFleet(uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")), nil,
		tpufake.WithOperationDelay("create", 20*time.Second))
	// The node our create made is READY with our generation label; a
	// person deletes it before we look at it again.
	w.fake.Fail(tpufake.FailRule{RPC: "operations.get", Of: "nodes.create", Times: 1,
		Person: &tpufake.Act{Kind: tpufake.ActDelete, Target: uNode, Principal: "alice@acme.example"}})
	w.startRecovery(uNode)
	w.sweeps(3)
	// The person's audit entries reach the function, as the sink routes them.
	for _, e := range w.fake.AuditLog() {
		if e.Principal == "alice@acme.example" {
			w.deliver(e.JSON)
		}
	}
	w.sweeps(20)
	if got := w.ourCreates(uNode); got != 1 {
		t.Errorf("%d successful creates, want 1: a node deleted by a person after our create finished is theirs to delete; records:%s", got, w.history(uNode))
	}
	if got := w.fake.Count("nodes.create", uNode); got != 1 {
		t.Errorf("%d create requests, want 1; records:%s", got, w.history(uNode))
	}
	named := false
	for _, r := range w.recordsOf(uNode) {
		named = named || r.Outcome == "closed" && strings.Contains(r.Reason, "alice@acme.example")
	}
	if !named {
		t.Errorf("no record closes the recovery naming the person's delete (alice@acme.example, whose audit entries were delivered); records:%s", w.history(uNode))
	}
}

func TestUncertainQueuedResourceDeletedDuringResetClosesWithTheEvidence(t *testing.T) {
	f, err := tpufake.ReadFleetFile("../testdata/fleet-queued.json")
	if err != nil {
		t.Fatal(err)
	}
	const (
		qr     = "projects/acme-ml/locations/us-west4-a/queuedResources/qr-spot-v5e-16"
		qrNode = "projects/acme-ml/locations/us-west4-a/nodes/qr-spot-v5e-16"
	)
	w := newWorld(t, f, map[string]string{"AUTOHEAL_ZONES": "us-west4-a"}, tpufake.WithOperationDelay("reset", 5*time.Minute))
	// A person deletes the queued resource right after our reset started.
	w.fake.Fail(tpufake.FailRule{RPC: "queuedResources.reset", Name: qr, Times: 1,
		Person: &tpufake.Act{Kind: tpufake.ActDeleteQueuedResource, Target: qr, Principal: "alice@acme.example"}})
	if code := w.deliver(uEntry("terminate-qr", qrNode, uT0, "system@google.com", "")); code >= 300 {
		t.Fatalf("entry answered %d", code)
	}
	if got := w.fake.Count("queuedResources.reset", qr); got != 1 {
		t.Fatalf("%d resets, want 1 (the recovery started)%s", got, w.history(qrNode))
	}
	// Its NOT FOUND is evidence enough: the recovery ends at the next looks,
	// not after backing off through its failures.
	w.sweeps(5)
	closed := false
	for _, r := range w.recordsOf(qrNode) {
		if (r.Outcome == "closed" || r.Outcome == "abandoned") && strings.Contains(r.Reason, "qr-spot-v5e-16") && strings.Contains(strings.ToUpper(r.Reason), "NOT FOUND") {
			closed = true
		}
	}
	if !closed {
		t.Errorf("no record ends the recovery within 5 minutes naming the queued resource NOT FOUND; records:%s", w.history(qrNode))
	}
	reads := w.fake.Count("queuedResources.get", qr)
	w.sweeps(30)
	if more := w.fake.Count("queuedResources.get", qr) - reads; more > 0 {
		t.Errorf("%d more reads of the deleted queued resource in 30 sweeps: the recovery is still going", more)
	}
	if got := w.fake.Count("queuedResources.reset", qr); got != 1 {
		t.Errorf("%d resets of a deleted queued resource, want 1", got)
	}
}

// --- Inputs from the audit log only ---

func TestUncertainForgedEntryDoesNotStopARecovery(t *testing.T) {
	w := newWorld(t, uFleet(uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")), nil,
		tpufake.WithOperationDelay("delete", 2*time.Minute))
	w.startRecovery(uNode)
	// A terminate by a person, written to a log anyone in the project can
	// write, whose name contains the audit log's.
	forged := uEntry("forged-1", uNode, uT0.Add(30*time.Second), "mallory@acme.example", "projects/acme-ml/logs/cloudaudit.googleapis.com%2Fsystem_event-copy")
	w.clock.add(30 * time.Second)
	w.deliver(forged)
	w.sweeps(20)
	w.requireNotLost(uNode)
}

func TestUncertainUserTerminateDoesNotCloseARecoveryWhoseDeleteWasSent(t *testing.T) {
	w := newWorld(t, uFleet(uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")), nil,
		tpufake.WithOperationDelay("delete", 2*time.Minute))
	w.startRecovery(uNode)
	// A genuine system-event entry of a terminate by a person arrives after
	// our delete was sent: it may hold a node not in recovery, never close
	// one whose delete was sent (only a person's delete, with its evidence,
	// does).
	w.clock.add(30 * time.Second)
	w.deliver(uEntry("user-terminate-1", uNode, uT0.Add(30*time.Second), "mallory@acme.example", ""))
	w.sweeps(20)
	w.requireNotLost(uNode)
}

func TestUncertainForgedEntryPlantsNoHold(t *testing.T) {
	w := newWorld(t, uFleet(uNodeSpec(uNode, "READY", "HEALTHY")), nil)
	forged := uEntry("forged-1", uNode, uT0, "mallory@acme.example", "projects/acme-ml/logs/syslog")
	w.deliver(forged)
	// Later the platform terminates the node, and says so.
	w.clock.add(time.Hour)
	n := w.node(uNode)
	n.State, n.Health = "TERMINATED", "UNHEALTHY_MAINTENANCE"
	w.fake.SetNode(n)
	if code := w.deliver(uEntry("terminate-2", uNode, w.clock.now(), "system@google.com", "")); code >= 300 {
		t.Fatalf("terminate answered %d", code)
	}
	w.sweeps(10)
	if got := w.fake.Count("nodes.delete", uNode); got != 1 {
		t.Errorf("%d deletes after the platform's terminate, want 1: a forged entry from another log must not hold the node; records:%s", got, w.history(uNode))
	}
}
