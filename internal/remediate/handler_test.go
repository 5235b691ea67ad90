package remediate_test

import (
	"context"
	"errors"
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
	"github.com/tpu-autoheal/autoheal/startup"
)

const (
	project  = "acme-ml"
	zone     = "us-central2-b"
	nodeID   = "llm-v4-128"
	nodeName = "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128"
	qrName   = "projects/acme-ml/locations/us-central2-b/queuedResources/qr-1"
	script   = "#!/bin/bash\nexec /opt/resume-training\n"
)

var start = time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)

// clock is a settable clock shared by the handler, the ledger and the fake.
type clock struct {
	mu   sync.Mutex
	now  time.Time
	tick time.Duration // added on every reading
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now
	c.now = c.now.Add(c.tick)
	return t
}

// Set moves the clock forward to t (never back).
func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type records struct {
	mu  sync.Mutex
	all []remediate.Record
}

func (r *records) Record(_ context.Context, rec remediate.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, rec)
	return nil
}

func (r *records) list() []remediate.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]remediate.Record(nil), r.all...)
}

type env struct {
	fake    *tpufake.Server
	store   *ledger.Memory
	records *records
	clock   *clock
	h       *remediate.Handler
}

func newEnv(t *testing.T, f tpufake.Fleet, opts ...tpufake.Option) *env {
	t.Helper()
	clk := &clock{now: start}
	fake := tpufake.New(f, opts...)
	t.Cleanup(fake.Close)
	svc, err := fake.Service(context.Background())
	if err != nil {
		t.Fatalf("fake service: %v", err)
	}
	client := tpuapi.New(svc)
	store := ledger.NewMemory(ledger.WithClock(clk.Now))
	recs := &records{}
	cfg := remediate.DefaultConfig()
	cfg.StartupScript = script
	return &env{fake: fake, store: store, records: recs, clock: clk, h: remediate.Filled(&remediate.Handler{
		TPU: client, Store: store, Lease: store, Histories: store, Recorder: recs, Config: cfg, Now: clk.Now, Holder: "test",
	})}
}

// settle runs continuations on the virtual clock until no recovery is
// unfinished: the sweeps and redeliveries that finish what a delivery
// started. It returns how many are still unfinished after the bound.
func (e *env) settle(t *testing.T) int {
	t.Helper()
	left, err := e.h.Drain(context.Background(), e.clock.Set, 60)
	if err != nil {
		t.Fatalf("Drain: %v", err)
	}
	return left
}

// handleSettled handles ev, then settles: the whole recovery, whose steps
// run across several looks.
func (e *env) handleSettled(t *testing.T, ev events.Event) (remediate.Record, error) {
	t.Helper()
	r, err := e.h.Handle(context.Background(), ev)
	if err != nil {
		return r, err
	}
	e.settle(t)
	return lastOf(e.records.list(), r), nil
}

// lastOf is the last record about r's node: where the recovery r started
// ended. Warnings and steps of every record since r are gathered in it.
func lastOf(all []remediate.Record, r remediate.Record) remediate.Record {
	out, seen := r, false
	var warnings []string
	var steps []remediate.Step
	for _, x := range all {
		if x.Node != r.Node {
			continue
		}
		if x.Time.Equal(r.Time) && x.InsertID == r.InsertID {
			seen = true
		}
		if seen {
			warnings = append(warnings, x.Warnings...)
			steps = append(steps, x.Steps...)
			if x.Spec == nil {
				x.Spec = out.Spec
			}
			out = x
		}
	}
	out.Warnings, out.Steps = warnings, steps
	return out
}

