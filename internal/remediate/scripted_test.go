package remediate_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/api/googleapi"

	"github.com/tpu-autoheal/autoheal/internal/googleerr"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// scriptedTPU is a remediate.TPU held in memory whose calls can be scripted
// in ways the wire-level tpufake cannot express: a hook run inside a create
// or a reset (the world changes while the handler acts), a barrier that
// holds concurrent observers until all of them read the queued resource,
// and errors returned by the request itself. It logs every mutating call
// with the node's id, so a test can say which node was deleted.
type scriptedTPU struct {
	mu        sync.Mutex
	nodes     map[string]*tpu.Node
	qrs       map[string]*tpu.QueuedResource
	calls     []string
	createErr error
	deleteErr error
	resetErr  error
	qrBarrier *sync.WaitGroup
	nextID    int64
	onReset   func(f *scriptedTPU) // called with mu held
	onCreate  func(f *scriptedTPU) // called with mu held
	// onGet is called with mu held after the call-th GetNode (from 1) is
	// answered: the world changes between two reads.
	onGet func(f *scriptedTPU, call int)
	gets  int
}

const (
	sProject = "acme-ml"
	sZone    = "us-central2-b"
	sQR      = "projects/acme-ml/locations/us-central2-b/queuedResources/qr-1"
)

func sName(id string) string {
	return fmt.Sprintf("projects/%s/locations/%s/nodes/%s", sProject, sZone, id)
}

// sNode is an opted-in node with id 1.
func sNode(id, state string) *tpu.Node {
	return &tpu.Node{Name: sName(id), State: state, AcceleratorType: "v4-8", RuntimeVersion: "rt", Id: 1,
		Labels: map[string]string{"tpu-autoheal": "enabled"}}
}

func sEvent(id, insertID string, t time.Time) events.Event {
	return events.Event{InsertID: insertID, Time: t, Method: events.MethodTerminate,
		Node: events.NodeRef{Project: sProject, Zone: sZone, Node: id}, Cause: events.CauseMaintenance}
}

func (f *scriptedTPU) log(s string) { f.calls = append(f.calls, s) }

// count reports the logged calls starting with prefix.
func (f *scriptedTPU) count(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := 0
	for _, s := range f.calls {
		if strings.HasPrefix(s, prefix) {
			c++
		}
	}
	return c
}

func (f *scriptedTPU) node(name string) *tpu.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n, ok := f.nodes[name]; ok {
		return cloneTPUNode(n)
	}
	return nil
}

func (f *scriptedTPU) set(n *tpu.Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes[n.Name] = cloneTPUNode(n)
}

func (f *scriptedTPU) remove(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.nodes, name)
}

func (f *scriptedTPU) setQRState(state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.qrs[sQR] = &tpu.QueuedResource{Name: sQR, State: &tpu.QueuedResourceState{State: state}}
}

func (f *scriptedTPU) script(do func(f *scriptedTPU)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	do(f)
}

func scriptedNotFound() error {
	return googleerr.FromAPI(&googleapi.Error{Code: http.StatusNotFound, Message: "not found"})
}

func cloneTPUNode(n *tpu.Node) *tpu.Node {
	c := *n
	c.Labels = map[string]string{}
	for k, v := range n.Labels {
		c.Labels[k] = v
	}
	return &c
}

func (f *scriptedTPU) GetNode(ctx context.Context, name string) (*tpu.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if f.onGet != nil {
		defer f.onGet(f, f.gets)
	}
	n, ok := f.nodes[name]
	if !ok {
		return nil, scriptedNotFound()
	}
	return cloneTPUNode(n), nil
}

func (f *scriptedTPU) ListNodes(ctx context.Context, parent, token string) ([]*tpu.Node, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*tpu.Node
	for _, n := range f.nodes {
		out = append(out, cloneTPUNode(n))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, "", nil
}

func (f *scriptedTPU) DeleteNode(ctx context.Context, name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[name]
	if !ok {
		return "", scriptedNotFound()
	}
	f.log(fmt.Sprintf("delete %s id=%d state=%s", name, n.Id, n.State))
	if f.deleteErr != nil {
		return "", googleerr.FromAPI(f.deleteErr) // as the adapter classifies it
	}
	delete(f.nodes, name)
	return "op-del", nil
}

func (f *scriptedTPU) CreateNode(ctx context.Context, parent, id string, n *tpu.Node) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := parent + "/nodes/" + id
	f.log("create " + name)
	if f.createErr != nil {
		return "", googleerr.FromAPI(f.createErr)
	}
	if _, ok := f.nodes[name]; ok {
		return "", googleerr.FromAPI(&googleapi.Error{Code: http.StatusConflict, Message: "ALREADY_EXISTS"})
	}
	if f.onCreate != nil {
		f.onCreate(f)
	}
	c := cloneTPUNode(n)
	c.Name, c.State, c.Health = name, "READY", "HEALTHY"
	f.nextID++
	c.Id = f.nextID
	f.nodes[name] = c
	return "op-create", nil
}

