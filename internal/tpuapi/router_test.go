package tpuapi_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/tpu/apiv1/tpupb"
	"github.com/google/go-cmp/cmp"
	tpu "google.golang.org/api/tpu/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
	"github.com/tpu-autoheal/autoheal/internal/tpulegacy"
	"github.com/tpu-autoheal/autoheal/internal/tpulegacy/legacyfake"
)

const (
	rtProject = "acme-ml"
	rtZone    = "us-central1-b"
	rtParent  = "projects/acme-ml/locations/us-central1-b"
	legacyID  = "bert-v3-8"
	vmID      = "llm-v4-32"
)

// legacyTPU is a legacy TPU Node (v1 architecture) as the v1 API shows it.
func legacyTPU(id string, state tpupb.Node_State) *tpupb.Node {
	return &tpupb.Node{
		Name:              rtParent + "/nodes/" + id,
		AcceleratorType:   "v3-8",
		TensorflowVersion: "2.12.0",
		Network:           "projects/acme-ml/global/networks/default",
		CidrBlock:         "10.240.0.0/29",
		ServiceAccount:    "service-123@cloud-tpu.iam.gserviceaccount.com",
		SchedulingConfig:  &tpupb.SchedulingConfig{Preemptible: true},
		Labels:            map[string]string{"tpu-autoheal": "enabled", "team": "nlp"},
		State:             state,
		Health:            tpupb.Node_UNHEALTHY_MAINTENANCE,
		ApiVersion:        tpupb.Node_V1,
	}
}

// vmTPU is a TPU VM as the v2 API shows it.
func vmTPU(id, state string) *tpu.Node {
	return &tpu.Node{
		Name:            rtParent + "/nodes/" + id,
		AcceleratorType: "v4-32",
		RuntimeVersion:  "tpu-ubuntu2204-base",
		NetworkConfig:   &tpu.NetworkConfig{Network: "projects/acme-ml/global/networks/default"},
		Labels:          map[string]string{"tpu-autoheal": "enabled"},
		Metadata:        map[string]string{"startup-script": "#!/bin/bash\ntrain"},
		State:           state,
		ApiVersion:      "V2",
	}
}

type routed struct {
	v2     *tpufake.Server
	v1     *legacyfake.Server
	router tpuapi.Router
}

func newRouted(t *testing.T, vms []*tpu.Node, legacy []*tpupb.Node, opts ...tpufake.Option) routed {
	t.Helper()
	v2 := tpufake.New(tpufake.Fleet{Nodes: vms}, opts...)
	t.Cleanup(v2.Close)
	svc, err := v2.Service(context.Background())
	if err != nil {
		t.Fatalf("v2 fake service: %v", err)
	}
	c2 := tpuapi.New(svc)
	v1 := legacyfake.New(legacy...)
	t.Cleanup(v1.Close)
	c1, err := tpulegacy.NewFromOptions(context.Background(), v1.ClientOptions()...)
	if err != nil {
		t.Fatalf("v1 client: %v", err)
	}
	t.Cleanup(func() { _ = c1.Close() })
	c1.PageSize = 1
	return routed{v2: v2, v1: v1, router: tpuapi.Router{V2: c2, V1: c1}}
}

type recordSlice struct {
	mu  sync.Mutex
	all []remediate.Record
}

func (r *recordSlice) Record(_ context.Context, rec remediate.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, rec)
	return nil
}

func (e routed) handlerWithClock() (*remediate.Handler, *vclock) {
	cfg := remediate.DefaultConfig()
	cfg.StartupScript = "#!/bin/bash\nexec /opt/resume-training\n"
	clk := &vclock{t: time.Now()}
	mem := ledger.NewMemory(ledger.WithClock(clk.now))
	h, err := remediate.New(remediate.Deps{TPU: e.router, Recorder: &recordSlice{}, Holder: "test", Clock: clk.now}.WithLedger(mem), cfg)
	if err != nil {
		panic(err) // the deps are all given
	}
	return h, clk
}

