package remediate_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// The fault matrix: every TPU call a recovery makes × every way it fails ×
// a crash after each saved phase. Each cell runs redeliveries, Continue and
// sweeps on a virtual clock until nothing changes, then checks the
// invariants (see checkCell).

// matrixCall is one TPU call a recovery makes and how to make it fail.
type matrixCall struct {
	name  string
	reset bool   // the scenario is a queued-resource-owned node (reset)
	rpc   string // the fake's RPC of the request
	of    string // for an operation's poll: whose operation
	opRPC string // for an operation: "operation:"+rpc rules end it with an error
}

var matrixCalls = []matrixCall{
	{name: "get", rpc: "nodes.get"},
	{name: "delete", rpc: "nodes.delete"},
	{name: "delete-op", rpc: "operations.get", of: "nodes.delete", opRPC: "operation:nodes.delete"},
	{name: "create", rpc: "nodes.create"},
	{name: "create-op", rpc: "operations.get", of: "nodes.create", opRPC: "operation:nodes.create"},
	{name: "qr-get", reset: true, rpc: "queuedResources.get"},
	{name: "reset", reset: true, rpc: "queuedResources.reset"},
	{name: "reset-op", reset: true, rpc: "operations.get", of: "queuedResources.reset", opRPC: "operation:queuedResources.reset"},
}

// matrixFault is one way a call fails; rule builds the fake's rule.
type matrixFault struct {
	name   string
	opOnly bool // only operations end this way
	rule   func(c matrixCall) tpufake.FailRule
}

func codeFault(code int) matrixFault {
	return matrixFault{name: fmt.Sprint(code), rule: func(c matrixCall) tpufake.FailRule {
		return tpufake.FailRule{RPC: c.rpc, Of: c.of, Code: code, Times: 1}
	}}
}

func opFault(status string) matrixFault {
	return matrixFault{name: "op " + status, opOnly: true, rule: func(c matrixCall) tpufake.FailRule {
		return tpufake.FailRule{RPC: c.opRPC, Status: status, Times: 1}
	}}
}

var matrixFaults = []matrixFault{
	codeFault(400), codeFault(403), codeFault(404), codeFault(409), codeFault(429), codeFault(500), codeFault(503),
	{name: "hang", rule: func(c matrixCall) tpufake.FailRule {
		return tpufake.FailRule{RPC: c.rpc, Of: c.of, Hang: true, Times: 1}
	}},
	{name: "malformed", rule: func(c matrixCall) tpufake.FailRule {
		return tpufake.FailRule{RPC: c.rpc, Of: c.of, Malformed: true, Times: 1}
	}},
	{name: "lost", rule: func(c matrixCall) tpufake.FailRule {
		return tpufake.FailRule{RPC: c.rpc, Of: c.of, Lost: true, Times: 1}
	}},
	opFault("RESOURCE_EXHAUSTED"), opFault("INTERNAL"), opFault("PERMISSION_DENIED"),
}

// matrixCrashes are the saved phases a crash follows ("" = no crash).
var matrixCrashes = []remediate.Phase{"", remediate.PhaseDeleting, remediate.PhaseCreating, remediate.PhaseCreated,
	remediate.PhaseResetting, remediate.PhaseReset}

// crashStore saves the first update to phase crashAt, then fails as a
// process dying right after the write would: the call it preceded is never
// made, and nothing after it is saved by this delivery.
type crashStore struct {
	remediate.Store
	mu      sync.Mutex
	crashAt remediate.Phase
	crashed bool
	specs   map[string]bool // nodes whose spec was saved
}

var errCrash = errors.New("crashed after saving")

func (s *crashStore) Update(ctx context.Context, rec remediate.Recovery) error {
	if err := s.Store.Update(ctx, rec); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec.Spec != nil {
		s.specs[rec.Node] = true
	}
	if !s.crashed && s.crashAt != "" && rec.Phase == s.crashAt {
		s.crashed = true
		return errCrash
	}
	return nil
}

// guardTPU checks, on every delete, that the node's spec was saved first.
type guardTPU struct {
	remediate.TPU
	store      *crashStore
	mu         sync.Mutex
	violations []string
}

