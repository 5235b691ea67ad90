package remediate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

func pauseProject(t *testing.T, e *env) {
	t.Helper()
	if err := e.store.SetPause(context.Background(), remediate.Pause{Scope: remediate.PauseProject, Project: project,
		Reason: "incident 42", By: "sre@example.com", Since: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
}

// A pause holds back a maintenance notice's metadata patch too: the sweep
// sends no prepare while the project is paused.
func TestPauseHoldsBackPrepare(t *testing.T) {
	e := newMaintEnv(t, remediate.MaintenanceEarly)
	pauseProject(t, e)
	sweepZone(t, e)
	if got := e.fake.Count("nodes.patch", ""); got != 0 {
		t.Errorf("%d metadata patches while paused, want 0", got)
	}
	for _, r := range e.records.list() {
		if r.Action == remediate.ActionPrepare || r.Action == remediate.ActionMaintain {
			t.Errorf("record %s %s while paused", r.Action, r.Reason)
		}
	}
}

// A node that recovered by itself while our recovery was unfinished is not
// closed while paused — and that is no transient failure (no redelivery
// storm): the event is acknowledged and the record says why.
func TestPauseLeavesARecoveryOpenWithoutFailing(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}}, tpufake.WithOperationDelay("delete", time.Hour))
	if _, err := e.h.Handle(context.Background(), terminate("e1")); err != nil {
		t.Fatal(err)
	}
	pauseProject(t, e)
	n := nodeOf(t, e.fake, nodeName)
	n.State, n.Health = "READY", "HEALTHY"
	e.fake.SetNode(n)
	e.clock.Set(e.clock.Now().Add(2 * time.Minute))
	r, err := e.h.Handle(context.Background(), terminate("e2"))
	if err != nil {
		t.Fatalf("Handle under a pause = %v, want nil (acknowledged)", err)
	}
	if !strings.Contains(r.Reason, "paused by") {
		t.Errorf("reason %q, want it to say the pause left the recovery open", r.Reason)
	}
	if u, _ := e.store.Unfinished(context.Background()); len(u) != 1 {
		t.Errorf("%d unfinished recoveries, want the one left open by the pause", len(u))
	}
}

// A following sweep does not retake a paused recovery every tick: a look
// that did not move it on leaves it to the next sweep.
func TestFollowDoesNotSpinOnAPausedRecovery(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}}, tpufake.WithOperationDelay("delete", time.Hour))
	if _, err := e.h.Handle(context.Background(), terminate("e1")); err != nil {
		t.Fatal(err)
	}
	pauseProject(t, e)
	e.h.Now = time.Now // the wall clock: follow waits on real timers
	before := len(e.records.list())
	if _, err := e.h.Sweep(context.Background(), remediate.SweepOptions{Projects: []string{project}, Follow: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	var paused int
	for _, r := range e.records.list()[before:] {
		if strings.Contains(r.Reason, "paused by") {
			paused++
		}
	}
	if paused > 2 {
		t.Errorf("%d paused records from one 3 s following sweep, want at most 2 (not one per tick)", paused)
	}
}
