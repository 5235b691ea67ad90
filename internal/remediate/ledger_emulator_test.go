//go:build emulator

package remediate_test

// Issue 3: recovery state is durable. These tests run the real Handler
// against the Firestore ledger on the emulator and the simulated TPU API:
// racing deliveries never double-act, a crash after any phase is finished
// with the identical spec, a node deleted by a person is never recreated,
// and a deferral is acted on after its grace period, not before.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/go-cmp/cmp"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/emulator"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

func TestMain(m *testing.M) { os.Exit(emulator.Main(m, emulator.Firestore)) }

const (
	fsProject  = "autoheal-test" // the emulator accepts any project and database
	fsDatabase = "tpu-autoheal"
	raceTrials = 50
	racers     = 64
)

var fsPrefixSeq atomic.Int64

// fsPrefix returns fresh collection names for one test or trial.
func fsPrefix(name string) string {
	return fmt.Sprintf("%s%d_", name, fsPrefixSeq.Add(1))
}

func fsClient(t *testing.T) *firestore.Client {
	t.Helper()
	emulator.Require(t, emulator.Firestore)
	c, err := firestore.NewClientWithDatabase(context.Background(), fsProject, fsDatabase)
	if err != nil {
		t.Fatalf("firestore client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// fsEnv is newEnv with the Firestore ledger in place of the in-memory one.
func fsEnv(t *testing.T, f tpufake.Fleet) (*env, *ledger.Firestore) {
	t.Helper()
	e := newEnv(t, f)
	store := ledger.NewFirestore(fsClient(t), ledger.WithPrefix(fsPrefix("issue3_")), ledger.WithClock(e.clock.Now))
	e.h.Store = store
	return e, store
}

func terminateNode(id, insertID string) events.Event {
	ev := terminate(insertID)
	ev.Node.Node = id
	return ev
}

func TestRacingDeliveriesRecreateOnce(t *testing.T) {
	clients := make([]*firestore.Client, racers) // one per racer, as separate instances
	for i := range clients {
		clients[i] = fsClient(t)
	}
	clk := &clock{now: start}
	fake := tpufake.New(tpufake.Fleet{}, tpufake.WithClock(clk.Now))
	t.Cleanup(fake.Close)
	svc, err := fake.Service(context.Background())
	if err != nil {
		t.Fatalf("fake service: %v", err)
	}
	tpuClient := tpuapi.New(svc)
	tpuClient.PollInterval = time.Millisecond
	cfg := remediate.DefaultConfig()
	cfg.StartupScript = script

	var doubles, errs, skips int
	for trial := 0; trial < raceTrials; trial++ {
		id := fmt.Sprintf("race-%d", trial)
		name := fmt.Sprintf("projects/%s/locations/%s/nodes/%s", project, zone, id)
		n := fullNode("TERMINATED")
		n.Name = name
		fake.SetNode(n)
		prefix := fsPrefix("race_")
		sameEvent := trial%2 == 0 // even trials: one event delivered 64 times; odd: 64 distinct entries (pod workers)

		var wg sync.WaitGroup
		var mu sync.Mutex
		var actions []remediate.Action
		var handleErrs []error
		startLine := make(chan struct{})
		for i := 0; i < racers; i++ {
			h := &remediate.Handler{
				TPU:      tpuClient,
				Store:    ledger.NewFirestore(clients[i], ledger.WithPrefix(prefix), ledger.WithClock(clk.Now)),
				Recorder: &records{},
				Config:   cfg,
				Now:      clk.Now,
				Holder:   fmt.Sprintf("instance-%d", i),
				Backoff:  remediate.Backoff{Initial: time.Millisecond, Max: 4 * time.Millisecond, Attempts: 4},
			}
			insertID := fmt.Sprintf("%s-ev", id)
			if !sameEvent {
				insertID = fmt.Sprintf("%s-ev-%d", id, i)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-startLine
				rec, err := h.Handle(context.Background(), terminateNode(id, insertID))
				mu.Lock()
				defer mu.Unlock()
				actions = append(actions, rec.Action)
				if err != nil {
					handleErrs = append(handleErrs, err)
				}
			}()
		}
		close(startLine)
		wg.Wait()

		deletes, creates := fake.Count("nodes.delete", name), fake.Count("nodes.create", name)
		if deletes != 1 || creates != 1 {
			doubles++
			t.Errorf("trial %d (same event %v): %d deletes, %d creates; want exactly 1 and 1 (actions %v)", trial, sameEvent, deletes, creates, actions)
		}
		if len(handleErrs) > 0 {
			errs += len(handleErrs)
			t.Errorf("trial %d: %d Handle errors, first: %v", trial, len(handleErrs), handleErrs[0])
		}
		recreates := 0
		for _, a := range actions {
			switch a {
			case remediate.ActionRecreate:
				recreates++
			case remediate.ActionSkip:
				skips++
			}
		}
		if recreates != 1 {
			t.Errorf("trial %d: %d handlers recorded recreate; want 1 (actions %v)", trial, recreates, actions)
		}
		got := nodeOf(t, fake, name)
		want := userSpec(t, n)
		want.Metadata["startup-script"] = script
		if diff := cmp.Diff(want, userSpec(t, got)); diff != "" {
			t.Errorf("trial %d: recreated spec (-want +got):\n%s", trial, diff)
		}
	}
	t.Logf("race: %d trials x %d concurrent Handle calls (own Firestore client each): double actions %d, Handle errors %d, skips %d",
		raceTrials, racers, doubles, errs, skips)
}

// crashOnSave crashes at the first Update that saves phase: before the
// write (the step before it ran, its result was never recorded) or after it
// (the phase is durable, the next step never ran).
type crashOnSave struct {
	remediate.Store
	phase      remediate.Phase
	afterWrite bool
	crashed    atomic.Bool
}

func (s *crashOnSave) Update(ctx context.Context, rec remediate.Recovery) error {
	if rec.Phase != s.phase || !s.crashed.CompareAndSwap(false, true) {
		return s.Store.Update(ctx, rec)
	}
	if s.afterWrite {
		if err := s.Store.Update(ctx, rec); err != nil {
			return err
		}
	}
	return errors.New("injected crash")
}

func TestCrashAfterAnyPhaseIsFinishedWithTheSameSpec(t *testing.T) {
	crashes := []struct {
		after      string
		phase      remediate.Phase
		afterWrite bool
		// A step whose result the crash lost is requested again: a second
		// delete meets a node already gone, a second create ALREADY_EXISTS.
		maxDeletes, maxCreates int
	}{
		{"claim, before the spec was saved", remediate.PhaseSaved, false, 1, 1},
		{"spec saved", remediate.PhaseSaved, true, 1, 1},
		{"delete requested, not yet recorded", remediate.PhaseDeleting, false, 2, 1},
		{"delete requested", remediate.PhaseDeleting, true, 1, 1},
		{"delete done", remediate.PhaseDeleted, true, 1, 1},
		{"create requested, not yet recorded", remediate.PhaseCreating, false, 1, 2},
		{"create requested", remediate.PhaseCreating, true, 1, 1},
	}
	for _, c := range crashes {
		for _, finisher := range []string{"redelivery", "sweep"} {
			t.Run(fmt.Sprintf("crash after %s finished by %s", c.after, finisher), func(t *testing.T) {
				e, store := fsEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
				ctx := context.Background()
				e.h.Store = &crashOnSave{Store: store, phase: c.phase, afterWrite: c.afterWrite}
				if _, err := e.h.Handle(ctx, terminate("e1")); err == nil {
					t.Fatal("Handle that crashed = nil error; want a transient error")
				}
				e.h.Store = store

				// While the lease is live, a redelivery must not touch the node.
				deletes, creates := e.fake.Count("nodes.delete", nodeName), e.fake.Count("nodes.create", nodeName)
				if rec, err := e.h.Handle(ctx, terminate("e2")); err != nil || rec.Action == remediate.ActionRecreate {
					t.Errorf("Handle during the live lease = %s %q, %v; want no recreate", rec.Action, rec.Reason, err)
				}
				if d, c := e.fake.Count("nodes.delete", nodeName), e.fake.Count("nodes.create", nodeName); d != deletes || c != creates {
					t.Errorf("TPU calls during the live lease: deletes %d→%d creates %d→%d; want none", deletes, d, creates, c)
				}

				e.clock.Advance(remediate.DefaultConfig().Lease + time.Second)
				switch finisher {
				case "redelivery":
					if _, err := e.h.Handle(ctx, terminate("e3")); err != nil {
						t.Fatalf("redelivery after the lease expired: %v", err)
					}
				case "sweep":
					if _, err := e.h.Sweep(ctx, remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone}}); err != nil {
						t.Fatalf("Sweep after the lease expired: %v", err)
					}
				}
				if u, err := store.Unfinished(ctx); err != nil || len(u) != 0 {
					t.Fatalf("unfinished recoveries after the %s = %+v, %v; want none", finisher, u, err)
				}
				got := nodeOf(t, e.fake, nodeName)
				want := userSpec(t, fullNode("TERMINATED"))
				want.Metadata["startup-script"] = script
				if diff := cmp.Diff(want, userSpec(t, got)); diff != "" {
					t.Errorf("recreated spec (-want +got):\n%s", diff)
				}
				if got.Labels[remediate.GenerationLabel] != "1" {
					t.Errorf("generation label = %q; want 1 (one recreate)", got.Labels[remediate.GenerationLabel])
				}
				if d := e.fake.Count("nodes.delete", nodeName); d < 1 || d > c.maxDeletes {
					t.Errorf("delete requests = %d; want 1..%d", d, c.maxDeletes)
				}
				if cr := e.fake.Count("nodes.create", nodeName); cr < 1 || cr > c.maxCreates {
					t.Errorf("create requests = %d; want 1..%d", cr, c.maxCreates)
				}
			})
		}
	}
}

func TestNodeDeletedByAPersonIsNeverRecreated(t *testing.T) {
	e, _ := fsEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("READY")}})
	ctx := context.Background()
	e.fake.DeleteNodeNow(nodeName)
	rec, err := e.h.Handle(ctx, terminate("e1"))
	if err != nil || rec.Action != remediate.ActionRecord {
		t.Errorf("Handle for a node gone without our recovery = %s %q, %v; want record", rec.Action, rec.Reason, err)
	}
	e.clock.Advance(time.Hour)
	if _, err := e.h.Sweep(ctx, remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone}}); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if c := e.fake.Count("nodes.create", nodeName); c != 0 {
		t.Errorf("creates of a node a person deleted = %d; want 0", c)
	}
	if n := nodeOf(t, e.fake, nodeName); n != nil {
		t.Errorf("node = %+v; want it to stay deleted", n)
	}
}