func (g *guardTPU) DeleteNode(ctx context.Context, name string) (string, error) {
	g.store.mu.Lock()
	saved := g.store.specs[name]
	g.store.mu.Unlock()
	if !saved {
		g.mu.Lock()
		g.violations = append(g.violations, "delete of "+name+" before its spec was saved")
		g.mu.Unlock()
	}
	return g.TPU.DeleteNode(ctx, name)
}

// cellResult is what one cell ended with.
type cellResult struct {
	outcome  string // recovered, abandoned, or a violation
	calls    int
	creates  int
	problems []string
}

const (
	mProject = "acme-ml"
	mZone    = "us-central2-b"
	mQR      = "projects/acme-ml/locations/us-central2-b/queuedResources/qr-1"
	mQRNode  = "projects/acme-ml/locations/us-central2-b/nodes/qr-1"
	// maxCalls bounds the TPU calls of one cell: a loop shows as more.
	maxCalls = 250
)

func qrFleet() tpufake.Fleet {
	n := &tpu.Node{AcceleratorType: "v5litepod-16", RuntimeVersion: "v2-alpha-tpuv5-lite",
		Labels: map[string]string{"tpu-autoheal": "enabled"}}
	node := *n
	node.Name, node.State, node.Health, node.QueuedResource, node.Id = mQRNode, "PREEMPTED", "", mQR, 99
	return tpufake.Fleet{
		Nodes: []*tpu.Node{&node},
		QueuedResources: []*tpu.QueuedResource{{
			Name:  mQR,
			State: &tpu.QueuedResourceState{State: "ACTIVE"},
			Tpu: &tpu.Tpu{NodeSpec: []*tpu.NodeSpec{{
				Parent: "projects/acme-ml/locations/us-central2-b", NodeId: "qr-1", Node: n,
			}}},
		}},
	}
}

// runCell runs one cell: rules on a fresh fake, a terminate event, then
// redeliveries, Continue and sweeps until quiescent.
func runCell(t *testing.T, reset bool, rules []tpufake.FailRule, crashAt remediate.Phase) cellResult {
	t.Helper()
	return runCellWith(t, reset, rules, crashAt, func(clk func() time.Time) remediate.Store { return ledger.NewMemory(ledger.WithClock(clk)) })
}

// runCellWith is runCell on the ledger newStore builds.
func runCellWith(t *testing.T, reset bool, rules []tpufake.FailRule, crashAt remediate.Phase, newStore func(func() time.Time) remediate.Store) cellResult {
	t.Helper()
	clk := &clock{now: start}
	f := tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}}
	target := nodeName
	if reset {
		f, target = qrFleet(), mQRNode
	}
	original := remediate.CleanSpec(f.Nodes[0])
	fake := tpufake.New(f, tpufake.WithClock(clk.Now), tpufake.WithRequestLog(0),
		tpufake.WithOperationDelay("delete", 2*time.Minute),
		tpufake.WithOperationDelay("create", 5*time.Minute),
		tpufake.WithOperationDelay("reset", 5*time.Minute))
	defer fake.Close()
	for _, r := range rules {
		fake.Fail(r)
	}
	svc, err := fake.Service(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	store := &crashStore{Store: newStore(clk.Now), crashAt: crashAt, specs: map[string]bool{}}
	g := &guardTPU{TPU: tpuapi.New(svc), store: store}
	recs := &records{}
	cfg := remediate.DefaultConfig()
	cfg.StartupScript = script
	h := remediate.Filled(&remediate.Handler{TPU: g, Store: store, Recorder: recs, Config: cfg, Now: clk.Now, Holder: "m",
		CallTimeout: 200 * time.Millisecond, Workers: 2})
	ctx := context.Background()
	ev := events.Event{InsertID: "ev-1", Time: start.Add(-time.Minute), Method: events.MethodTerminate, LogName: "projects/acme-ml/logs/cloudaudit.googleapis.com%2Fsystem_event",
		Node: events.NodeRef{Project: mProject, Zone: mZone, Node: target[strings.LastIndex(target, "/")+1:]}, Cause: events.CauseMaintenance}
	if reset {
		ev.Cause = events.CausePreemption
	}

	_, herr := h.Handle(ctx, ev)
	for round := 0; round < 80; round++ {
		if herr != nil { // Pub/Sub redelivers a failed delivery
			clk.Advance(10 * time.Second)
			_, herr = h.Handle(ctx, ev)
			continue
		}
		left, err := h.Drain(ctx, clk.Set, 1)
		if err != nil {
			t.Fatalf("Drain: %v", err)
		}
		if left == 0 {
			break
		}
	}
	// A later sweep of the zone catches what is left (a node left broken).
	clk.Advance(2 * time.Hour)
	for range 40 {
		if _, err := h.Sweep(ctx, remediate.SweepOptions{Projects: []string{mProject}, Zones: []string{mZone}}); err != nil {
			t.Logf("Sweep: %v", err)
		}
		left, _ := h.Drain(ctx, clk.Set, 40)
		if left == 0 {
			break
		}
	}
	return checkCell(t, fake, store, g, recs, target, original, reset)
}