// vclock is a virtual clock Drain moves.
type vclock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *vclock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *vclock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.t) {
		c.t = t
	}
}

// handleSettled handles ev and runs the recovery's later looks on a
// virtual clock; it returns the last record.
func (e routed) handleSettled(t *testing.T, ev events.Event) (remediate.Record, error) {
	t.Helper()
	h, clk := e.handlerWithClock()
	r, err := h.Handle(context.Background(), ev)
	if err != nil {
		return r, err
	}
	if _, err := h.Drain(context.Background(), clk.set, 40); err != nil {
		return r, err
	}
	// The last record, with the spec, steps and warnings of every record
	// of the recovery gathered in it.
	var out remediate.Record
	var steps []remediate.Step
	var warnings []string
	for _, x := range h.Recorder.(*recordSlice).all {
		steps, warnings = append(steps, x.Steps...), append(warnings, x.Warnings...)
		if x.Spec == nil {
			x.Spec = out.Spec
		}
		out = x
	}
	out.Steps, out.Warnings = steps, warnings
	return out, nil
}

func terminated(id string) events.Event {
	return events.Event{
		InsertID: "e-" + id, Time: time.Now().Add(-time.Minute), Method: events.MethodTerminate,
		Node:  events.NodeRef{Project: rtProject, Zone: rtZone, Node: id},
		Cause: events.CauseMaintenance,
	}
}

func TestTerminatedLegacyNodeIsRecreatedThroughV1WithTheSameSpec(t *testing.T) {
	e := newRouted(t, []*tpu.Node{vmTPU(vmID, "READY")}, []*tpupb.Node{legacyTPU(legacyID, tpupb.Node_TERMINATED)})
	rec, err := e.handleSettled(t, terminated(legacyID))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if rec.Action != remediate.ActionRecreate || rec.Phase != remediate.PhaseRecovered || rec.Err != "" {
		t.Fatalf("Handle = %s phase %s err %q (%s), want recreate done", rec.Action, rec.Phase, rec.Err, rec.Reason)
	}
	if got := map[string]int{"create": e.v2.Count("nodes.create", ""), "delete": e.v2.Count("nodes.delete", "")}; got["create"]+got["delete"] != 0 {
		t.Errorf("v2 mutations = %v, want none", got)
	}
	name := rtParent + "/nodes/" + legacyID
	if got := map[string]int{"delete": e.v1.Count(legacyfake.RPCDelete, name), "create": e.v1.Count(legacyfake.RPCCreate, name)}; !cmp.Equal(got, map[string]int{"delete": 1, "create": 1}) {
		t.Errorf("v1 mutations = %v, want one delete and one create", got)
	}
	creates := e.v1.Creates()
	if len(creates) != 1 {
		t.Fatalf("v1 creates = %d, want 1", len(creates))
	}
	want := legacyTPU(legacyID, 0)
	want.Name, want.Health, want.ApiVersion = "", 0, 0
	want.Labels[remediate.GenerationLabel] = "1"
	if diff := cmp.Diff(want, creates[0].GetNode(), protocmp.Transform()); diff != "" {
		t.Errorf("v1 create spec (-want +got):\n%s", diff)
	}
	if got := e.v1.Node(name); got == nil || got.GetState() != tpupb.Node_READY {
		t.Errorf("legacy node after recovery = %v, want READY", got)
	}
	for _, s := range rec.Steps {
		if s.Operation != "" && !strings.HasPrefix(s.Operation, tpuapi.V1OperationPrefix) {
			t.Errorf("step %s operation %q, want a %q operation", s.Name, s.Operation, tpuapi.V1OperationPrefix)
		}
	}
	if _, ok := rec.Spec.Metadata[remediate.StartupScriptKey]; ok || !strings.Contains(strings.Join(rec.Warnings, "; "), "legacy TPU Node") {
		t.Errorf("record: startup-script in spec %v, warnings %q; want no script and a legacy warning (a legacy node runs none)", ok, rec.Warnings)
	}
}

