package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/seal"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// keptSlices is an instance store as the instance path leaves it: a 4-VM
// MIG slice broken since at with a recreateInstances operation without a
// verdict and a start whose answer was lost, and trainer-a healthy again
// after a start, its host reported faulty once.
func keptSlices(t *testing.T, at time.Time) *computevm.Memory {
	t.Helper()
	m := computevm.NewMemory()
	ctx := context.Background()
	set := func(key string, s computevm.SliceState) {
		if err := m.SetSlice(ctx, key, s); err != nil {
			t.Fatal(err)
		}
	}
	set("projects/acme-ml/zones/us-central1-c/instances/trainer-a", computevm.SliceState{
		Incident: vmpolicy.Incident{Action: vmpolicy.ActionStart, At: at},
		Faulty:   []computevm.FaultyReport{{Instance: trainerA, At: at.Add(-time.Hour), Operation: "op-f"}},
	})
	set("projects/acme-ml/zones/us-central1-c/instanceGroupManagers/slice-mig", computevm.SliceState{
		Since:      at,
		Incident:   vmpolicy.Incident{Action: vmpolicy.ActionRecreateInstances, At: at.Add(time.Minute)},
		Operations: []string{"projects/acme-ml/zones/us-central1-c/operations/op-1"},
		Unknown:    []computevm.UnknownCall{{Instance: "projects/acme-ml/zones/us-central1-c/instances/slice-mig-w1", Action: vmpolicy.ActionStart, At: at, Reads: 2}},
	})
	return m
}

// status lists the instance slices the instance path keeps, broken first,
// in JSON and in text, beside the nodes' ledger.
func TestStatusListsInstanceSlices(t *testing.T) {
	withLedger(t, ledger.NewMemory())
	at := time.Date(2026, 11, 20, 3, 44, 36, 0, time.UTC)
	withInstanceSlices(t, keptSlices(t, at))

	rep := statusJSON(t)
	since, last, started := at, at.Add(time.Minute), at
	want := []statusSlice{
		{
			Slice: "projects/acme-ml/zones/us-central1-c/instanceGroupManagers/slice-mig", Broken: true, BrokenSince: &since,
			LastAction: "recreateInstances", LastActionAt: &last,
			Operations: []string{"projects/acme-ml/zones/us-central1-c/operations/op-1"},
			Unknown:    []statusUnknownCall{{Instance: "projects/acme-ml/zones/us-central1-c/instances/slice-mig-w1", Action: "start", SentAt: at, Reads: 2}},
			Faulty:     []statusFaultyHost{}, Maintained: []statusMaintained{},
		},
		{
			Slice: trainerA, LastAction: "start", LastActionAt: &started,
			Operations: []string{}, Unknown: []statusUnknownCall{},
			Faulty: []statusFaultyHost{{Instance: trainerA, At: at.Add(-time.Hour), Operation: "op-f"}}, Maintained: []statusMaintained{},
		},
	}
	if diff := cmp.Diff(want, rep.InstanceSlices); diff != "" {
		t.Errorf("status instanceSlices (-want +got):\n%s", diff)
	}

	out, err := runLedgerCmd(t, "status", "--ledger-project", "host-proj")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"\ninstance slices: 2 (1 broken)\n",
		"\n  us-central1-c/slice-mig  BROKEN since 2026-11-20T03:44:36Z; last recreateInstances at 2026-11-20T03:45:36Z; 1 operation without a verdict: projects/acme-ml/zones/us-central1-c/operations/op-1; outcome unknown: start of us-central1-c/slice-mig-w1 sent 2026-11-20T03:44:36Z (2 looks since)\n",
		"\n  us-central1-c/trainer-a  healthy when last looked at; last start at 2026-11-20T03:44:36Z; host of us-central1-c/trainer-a reported faulty 2026-11-20T02:44:36Z\n",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("status text lacks %q:\n%s", w, out)
		}
	}
}

// What the instance path itself keeps after a host error on the opted-in
// TPU7x VM (start sent, the slice not yet seen RUNNING again) is what status
// shows: that slice, broken, last start.
func TestStatusShowsWhatTheInstancePathKept(t *testing.T) {
	csrv, entries := brokenInstances(t)
	defer csrv.Close()
	ctx := context.Background()
	client, err := computevm.NewFromOptions(ctx, csrv.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	vms := computevm.NewMemory()
	vm := instancePath(client, vms, ledger.NewMemory(), discardRecorder{}, remediate.DefaultConfig(), time.Now, seal.RandomLocalKeys(), "test")
	ev, err := events.Parse([]byte(strings.SplitN(entries, "\n", 2)[0]), events.Options{AcceptMissingLogName: true, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := vm.HandleEvent(ctx, ev)
	if err != nil || len(recs) == 0 || recs[len(recs)-1].Action != "start" {
		t.Fatalf("HandleEvent = %+v, %v; want a start", recs, err)
	}
	withLedger(t, ledger.NewMemory())
	withInstanceSlices(t, vms)
	rep := statusJSON(t)
	if len(rep.InstanceSlices) != 1 {
		t.Fatalf("%d instance slices, want 1 (trainer-a): %+v", len(rep.InstanceSlices), rep.InstanceSlices)
	}
	s := rep.InstanceSlices[0]
	if s.Slice != trainerA || !s.Broken || s.LastAction != "start" || s.LastActionAt == nil {
		t.Errorf("instance slice %+v, want trainer-a broken, last start at a time", s)
	}
}
