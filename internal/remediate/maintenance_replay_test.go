package remediate

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

// The maintenance replay: a simulated training job on a two-worker node
// against the real Maintainer (decisions, ledger claims, patch, guest
// attributes, performMaintenance through a plain fake), one maintenance
// event after another, measuring the training progress lost per event.
//
// Assumptions (stated in the README with the figures):
//   - the job checkpoints every hour (Google's recommendation), at a
//     random phase; a checkpoint covers the progress up to when it started
//     and counts once written, CheckpointWrite later;
//   - the function looks at the node every SweepEvery (the scheduler's
//     sweep), at a random phase; a notice is first seen at the first look
//     after it appears (a compute.instances.upcomingMaintenance zone hint
//     would see it sooner: this is the conservative case);
//   - the guest watcher sees the notice in metadata at once (hanging GET),
//     starts a checkpoint then, and reports it when written;
//   - without early maintenance, the platform starts it at the window start;
//     with early maintenance it starts when performMaintenance is called;
//   - progress lost = when maintenance starts − the start of the last
//     checkpoint written by then; the restart time is the same in every
//     mode and left out.
type replayScenario struct {
	name            string
	lead            time.Duration // notice → window start
	mode            string
	checkpointEvery time.Duration
	checkpointWrite time.Duration
	sweepEvery      time.Duration
}

func replayMaintenance(t testing.TB, sc replayScenario, count int, seed uint64) (mean time.Duration, started int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	var total time.Duration
	for i := range count {
		base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 30 * 24 * time.Hour)
		phase := time.Duration(rng.Int64N(int64(sc.checkpointEvery)))
		look := time.Duration(rng.Int64N(int64(sc.sweepEvery)))
		noticeAt := base.Add(time.Duration(rng.Int64N(int64(24 * time.Hour))))
		windowStart := noticeAt.Add(sc.lead)

		node := maintNode("PENDING", "SCHEDULED", true, "", 2)
		node.UpcomingMaintenance.WindowStartTime = windowStart.Format(time.RFC3339)
		node.Metadata = map[string]string{ResumeOptInKey: "python3 train.py"}
		f := &fakeMaintTPU{node: node}
		now := noticeAt
		cfg := DefaultConfig()
		cfg.MaintenanceMode = sc.mode
		m := &Maintainer{TPU: f, Notices: memNotices{}, Config: cfg, Now: func() time.Time { return now }}

		var prepAt time.Time // when the guest started the notice's checkpoint
		hit := windowStart
		first := noticeAt.Truncate(sc.sweepEvery).Add(look)
		if first.Before(noticeAt) {
			first = first.Add(sc.sweepEvery)
		}
		for at := first; at.Before(windowStart); at = at.Add(sc.sweepEvery) {
			now = at
			if !prepAt.IsZero() && !at.Before(prepAt.Add(sc.checkpointWrite)) && len(f.attrs) == 0 {
				v, _ := json.Marshal(CheckpointReport{Notice: node.UpcomingMaintenance.WindowStartTime, Checkpoint: "gs://c", Time: prepAt.Format(time.RFC3339)})
				f.attrs = []GuestAttribute{{Worker: "0", Namespace: CheckpointNamespace, Key: CheckpointKey, Value: string(v)}, {Worker: "1", Namespace: CheckpointNamespace, Key: CheckpointKey, Value: string(v)}}
			}
			cur, _ := f.GetNode(context.Background(), node.Name)
			patches := len(f.patches)
			if _, _, err := m.Observe(context.Background(), events.Event{}, cur, ""); err != nil {
				t.Fatalf("observe: %v", err)
			}
			if len(f.patches) > patches && prepAt.IsZero() {
				prepAt = at
			}
			if len(f.maintains) > 0 {
				hit = at
				started++
				break
			}
			if sc.mode == MaintenanceOff || (sc.mode == MaintenancePrepare && !prepAt.IsZero()) {
				break // nothing else happens until the platform starts it
			}
		}
		// The last checkpoint written by hit: hourly ones, and the notice's.
		last := lastHourly(base, phase, sc.checkpointEvery, hit.Add(-sc.checkpointWrite))
		if !prepAt.IsZero() && !hit.Before(prepAt.Add(sc.checkpointWrite)) && prepAt.After(last) {
			last = prepAt
		}
		total += hit.Sub(last)
	}
	return total / time.Duration(count), started
}

// lastHourly is the start of the latest periodic checkpoint started at or
// before by (checkpoints at base+phase+k·every).
func lastHourly(base time.Time, phase, every time.Duration, by time.Time) time.Time {
	k := by.Sub(base.Add(phase)) / every
	t := base.Add(phase).Add(k * every)
	for t.After(by) {
		t = t.Add(-every)
	}
	return t
}

func replayScenarios() []replayScenario {
	var out []replayScenario
	for _, lead := range []struct {
		name string
		d    time.Duration
	}{{"SCHEDULED notice, 7 days ahead", 7 * 24 * time.Hour}, {"short notice, 20 minutes ahead", 20 * time.Minute}} {
		for _, mode := range []string{MaintenanceOff, MaintenancePrepare, MaintenanceEarly} {
			out = append(out, replayScenario{name: fmt.Sprintf("%s, mode %s", lead.name, mode), lead: lead.d, mode: mode,
				checkpointEvery: time.Hour, checkpointWrite: 2 * time.Minute, sweepEvery: 5 * time.Minute})
		}
	}
	return out
}

// TestMaintenanceReplayProgressLost prints the figures of the README and
// checks what the modes promise: early maintenance loses less than the
// platform's own timing, and mode off loses what an hourly checkpoint loses
// on average.
func TestMaintenanceReplayProgressLost(t *testing.T) {
	got := map[string]time.Duration{}
	for _, sc := range replayScenarios() {
		mean, started := replayMaintenance(t, sc, 300, 42)
		got[sc.name] = mean
		t.Logf("%-50s %6.1f min lost per event (%d/300 started early)", sc.name, mean.Minutes(), started)
		if sc.mode != MaintenanceEarly && started != 0 {
			t.Errorf("%s: %d maintenances started early in mode %s", sc.name, started, sc.mode)
		}
		if sc.mode == MaintenanceEarly && started != 300 {
			t.Errorf("%s: %d/300 started early, want all", sc.name, started)
		}
	}
	for _, lead := range []string{"SCHEDULED notice, 7 days ahead", "short notice, 20 minutes ahead"} {
		off, early := got[lead+", mode off"], got[lead+", mode early"]
		if early >= off/3 {
			t.Errorf("%s: early loses %s, off %s: want early well under off", lead, early, off)
		}
		if off < 20*time.Minute || off > 40*time.Minute {
			t.Errorf("%s: off loses %s, want about half the checkpoint interval", lead, off)
		}
	}
	if short, long := got["short notice, 20 minutes ahead, mode prepare"], got["SCHEDULED notice, 7 days ahead, mode prepare"]; short >= long {
		t.Errorf("prepare on short notice loses %s, on 7 days' %s: the notice's checkpoint should help on short notice", short, long)
	}
}

func BenchmarkMaintenanceReplay(b *testing.B) {
	for _, sc := range replayScenarios() {
		b.Run(sc.name, func(b *testing.B) {
			var mean time.Duration
			for i := range b.N {
				mean, _ = replayMaintenance(b, sc, 50, uint64(i))
			}
			b.ReportMetric(mean.Minutes(), "min-lost/event")
		})
	}
}
