// Regression tests for recovery under uncertainty: every failure found by
// trying the landed system as an adversary would, one named test each,
// driven through the function's outer surfaces only (its HTTP handler and
// HandleMessage, its configuration from AUTOHEAL_* variables, the TPU API at
// AUTOHEAL_TPU_ENDPOINT served by the simulated control plane with its
// ambiguous outcomes, read lag, paging anomalies and people acting, the
// in-memory ledger, and the records it writes to stdout), so that they
// survive any restructuring of the engine behind them. Each asserts the
// invariant a recovery must keep whatever the cloud does: no node lost (it
// ends recovered, abandoned with an ERROR record, or closed with the
// evidence named), at most one successful create per deleted node, every
// loop bounded, nothing acted on from an entry that is not the audit log's.
//
// The tests of the evidence rule (docs/recovery.md) are here, in the
// normal suite; those of issue 18's loop bounds, over-size spec and
// maintenance are built with the uncertainty tag (uncertainty_test.go)
// until they pass:
//
//	go test -tags uncertainty ./function -run Uncertain
package function_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

const (
	uProject = "acme-ml"
	uZone    = "us-central2-b"
	uParent  = "projects/" + uProject + "/locations/" + uZone
	uNode    = uParent + "/nodes/llm-v4-32"
	// uGenLabel is the label a node recreated by tpu-autoheal carries.
	uGenLabel = "tpu-autoheal-generation"
)

// uT0 is when the incident happens; the clocks start there.
var uT0 = time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)