// checkCell checks the invariants of a quiescent cell.
func checkCell(t *testing.T, fake *tpufake.Server, store *crashStore, g *guardTPU, recs *records, target string, original *tpu.Node, reset bool) cellResult {
	var res cellResult
	for _, rpc := range []string{"nodes.get", "nodes.list", "nodes.delete", "nodes.create", "operations.get", "queuedResources.get", "queuedResources.reset"} {
		res.calls += fake.Count(rpc, "")
	}
	res.creates = fake.Succeeded("nodes.create") + fake.Succeeded("queuedResources.reset")
	res.problems = append(res.problems, g.violations...)
	if res.creates > 1 {
		res.problems = append(res.problems, fmt.Sprintf("%d successful creates/resets", res.creates))
	}
	if res.calls > maxCalls {
		res.problems = append(res.problems, fmt.Sprintf("%d TPU calls > %d", res.calls, maxCalls))
	}
	if un, _ := store.Unfinished(context.Background()); len(un) > 0 {
		res.problems = append(res.problems, fmt.Sprintf("in-flight slot held: %s in phase %s (%s)", un[0].Node, un[0].Phase, un[0].LastError))
	}
	var node *tpu.Node
	for _, n := range fake.Fleet().Nodes {
		if n.Name == target {
			node = n
		}
	}
	abandoned := false
	for _, r := range recs.list() {
		if r.Outcome == remediate.OutcomeAbandoned {
			abandoned = true
			if r.Err == "" || r.Spec == nil {
				res.problems = append(res.problems, "abandoned without an ERROR record carrying the spec")
			}
		}
	}
	switch {
	case node != nil && node.State == "READY":
		res.outcome = "recovered"
		if !reset {
			got := remediate.CleanSpec(node)
			delete(got.Labels, remediate.GenerationLabel)
			want := remediate.CleanSpec(original)
			want.Metadata[remediate.StartupScriptKey] = script
			if diff := cmp.Diff(want, got); diff != "" {
				res.problems = append(res.problems, "recreated node differs from the original spec: "+diff)
			}
		}
	case abandoned:
		res.outcome = "abandoned"
	default:
		state := "NOT FOUND"
		if node != nil {
			state = node.State
		}
		res.problems = append(res.problems, "node lost: "+state+" and no abandoned record")
		res.outcome = "LOST"
	}
	if len(res.problems) > 0 {
		for _, r := range recs.list() {
			t.Logf("  record %s %s phase=%s outcome=%s reason=%q err=%q warnings=%q", r.Node, r.Action, r.Phase, r.Outcome, r.Reason, r.Err, r.Warnings)
		}
	}
	return res
}

// phaseReached reports whether a scenario ever saves phase p.
func phaseReached(reset bool, p remediate.Phase) bool {
	switch p {
	case "":
		return true
	case remediate.PhaseResetting, remediate.PhaseReset:
		return reset
	}
	return !reset
}

