package remediate_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// TestStormOf500TerminatedNodesInOneZoneTripsTheBreakerOnce: a region-wide
// incident or a control-plane bug shows as hundreds of TERMINATED opted-in
// nodes in one zone. With the in-flight cap lifted out of the way, the
// storm breaker (default 48 per zone per hour) is what stops us: 500
// terminates delivered at once, then every continuation run to quiescence,
// start no more than 48 recreates, and exactly one ERROR record pages a
// person; every other node is skipped with a reason starting "breaker open".
func TestStormOf500TerminatedNodesInOneZoneTripsTheBreakerOnce(t *testing.T) {
	const n = 500
	var fleet tpufake.Fleet
	for i := range n {
		node := fullNode("TERMINATED")
		node.Name = fmt.Sprintf("projects/%s/locations/%s/nodes/storm-%03d", project, zone, i)
		fleet.Nodes = append(fleet.Nodes, node)
	}
	e := newEnv(t, fleet)
	e.h.Config.MaxInFlight = 10 * n // the breaker, not the in-flight cap, is under test
	if e.h.Config.BreakerLimit != remediate.DefaultBreakerLimit || remediate.DefaultBreakerLimit != 48 {
		t.Fatalf("breaker limit %d (default %d), want the default 48", e.h.Config.BreakerLimit, remediate.DefaultBreakerLimit)
	}

	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ev := events.Event{InsertID: fmt.Sprintf("storm-%03d", i), Time: start.Add(-1), Method: events.MethodTerminate,
				Node: events.NodeRef{Project: project, Zone: zone, Node: fmt.Sprintf("storm-%03d", i)}, Cause: events.CauseMaintenance}
			if _, err := e.h.Handle(context.Background(), ev); err != nil {
				t.Errorf("Handle %s: %v", ev.InsertID, err)
			}
		}()
	}
	wg.Wait()
	if left := e.settle(t); left != 0 {
		t.Fatalf("%d recoveries still unfinished after settling", left)
	}

	if got := e.fake.Succeeded("nodes.create"); got > 48 || got == 0 {
		t.Errorf("%d successful creates, want between 1 and 48 (the breaker's limit)", got)
	}
	if got := e.fake.Count("nodes.delete", ""); got > 48 {
		t.Errorf("%d deletes, want at most 48", got)
	}
	var trips, breakerSkips int
	for _, r := range e.records.list() {
		if strings.HasPrefix(r.Err, "breaker open") {
			trips++
		}
		if r.Action == remediate.ActionSkip && strings.HasPrefix(r.Reason, "breaker open") {
			breakerSkips++
		}
	}
	if trips != 1 {
		t.Errorf("%d ERROR records of a breaker trip, want exactly 1", trips)
	}
	if breakerSkips != n-48 {
		t.Errorf("%d skips with reason \"breaker open\", want %d", breakerSkips, n-48)
	}
	var ready int
	for _, node := range e.fake.Fleet().Nodes {
		if node.State == "READY" {
			ready++
		}
	}
	if ready != 48 {
		t.Errorf("%d nodes READY after the storm, want the 48 the breaker let through", ready)
	}
}