func TestTerminatedTPUVMIsRecreatedThroughV2Only(t *testing.T) {
	e := newRouted(t, []*tpu.Node{vmTPU(vmID, "TERMINATED")}, []*tpupb.Node{legacyTPU(legacyID, tpupb.Node_READY)})
	rec, err := e.handleSettled(t, terminated(vmID))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if rec.Action != remediate.ActionRecreate || rec.Phase != remediate.PhaseRecovered || rec.Err != "" {
		t.Fatalf("Handle = %s phase %s err %q (%s), want recreate done", rec.Action, rec.Phase, rec.Err, rec.Reason)
	}
	if got := []int{e.v2.Count("nodes.delete", ""), e.v2.Count("nodes.create", "")}; !cmp.Equal(got, []int{1, 1}) {
		t.Errorf("v2 delete, create = %v, want 1, 1", got)
	}
	// V1 is only asked about the node once V2 no longer finds it (the
	// handler's check after the delete); it never mutates anything.
	if got := []int{e.v1.Count(legacyfake.RPCDelete, ""), e.v1.Count(legacyfake.RPCCreate, "")}; !cmp.Equal(got, []int{0, 0}) {
		t.Errorf("v1 delete, create = %v, want 0, 0", got)
	}
}

func TestListNodesMergesBothAPIsAndListsLegacyNodesOnce(t *testing.T) {
	// The v2 API may show a legacy node too (ApiVersion V1): it is listed
	// once, from V1.
	shadow := vmTPU(legacyID, "READY")
	shadow.ApiVersion = "V1"
	e := newRouted(t,
		[]*tpu.Node{vmTPU("vm-a", "READY"), vmTPU("vm-b", "READY"), shadow},
		[]*tpupb.Node{legacyTPU(legacyID, tpupb.Node_READY), legacyTPU("old-c", tpupb.Node_READY)},
		tpufake.WithPageSize(1))
	var got []string
	token := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("ListNodes never ends")
		}
		nodes, next, err := e.router.ListNodes(context.Background(), "projects/acme-ml/locations/-", token)
		if err != nil {
			t.Fatalf("ListNodes(%q): %v", token, err)
		}
		for _, n := range nodes {
			got = append(got, n.Name+" "+n.ApiVersion)
		}
		if token = next; token == "" {
			break
		}
	}
	want := []string{
		rtParent + "/nodes/vm-a V2", rtParent + "/nodes/vm-b V2",
		rtParent + "/nodes/" + legacyID + " V1", rtParent + "/nodes/old-c V1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listed (-want +got):\n%s", diff)
	}
}