func TestFaultMatrix(t *testing.T) {
	type total struct{ cells, recovered, abandoned, violations, calls, maxCalls int }
	perCall := map[string]*total{}
	var all total
	var lines []string
	for _, c := range matrixCalls {
		tot := &total{}
		perCall[c.name] = tot
		for _, fl := range matrixFaults {
			if fl.opOnly && c.opRPC == "" {
				continue
			}
			for _, crash := range matrixCrashes {
				if !phaseReached(c.reset, crash) {
					continue
				}
				name := fmt.Sprintf("%s/%s/crash-after-%s", c.name, fl.name, orDash(string(crash)))
				var res cellResult
				t.Run(name, func(t *testing.T) {
					res = runCell(t, c.reset, []tpufake.FailRule{fl.rule(c)}, crash)
					for _, p := range res.problems {
						t.Error(p)
					}
				})
				tot.cells++
				tot.calls += res.calls
				tot.maxCalls = max(tot.maxCalls, res.calls)
				switch {
				case len(res.problems) > 0:
					tot.violations++
				case res.outcome == "recovered":
					tot.recovered++
				default:
					tot.abandoned++
				}
				if res.outcome != "recovered" || len(res.problems) > 0 {
					lines = append(lines, fmt.Sprintf("  %-60s %s %v", name, res.outcome, res.problems))
				}
			}
		}
		all.cells += tot.cells
		all.recovered += tot.recovered
		all.abandoned += tot.abandoned
		all.violations += tot.violations
		all.calls += tot.calls
		all.maxCalls = max(all.maxCalls, tot.maxCalls)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| call | cells | recovered | abandoned | violations | TPU calls (mean / max) |\n|---|---|---|---|---|---|\n")
	names := make([]string, 0, len(matrixCalls))
	for _, c := range matrixCalls {
		names = append(names, c.name)
	}
	for _, n := range names {
		tt := perCall[n]
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %.1f / %d |\n", n, tt.cells, tt.recovered, tt.abandoned, tt.violations, float64(tt.calls)/float64(max(tt.cells, 1)), tt.maxCalls)
	}
	fmt.Fprintf(&b, "| **total** | %d | %d | %d | %d | %.1f / %d |\n", all.cells, all.recovered, all.abandoned, all.violations, float64(all.calls)/float64(max(all.cells, 1)), all.maxCalls)
	sort.Strings(lines)
	t.Logf("fault matrix:%s\nnot recovered:\n%s", b.String(), strings.Join(lines, "\n"))
}

func orDash(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// TestFaultMatrixNamedRows are the four failures the matrix was built
// from, each a row of its own.
func TestFaultMatrixNamedRows(t *testing.T) {
	tests := []struct {
		name  string
		reset bool
		rules []tpufake.FailRule
		want  string
	}{
		{
			name: "lost create answer, then the create operation ends RESOURCE_EXHAUSTED: the node comes back",
			rules: []tpufake.FailRule{
				{RPC: "nodes.create", Lost: true, Times: 1},
				{RPC: "operation:nodes.create", Status: "RESOURCE_EXHAUSTED", Times: 1},
			},
			want: "recovered",
		},
		{
			name:  "reset operation ends INTERNAL with the node gone: bounded, and the node comes back",
			reset: true,
			rules: []tpufake.FailRule{{RPC: "operation:queuedResources.reset", Status: "INTERNAL", Times: 1}},
			want:  "recovered",
		},
		{
			name:  "delete answers 404 while the node exists: deleted again, recreated, not closed as someone else's",
			rules: []tpufake.FailRule{{RPC: "nodes.delete", Code: 404, Times: 1}},
			want:  "recovered",
		},
		{
			name:  "malformed body on the first get: transient, redelivered, recovered",
			rules: []tpufake.FailRule{{RPC: "nodes.get", Malformed: true, Times: 1}},
			want:  "recovered",
		},
		{
			name:  "reset operation always ends INTERNAL: abandoned with the spec, slot released",
			reset: true,
			rules: []tpufake.FailRule{{RPC: "operation:queuedResources.reset", Status: "INTERNAL"}},
			want:  "abandoned",
		},
		{
			name:  "create always PERMISSION_DENIED: abandoned with the spec, slot released",
			rules: []tpufake.FailRule{{RPC: "nodes.create", Code: 403}},
			want:  "abandoned",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runCell(t, tt.reset, tt.rules, "")
			for _, p := range res.problems {
				t.Error(p)
			}
			if res.outcome != tt.want {
				t.Errorf("outcome = %s, want %s", res.outcome, tt.want)
			}
		})
	}
}