// fullNode is a node with every field a person can set, set.
func fullNode(state string) *tpu.Node {
	return &tpu.Node{
		Name:              nodeName,
		AcceleratorType:   "v4-128",
		AcceleratorConfig: &tpu.AcceleratorConfig{Type: "V4", Topology: "4x4x4"},
		RuntimeVersion:    "tpu-ubuntu2204-base",
		Description:       "llm pretraining",
		CidrBlock:         "10.240.0.0/29",
		State:             state,
		Health:            "UNHEALTHY_MAINTENANCE",
		HealthDescription: "The TPU had a maintenance event at 2026-11-20T03:44:36.265703305Z",
		NetworkConfig: &tpu.NetworkConfig{
			Network:           "projects/acme-ml/global/networks/default",
			Subnetwork:        "projects/acme-ml/regions/us-central2/subnetworks/default",
			EnableExternalIps: true, CanIpForward: true, QueueCount: 4,
		},
		ServiceAccount: &tpu.ServiceAccount{
			Email: "trainer@acme-ml.iam.gserviceaccount.com",
			Scope: []string{"https://www.googleapis.com/auth/cloud-platform"},
		},
		SchedulingConfig:       &tpu.SchedulingConfig{Reserved: true},
		ShieldedInstanceConfig: &tpu.ShieldedInstanceConfig{EnableSecureBoot: true},
		BootDiskConfig:         &tpu.BootDiskConfig{CustomerEncryptionKey: &tpu.CustomerEncryptionKey{KmsKeyName: "projects/acme-ml/locations/us/keyRings/r/cryptoKeys/k"}},
		DataDisks:              []*tpu.AttachedDisk{{SourceDisk: "projects/acme-ml/zones/us-central2-b/disks/data", Mode: "READ_ONLY"}},
		Labels:                 map[string]string{"tpu-autoheal": "enabled", "team": "llm"},
		Metadata: map[string]string{
			"autoheal-train-cmd":      "python3 train.py --config=llm.yaml",
			"autoheal-checkpoint-dir": "gs://acme-ckpt/llm",
			"startup-script":          "#!/bin/bash\necho old",
		},
		Tags:             []string{"tpu-train", "ssh"},
		NetworkEndpoints: []*tpu.NetworkEndpoint{{IpAddress: "10.128.0.7", Port: 8470}},
		CreateTime:       "2026-11-01T00:00:00Z",
		Id:               4721934471238,
		ApiVersion:       "V2",
		Symptoms:         []*tpu.Symptom{{SymptomType: "LOW_MEMORY", Details: "x"}},
	}
}

func terminate(id string) events.Event {
	return events.Event{
		InsertID: id, Time: start.Add(-time.Minute), Method: events.MethodTerminate,
		Node:  events.NodeRef{Project: project, Zone: zone, Node: nodeID},
		Cause: events.CauseMaintenance,
	}
}

// userSpec is what a person chose for a node: n without output-only fields
// and without our generation label.
func userSpec(t *testing.T, n *tpu.Node) *tpu.Node {
	t.Helper()
	if n == nil {
		t.Fatal("node is missing")
	}
	c := remediate.CleanSpec(n)
	c.Name = ""
	delete(c.Labels, remediate.GenerationLabel)
	return c
}

