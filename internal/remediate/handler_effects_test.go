package remediate_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// breakerStore refuses every new claim as the storm breaker would; the
// first refusal is the one that tripped it.
type breakerStore struct {
	remediate.Store
	mu    sync.Mutex
	calls int
	zones []string
}

func (s *breakerStore) Claim(ctx context.Context, req remediate.ClaimRequest) (remediate.Recovery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.zones = append(s.zones, req.Zone)
	return remediate.Recovery{}, &remediate.BreakerOpenError{Zone: req.Zone, Started: 48, Limit: 48, Window: time.Hour,
		Until: start.Add(30 * time.Minute), Tripped: s.calls == 1}
}

func TestBreakerOpenSkipsAndTheTripIsOneErrorRecord(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
	bs := &breakerStore{Store: e.store}
	remediate.SetStore(e.h, bs)
	first, err := e.h.Handle(context.Background(), terminate("e1"))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	second, err := e.h.Handle(context.Background(), terminate("e2"))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	for _, r := range []remediate.Record{first, second} {
		if r.Action != remediate.ActionSkip || !strings.HasPrefix(r.Reason, "breaker open") {
			t.Errorf("record = %s %q, want skip with a reason starting \"breaker open\"", r.Action, r.Reason)
		}
	}
	if first.Err == "" || !strings.HasPrefix(first.Err, "breaker open") || second.Err != "" {
		t.Errorf("errors = %q, %q; want the trip's record alone to carry the breaker as its error", first.Err, second.Err)
	}
	if len(bs.zones) == 0 || bs.zones[0] != zone {
		t.Errorf("claim zones = %q, want %q: the breaker counts per zone", bs.zones, zone)
	}
	wantCounts(t, e.fake, map[string]int{"nodes.delete": 0, "nodes.create": 0})
	// The node is looked at again when the breaker may have closed.
	due, _ := e.store.DueDeferrals(context.Background(), start.Add(31*time.Minute))
	if len(due) != 1 || !due[0].Due.Equal(start.Add(30*time.Minute)) {
		t.Errorf("deferrals = %+v, want one due when the breaker closes", due)
	}
}

func TestSameInsertIDWithAnotherTimestampIsAnotherEntry(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
	first := terminate("same-id")
	if _, err := e.handleSettled(t, first); err != nil {
		t.Fatal(err)
	}
	// Terminated again later; Cloud Logging reused the insertId.
	n := nodeOf(t, e.fake, nodeName)
	n.State, n.Health = "TERMINATED", ""
	e.fake.SetNode(n)
	e.clock.Advance(2 * time.Hour) // past the cooldown
	again := first
	again.Time = e.clock.Now().Add(-time.Second)
	r, err := e.h.Handle(context.Background(), again)
	if err != nil {
		t.Fatal(err)
	}
	if r.Action != remediate.ActionRecreate {
		t.Errorf("second entry with the same insertId = %s %q, want recreate (a new entry)", r.Action, r.Reason)
	}
	// The very same entry again is a duplicate.
	dup, err := e.h.Handle(context.Background(), first)
	if err != nil || dup.Action != remediate.ActionSkip || !strings.Contains(dup.Reason, "already handled") {
		t.Errorf("redelivered first entry = %s %q, %v; want skip already handled", dup.Action, dup.Reason, err)
	}
	if k1, k2 := remediate.EventKey(first), remediate.EventKey(again); k1 == k2 {
		t.Errorf("EventKey = %q for both, want the timestamp in it", k1)
	}
}

// failingUpdates fails Update while on is set, as a ledger outage would.
type failingUpdates struct {
	remediate.Store
	mu sync.Mutex
	on bool
}

func (s *failingUpdates) Update(ctx context.Context, rec remediate.Recovery) error {
	s.mu.Lock()
	on := s.on
	s.mu.Unlock()
	if on {
		return errors.New("firestore: unavailable")
	}
	return s.Store.Update(ctx, rec)
}

