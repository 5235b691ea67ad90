package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/seal"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// applyEntry writes a terminate entry of podNode dated a minute ago (so
// that --clock wall and the entry agree) and returns its file.
func applyEntry(t *testing.T) string {
	t.Helper()
	entry, _ := json.Marshal(map[string]any{
		"protoPayload": map[string]any{
			"serviceName": "tpu.googleapis.com", "methodName": "tpu.nodes.terminate", "resourceName": podNode,
			"authenticationInfo": map[string]any{"principalEmail": "system@google.com"},
			"metadata":           map[string]any{"terminateReason": "Terminated due to a maintenance event"},
		},
		"insertId":  "replay-apply-resume-1",
		"timestamp": time.Now().UTC().Add(-time.Minute).Format(time.RFC3339Nano),
		"logName":   "projects/acme-ml/logs/cloudaudit.googleapis.com%2Fsystem_event",
		"resource":  map[string]any{"type": "audited_resource", "labels": map[string]string{"project_id": "acme-ml"}},
	})
	file := filepath.Join(t.TempDir(), "entry.json")
	if err := os.WriteFile(file, entry, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// applyServer is the bundled fleet behind a TPU v2 API whose operations take
// real time.
func applyServer(t *testing.T, opts ...tpufake.Option) *tpufake.Server {
	t.Helper()
	fleet, err := tpufake.ReadFleetFile(fleetFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := tpufake.New(fleet, opts...)
	t.Cleanup(srv.Close)
	return srv
}

func nodeState(srv *tpufake.Server, name string) string {
	for _, n := range srv.Fleet().Nodes {
		if n.Name == name {
			return n.State
		}
	}
	return "NOT_FOUND"
}

// metadataValues are the bundled fleet's metadata values of podNode: never
// printed.
func metadataValues(t *testing.T, srv *tpufake.Server) []string {
	t.Helper()
	var vs []string
	for _, n := range srv.Fleet().Nodes {
		if n.Name == podNode {
			for _, v := range n.Metadata {
				if len(v) > 8 {
					vs = append(vs, v)
				}
			}
		}
	}
	if len(vs) == 0 {
		t.Fatalf("%s has no metadata: the check of printed values tests nothing", podNode)
	}
	return vs
}

// An interrupt (Ctrl-C) during the wall-clock continuation stops it where
// it is: the outcome is unfinished, the exit is 5 (needs a person), stderr
// says how to finish, and no metadata value is printed.
func TestReplayApplyInterruptedExitsFiveAndSaysHowToFinish(t *testing.T) {
	srv := applyServer(t, tpufake.WithOperationDelay("delete", time.Hour))
	secrets := metadataValues(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	old := waitFor
	waitFor = func(context.Context, time.Duration) bool { cancel(); return false } // Ctrl-C during the first wait
	t.Cleanup(func() { waitFor = old })

	var out, errOut bytes.Buffer
	err := run(ctx, []string{"replay", "--tpu-endpoint", srv.URL(), "--apply", "--format", "json", applyEntry(t)}, strings.NewReader(""), &out, &errOut)
	if got := exitCodeOf(err, nil); got != exitNeedsPerson {
		t.Fatalf("exit %d (%v), want %d (needs a person)\nstderr:\n%s", got, err, exitNeedsPerson, errOut.String())
	}
	outs, sum := parseOutput(t, out.String())
	if len(outs) != 1 || outs[0].Outcome != outcomeUnfinished || outs[0].Phase != string(remediate.PhaseDeleting) {
		t.Errorf("outcomes = %+v, want one unfinished in phase deleting", outs)
	}
	if sum.ExitCode != exitNeedsPerson {
		t.Errorf("summary exit code %d, want %d", sum.ExitCode, exitNeedsPerson)
	}
	for _, want := range []string{"autoheal: us-central2-b/llm-v4-128: recreate in phase deleting, ", " elapsed, next look in ", "interrupted with 1 recovery unfinished: us-central2-b/llm-v4-128 (phase deleting)", "--ledger-project", "replay --apply", "in memory"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	for _, v := range secrets {
		if strings.Contains(out.String()+errOut.String(), v) {
			t.Errorf("a metadata value was printed: %.40q", v)
		}
	}
}

// With --ledger-project the recoveries are in the function's ledger: a run
// stopped by --wait exits 5 and names the command that finishes it; that
// command (a second run over the same ledger) resumes the recovery and
// brings the node back, with one delete and one create in all.
func TestReplayApplyWithTheLedgerResumesWhatAStoppedRunLeft(t *testing.T) {
	store := ledger.NewMemory()
	withLedger(t, store)
	srv := applyServer(t, tpufake.WithOperationDelay("delete", 2*time.Second), tpufake.WithOperationDelay("create", time.Second))
	file := applyEntry(t)
	withSealer(t)
	args := []string{"replay", "--tpu-endpoint", srv.URL(), "--apply", "--ledger-project", "host-proj", "--mac-key", testMACKey, "--look-again", "1s"}

	first := runCLI(t, nil, append(args, "--wait", "1s", file)...)
	if got := exitCodeOf(first.err, nil); got != exitNeedsPerson {
		t.Fatalf("first run: exit %d (%v), want %d\nstderr:\n%s", got, first.err, exitNeedsPerson, first.stderr)
	}
	if s := nodeState(srv, podNode); s == "READY" {
		t.Fatalf("first run left %s READY: --wait 1s did not stop it before the 2 s delete ended", podNode)
	}
	for _, want := range []string{"--wait 1s ends before the next look", "run replay --apply again with the same ledger", "--ledger-project host-proj"} {
		if !strings.Contains(first.stderr, want) {
			t.Errorf("first run's stderr lacks %q:\n%s", want, first.stderr)
		}
	}
	un, err := store.Unfinished(context.Background())
	if err != nil || len(un) != 1 || un[0].Holder != replayHolder || un[0].Spec == nil {
		t.Fatalf("ledger after the first run: %+v, %v; want the recovery, held by %s, with its spec", un, err, replayHolder)
	}

	second := runCLI(t, nil, append(args, file)...)
	if second.err != nil {
		t.Fatalf("second run: %v\nstdout:\n%s\nstderr:\n%s", second.err, second.stdout, second.stderr)
	}
	if !strings.Contains(second.stderr, "resuming 1 recovery an earlier replay left unfinished") {
		t.Errorf("second run does not say it resumes:\n%s", second.stderr)
	}
	if !strings.Contains(second.stdout, "us-central2-b/llm-v4-128      recreate  recovered") {
		t.Errorf("second run does not end with the recovery recovered:\n%s", second.stdout)
	}
	if s := nodeState(srv, podNode); s != "READY" {
		t.Errorf("%s is %s after the second run, want READY", podNode, s)
	}
	if d, c := srv.Count("nodes.delete", podNode), srv.Count("nodes.create", podNode); d != 1 || c != 1 {
		t.Errorf("%d deletes and %d creates of %s, want 1 and 1", d, c, podNode)
	}
}

func TestReplayApplyFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ledger-project", "host-proj"}, "--ledger-project needs --apply"},
		{[]string{"--ledger-project", "host-proj", "--fleet", fleetFile}, "not to the simulated --fleet"},
		{[]string{"--ledger-project", "host-proj", "--apply", "--clock", "event"}, "--clock wall"},
		{[]string{"--ledger-database", "db"}, "--ledger-database needs --ledger-project"},
		{[]string{"--wait", "-1s"}, "--wait"},
		{[]string{"--ledger-project", "host-proj", "--apply", "--tpu-endpoint", "http://127.0.0.1:1"}, "--ledger-project needs --mac-key"},
		{[]string{"--mac-key", "projects/p/locations/l/keyRings/r/cryptoKeys/k/cryptoKeyVersions/1"}, "--mac-key needs --ledger-project"},
	} {
		r := runCLI(t, nil, append(append([]string{"replay"}, tc.args...), "-")...)
		if got := exitCodeOf(r.err, nil); got != exitUsage || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("replay %q: exit %d %v, want a usage error saying %q", tc.args, got, r.err, tc.want)
		}
	}
}

func TestParseOpTimes(t *testing.T) {
	got, err := parseOpTimes("2s")
	if err != nil || got["delete"] != 2*time.Second || got["create"] != 2*time.Second || got["reset"] != 2*time.Second {
		t.Errorf("parseOpTimes(2s) = %v, %v; want 2s for every verb", got, err)
	}
	got, err = parseOpTimes("delete=1s,create=3s")
	if err != nil || got["delete"] != time.Second || got["create"] != 3*time.Second || len(got) != 2 {
		t.Errorf("parseOpTimes(delete=1s,create=3s) = %v, %v", got, err)
	}
	if got, err := parseOpTimes(""); got != nil || err != nil {
		t.Errorf(`parseOpTimes("") = %v, %v; want nil (done at once)`, got, err)
	}
	for _, bad := range []string{"soon", "-1s", "delete=x", "stop=1s"} {
		if _, err := parseOpTimes(bad); err == nil {
			t.Errorf("parseOpTimes(%q) = nil error", bad)
		}
	}
}

// countingStore fails Unfinished after limit calls: a continuation that
// reads the ledger that often without waiting is spinning.
type countingStore struct {
	*ledger.Memory
	calls, limit int
}

func (s *countingStore) Unfinished(ctx context.Context) ([]remediate.Recovery, error) {
	if s.calls++; s.calls > s.limit {
		return nil, errors.New("spinning: the ledger was read too often")
	}
	return s.Memory.Unfinished(ctx)
}

// A recovery that is due but cannot be advanced (its node was paused: every
// claim is refused) is looked at again every look-again, not in a busy
// loop, until --wait ends.
func TestWallContinuationDoesNotSpinOnARecoveryItCannotAdvance(t *testing.T) {
	waits := skipWaits(t)
	start := time.Now()
	clk := &replayClock{base: func() time.Time { return start }, realWait: true}
	mem := ledger.NewMemory(ledger.WithClock(clk.now))
	ctx := context.Background()
	cfg := remediate.DefaultConfig()
	cfg.LookAgain = 5 * time.Second
	rec, err := mem.Claim(ctx, remediate.ClaimRequest{Node: podNode, Project: "acme-ml", Zone: "us-central2-b", Holder: replayHolder, Now: start, Action: remediate.ActionRecreate, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	rec.Phase, rec.DeleteSent, rec.NextLookAt, rec.UpdatedAt = remediate.PhaseDeleting, true, start, start
	if err := mem.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := mem.SetPause(ctx, remediate.Pause{Scope: remediate.PauseNode, Node: podNode, Reason: "INC-1", By: "alice", Since: start}); err != nil {
		t.Fatal(err)
	}
	store := &countingStore{Memory: mem, limit: 200}
	srv := applyServer(t)
	svc, err := srv.Service(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, err := remediate.New(remediate.Deps{TPU: tpuapi.New(svc), Recorder: discardRecorder{}, Holder: replayHolder, Clock: clk.now}.WithLedger(store), cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopped, err := continueRecoveries(ctx, h, clk, continueOptions{wait: time.Minute})
	if err != nil {
		t.Fatalf("continueRecoveries: %v (after %d ledger reads, %d waits)", err, store.calls, *waits)
	}
	if stopped != stoppedWait {
		t.Errorf("stopped = %q, want %q", stopped, stoppedWait)
	}
	if *waits < 5 || *waits > 13 {
		t.Errorf("%d waits within --wait 1m at look-again 5s, want about 12", *waits)
	}
}

// testMACKey names the key version --mac-key is given in tests; withSealer
// makes it a local key that every run of the test shares, as runs over the
// function's ledger share its Cloud KMS key.
const testMACKey = "projects/host-proj/locations/us-central1/keyRings/autoheal/cryptoKeys/autoheal-ledger-mac/cryptoKeyVersions/1"

func withSealer(t *testing.T) {
	t.Helper()
	keys, err := seal.NewLocalKeys("k1", map[string][]byte{"k1": []byte("a test key of thirty-two bytes!!")})
	if err != nil {
		t.Fatal(err)
	}
	old := openSealer
	openSealer = func(_ context.Context, keyVersion string) (seal.Sealer, func() error, error) {
		if keyVersion != testMACKey {
			t.Errorf("sealer opened for key %q, want %q", keyVersion, testMACKey)
		}
		return keys, func() error { return nil }, nil
	}
	t.Cleanup(func() { openSealer = old })
}

// A --mac-key the account may not use is a setup error before any entry
// is read, never a run that retries every recovery until its cap.
func TestReplayMACKeyThatCannotSealIsASetupError(t *testing.T) {
	store := ledger.NewMemory()
	withLedger(t, store)
	old := openSealer
	openSealer = func(context.Context, string) (seal.Sealer, func() error, error) {
		return refusingSealer{}, func() error { return nil }, nil
	}
	t.Cleanup(func() { openSealer = old })
	srv := applyServer(t)
	file := applyEntry(t)
	r := runCLI(t, nil, "replay", "--tpu-endpoint", srv.URL(), "--apply", "--ledger-project", "host-proj", "--mac-key", testMACKey, file)
	if got := exitCodeOf(r.err, nil); got != exitUsage || !strings.Contains(r.err.Error(), "useToSign") {
		t.Fatalf("exit %d (%v), want %d naming the grant the account lacks", got, r.err, exitUsage)
	}
	if n := srv.Count("nodes.delete", podNode); n != 0 {
		t.Errorf("%d deletes sent, want none", n)
	}
}

type refusingSealer struct{}

func (refusingSealer) Seal(context.Context, []byte) (seal.Seal, error) {
	return seal.Seal{}, errors.New("rpc error: code = PermissionDenied desc = Permission 'cloudkms.cryptoKeyVersions.useToSign' denied")
}

func (refusingSealer) Verify(context.Context, []byte, seal.Seal) error {
	return errors.New("permission denied")
}