func nodeOf(t *testing.T, f *tpufake.Server, name string) *tpu.Node {
	t.Helper()
	for _, n := range f.Fleet().Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func wantCounts(t *testing.T, f *tpufake.Server, want map[string]int) {
	t.Helper()
	got := map[string]int{}
	for rpc := range want {
		got[rpc] = f.Count(rpc, "")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("TPU calls mismatch (-want +got):\n%s", diff)
	}
}

func TestTerminatedNodeIsRecreatedWithTheSameSpec(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
	rec, err := e.handleSettled(t, terminate("e1"))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if rec.Action != remediate.ActionRecreate || rec.Phase != remediate.PhaseRecovered || rec.Err != "" {
		t.Fatalf("Handle = %s phase %s err %q (%s), want recreate done", rec.Action, rec.Phase, rec.Err, rec.Reason)
	}
	wantCounts(t, e.fake, map[string]int{"nodes.delete": 1, "nodes.create": 1})

	got := nodeOf(t, e.fake, nodeName)
	if got == nil || got.State != "READY" {
		t.Fatalf("recreated node = %+v, want READY", got)
	}
	if g := got.Labels[remediate.GenerationLabel]; g != "1" {
		t.Errorf("generation label = %q, want 1", g)
	}
	if s := got.Metadata["startup-script"]; s != script {
		t.Errorf("startup-script = %q, want the configured script", s)
	}
	want := userSpec(t, fullNode("TERMINATED"))
	want.Metadata["startup-script"] = script
	if diff := cmp.Diff(want, userSpec(t, got)); diff != "" {
		t.Errorf("recreated spec mismatch (-want +got):\n%s", diff)
	}
	// The record carries the spec sent and every step.
	if rec.Spec == nil || rec.Spec.Labels[remediate.GenerationLabel] != "1" || rec.Generation != 1 {
		t.Errorf("record spec/generation = %+v / %d, want the created spec, generation 1", rec.Spec, rec.Generation)
	}
	var steps []string
	for _, s := range rec.Steps {
		steps = append(steps, s.Name)
	}
	// The event's delivery reads, saves the spec with the delete's phase and
	// deletes; each later look (a continuation) reads the node, looks at
	// the operation once and takes the next step.
	want1 := []string{"get", "get", "delete", "get", "poll-operation", "get", "create", "get", "poll-operation", "get"}
	if diff := cmp.Diff(want1, steps); diff != "" {
		t.Errorf("steps mismatch (-want +got):\n%s", diff)
	}
	if len(e.records.list()) != 3 {
		t.Errorf("records = %d, want 3 (the delivery and two continuations)", len(e.records.list()))
	}
}

func TestStartupScript(t *testing.T) {
	tests := []struct {
		name        string
		configured  string
		resume      bool // the caller hands in the resume script and its keys
		nodeScript  string
		dropKey     string // a metadata key removed from the node before the event
		want        string
		wantWarning bool
	}{
		{name: "node carrying autoheal-train-cmd gets the resume script, its own replaced with a warning", resume: true, nodeScript: "old", want: startup.Script, wantWarning: true},
		{name: "node carrying autoheal-train-cmd without a script gets the resume script silently", resume: true, want: startup.Script},
		{name: "node without autoheal-train-cmd keeps its own script", resume: true, nodeScript: "old", dropKey: startup.MetadataTrainCmd, want: "old"},
		{name: "configured script wins and says it replaced the node's own", configured: "new", nodeScript: "old", want: "new", wantWarning: true},
		{name: "configured script equal to the node's own replaces nothing", configured: "old", nodeScript: "old", want: "old"},
		{name: "node's own script is kept when none is configured", nodeScript: "old", want: "old"},
		{name: "no script at all recreates and warns", want: "", wantWarning: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := fullNode("TERMINATED")
			n.Metadata["startup-script"] = tt.nodeScript
			if tt.nodeScript == "" {
				delete(n.Metadata, "startup-script")
			}
			delete(n.Metadata, tt.dropKey)
			e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{n}})
			e.h.Config.StartupScript = tt.configured
			if tt.resume {
				e.h.Config.ResumeScript, e.h.Config.ResumeKeys = startup.Script, []string{startup.MetadataTrainCmd}
			}
			rec, err := e.handleSettled(t, terminate("e1"))
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			got := nodeOf(t, e.fake, nodeName).Metadata
			if got["startup-script"] != tt.want {
				t.Errorf("startup-script = %q, want %q", got["startup-script"], tt.want)
			}
			for _, k := range []string{startup.MetadataTrainCmd, startup.MetadataCheckpointDir} {
				if k != tt.dropKey && got[k] != n.Metadata[k] {
					t.Errorf("metadata %s = %q, want %q carried over", k, got[k], n.Metadata[k])
				}
			}
			if got := len(rec.Warnings) > 0; got != tt.wantWarning {
				t.Errorf("warnings = %q, want some: %v", rec.Warnings, tt.wantWarning)
			}
		})
	}
}

func TestHandleDoesNotMutate(t *testing.T) {
	unlabelled := fullNode("TERMINATED")
	unlabelled.Labels = map[string]string{"team": "llm"}
	healthy := fullNode("READY")
	healthy.Health = "HEALTHY"
	user := terminate("u1")
	user.Cause = events.CauseUser
	tests := []struct {
		name   string
		node   *tpu.Node
		ev     events.Event
		dryRun bool
		want   remediate.Action
	}{
		{name: "healthy node is only recorded", node: healthy, ev: terminate("e1"), want: remediate.ActionRecord},
		{name: "unlabelled node is skipped", node: unlabelled, ev: terminate("e1"), want: remediate.ActionSkip},
		{name: "user termination is skipped", node: fullNode("TERMINATED"), ev: user, want: remediate.ActionSkip},
		{name: "dry run makes no mutating call", node: fullNode("TERMINATED"), ev: terminate("e1"), dryRun: true, want: remediate.ActionSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{tt.node}})
			e.h.Config.DryRun = tt.dryRun
			rec, err := e.handleSettled(t, tt.ev)
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if rec.Action != tt.want {
				t.Errorf("Handle = %s (%s), want %s", rec.Action, rec.Reason, tt.want)
			}
			wantCounts(t, e.fake, map[string]int{"nodes.delete": 0, "nodes.create": 0, "queuedResources.reset": 0})
			if u, _ := e.store.Unfinished(context.Background()); len(u) != 0 {
				t.Errorf("unfinished recoveries = %+v, want none (no claim)", u)
			}
		})
	}
}