// Killed mutation: marking an event processed after a transient failure on
// the act path.
func TestEventIsNotMarkedAfterATransientFailureActing(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
	fs := &failingUpdates{Store: e.store, on: true}
	remediate.SetStore(e.h, fs)
	if _, err := e.h.Handle(context.Background(), terminate("e1")); err == nil {
		t.Fatal("Handle with the ledger failing = nil, want a transient error")
	}
	h, err := e.store.History(context.Background(), nodeName, project, remediate.EventKey(terminate("e1")), e.clock.Now(), time.Hour)
	if err != nil || h.EventSeen {
		t.Fatalf("History = %+v, %v: the event was marked processed after a transient failure", h, err)
	}
	fs.mu.Lock()
	fs.on = false
	fs.mu.Unlock()
	e.clock.Advance(16 * time.Minute) // the failed holder's lease
	r, err := e.h.Handle(context.Background(), terminate("e1"))
	if err != nil || r.Action != remediate.ActionRecreate {
		t.Errorf("redelivery = %s %q, %v; want it handled (recreate)", r.Action, r.Reason, err)
	}
}

// Killed mutation: not saving the delete's phase (the old DeleteSent)
// before the delete. With the save failing, no delete may be sent.
func TestNoDeleteIsSentBeforeItsPhaseIsSaved(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
	remediate.SetStore(e.h, &failingUpdates{Store: e.store, on: true})
	_, _ = e.h.Handle(context.Background(), terminate("e1"))
	if got := e.fake.Count("nodes.delete", ""); got != 0 {
		t.Errorf("deletes = %d with the deleting phase unsaved, want 0", got)
	}
	// And once it is saved, a crash right after the delete still finds the
	// node ours: the next look recreates it from the saved spec.
	remediate.SetStore(e.h, &crashingStore{Store: e.store, phase: remediate.PhaseDeleting})
	e.clock.Advance(16 * time.Minute)
	_, _ = e.h.Handle(context.Background(), terminate("e1"))
	remediate.SetStore(e.h, e.store)
	e.settle(t)
	if n := nodeOf(t, e.fake, nodeName); n == nil || n.State != "READY" {
		t.Errorf("node after a crash around the delete = %+v, want READY", n)
	}
}

// deleteLeavesDeleting accepts the delete, whose operation then says done,
// but the node stays DELETING.
type deleteLeavesDeleting struct{ *scriptedTPU }

func (d deleteLeavesDeleting) DeleteNode(ctx context.Context, name string) (string, error) {
	d.scriptedTPU.mu.Lock()
	defer d.scriptedTPU.mu.Unlock()
	d.nodes[name].State = "DELETING"
	d.log("delete " + name)
	return "op-del", nil
}

// Killed mutation: not failing a node still DELETING after the delete's
// operation finished: it is a counted wait, never taken for deleted.
func TestNodeStillDeletingAfterItsOperationIsNotTakenForDeleted(t *testing.T) {
	e := newScripted(t)
	e.h.TPU = deleteLeavesDeleting{e.f}
	e.f.set(sNode("a", "TERMINATED"))
	e.handle(t, sEvent("a", "ev1", e.clock.Now()))
	for range 3 {
		e.clock.Advance(10 * time.Minute)
		if _, err := e.h.Continue(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.f.count("create "); got != 0 {
		t.Fatalf("creates = %d while the node is still DELETING, want 0", got)
	}
	h, _ := e.store.History(context.Background(), sName("a"), sProject, "", e.clock.Now(), time.Hour)
	if h.Recovery == nil || h.Recovery.Phase != remediate.PhaseDeleting || h.Recovery.Failures == 0 {
		t.Fatalf("recovery = %+v, want deleting with the wait counted", h.Recovery)
	}
	e.f.remove(sName("a")) // the delete completes
	e.settle(t)
	if n := e.f.node(sName("a")); n == nil || n.State != "READY" {
		t.Errorf("node after the delete completed = %+v, want recreated", n)
	}
}
