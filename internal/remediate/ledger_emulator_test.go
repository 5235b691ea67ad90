//go:build emulator

package remediate_test

// Issue 3: recovery state is durable. These tests run the real Handler
// against the Firestore ledger on the emulator and the simulated TPU API:
// racing deliveries never double-act, a crash after any phase is finished
// with the identical spec, a node deleted by a person is never recreated,
// and a deferral is acted on after its grace period, not before.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
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
	remediate.SetStore(e.h, store)
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
			fs := ledger.NewFirestore(clients[i], ledger.WithPrefix(prefix), ledger.WithClock(clk.Now))
			h := remediate.Filled(&remediate.Handler{
				TPU:       tpuClient,
				Store:     fs,
				Lease:     fs,
				Histories: fs,
				Recorder:  &records{},
				Config:    cfg,
				Now:       clk.Now,
				Holder:    fmt.Sprintf("instance-%d", i),
			})
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
		// The later looks (a sweep's continuations) finish the recovery.
		fs := ledger.NewFirestore(clients[0], ledger.WithPrefix(prefix), ledger.WithClock(clk.Now))
		finisher := remediate.Filled(&remediate.Handler{TPU: tpuClient, Store: fs, Lease: fs, Histories: fs,
			Recorder: &records{}, Config: cfg, Now: clk.Now, Holder: "finisher"})
		if _, err := finisher.Drain(context.Background(), clk.Set, 20); err != nil {
			t.Fatalf("Drain: %v", err)
		}

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
	}{
		{"delete requested, its phase not written", remediate.PhaseDeleting, false},
		{"delete's phase written, delete not sent", remediate.PhaseDeleting, true},
		{"create's phase not written", remediate.PhaseCreating, false},
		{"create's phase written, create not sent", remediate.PhaseCreating, true},
		{"create succeeded", remediate.PhaseCreated, true},
	}
	for _, c := range crashes {
		t.Run("crash: "+c.after, func(t *testing.T) {
			e, store := fsEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
			ctx := context.Background()
			crash := &crashOnSave{Store: store, phase: c.phase, afterWrite: c.afterWrite}
			remediate.SetStore(e.h, crash)
			_, _ = e.h.Handle(ctx, terminate("e1"))
			if _, err := e.h.Drain(ctx, e.clock.Set, 60); err != nil {
				t.Fatalf("Drain: %v", err)
			}
			if !crash.crashed.Load() {
				t.Fatal("never crashed")
			}
			if u, err := store.Unfinished(ctx); err != nil || len(u) != 0 {
				t.Fatalf("unfinished recoveries = %+v, %v; want none", u, err)
			}
			got := nodeOf(t, e.fake, nodeName)
			want := userSpec(t, fullNode("TERMINATED"))
			want.Metadata["startup-script"] = script
			if diff := cmp.Diff(want, userSpec(t, got)); diff != "" {
				t.Errorf("recreated spec (-want +got):\n%s", diff)
			}
			if got.Labels[remediate.GenerationLabel] != "1" || e.fake.Succeeded("nodes.create") != 1 {
				t.Errorf("generation %q, successful creates %d; want 1 and 1", got.Labels[remediate.GenerationLabel], e.fake.Succeeded("nodes.create"))
			}
		})
	}
}