func TestRepeatedEventAndSecondTerminateDoNotRecreateAgain(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
	if _, err := e.handleSettled(t, terminate("e1")); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	e.clock.Advance(time.Minute)
	rec, err := e.handleSettled(t, terminate("e1"))
	if err != nil || rec.Action != remediate.ActionSkip || !strings.Contains(rec.Reason, "already handled") {
		t.Errorf("repeat Handle = %s %q, %v; want skip already handled", rec.Action, rec.Reason, err)
	}
	rec, err = e.handleSettled(t, terminate("e2"))
	if err != nil || rec.Action != remediate.ActionRecord {
		t.Errorf("second terminate Handle = %s %q, %v; want record", rec.Action, rec.Reason, err)
	}
	wantCounts(t, e.fake, map[string]int{"nodes.delete": 1, "nodes.create": 1})
}

// look moves the clock to the next look and continues due recoveries once.
func (e *env) look(t *testing.T) {
	t.Helper()
	e.clock.Advance(remediate.LookAgain)
	if _, err := e.h.Continue(context.Background()); err != nil {
		t.Fatalf("Continue: %v", err)
	}
}

func TestTransientAndPermanentFailures(t *testing.T) {
	t.Run("transient 503 on delete is retried at a later look", func(t *testing.T) {
		e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
		e.fake.Fail(tpufake.FailRule{RPC: "nodes.delete", Code: 503, Times: 2})
		rec, err := e.handleSettled(t, terminate("e1"))
		if err != nil || rec.Phase != remediate.PhaseRecovered {
			t.Fatalf("Handle = %s phase %s, %v; want recovered", rec.Action, rec.Phase, err)
		}
		wantCounts(t, e.fake, map[string]int{"nodes.delete": 3, "nodes.create": 1})
	})
	t.Run("503 on the first read returns the error and leaves the event unmarked", func(t *testing.T) {
		e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
		e.fake.Fail(tpufake.FailRule{RPC: "nodes.get", Code: 503, Times: 1})
		rec, err := e.h.Handle(context.Background(), terminate("e1"))
		var ae *remediate.ActError
		if err == nil || !errors.As(err, &ae) || !ae.Transient || rec.Err == "" {
			t.Fatalf("Handle = %v (record err %q), want a transient ActError", err, rec.Err)
		}
		// The redelivery is handled, not skipped as already handled.
		rec, err = e.handleSettled(t, terminate("e1"))
		if err != nil || rec.Action != remediate.ActionRecreate || rec.Phase != remediate.PhaseRecovered {
			t.Fatalf("redelivered Handle = %s %s %q, %v; want recreate, recovered", rec.Action, rec.Phase, rec.Reason, err)
		}
	})
	t.Run("permanent 403 on delete is saved, acknowledged, and abandoned after MaxAttempts", func(t *testing.T) {
		e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
		e.fake.Fail(tpufake.FailRule{RPC: "nodes.delete", Code: 403})
		rec, err := e.h.Handle(context.Background(), terminate("e1"))
		if err != nil {
			t.Fatalf("Handle = %v, want nil for a permanent failure", err)
		}
		if rec.Outcome != remediate.OutcomeFailed || len(rec.Warnings) == 0 || !strings.Contains(rec.Warnings[len(rec.Warnings)-1], "403") {
			t.Errorf("record = outcome %s warnings %q, want failed with the 403", rec.Outcome, rec.Warnings)
		}
		u, _ := e.store.Unfinished(context.Background())
		if len(u) != 1 || u[0].Phase != remediate.PhaseSaved || u[0].Spec == nil {
			t.Fatalf("unfinished = %+v, want one recovery back in saved with its spec", u)
		}
		e.settle(t)
		wantCounts(t, e.fake, map[string]int{"nodes.delete": remediate.DefaultMaxAttempts, "nodes.create": 0})
		last := e.records.list()[len(e.records.list())-1]
		if last.Outcome != remediate.OutcomeAbandoned || last.Spec == nil || !strings.Contains(last.Err, "403") {
			t.Errorf("last record = outcome %s spec %v err %q, want abandoned with the spec and the 403", last.Outcome, last.Spec != nil, last.Err)
		}
	})
}

