package tpufake_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// vclock is a virtual clock tests move by hand.
type vclock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *vclock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *vclock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestDelayedOperationFinishesOnTheServerClockUnpolled(t *testing.T) {
	c := &vclock{t: clock}
	s, svc := start(t, fleetFile, tpufake.WithClock(c.now), tpufake.WithOperationDelay("delete", 10*time.Minute))
	op, err := svc.Projects.Locations.Nodes.Delete(llm).Do()
	if err != nil {
		t.Fatal(err)
	}
	if got := getNode(t, svc, llm).State; got != "DELETING" {
		t.Fatalf("state right after delete = %s, want DELETING", got)
	}
	if got := getOp(t, svc, op.Name); got.Done {
		t.Fatalf("operation done before its delay passed")
	}
	c.add(10 * time.Minute)
	// Nobody polls: the node is gone anyway.
	if _, err := svc.Projects.Locations.Nodes.Get(llm).Do(); err == nil {
		t.Fatalf("node still there after the delete's delay passed")
	}
	if got := getOp(t, svc, op.Name); !got.Done || got.Error != nil {
		t.Errorf("operation after its delay = %+v, want done", got)
	}
	if n := s.Count("operations.get", op.Name); n != 2 {
		t.Errorf("Count(operations.get) = %d, want 2", n)
	}
}

func TestLostAnswerTakesEffect(t *testing.T) {
	s, svc := start(t, fleetFile)
	s.Fail(tpufake.FailRule{RPC: "nodes.delete", Lost: true, Times: 1})
	if _, err := svc.Projects.Locations.Nodes.Delete(llm).Do(); err == nil {
		t.Fatal("delete with a lost answer succeeded, want a 500")
	}
	if got := getNode(t, svc, llm).State; got != "DELETING" {
		t.Errorf("state after the lost delete = %s, want DELETING (the call took effect)", got)
	}
}

func TestMalformedAnswerAndHang(t *testing.T) {
	s, svc := start(t, fleetFile)
	s.Fail(tpufake.FailRule{RPC: "nodes.get", Malformed: true, Times: 1})
	if _, err := svc.Projects.Locations.Nodes.Get(llm).Do(); err == nil {
		t.Error("get with a malformed body succeeded, want a decode error")
	}
	s.Fail(tpufake.FailRule{RPC: "nodes.get", Hang: true, Times: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := svc.Projects.Locations.Nodes.Get(llm).Context(ctx).Do(); err == nil {
		t.Error("hanging get answered, want the caller's deadline")
	}
	if got := getNode(t, svc, llm); got.Name != llm {
		t.Errorf("get after the faults = %v, want the node", got.Name)
	}
}

func TestRequestLogIsARing(t *testing.T) {
	s, svc := start(t, fleetFile, tpufake.WithRequestLog(2))
	for range 5 {
		_, _ = svc.Projects.Locations.Nodes.Get(llm).Do()
	}
	if got := len(s.Requests()); got != 2 {
		t.Errorf("len(Requests()) = %d, want 2 (the ring's size)", got)
	}
	if got := s.Count("nodes.get", llm); got != 5 {
		t.Errorf("Count = %d, want 5 (exact beyond the ring)", got)
	}
}