func TestRouterRoutesEachCall(t *testing.T) {
	ctx := context.Background()
	legacyName := rtParent + "/nodes/" + legacyID
	t.Run("a legacy node the v2 API shows is read through v1", func(t *testing.T) {
		shadow := vmTPU(legacyID, "READY")
		shadow.ApiVersion = "V1"
		e := newRouted(t, []*tpu.Node{shadow}, []*tpupb.Node{legacyTPU(legacyID, tpupb.Node_TERMINATED)})
		n, err := e.router.GetNode(ctx, legacyName)
		if err != nil || n.State != "TERMINATED" || n.RuntimeVersion != "2.12.0" {
			t.Errorf("GetNode = %+v, %v; want the v1 node (TERMINATED, tensorflow 2.12.0)", n, err)
		}
	})
	t.Run("a node neither API has is NOT FOUND", func(t *testing.T) {
		e := newRouted(t, nil, nil)
		if _, err := e.router.GetNode(ctx, legacyName); !remediate.IsNotFound(err) {
			t.Errorf("GetNode: IsNotFound(%v) = false", err)
		}
		if _, err := e.router.DeleteNode(ctx, legacyName); !remediate.IsNotFound(err) {
			t.Errorf("DeleteNode: IsNotFound(%v) = false", err)
		}
	})
	t.Run("a node v2 does not find stays NOT FOUND when v1 refuses the read", func(t *testing.T) {
		e := newRouted(t, nil, nil)
		e.v1.Fail(legacyfake.FailRule{RPC: legacyfake.RPCGet, Code: codes.InvalidArgument, Message: "no legacy TPUs in this zone"})
		if _, err := e.router.GetNode(ctx, legacyName); !remediate.IsNotFound(err) {
			t.Errorf("GetNode: IsNotFound(%v) = false, want v2's NOT FOUND (a node we deleted must read as gone)", err)
		}
		e.v1.Fail(legacyfake.FailRule{RPC: legacyfake.RPCDelete, Code: codes.InvalidArgument, Message: "no legacy TPUs in this zone"})
		if _, err := e.router.DeleteNode(ctx, legacyName); !remediate.IsNotFound(err) {
			t.Errorf("DeleteNode: IsNotFound(%v) = false, want v2's NOT FOUND (the delete is done)", err)
		}
	})
	t.Run("a transient v1 failure is not hidden", func(t *testing.T) {
		e := newRouted(t, nil, nil)
		e.v1.Fail(legacyfake.FailRule{RPC: legacyfake.RPCGet, Code: codes.Unavailable})
		if _, err := e.router.GetNode(ctx, legacyName); !remediate.IsTransient(err) {
			t.Errorf("GetNode: IsTransient(%v) = false, want v1's UNAVAILABLE (retry: it may be a legacy node)", err)
		}
	})
	t.Run("a legacy spec is created through v1 after the node is gone", func(t *testing.T) {
		// A crash between delete and create: only the saved spec says
		// which API the node was from.
		e := newRouted(t, nil, nil)
		spec := tpulegacy.ToV2(legacyTPU(legacyID, tpupb.Node_TERMINATED))
		spec = remediate.CleanSpec(spec)
		op, err := e.router.CreateNode(ctx, rtParent, legacyID, spec)
		if err != nil {
			t.Fatalf("CreateNode: %v", err)
		}
		if err := waitOp(ctx, e.router, op); err != nil {
			t.Fatalf("WaitOperation(%s): %v", op, err)
		}
		if e.v1.Node(legacyName) == nil || e.v2.Count("nodes.create", "") != 0 {
			t.Errorf("legacy node %v, v2 creates %d; want created through v1 only", e.v1.Node(legacyName), e.v2.Count("nodes.create", ""))
		}
	})
	t.Run("without v1 the router is v2 alone", func(t *testing.T) {
		e := newRouted(t, nil, []*tpupb.Node{legacyTPU(legacyID, tpupb.Node_TERMINATED)})
		r := tpuapi.Router{V2: e.router.V2}
		if _, err := r.GetNode(ctx, legacyName); !remediate.IsNotFound(err) {
			t.Errorf("GetNode: IsNotFound(%v) = false, want v2's NOT FOUND", err)
		}
		spec := tpulegacy.ToV2(legacyTPU(legacyID, tpupb.Node_TERMINATED))
		if _, err := r.CreateNode(ctx, rtParent, legacyID, remediate.CleanSpec(spec)); err != nil {
			t.Fatalf("CreateNode: %v", err)
		}
		if _, err := r.GetOperation(ctx, tpuapi.V1OperationPrefix+"x"); err == nil {
			t.Errorf("WaitOperation of a v1 operation without v1 succeeded, want an error")
		}
		if got := []int{e.v2.Count("nodes.create", ""), len(e.v1.Requests())}; !cmp.Equal(got, []int{1, 0}) {
			t.Errorf("v2 creates, v1 requests = %v, want 1, 0", got)
		}
	})
}