func TestStockoutFailsThenSweepFinishesWithTheSameSpec(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
	ctx := context.Background()
	e.fake.Fail(tpufake.FailRule{RPC: "operation:nodes.create", Status: "RESOURCE_EXHAUSTED", Times: 1})
	if _, err := e.h.Handle(ctx, terminate("e1")); err != nil {
		t.Fatalf("Handle = %v", err)
	}
	e.look(t) // the delete's operation: done; create
	e.look(t) // the create's operation: RESOURCE_EXHAUSTED
	u, _ := e.store.Unfinished(ctx)
	if len(u) != 1 || u[0].Spec == nil || u[0].Phase != remediate.PhaseDeleted || u[0].Failures != 0 {
		t.Fatalf("unfinished = %+v, want the recovery back in deleted with its spec, the stockout not counted", u)
	}
	last := e.records.list()[len(e.records.list())-1]
	if last.Outcome != remediate.OutcomeFailed {
		t.Errorf("record of the stockout: outcome %q, want failed", last.Outcome)
	}
	if n := nodeOf(t, e.fake, nodeName); n != nil {
		t.Fatalf("node exists after a failed create: %+v", n)
	}

	// A sweep within the lease does not retry (no retry storm).
	res, err := e.h.Sweep(ctx, remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone}})
	if err != nil || e.fake.Count("nodes.create", "") != 1 {
		t.Fatalf("sweep within lease: %v, creates %d; want no retry", err, e.fake.Count("nodes.create", ""))
	}
	e.clock.Advance(16 * time.Minute)
	res, err = e.h.Sweep(ctx, remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone}})
	if err != nil || !res.Complete {
		t.Fatalf("Sweep = %+v, %v", res, err)
	}
	e.settle(t)
	want := userSpec(t, fullNode("TERMINATED"))
	want.Metadata["startup-script"] = script
	if diff := cmp.Diff(want, userSpec(t, nodeOf(t, e.fake, nodeName))); diff != "" {
		t.Errorf("spec after the sweep mismatch (-want +got):\n%s", diff)
	}
	wantCounts(t, e.fake, map[string]int{"nodes.delete": 1, "nodes.create": 2})
}

// crashingStore fails the first Update that saves phase, as a crash right
// after the step before it would.
type crashingStore struct {
	remediate.Store
	phase   remediate.Phase
	crashed bool
}

func (s *crashingStore) Update(ctx context.Context, rec remediate.Recovery) error {
	if !s.crashed && rec.Phase == s.phase {
		s.crashed = true
		return errors.New("crash")
	}
	return s.Store.Update(ctx, rec)
}

func TestCrashBetweenPhasesIsFinishedWithTheSavedSpec(t *testing.T) {
	for _, phase := range []remediate.Phase{remediate.PhaseDeleting, remediate.PhaseCreating, remediate.PhaseCreated} {
		t.Run("crash saving "+string(phase), func(t *testing.T) {
			e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
			ctx := context.Background()
			crash := &crashingStore{Store: e.store, phase: phase}
			remediate.SetStore(e.h, crash)
			_, _ = e.h.Handle(ctx, terminate("e1"))
			e.settle(t) // the lease of the crashed holder expires; the next look takes over
			if !crash.crashed {
				t.Fatal("the store never crashed")
			}
			if u, _ := e.store.Unfinished(ctx); len(u) != 0 {
				t.Fatalf("unfinished after settling = %+v", u)
			}
			got := nodeOf(t, e.fake, nodeName)
			want := userSpec(t, fullNode("TERMINATED"))
			want.Metadata["startup-script"] = script
			if diff := cmp.Diff(want, userSpec(t, got)); diff != "" {
				t.Errorf("spec mismatch (-want +got):\n%s", diff)
			}
			if got.Labels[remediate.GenerationLabel] != "1" || got.State != "READY" {
				t.Errorf("node = %s gen %q, want READY generation 1", got.State, got.Labels[remediate.GenerationLabel])
			}
			if c := e.fake.Succeeded("nodes.create"); c != 1 {
				t.Errorf("successful creates = %d, want 1", c)
			}
		})
	}
}

func TestQueuedResourceOwnedNodeIsResetNotDeleted(t *testing.T) {
	n := fullNode("TERMINATED")
	n.QueuedResource = qrName
	spec := userSpec(t, fullNode("TERMINATED"))
	q := &tpu.QueuedResource{
		Name:  qrName,
		State: &tpu.QueuedResourceState{State: "ACTIVE"},
		Tpu: &tpu.Tpu{NodeSpec: []*tpu.NodeSpec{{
			Parent: "projects/acme-ml/locations/us-central2-b", NodeId: nodeID, Node: spec,
		}}},
	}
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{n}, QueuedResources: []*tpu.QueuedResource{q}})
	rec, err := e.handleSettled(t, terminate("e1"))
	if err != nil || rec.Action != remediate.ActionReset || rec.Phase != remediate.PhaseRecovered {
		t.Fatalf("Handle = %s phase %s %q, %v; want reset done", rec.Action, rec.Phase, rec.Reason, err)
	}
	wantCounts(t, e.fake, map[string]int{"nodes.delete": 0, "nodes.create": 0, "queuedResources.reset": 1})
}

