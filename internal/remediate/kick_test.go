package remediate_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// countingKicker counts the kicks tried; fail makes each one fail.
type countingKicker struct {
	mu    sync.Mutex
	tries int
	fail  error
}

var _ remediate.Kicker = (*countingKicker)(nil)

func (k *countingKicker) Kick(context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.tries++
	return k.fail
}

func (k *countingKicker) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.tries
}

// kickEngine is an engine built by New on a memory ledger (its follower
// lease and kick claim) with kicker k, logging into the returned buffer.
func kickEngine(t *testing.T, k remediate.Kicker) (*remediate.Handler, *bytes.Buffer) {
	t.Helper()
	clk := &clock{now: start}
	var log bytes.Buffer
	h, err := remediate.New(remediate.Deps{TPU: nilTPU{}, Recorder: &records{}, Kicker: k, Clock: clk.Now,
		Log: slog.New(slog.NewJSONHandler(&log, nil))}.WithLedger(ledger.NewMemory(ledger.WithClock(clk.Now))), remediate.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return h, &log
}

// The kick policy's failure path: a publish that fails releases the kick
// claim (KickFailed), so the next delivery kicks again rather than wait
// KickPending for a kick that never went out; the failure is a warning on
// the engine's logger, never the delivery's error.
func TestFailedKickReleasesTheClaim(t *testing.T) {
	ctx := context.Background()
	left := remediate.Record{Node: nodeName, Action: remediate.ActionRecreate, Phase: remediate.PhaseDeleting}

	ok := &countingKicker{}
	h, log := kickEngine(t, ok)
	h.KickAfter(ctx, left)
	h.KickAfter(ctx, left)
	if got := ok.count(); got != 1 {
		t.Errorf("published kicks after two deliveries = %d, want 1 (the first kick's claim is pending)", got)
	}
	if !strings.Contains(log.String(), "follow kick published (delivery)") {
		t.Errorf("log does not say the kick was published:\n%s", log)
	}

	failing := &countingKicker{fail: errors.New("pubsub: permission denied")}
	h, log = kickEngine(t, failing)
	h.KickAfter(ctx, left)
	h.KickAfter(ctx, left)
	if got := failing.count(); got != 2 {
		t.Errorf("kicks tried after two deliveries whose publish failed = %d, want 2 (a failed kick releases its claim)", got)
	}
	if !h.KickWanted(ctx, left) {
		t.Error("after failed kicks the claim is still held: KickWanted = false")
	}
	for _, want := range []string{"follow kick not published", "permission denied", `"event":"follow-kick"`, `"why":"delivery"`, `"level":"WARN"`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
}

// No kicker, no kick: KickAfter claims nothing, so a kicker-less engine
// leaves the claim to one that has a kicker.
func TestNoKickerClaimsNothing(t *testing.T) {
	ctx := context.Background()
	h, _ := kickEngine(t, nil)
	left := remediate.Record{Node: nodeName, Action: remediate.ActionRecreate, Phase: remediate.PhaseDeleting}
	h.KickAfter(ctx, left)
	h.KickChain(ctx, true)
	if !h.KickWanted(ctx, left) {
		t.Error("KickAfter without a kicker claimed the kick")
	}
}

// nilTPU is a backend that is never called (the kick tests make no TPU call).
type nilTPU struct{ remediate.TPU }
