package remediate_test

// Tests written for the survivors of the mutation check (docs/testing.md,
// "Mutation check"; bench/mutate): each fails with its mutation applied and
// passes without it.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// failingHolds fails SetHold, as a ledger outage would.
type failingHolds struct{ remediate.Store }

func (failingHolds) SetHold(context.Context, remediate.Hold) error {
	return errors.New("firestore: unavailable")
}

// A person's terminate whose hold cannot be written is not acknowledged:
// Handle returns the transient failure so Pub/Sub redelivers it, and the
// event is not marked handled, else the hold is lost and a later sweep
// undoes the person's terminate (mutation I03).
func TestAHoldTheLedgerFailedToWriteIsRetried(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
	e.h.Store = failingHolds{e.store}
	ev := terminate("user-1")
	ev.Cause = events.CauseUser
	r, err := e.h.Handle(context.Background(), ev)
	if err == nil {
		t.Fatalf("Handle(user terminate, SetHold failing) = %s %q, nil; want a transient error (redelivered)", r.Action, r.Reason)
	}
	var ae *remediate.ActError
	if !errors.As(err, &ae) || !ae.Transient || !strings.Contains(err.Error(), "set hold") {
		t.Errorf("Handle error = %v; want a transient ledger error naming the hold", err)
	}
	h, herr := e.store.History(context.Background(), nodeName, project, remediate.EventKey(ev), e.clock.Now(), time.Hour)
	if herr != nil {
		t.Fatal(herr)
	}
	if h.EventSeen {
		t.Error("the event is marked handled although its hold was not written: the redelivery would be skipped")
	}
	wantCounts(t, e.fake, map[string]int{"nodes.delete": 0, "nodes.create": 0})
}

// resetHook runs hook once, just before the first reset is sent.
type resetHook struct {
	remediate.TPU
	fired bool
	hook  func()
}

func (t *resetHook) ResetQueuedResource(ctx context.Context, name string) (string, error) {
	if !t.fired {
		t.fired = true
		t.hook()
	}
	return t.TPU.ResetQueuedResource(ctx, name)
}

// Two slices of one multislice queued resource, both terminated, their
// recoveries racing: the second claims while the first has marked the
// incident's one reset but not yet sent it (the queued resource still
// ACTIVE). The second finds the mark and closes; the queued resource is
// reset once, not once per slice (mutation I06: the mark keyed by the node
// gave each slice its own "one reset").
func TestASecondSliceFindsTheResetMarkedForTheQueuedResource(t *testing.T) {
	a, b := fullNode("TERMINATED"), fullNode("TERMINATED")
	a.QueuedResource, b.QueuedResource = qrName, qrName
	b.Name, b.Id = nodeName+"-b", a.Id+1
	q := &tpu.QueuedResource{
		Name:  qrName,
		State: &tpu.QueuedResourceState{State: "ACTIVE"},
		Tpu: &tpu.Tpu{NodeSpec: []*tpu.NodeSpec{
			{Parent: "projects/acme-ml/locations/us-central2-b", NodeId: nodeID, Node: userSpec(t, fullNode("TERMINATED"))},
			{Parent: "projects/acme-ml/locations/us-central2-b", NodeId: nodeID + "-b", Node: userSpec(t, fullNode("TERMINATED"))},
		}},
	}
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{a, b}, QueuedResources: []*tpu.QueuedResource{q}})
	evB := terminate("slice-b")
	evB.Node.Node = nodeID + "-b"
	var second remediate.Record
	var secondErr error
	e.h.TPU = &resetHook{TPU: e.h.TPU, hook: func() {
		second, secondErr = e.h.Handle(context.Background(), evB)
	}}
	first, err := e.h.Handle(context.Background(), terminate("slice-a"))
	if err != nil || first.Action != remediate.ActionReset {
		t.Fatalf("Handle(slice a) = %s %q, %v; want reset", first.Action, first.Reason, err)
	}
	if secondErr != nil || second.Outcome != remediate.OutcomeClosed || !strings.Contains(second.Reason, "reset recently") {
		t.Errorf("Handle(slice b) while a's reset is marked = %s %s %q, %v; want closed: reset recently by another slice", second.Action, second.Outcome, second.Reason, secondErr)
	}
	if c := e.fake.Count("queuedResources.reset", ""); c != 1 {
		t.Errorf("queued resource resets = %d, want 1 for the incident", c)
	}
}

// Cloud Logging's identity of an entry is insertId, timestamp and logName:
// two projects' entries with the same insertId and timestamp are two
// events, each handled (mutation I07: the key without the log name made the
// second "already handled").
func TestSameInsertIDInTwoProjectsIsTwoEvents(t *testing.T) {
	other := fullNode("TERMINATED")
	other.Name, other.Id = "projects/other-ml/locations/us-central2-b/nodes/llm-v4-128", 99
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED"), other}})
	ev := terminate("shared-id")
	ev.LogName = events.AuditLogName(project, events.LogSystemEvent)
	evOther := ev
	evOther.Node.Project = "other-ml"
	evOther.LogName = events.AuditLogName("other-ml", events.LogSystemEvent)
	for _, x := range []events.Event{ev, evOther} {
		r, err := e.h.Handle(context.Background(), x)
		if err != nil || r.Action != remediate.ActionRecreate {
			t.Errorf("Handle(%s in %s) = %s %q, %v; want recreate (a distinct entry)", x.InsertID, x.Node.Project, r.Action, r.Reason, err)
		}
	}
}