func TestUserTerminationIsNeverUndoneBySweeps(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
	sweep := remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone}}

	userStop := terminate("user-1")
	userStop.Cause = events.CauseUser
	rec, err := e.handleSettled(t, userStop)
	if err != nil || rec.Action != remediate.ActionSkip {
		t.Fatalf("Handle(user terminate) = %s, %v; want skip, nil", rec.Action, err)
	}
	if _, err := e.h.Sweep(ctx, sweep); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if _, err := e.handleSettled(t, terminate("maintenance-after-user")); err != nil {
		t.Fatalf("Handle(maintenance terminate): %v", err)
	}
	wantCounts(t, e.fake, map[string]int{"nodes.delete": 0, "nodes.create": 0})

	// The user starts the node again: the hold ends, and the next
	// maintenance termination is recovered as usual.
	n := nodeOf(t, e.fake, nodeName)
	n.State, n.Health = "READY", "HEALTHY"
	e.fake.SetNode(n)
	if _, err := e.h.Sweep(ctx, sweep); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	n.State, n.Health = "TERMINATED", "UNHEALTHY_MAINTENANCE"
	e.fake.SetNode(n)
	e.clock.Advance(time.Minute)
	rec, err = e.handleSettled(t, terminate("maintenance-later"))
	if err != nil || rec.Action != remediate.ActionRecreate {
		t.Fatalf("Handle(maintenance terminate after the hold ended) = %s (%s), %v; want recreate", rec.Action, rec.Reason, err)
	}
	wantCounts(t, e.fake, map[string]int{"nodes.delete": 1, "nodes.create": 1})
}

func TestCreateRateLimitIsRetriedInProcess(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
	e.fake.Fail(tpufake.FailRule{RPC: "nodes.create", Code: 429, Status: "RESOURCE_EXHAUSTED",
		Message: "Quota exceeded for quota metric 'Write requests' and limit 'Write requests per minute'", Times: 1})
	r, err := e.handleSettled(t, terminate("ev-rate"))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if r.Phase != remediate.PhaseRecovered || r.Err != "" {
		t.Errorf("record phase %s err %q; want done: a request-rate limit is retried at once, not after a lease", r.Phase, r.Err)
	}
	if got := e.fake.Count("nodes.create", ""); got != 2 {
		t.Errorf("create requests = %d, want 2 (limited, then retried)", got)
	}
}

func TestCancelledHandlingIsRetriedNotRecordedAsPermanent(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the function's deadline passed
	r, err := e.h.Handle(ctx, terminate("ev-cancelled"))
	if err == nil {
		t.Errorf("Handle = nil error; want one, so that Pub/Sub redelivers the event")
	}
	if strings.Contains(r.Reason, "permanent") {
		t.Errorf("record reason = %q; want no permanent failure for a cancelled call", r.Reason)
	}
	h, herr := e.store.History(context.Background(), nodeName, project, "ev-cancelled", start, 24*time.Hour)
	if herr != nil || h.EventSeen {
		t.Errorf("History = EventSeen %t, %v; want the event not marked processed", h.EventSeen, herr)
	}
}

// TestRecoveredRecordSaysHowLongItTook: the record that ends a recovery
// recovered carries the time from the recovery's start to READY (the
// dashboard's time-to-recover), on the virtual clock.
func TestRecoveredRecordSaysHowLongItTook(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
	started := e.clock.Now()
	rec, err := e.handleSettled(t, terminate("e1"))
	if err != nil || rec.Outcome != remediate.OutcomeRecovered {
		t.Fatalf("handled = %s %s, %v; want recovered", rec.Action, rec.Outcome, err)
	}
	if want := e.clock.Now().Sub(started); rec.TimeToRecover <= 0 || rec.TimeToRecover > want {
		t.Errorf("TimeToRecover = %v, want between 0 and %v (the virtual time the recovery took)", rec.TimeToRecover, want)
	}
}
