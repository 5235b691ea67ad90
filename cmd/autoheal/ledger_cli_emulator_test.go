//go:build emulator

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/tpu-autoheal/autoheal/internal/emulator"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// TestMain starts the Firestore emulator; FIRESTORE_EMULATOR_HOST then
// points the commands' own Firestore client at it.
func TestMain(m *testing.M) { os.Exit(emulator.Main(m, emulator.Firestore)) }

var emulatorDB atomic.Int64

// emulatorLedger returns a fresh database id on the emulator (which accepts
// any) and a store on it, as the deployed function would see it.
func emulatorLedger(t *testing.T) (string, *ledger.Firestore) {
	t.Helper()
	emulator.Require(t, emulator.Firestore)
	db := fmt.Sprintf("cli-%d-%d", time.Now().UnixNano(), emulatorDB.Add(1))
	c, err := firestore.NewClientWithDatabase(context.Background(), "host-proj", db)
	if err != nil {
		t.Fatalf("firestore client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return db, ledger.NewFirestore(c)
}

func TestLedgerCommandsAgainstTheFirestoreEmulator(t *testing.T) {
	db, store := emulatorLedger(t)
	ctx := context.Background()
	lf := []string{"--ledger-project", "host-proj", "--ledger-database", db}
	cmd := func(args ...string) string {
		t.Helper()
		out, err := runLedgerCmd(t, append(args, lf...)...)
		if err != nil {
			t.Fatalf("autoheal %s: %v", strings.Join(args, " "), err)
		}
		return out
	}

	cmd("pause", "--zone", "us-central2-b", "--reason", "INC-9 zone incident", "--by", "alice")
	_, err := store.Claim(ctx, claimReq(cliNode, time.Now()))
	if !errors.Is(err, remediate.ErrPaused) || !strings.HasPrefix(err.Error(), "paused by alice: INC-9 zone incident") {
		t.Errorf("function's claim while paused: %v; want refused, paused by alice", err)
	}
	h, err := store.History(ctx, cliNode, "proj-a", "", time.Now(), time.Hour)
	if err != nil || h.Pause == nil || h.Pause.Scope != remediate.PauseZone {
		t.Errorf("History.Pause = %+v, %v; want the zone pause", h.Pause, err)
	}
	if out := cmd("status"); !strings.Contains(out, "pauses: 1\n  zone us-central2-b (every project)  by alice") {
		t.Errorf("status lacks the pause:\n%s", out)
	}
	cmd("resume", "--zone", "us-central2-b")
	if _, err := store.Claim(ctx, claimReq(cliNode, time.Now())); err != nil {
		t.Fatalf("claim after resume: %v", err)
	}

	// Open the breaker with a limit of 1, see it in status, reset it.
	r := claimReq(cliNodeB, time.Now())
	r.Config.BreakerLimit = 1
	var open *remediate.BreakerOpenError
	if _, err := store.Claim(ctx, r); !errors.As(err, &open) || !open.Tripped {
		t.Fatalf("claim past a limit of 1: %v; want a tripped breaker", err)
	}
	if out := cmd("status", "--breaker", "1/1h"); !strings.Contains(out, "open breakers: 1\n  zone us-central2-b: 1 starts within 1h (limit 1)") {
		t.Errorf("status lacks the open breaker:\n%s", out)
	}
	cmd("breaker", "reset", "--zone", "us-central2-b")
	if out := cmd("status", "--breaker", "1/1h"); !strings.Contains(out, "open breakers: 0") {
		t.Errorf("status after reset still lists an open breaker:\n%s", out)
	}
	if _, err := store.Claim(ctx, r); err != nil {
		t.Errorf("claim after breaker reset: %v", err)
	}
	if out := cmd("status", "--format", "json"); !strings.Contains(out, `"unfinished": [`) || !strings.Contains(out, cliNodeB) {
		t.Errorf("status JSON lacks the unfinished recoveries:\n%s", out)
	}
}