// uclock is the virtual clock the function and the control plane share.
type uclock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *uclock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *uclock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// ubuffer is the function's stdout: its records, one JSON line each.
type ubuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *ubuffer) Write(p []byte) (int, error) { b.mu.Lock(); defer b.mu.Unlock(); return b.b.Write(p) }
func (b *ubuffer) String() string              { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// urec is a record as Cloud Logging receives it (the stdout line).
type urec struct {
	Severity string `json:"severity"`
	Action   string `json:"action"`
	Reason   string `json:"reason"`
	Node     string `json:"node"`
	Zone     string `json:"zone"`
	Phase    string `json:"phase"`
	Outcome  string `json:"outcome"`
	Error    string `json:"error"`
	Spec     json.RawMessage
}

// uworld is the function deployed against a simulated control plane.
type uworld struct {
	t     *testing.T
	fake  *tpufake.Server
	fn    *function.Function
	clock *uclock
	out   *ubuffer
}

// newWorld starts the control plane with fleet and the function configured
// by the defaults plus env, both on one virtual clock, with the in-memory
// ledger.
func newWorld(t *testing.T, fleet tpufake.Fleet, env map[string]string, fakeOpts ...tpufake.Option) *uworld {
	t.Helper()
	return newWorldLedger(t, true, fleet, env, fakeOpts...)
}

// newWorldWith is newWorld with more function options.
func newWorldWith(t *testing.T, fleet tpufake.Fleet, env map[string]string, fnOpts []function.Option, fakeOpts ...tpufake.Option) *uworld {
	t.Helper()
	return newWorldOpts(t, true, fleet, env, fnOpts, fakeOpts...)
}

// newWorldLedger is newWorld with the in-memory ledger (memory) or the
// Firestore ledger the function builds itself (FIRESTORE_EMULATOR_HOST).
func newWorldLedger(t *testing.T, memory bool, fleet tpufake.Fleet, env map[string]string, fakeOpts ...tpufake.Option) *uworld {
	t.Helper()
	return newWorldOpts(t, memory, fleet, env, nil, fakeOpts...)
}

// newWorldOpts is newWorldLedger with more function options.
func newWorldOpts(t *testing.T, memory bool, fleet tpufake.Fleet, env map[string]string, fnOpts []function.Option, fakeOpts ...tpufake.Option) *uworld {
	t.Helper()
	clock := &uclock{t: uT0.Add(10 * time.Second)}
	fake := tpufake.New(fleet, append([]tpufake.Option{tpufake.WithClock(clock.now), tpufake.WithAuditLog(1 << 16)}, fakeOpts...)...)
	t.Cleanup(fake.Close)
	vars := map[string]string{
		"AUTOHEAL_PROJECT":      "acme-ops",
		"AUTOHEAL_PROJECTS":     uProject,
		"AUTOHEAL_ZONES":        uZone,
		"AUTOHEAL_TPU_ENDPOINT": fake.URL(),
		"AUTOHEAL_RECORD_TO":    "stdout",
	}
	for k, v := range env {
		vars[k] = v
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, function.EnvPrefix+"_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	cfg, err := function.LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	out := &ubuffer{}
	opts := []function.Option{function.WithStdout(out), function.WithClock(clock.now), function.WithDiagnostics(io.Discard)}
	if memory {
		opts = append(opts, function.WithStore(ledger.NewMemory(ledger.WithClock(clock.now))))
	}
	opts = append(opts, fnOpts...)
	fn, err := function.New(context.Background(), cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fn.Close() })
	return &uworld{t: t, fake: fake, fn: fn, clock: clock, out: out}
}

// uNodeSpec is an opted-in v4-32 node (4 workers) in state and health.
func uNodeSpec(name, state, health string) *tpu.Node {
	return &tpu.Node{
		Name: name, AcceleratorType: "v4-32", State: state, Health: health,
		RuntimeVersion: "tpu-ubuntu2204-base",
		NetworkConfig:  &tpu.NetworkConfig{Network: "projects/" + uProject + "/global/networks/default"},
		Labels:         map[string]string{"tpu-autoheal": "enabled", "team": "llm"},
		Metadata:       map[string]string{"autoheal-train-cmd": "python3 train.py", "autoheal-checkpoint-dir": "gs://acme-ml/ckpt"},
		CreateTime:     "2026-11-01T00:00:00Z",
		Id:             4242,
		ApiVersion:     "V2",
	}
}

func uFleet(nodes ...*tpu.Node) tpufake.Fleet { return tpufake.Fleet{Nodes: nodes} }

// uEntry is a tpu.nodes.terminate system event about node, as the log
// sink routes it, from principal (system@google.com: the platform) in log
// (the project's system-event audit log when "").
func uEntry(insertID, node string, ts time.Time, principal, log string) []byte {
	project := strings.Split(node, "/")[1]
	if log == "" {
		log = "projects/" + project + "/logs/cloudaudit.googleapis.com%2Fsystem_event"
	}
	b, _ := json.Marshal(map[string]any{
		"protoPayload": map[string]any{
			"@type":              "type.googleapis.com/google.cloud.audit.AuditLog",
			"status":             map[string]any{},
			"authenticationInfo": map[string]any{"principalEmail": principal},
			"serviceName":        "tpu.googleapis.com",
			"methodName":         "tpu.nodes.terminate",
			"resourceName":       node,
			"metadata":           map[string]any{"terminateReason": "Terminated due to a maintenance event"},
		},
		"insertId":         insertID,
		"resource":         map[string]any{"type": "audited_resource", "labels": map[string]string{"project_id": project, "service": "tpu.googleapis.com", "method": "tpu.nodes.terminate"}},
		"timestamp":        ts.UTC().Format(time.RFC3339Nano),
		"receiveTimestamp": ts.Add(time.Second).UTC().Format(time.RFC3339Nano),
		"severity":         "NOTICE",
		"logName":          log,
	})
	return b
}

// push is data as a Pub/Sub push body.
func push(data []byte) []byte {
	b, _ := json.Marshal(map[string]any{
		"message":      map[string]any{"data": base64.StdEncoding.EncodeToString(data), "messageId": "1"},
		"subscription": "projects/acme-ops/subscriptions/tpu-autoheal-push",
	})
	return b
}

// deliver posts data as Pub/Sub pushes it and returns the HTTP status.
func (w *uworld) deliver(data []byte) int {
	rec := httptest.NewRecorder()
	w.fn.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(push(data))))
	return rec.Code
}

// sweeps moves the clock a minute and delivers Cloud Scheduler's sweep, n
// times, and returns how many were not acknowledged.
func (w *uworld) sweeps(n int) (nacked int) {
	w.t.Helper()
	for range n {
		w.clock.add(time.Minute)
		if code := w.deliver([]byte(events.SweepMessage)); code >= 300 {
			nacked++
		}
	}
	return nacked
}

