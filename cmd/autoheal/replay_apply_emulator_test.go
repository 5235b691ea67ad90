//go:build emulator

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// TestReplayApplySecondRunResumesTheFirstOnFirestore: replay --apply
// --ledger-project keeps its recoveries in the Firestore ledger, as the
// function does: a first run stopped by --wait leaves the recovery there
// (spec included), and a second run over the same database resumes it and
// brings the node back, one delete and one create in all.
func TestReplayApplySecondRunResumesTheFirstOnFirestore(t *testing.T) {
	db, store := emulatorLedger(t)
	srv := applyServer(t, tpufake.WithOperationDelay("delete", 2*time.Second), tpufake.WithOperationDelay("create", time.Second))
	secrets := metadataValues(t, srv)
	file := applyEntry(t)
	withSealer(t)
	args := []string{"replay", "--tpu-endpoint", srv.URL(), "--apply", "--ledger-project", "host-proj", "--ledger-database", db, "--mac-key", testMACKey, "--look-again", "1s"}

	first := runCLI(t, nil, append(args, "--wait", "1s", file)...)
	if got := exitCodeOf(first.err, nil); got != exitNeedsPerson {
		t.Fatalf("first run: exit %d (%v), want %d\nstderr:\n%s", got, first.err, exitNeedsPerson, first.stderr)
	}
	if !strings.Contains(first.stderr, "--ledger-database "+db) || !strings.Contains(first.stderr, "run replay --apply again with the same ledger") {
		t.Errorf("first run does not say how to finish with the same ledger:\n%s", first.stderr)
	}
	un, err := store.Unfinished(context.Background())
	if err != nil || len(un) != 1 || un[0].Node != podNode || un[0].Spec == nil || un[0].Holder != replayHolder {
		t.Fatalf("Firestore after the first run: %+v, %v; want %s's recovery with its spec, held by %s", un, err, podNode, replayHolder)
	}

	second := runCLI(t, nil, append(args, file)...)
	if second.err != nil {
		t.Fatalf("second run: %v\nstdout:\n%s\nstderr:\n%s", second.err, second.stdout, second.stderr)
	}
	if !strings.Contains(second.stderr, "resuming 1 recovery") || !strings.Contains(second.stdout, "us-central2-b/llm-v4-128      recreate  recovered") {
		t.Errorf("second run did not resume and recover:\nstdout:\n%s\nstderr:\n%s", second.stdout, second.stderr)
	}
	if !strings.Contains(second.stdout, "already hand") {
		t.Errorf("second run decided the entry again (the ledger marks it handled):\n%s", second.stdout)
	}
	if s := nodeState(srv, podNode); s != "READY" {
		t.Errorf("%s is %s after the second run, want READY", podNode, s)
	}
	if d, c := srv.Count("nodes.delete", podNode), srv.Count("nodes.create", podNode); d != 1 || c != 1 {
		t.Errorf("%d deletes and %d creates of %s, want 1 and 1", d, c, podNode)
	}
	if un, err := store.Unfinished(context.Background()); err != nil || len(un) != 0 {
		t.Errorf("Firestore after the second run: %d unfinished, %v; want none", len(un), err)
	}
	for _, v := range secrets {
		if strings.Contains(first.stdout+first.stderr+second.stdout+second.stderr, v) {
			t.Errorf("a metadata value was printed: %.40q", v)
		}
	}
}