// TestFaultMatrixOnFirestore runs a subset of the fault matrix with the
// Firestore ledger.
func TestFaultMatrixOnFirestore(t *testing.T) {
	client := fsClient(t)
	newStore := func(clk func() time.Time) remediate.Store {
		return ledger.NewFirestore(client, ledger.WithPrefix(fsPrefix("matrix_")), ledger.WithClock(clk))
	}
	for _, c := range matrixCalls {
		for _, fl := range []matrixFault{codeFault(503), {name: "lost", rule: func(c matrixCall) tpufake.FailRule {
			return tpufake.FailRule{RPC: c.rpc, Of: c.of, Lost: true, Times: 1}
		}}} {
			crash := remediate.PhaseDeleting
			if c.reset {
				crash = remediate.PhaseResetting
			}
			t.Run(c.name+"/"+fl.name, func(t *testing.T) {
				res := runCellWith(t, c.reset, []tpufake.FailRule{fl.rule(c)}, crash, newStore)
				for _, p := range res.problems {
					t.Error(p)
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
	if err != nil || len(res.Records) != 1 || res.Records[0].Action != remediate.ActionRecreate {
		t.Fatalf("Sweep after the grace = %+v, %v; want one recreate", res.Records, err)
	}
	if _, err := e.h.Drain(ctx, e.clock.Set, 20); err != nil {
		t.Fatal(err)
	}
	if d, c := e.fake.Count("nodes.delete", nodeName), e.fake.Count("nodes.create", nodeName); d != 1 || c != 1 {
		t.Errorf("deletes %d creates %d; want 1 and 1", d, c)
	}
	if due, _ := store.DueDeferrals(ctx, e.clock.Now().Add(time.Hour)); len(due) != 0 {
		t.Errorf("deferrals after the recreate = %+v; want none", due)
	}
}

// TestFirestoreRecoveriesInTodaysShapeAreFinished writes recovery documents
// exactly as the ledger wrote them before Advance (no nextLookAt, no
// failures; phases saved, deleting, creating, failed) and checks a sweep's
// continuations finish each one with the saved spec.
func TestFirestoreRecoveriesInTodaysShapeAreFinished(t *testing.T) {
	specJSON, err := json.Marshal(remediate.CleanSpec(fullNode("TERMINATED")))
	if err != nil {
		t.Fatal(err)
	}
	rows := []struct {
		name   string
		node   bool // the node still exists (TERMINATED)
		fields map[string]any
	}{
		{"saved, delete not sent, node there", true, map[string]any{"phase": "saved", "deleteSent": false}},
		{"deleting, the operation of a gone process, node gone", false, map[string]any{"phase": "deleting", "deleteSent": true, "deleteOp": "projects/acme-ml/locations/us-central2-b/operations/operation-999"}},
		{"creating, its operation unknown, node gone", false, map[string]any{"phase": "creating", "deleteSent": true, "createOp": "projects/acme-ml/locations/us-central2-b/operations/operation-998"}},
		{"failed after our delete, node gone", false, map[string]any{"phase": "failed", "deleteSent": true, "lastError": "create: stockout"}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			f := tpufake.Fleet{}
			if row.node {
				f.Nodes = []*tpu.Node{fullNode("TERMINATED")}
			}
			e := newEnv(t, f)
			prefix := fsPrefix("oldshape_")
			client := fsClient(t)
			store := ledger.NewFirestore(client, ledger.WithPrefix(prefix), ledger.WithClock(e.clock.Now))
			remediate.SetStore(e.h, store)
			ctx := context.Background()
			old := start.Add(-2 * time.Hour)
			doc := map[string]any{
				"node": nodeName, "project": project, "action": "recreate", "spec": string(specJSON),
				"nodeId": int64(4721934471238), "queuedResource": "", "generation": 1, "holder": "gone-process",
				"leaseUntil": old.Add(15 * time.Minute), "leaseMillis": int64(15 * time.Minute / time.Millisecond),
				"deleteOp": "", "createOp": "", "attempts": 1, "eventId": "e0", "cause": "maintenance",
				"startedAt": old, "updatedAt": old, "lastError": "", "unfinished": true, "counted": true,
				"recreates": []time.Time{old},
			}
			for k, v := range row.fields {
				doc[k] = v
			}
			id := strings.ReplaceAll(nodeName, "/", "~")
			if _, err := client.Collection(prefix+ledger.CollectionRecoveries).Doc(id).Set(ctx, doc); err != nil {
				t.Fatal(err)
			}
			if _, err := client.Collection(prefix+ledger.CollectionProjects).Doc(project).Set(ctx, map[string]any{"project": project, "inFlight": []string{nodeName}}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.h.Drain(ctx, e.clock.Set, 40); err != nil {
				t.Fatalf("Drain: %v", err)
			}
			h, err := store.History(ctx, nodeName, project, "", e.clock.Now(), 24*time.Hour)
			if err != nil || h.Recovery == nil || h.Recovery.Phase != remediate.PhaseRecovered {
				t.Fatalf("recovery = %+v, %v; want recovered", h.Recovery, err)
			}
			got := nodeOf(t, e.fake, nodeName)
			want := userSpec(t, fullNode("TERMINATED"))
			want.Metadata["startup-script"] = script
			if diff := cmp.Diff(want, userSpec(t, got)); diff != "" {
				t.Errorf("recreated spec (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFirestoreLedgerRefusalIsPermanent(t *testing.T) {
	wantLedgerRefusalsClassified(t, ledger.NewFirestore(fsClient(t), ledger.WithPrefix(fsPrefix("refusal"))))
}