// node is node as the control plane holds it, nil when it does not exist.
func (w *uworld) node(name string) *tpu.Node {
	for _, n := range w.fake.Fleet().Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func (w *uworld) records() []urec {
	var rs []urec
	for _, line := range strings.Split(w.out.String(), "\n") {
		var r urec
		if json.Unmarshal([]byte(line), &r) == nil && r.Action != "" {
			rs = append(rs, r)
		}
	}
	return rs
}

// recordsOf are node's records.
func (w *uworld) recordsOf(node string) []urec {
	var rs []urec
	for _, r := range w.records() {
		if r.Node == node {
			rs = append(rs, r)
		}
	}
	return rs
}

// history is node's records, one line each, for a failure message.
func (w *uworld) history(node string) string {
	var b strings.Builder
	for _, r := range w.recordsOf(node) {
		fmt.Fprintf(&b, "\n  %s %s phase=%s outcome=%s: %s", r.Severity, r.Action, r.Phase, r.Outcome, r.Reason)
		if r.Error != "" {
			b.WriteString(" error: " + r.Error)
		}
	}
	return b.String()
}

// ourCreates is how many of tpu-autoheal's creates of node succeeded, from
// the audit log (an operation's last entry, status OK).
func (w *uworld) ourCreates(node string) int {
	n := 0
	for _, e := range w.fake.AuditLog() {
		if e.Resource == node && e.Last && e.Code == 0 && strings.HasSuffix(e.Method, ".CreateNode") && e.Principal == tpufake.DefaultCaller(uProject) {
			n++
		}
	}
	return n
}

// requireNotLost asserts the invariant every recovery keeps: the node was
// recreated once (READY with the generation label, one successful create),
// or the recovery was abandoned with an ERROR record carrying the spec. A
// recovery closed as if someone else had deleted the node, when nobody did,
// loses it.
func (w *uworld) requireNotLost(node string) {
	w.t.Helper()
	n := w.node(node)
	creates := w.ourCreates(node)
	if creates > 1 {
		w.t.Fatalf("%s created %d times, want at most once per delete; records:%s", node, creates, w.history(node))
	}
	if n != nil && n.State == "READY" && n.Labels[uGenLabel] != "" && creates == 1 {
		return
	}
	for _, r := range w.recordsOf(node) {
		if r.Severity == "ERROR" && r.Outcome == "abandoned" && len(r.Spec) > 0 {
			return
		}
	}
	state := "NOT_FOUND"
	if n != nil {
		state = n.State + " labels " + fmt.Sprint(n.Labels)
	}
	w.t.Fatalf("%s lost: it is %s after %d successful creates, and no ERROR record abandons it with its spec; records:%s", node, state, creates, w.history(node))
}

// startRecovery delivers the platform's terminate of a TERMINATED node.
func (w *uworld) startRecovery(node string) {
	w.t.Helper()
	if code := w.deliver(uEntry("terminate-1", node, uT0, "system@google.com", "")); code >= 300 {
		w.t.Fatalf("the terminate entry answered %d, want it acknowledged", code)
	}
	if got := w.fake.Count("nodes.delete", node); got != 1 {
		w.t.Fatalf("%d deletes after the terminate entry, want 1 (the recovery started)%s", got, w.history(node))
	}
}

// --- A delete whose outcome the recovery cannot see ---

func TestUncertainDeleteOperationErrorNodeStaysDeleting(t *testing.T) {
	w := newWorld(t, uFleet(uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")), nil)
	// The delete's operation ends in error, the node stays DELETING for
	// three minutes, then it is gone.
	w.fake.Fail(tpufake.FailRule{RPC: "operation:nodes.delete", Name: uNode, Times: 1, Status: "INTERNAL",
		Effect: tpufake.EffectLater, EffectDelay: 3 * time.Minute})
	w.startRecovery(uNode)
	w.sweeps(20)
	w.requireNotLost(uNode)
}

func TestUncertainDeleteStuckDeletingIsAbandonedWithAnError(t *testing.T) {
	w := newWorld(t, uFleet(uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")), nil)
	// The delete's operation ends in error and the node never leaves
	// DELETING: waited for, within a bound, then abandoned with the spec.
	w.fake.Fail(tpufake.FailRule{RPC: "operation:nodes.delete", Name: uNode, Times: 1, Status: "INTERNAL", Effect: tpufake.EffectStuck})
	w.startRecovery(uNode)
	for range 25 * 12 { // 25 hours, a sweep every 5 minutes: past the recovery's 24 h cap
		w.clock.add(4 * time.Minute)
		w.sweeps(1)
	}
	w.requireNotLost(uNode)
	for _, r := range w.recordsOf(uNode) {
		if r.Outcome == "closed" {
			t.Errorf("closed with no evidence of anyone else (%s); records:%s", r.Reason, w.history(uNode))
		}
	}
}

func TestUncertainDeleteOperationErrorButNodeDeleted(t *testing.T) {
	w := newWorld(t, uFleet(uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")), nil)
	// The operation ends in error after the node was deleted.
	w.fake.Fail(tpufake.FailRule{RPC: "operation:nodes.delete", Name: uNode, Times: 1, Status: "INTERNAL", Effect: tpufake.EffectNow})
	w.startRecovery(uNode)
	w.sweeps(20)
	w.requireNotLost(uNode)
}

func TestUncertainDelete500LandsLater(t *testing.T) {
	// DELETE answers 500 and the delete lands 2 s later: the next read still
	// shows the node as it was.
	w := newWorld(t, uFleet(uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")), nil,
		tpufake.WithOperationDelay("delete", 20*time.Second))
	w.fake.Fail(tpufake.FailRule{RPC: "nodes.delete", Name: uNode, Times: 1, Code: 500, Effect: tpufake.EffectLater, EffectDelay: 2 * time.Second})
	w.startRecovery(uNode)
	w.sweeps(20)
	w.requireNotLost(uNode)
}

func TestUncertainDeleteHangsPastTheDeadlineThenLands(t *testing.T) {
	// Each TPU call is bounded by 2 s of wall clock here (30 s deployed),
	// so the test does not wait 30 s for the hanging call to give up.
	w := newWorldWith(t, uFleet(uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")), nil,
		[]function.Option{function.WithCallTimeout(2 * time.Second)},
		tpufake.WithOperationDelay("delete", 20*time.Second))
	// DELETE hangs until the caller gives up (the call's own deadline) and
	// lands 40 s after it was sent, on the control plane's clock: past the
	// call's deadline, before the recovery's next look.
	w.fake.Fail(tpufake.FailRule{RPC: "nodes.delete", Name: uNode, Times: 1, Hang: true, Effect: tpufake.EffectLater, EffectDelay: 40 * time.Second})
	w.deliver(uEntry("terminate-1", uNode, uT0, "system@google.com", ""))
	w.fake.WaitIdle()
	w.sweeps(20)
	w.requireNotLost(uNode)
}

// --- A person acting during the recovery ---

func TestUncertainPersonDeletesTheNodeOurCreateMadeNotCreatedTwice(t *testing.T) {
	w := newWorld(t, uFleet(uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")), nil,
		tpufake.WithOperationDelay("create", 20*time.Second))
	// The node our create made is READY with our generation label; a
	// person deletes it before we look at it again.
	w.fake.Fail(tpufake.FailRule{RPC: "operations.get", Of: "nodes.create", Times: 1,
		Person: &tpufake.Act{Kind: tpufake.ActDelete, Target: uNode, Principal: "alice@acme.example"}})
	w.startRecovery(uNode)
	w.sweeps(3)
	// The person's audit entries reach the function, as the sink routes them.
	for _, e := range w.fake.AuditLog() {
		if e.Principal == "alice@acme.example" {
			w.deliver(e.JSON)
		}
	}
	w.sweeps(20)
	if got := w.ourCreates(uNode); got != 1 {
		t.Errorf("%d successful creates, want 1: a node deleted by a person after our create finished is theirs to delete; records:%s", got, w.history(uNode))
	}
	if got := w.fake.Count("nodes.create", uNode); got != 1 {
		t.Errorf("%d create requests, want 1; records:%s", got, w.history(uNode))
	}
	named := false
	for _, r := range w.recordsOf(uNode) {
		named = named || r.Outcome == "closed" && strings.Contains(r.Reason, "alice@acme.example")
	}
	if !named {
		t.Errorf("no record closes the recovery naming the person's delete (alice@acme.example, whose audit entries were delivered); records:%s", w.history(uNode))
	}
}

func TestUncertainQueuedResourceDeletedDuringResetClosesWithTheEvidence(t *testing.T) {
	f, err := tpufake.ReadFleetFile("../testdata/fleet-queued.json")
	if err != nil {
		t.Fatal(err)
	}
	const (
		qr     = "projects/acme-ml/locations/us-west4-a/queuedResources/qr-spot-v5e-16"
		qrNode = "projects/acme-ml/locations/us-west4-a/nodes/qr-spot-v5e-16"
	)
	w := newWorld(t, f, map[string]string{"AUTOHEAL_ZONES": "us-west4-a"}, tpufake.WithOperationDelay("reset", 5*time.Minute))
	// A person deletes the queued resource right after our reset started.
	w.fake.Fail(tpufake.FailRule{RPC: "queuedResources.reset", Name: qr, Times: 1,
		Person: &tpufake.Act{Kind: tpufake.ActDeleteQueuedResource, Target: qr, Principal: "alice@acme.example"}})
	if code := w.deliver(uEntry("terminate-qr", qrNode, uT0, "system@google.com", "")); code >= 300 {
		t.Fatalf("entry answered %d", code)
	}
	if got := w.fake.Count("queuedResources.reset", qr); got != 1 {
		t.Fatalf("%d resets, want 1 (the recovery started)%s", got, w.history(qrNode))
	}
	// Its NOT FOUND is evidence enough: the recovery ends at the next looks,
	// not after backing off through its failures.
	w.sweeps(5)
	closed := false
	for _, r := range w.recordsOf(qrNode) {
		if (r.Outcome == "closed" || r.Outcome == "abandoned") && strings.Contains(r.Reason, "qr-spot-v5e-16") && strings.Contains(strings.ToUpper(r.Reason), "NOT FOUND") {
			closed = true
		}
	}
	if !closed {
		t.Errorf("no record ends the recovery within 5 minutes naming the queued resource NOT FOUND; records:%s", w.history(qrNode))
	}
	reads := w.fake.Count("queuedResources.get", qr)
	w.sweeps(30)
	if more := w.fake.Count("queuedResources.get", qr) - reads; more > 0 {
		t.Errorf("%d more reads of the deleted queued resource in 30 sweeps: the recovery is still going", more)
	}
	if got := w.fake.Count("queuedResources.reset", qr); got != 1 {
		t.Errorf("%d resets of a deleted queued resource, want 1", got)
	}
}

// --- Inputs from the audit log only ---

func TestUncertainForgedEntryDoesNotStopARecovery(t *testing.T) {
	w := newWorld(t, uFleet(uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")), nil,
		tpufake.WithOperationDelay("delete", 2*time.Minute))
	w.startRecovery(uNode)
	// A terminate by a person, written to a log anyone in the project can
	// write, whose name contains the audit log's.
	forged := uEntry("forged-1", uNode, uT0.Add(30*time.Second), "mallory@acme.example", "projects/acme-ml/logs/cloudaudit.googleapis.com%2Fsystem_event-copy")
	w.clock.add(30 * time.Second)
	w.deliver(forged)
	w.sweeps(20)
	w.requireNotLost(uNode)
}

func TestUncertainUserTerminateDoesNotCloseARecoveryWhoseDeleteWasSent(t *testing.T) {
	w := newWorld(t, uFleet(uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")), nil,
		tpufake.WithOperationDelay("delete", 2*time.Minute))
	w.startRecovery(uNode)
	// A genuine system-event entry of a terminate by a person arrives after
	// our delete was sent: it may hold a node not in recovery, never close
	// one whose delete was sent (only a person's delete, with its evidence,
	// does).
	w.clock.add(30 * time.Second)
	w.deliver(uEntry("user-terminate-1", uNode, uT0.Add(30*time.Second), "mallory@acme.example", ""))
	w.sweeps(20)
	w.requireNotLost(uNode)
}

func TestUncertainForgedEntryPlantsNoHold(t *testing.T) {
	w := newWorld(t, uFleet(uNodeSpec(uNode, "READY", "HEALTHY")), nil)
	forged := uEntry("forged-1", uNode, uT0, "mallory@acme.example", "projects/acme-ml/logs/syslog")
	w.deliver(forged)
	// Later the platform terminates the node, and says so.
	w.clock.add(time.Hour)
	n := w.node(uNode)
	n.State, n.Health = "TERMINATED", "UNHEALTHY_MAINTENANCE"
	w.fake.SetNode(n)
	if code := w.deliver(uEntry("terminate-2", uNode, w.clock.now(), "system@google.com", "")); code >= 300 {
		t.Fatalf("terminate answered %d", code)
	}
	w.sweeps(10)
	if got := w.fake.Count("nodes.delete", uNode); got != 1 {
		t.Errorf("%d deletes after the platform's terminate, want 1: a forged entry from another log must not hold the node; records:%s", got, w.history(uNode))
	}
}

// --- The function's own audit entries are not a person's ---

// sweepsRoutingAudit is sweeps, with every admin-activity entry the control
// plane wrote since the last call delivered before each sweep, as the sink
// routes them: the function's own entries as well as anyone's.
func (w *uworld) sweepsRoutingAudit(n int, delivered *int) {
	w.t.Helper()
	for range n {
		log := w.fake.AuditLog()
		for _, e := range log[min(*delivered, len(log)):] {
			if code := w.deliver(e.JSON); code >= 300 {
				w.t.Errorf("audit entry %s %s answered %d, want it acknowledged", e.Method, e.Resource, code)
			}
		}
		*delivered = len(log)
		w.sweeps(1)
	}
}

func TestUncertainOwnAuditEntriesDoNotCloseAnAmbiguousDelete(t *testing.T) {
	for _, tc := range []struct {
		name  string
		actor string
	}{
		{"with AUTOHEAL_ACTOR the function's account", tpufake.DefaultCaller(uProject)},
		{"without AUTOHEAL_ACTOR", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, uFleet(uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")), map[string]string{"AUTOHEAL_ACTOR": tc.actor},
				tpufake.WithOperationDelay("delete", 20*time.Second))
			// DELETE answers 500 and lands later: no operation of ours is
			// known, and the delete's audit entries, by the function's own
			// account, reach the function.
			w.fake.Fail(tpufake.FailRule{RPC: "nodes.delete", Name: uNode, Times: 1, Code: 500, Effect: tpufake.EffectLater, EffectDelay: 2 * time.Second})
			w.startRecovery(uNode)
			delivered := 0
			w.sweepsRoutingAudit(20, &delivered)
			w.requireNotLost(uNode)
			if got := w.fake.Count("nodes.create", uNode); got != 1 {
				t.Errorf("%d create requests, want 1; records:%s", got, w.history(uNode))
			}
		})
	}
}

func TestUncertainPersonsDeleteAfterAnAmbiguousDeleteClosesWithTheEvidence(t *testing.T) {
	w := newWorld(t, uFleet(uNodeSpec(uNode, "TERMINATED", "UNHEALTHY_MAINTENANCE")),
		map[string]string{"AUTOHEAL_ACTOR": tpufake.DefaultCaller(uProject)},
		tpufake.WithOperationDelay("delete", 20*time.Second))
	// Our DELETE answers 500 and never takes effect; a person deletes the
	// node right after, and their audit entries reach the function within
	// the evidence wait.
	w.fake.Fail(tpufake.FailRule{RPC: "nodes.delete", Name: uNode, Times: 1, Code: 500,
		Person: &tpufake.Act{Kind: tpufake.ActDelete, Target: uNode, Principal: "alice@acme.example"}})
	w.startRecovery(uNode)
	delivered := 0
	w.sweepsRoutingAudit(20, &delivered)
	if got := w.fake.Count("nodes.create", uNode); got != 0 {
		t.Errorf("%d create requests, want 0: the person's delete is in evidence; records:%s", got, w.history(uNode))
	}
	named := false
	for _, r := range w.recordsOf(uNode) {
		named = named || r.Outcome == "closed" && strings.Contains(r.Reason, "alice@acme.example")
	}
	if !named {
		t.Errorf("no record closes the recovery naming alice@acme.example's delete; records:%s", w.history(uNode))
	}
}