func TestDeferralIsActedOnAfterTheGraceNotBefore(t *testing.T) {
	n := fullNode("READY")
	n.Health, n.HealthDescription = "UNHEALTHY_TENSORFLOW", ""
	e, store := fsEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{n}})
	ctx := context.Background()
	rec, err := e.h.Handle(ctx, terminate("e1"))
	if err != nil || rec.Action != remediate.ActionDefer {
		t.Fatalf("Handle = %s %q, %v; want defer", rec.Action, rec.Reason, err)
	}
	grace := remediate.DefaultConfig().UnhealthyGrace
	if due, err := store.DueDeferrals(ctx, e.clock.Now().Add(grace)); err != nil || len(due) != 1 {
		t.Fatalf("deferrals in Firestore = %+v, %v; want one", due, err)
	}
	opts := remediate.SweepOptions{Projects: []string{project}} // no zones: deferrals only
	e.clock.Advance(grace - time.Minute)
	if res, err := e.h.Sweep(ctx, opts); err != nil || len(res.Records) != 0 {
		t.Fatalf("Sweep before the grace = %+v, %v; want nothing due", res.Records, err)
	}
	if c := e.fake.Count("nodes.delete", nodeName); c != 0 {
		t.Fatalf("deletes before the grace = %d; want 0", c)
	}
	e.clock.Advance(2 * time.Minute)
	res, err := e.h.Sweep(ctx, opts)
	if err != nil || len(res.Records) != 1 || res.Records[0].Action != remediate.ActionRecreate || res.Records[0].Phase != remediate.PhaseDone {
		t.Fatalf("Sweep after the grace = %+v, %v; want one finished recreate", res.Records, err)
	}
	if d, c := e.fake.Count("nodes.delete", nodeName), e.fake.Count("nodes.create", nodeName); d != 1 || c != 1 {
		t.Errorf("deletes %d creates %d; want 1 and 1", d, c)
	}
	if due, _ := store.DueDeferrals(ctx, e.clock.Now().Add(time.Hour)); len(due) != 0 {
		t.Errorf("deferrals after the recreate = %+v; want none", due)
	}
}
