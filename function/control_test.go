package function_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// pushWithID is a push body of data with the Pub/Sub message id id.
func pushWithID(data []byte, id string) []byte {
	b, _ := json.Marshal(map[string]any{
		"message":      map[string]any{"data": base64.StdEncoding.EncodeToString(data), "messageId": id},
		"subscription": "projects/acme-ops/subscriptions/tpu-autoheal-push",
	})
	return b
}

// flakyLedger is the memory ledger whose list of unfinished recoveries
// fails while fail is set: a sweep then fails and is redelivered.
type flakyLedger struct {
	*ledger.Memory
	fail *atomic.Bool
}

func (l flakyLedger) Unfinished(ctx context.Context) ([]remediate.Recovery, error) {
	if l.fail.Load() {
		return nil, errors.New("firestore unavailable")
	}
	return l.Memory.Unfinished(ctx)
}

type controlEnv struct {
	fn    *function.Function
	lists func() int // TPU nodes.list calls so far: a sweep acted on lists
	now   *time.Time
	diag  *syncBuffer
}

func newControlEnv(t *testing.T, store function.Ledger, k function.Kicker) controlEnv {
	t.Helper()
	fake, tc := newFleetTPU(t)
	env := fleetEnv()
	env["AUTOHEAL_MAX_EVENT_AGE"] = "87600h"
	cfg, err := load(t, env)
	if err != nil {
		t.Fatal(err)
	}
	clk := eventTime.Add(time.Minute)
	diag := &syncBuffer{}
	opts := []function.Option{function.WithDiagnostics(diag), function.WithTPU(tc), function.WithStore(store),
		function.WithRecorder(&sliceRecorder{}), function.WithClock(func() time.Time { return clk })}
	if k != nil {
		opts = append(opts, function.WithKicker(k))
	}
	fn, err := function.New(context.Background(), cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fn.Close() })
	return controlEnv{fn: fn, lists: func() int { return fake.Count("nodes.list", "") }, now: &clk, diag: diag}
}

// sweep delivers sweep message id at offset after the env's start and
// reports whether it was acted on (it listed nodes).
func (e controlEnv) sweep(t *testing.T, id string, at time.Duration) (acted bool, err error) {
	t.Helper()
	*e.now = eventTime.Add(time.Minute + at)
	before := e.lists()
	err = e.fn.HandleMessage(context.Background(), pushWithID([]byte(events.SweepMessage), id))
	return e.lists() > before, err
}

func TestSweepWithinTheMinimumIntervalIsCountedNotActedOn(t *testing.T) {
	e := newControlEnv(t, ledger.NewMemory(), nil)
	for _, step := range []struct {
		name    string
		id      string
		at      time.Duration
		acted   bool
		ignored int64
	}{
		{"the scheduled sweep", "m1", 0, true, 0},
		{"a second sweep 10s later", "m2", 10 * time.Second, false, 1},
		{"a third 20s later", "m3", 20 * time.Second, false, 2},
		{"the next scheduled sweep, a minute later", "m4", time.Minute, true, 2},
	} {
		acted, err := e.sweep(t, step.id, step.at)
		if err != nil {
			t.Fatalf("%s: %v (a sweep not acted on is acknowledged)", step.name, err)
		}
		if sweeps, _ := e.fn.Ignored(); acted != step.acted || sweeps != step.ignored {
			t.Errorf("%s: acted on %v, ignored %d; want %v, %d", step.name, acted, sweeps, step.acted, step.ignored)
		}
	}
	if !strings.Contains(e.diag.String(), `"event":"control-ignored"`) {
		t.Errorf("no control-ignored diagnostic line:\n%s", e.diag.String())
	}
}

func TestRedeliveredUnfinishedSweepIsActedOn(t *testing.T) {
	fail := &atomic.Bool{}
	fail.Store(true)
	e := newControlEnv(t, flakyLedger{Memory: ledger.NewMemory(), fail: fail}, nil)
	if _, err := e.sweep(t, "m1", 0); err == nil {
		t.Fatal("the first sweep did not fail: nothing to redeliver")
	}
	if acted, err := e.sweep(t, "m2", 5*time.Second); acted || err != nil {
		t.Errorf("another sweep while m1 is unfinished: acted %v, err %v; want acknowledged, not acted on", acted, err)
	}
	fail.Store(false)
	acted, err := e.sweep(t, "m1", 10*time.Second)
	if !acted || err != nil {
		t.Errorf("the redelivery of unfinished m1: acted %v, err %v; want acted on", acted, err)
	}
	if acted, _ := e.sweep(t, "m1", 15*time.Second); acted {
		t.Error("a redelivery of m1 after it completed was acted on")
	}
	if sweeps, _ := e.fn.Ignored(); sweeps != 2 {
		t.Errorf("ignored sweeps = %d, want 2", sweeps)
	}
}

func TestFollowMessageNeedsAnIssuedUnusedNonce(t *testing.T) {
	k := &fakeKicker{}
	e := newControlEnv(t, ledger.NewMemory(), k)
	ctx := context.Background()
	// A delivery that leaves a recovery waiting kicks, with a nonce.
	if err := e.fn.HandleMessage(ctx, pushBody(readTestdata(t, "terminate-maintenance.json"))); err != nil {
		t.Fatal(err)
	}
	if k.count() != 1 {
		t.Fatalf("kicks = %d, want 1", k.count())
	}
	for _, step := range []struct {
		name    string
		msg     []byte
		ignored int64
	}{
		{"a follow message with no nonce", []byte(events.FollowMessage), 1},
		{"a follow message with an unknown nonce", []byte(events.FollowKick(ledger.NewNonce())), 2},
		{"the kick's own message", k.last(), 2},
		{"the kick's message again (nonce used)", k.last(), 3},
	} {
		if err := e.fn.HandleMessage(ctx, pushBody(step.msg)); err != nil {
			t.Fatalf("%s: %v (a follow message is always acknowledged)", step.name, err)
		}
		if _, follows := e.fn.Ignored(); follows != step.ignored {
			t.Errorf("%s: ignored follows = %d, want %d", step.name, follows, step.ignored)
		}
	}
}
