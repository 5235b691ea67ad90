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

// warningsAbout are the WARNING records about node among rs.
func warningsAbout(rs []remediate.Record, node string) []remediate.Record {
	var out []remediate.Record
	for _, r := range rs {
		if r.Node == node && r.Severity == remediate.SeverityWarning {
			out = append(out, r)
		}
	}
	return out
}

// A node paused after our recovery sent its delete stays deleted until
// resume, every sweep says so in one WARNING record, and the time it was
// paused does not count toward the recovery's 24 h bound: resumed after 30
// hours, the recovery creates the node instead of abandoning it.
func TestPausedDeletedNodeStaysDeletedWarnedEverySweepAndPausedTimeIsNotCounted(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
	ctx := context.Background()
	if _, err := e.h.Handle(ctx, terminate("e1")); err != nil {
		t.Fatal(err)
	}
	if got := e.fake.Count("nodes.delete", nodeName); got != 1 {
		t.Fatalf("%d deletes, want 1", got)
	}
	pauseProject(t, e)
	for i, step := range []time.Duration{time.Minute, time.Minute, 30 * time.Hour} {
		e.clock.Advance(step)
		res := sweepZone(t, e)
		if got := len(warningsAbout(res.Records, nodeName)); got != 1 {
			t.Errorf("sweep %d: %d WARNING records about the paused, deleted node, want 1; records: %v", i, got, actions(res.Records))
		}
		for _, r := range warningsAbout(res.Records, nodeName) {
			if !strings.Contains(r.Reason, "left deleted while paused") {
				t.Errorf("sweep %d: WARNING reason %q, want it to say the node is left deleted while paused", i, r.Reason)
			}
		}
	}
	if got := e.fake.Count("nodes.create", nodeName); got != 0 {
		t.Fatalf("%d creates while paused, want 0 (the node stays deleted until resume)", got)
	}
	if _, err := e.store.ClearPause(ctx, remediate.Pause{Scope: remediate.PauseProject, Project: project}); err != nil {
		t.Fatal(err)
	}
	if left := e.settle(t); left != 0 {
		t.Fatalf("%d recoveries unfinished after resume", left)
	}
	h, err := e.store.History(ctx, nodeName, project, "", e.clock.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if rec := h.Recovery; rec == nil || rec.Phase != remediate.PhaseRecovered {
		t.Fatalf("recovery after resume: %+v, want recovered (30 h paused are not counted toward the 24 h bound)", rec)
	}
	if rec := h.Recovery; rec.Paused < 30*time.Hour {
		t.Errorf("Paused = %v, want at least the 30 h it was paused", rec.Paused)
	}
	if got := e.fake.Count("nodes.create", nodeName); got != 1 {
		t.Errorf("%d creates after resume, want 1", got)
	}
}

// A recovery that was never paused is still abandoned at 24 h.
func TestRecoveryAgeCountsAllButPausedTime(t *testing.T) {
	t0 := time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)
	rec := remediate.Recovery{StartedAt: t0}
	if got := remediate.RecoveryAge(rec, t0.Add(25*time.Hour)); got != 25*time.Hour {
		t.Errorf("age unpaused = %v, want 25h", got)
	}
	p := remediate.Pause{Scope: remediate.PauseProject, Project: project, Since: t0.Add(time.Hour)}
	rec.Paused = remediate.PausedTime(p, rec, t0.Add(11*time.Hour))
	if got := remediate.RecoveryAge(rec, t0.Add(25*time.Hour)); got != 15*time.Hour {
		t.Errorf("age after a 10 h pause = %v, want 15h", got)
	}
	// A pause older than the recovery counts from the recovery's start.
	old := remediate.Pause{Since: t0.Add(-5 * time.Hour)}
	if got := remediate.PausedTime(old, remediate.Recovery{StartedAt: t0}, t0.Add(2*time.Hour)); got != 2*time.Hour {
		t.Errorf("PausedTime of a pause older than the recovery = %v, want 2h", got)
	}
}