func (f *scriptedTPU) GetOperation(ctx context.Context, op string) (bool, error) { return true, nil }

func (f *scriptedTPU) GetQueuedResource(ctx context.Context, name string) (*tpu.QueuedResource, error) {
	f.mu.Lock()
	b := f.qrBarrier
	q, ok := f.qrs[name]
	var c tpu.QueuedResource
	if ok {
		c = *q
		st := *q.State
		c.State = &st
	}
	f.mu.Unlock()
	if b != nil {
		b.Done()
		b.Wait() // every observer has read the queued resource before any acts
	}
	if !ok {
		return nil, scriptedNotFound()
	}
	return &c, nil
}

func (f *scriptedTPU) ResetQueuedResource(ctx context.Context, name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("reset " + name)
	if f.resetErr != nil {
		return "", googleerr.FromAPI(f.resetErr)
	}
	if f.onReset != nil {
		f.onReset(f)
	}
	return "op-reset", nil
}

// sEnv is a Handler on a scriptedTPU, the memory ledger and a settable clock.
type sEnv struct {
	f     *scriptedTPU
	store *ledger.Memory
	clock *clock
	recs  *records
	h     *remediate.Handler
}

func newScripted(t *testing.T) *sEnv {
	t.Helper()
	clk := &clock{now: start}
	f := &scriptedTPU{nodes: map[string]*tpu.Node{}, qrs: map[string]*tpu.QueuedResource{}, nextID: 1000}
	st := ledger.NewMemory(ledger.WithClock(clk.Now))
	recs := &records{}
	cfg := remediate.DefaultConfig()
	cfg.StartupScript = script
	e := &sEnv{f: f, store: st, clock: clk, recs: recs, h: remediate.Filled(&remediate.Handler{TPU: f, Store: st, Lease: st, Histories: st, Recorder: recs, Config: cfg, Now: clk.Now, Holder: "h"})}
	t.Cleanup(func() {
		if t.Failed() {
			e.dump(t)
		}
	})
	return e
}

func (e *sEnv) handle(t *testing.T, ev events.Event) remediate.Record {
	t.Helper()
	r, err := e.h.Handle(context.Background(), ev)
	if err != nil {
		t.Logf("Handle(%s): %v", ev.InsertID, err)
	}
	return r
}

// handleSettled handles ev, then runs continuations until the recovery it
// started waits for nothing.
func (e *sEnv) handleSettled(t *testing.T, ev events.Event) remediate.Record {
	t.Helper()
	r := e.handle(t, ev)
	e.settle(t)
	return lastOf(e.recs.list(), r)
}

func (e *sEnv) settle(t *testing.T) {
	t.Helper()
	if _, err := e.h.Drain(context.Background(), e.clock.Set, 60); err != nil {
		t.Fatalf("Drain: %v", err)
	}
}

func (e *sEnv) sweep(t *testing.T, zones ...string) remediate.SweepResult {
	t.Helper()
	res, err := e.h.Sweep(context.Background(), remediate.SweepOptions{Projects: []string{sProject}, Zones: zones})
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	return res
}

func (e *sEnv) dump(t *testing.T) {
	t.Helper()
	for _, r := range e.recs.list() {
		t.Logf("record %s %s phase=%s gen=%d reason=%q err=%q", r.Node, r.Action, r.Phase, r.Generation, r.Reason, r.Err)
	}
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	t.Logf("calls: %q", e.f.calls)
}

// The queue fallback's calls: scriptedTPU has no capacity to queue for.
func (f *scriptedTPU) CreateQueuedResource(ctx context.Context, parent, id string, q *tpu.QueuedResource) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("create-queued-resource " + parent + "/queuedResources/" + id)
	return "", &remediate.Error{Kind: remediate.KindPermanent, Err: errors.New("scriptedTPU: no queued resources")}
}

func (f *scriptedTPU) DeleteQueuedResource(ctx context.Context, name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("delete-queued-resource " + name)
	return "", scriptedNotFound()
}
