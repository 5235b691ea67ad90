package computevm_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/failure"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/seal"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

const (
	project   = "acme-ml"
	zone      = "us-central1-c"
	fleetFile = "../computefake/testdata/fleet.json"
)

var epoch = time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)

func name(instance string) string { return computefake.InstanceName(project, zone, instance) }

// vclock is a virtual clock the test moves by hand.
type vclock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *vclock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *vclock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type records struct {
	mu   sync.Mutex
	recs []remediate.Record
}

func (r *records) Record(_ context.Context, rec remediate.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}

type env struct {
	t      *testing.T
	fake   *computefake.Server
	clock  *vclock
	rec    *computevm.Recovery
	ledger *ledger.Memory
	out    *records
}

func newEnv(t *testing.T, opts ...computefake.Option) *env {
	t.Helper()
	f, err := computefake.ReadFleetFile(fleetFile)
	if err != nil {
		t.Fatal(err)
	}
	c := &vclock{t: epoch}
	s := computefake.New(f, append([]computefake.Option{computefake.WithClock(c.now)}, opts...)...)
	t.Cleanup(s.Close)
	client, err := computevm.NewFromOptions(context.Background(), s.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	l := ledger.NewMemory(ledger.WithClock(c.now))
	out := &records{}
	cfg := remediate.DefaultConfig()
	return &env{t: t, fake: s, clock: c, ledger: l, out: out, rec: &computevm.Recovery{
		Compute: client, Store: computevm.NewMemory(), Ledger: l, Recorder: out,
		Config: cfg, Policy: vmpolicy.DefaultConfig(), Holder: "test", Now: c.now,
		Sealer: seal.RandomLocalKeys(), // every test's specs are sealed and verified
	}}
}

// deliver parses the entry as the function does and hands it to the
// instance path; it returns the decision's action.
func (e *env) deliver(entry computefake.LogEntry) remediate.Action {
	e.t.Helper()
	ev, err := events.Parse(entry.JSON(), events.Options{})
	if err != nil {
		e.t.Fatalf("events.Parse: %v", err)
	}
	if ev.Kind != events.KindInstance {
		e.t.Fatalf("kind = %q, want instance", ev.Kind)
	}
	recs, err := e.rec.HandleEvent(context.Background(), ev)
	if err != nil {
		e.t.Fatalf("HandleEvent: %v", err)
	}
	return recs[len(recs)-1].Action
}

// sweep runs a sweep of the zone and returns the action for slice key.
func (e *env) sweep(key string) remediate.Action {
	e.t.Helper()
	res, err := e.rec.Sweep(context.Background(), []string{project}, []string{zone})
	if err != nil || len(res.Errors) > 0 {
		e.t.Fatalf("Sweep: %v %v", err, res.Errors)
	}
	for _, r := range res.Records {
		if r.Node == key {
			return r.Action
		}
	}
	e.t.Fatalf("sweep recorded nothing about %s", key)
	return ""
}

func (e *env) calls(method string) int { return e.fake.Count(method, "") }

func mutations(e *env) int {
	return e.calls("instances.start") + e.calls("instances.insert") + e.calls("instanceGroupManagers.recreateInstances") +
		e.calls("instances.delete") + e.calls("instances.stop")
}

func TestHostErrorOnAStandaloneTPU7xVMStartsItOnce(t *testing.T) {
	e := newEnv(t)
	vm := name("reserved-1") // tpu7x-standard-4t, automaticRestart false, no MIG
	e.sweep(vm)
	entry, err := e.fake.HostError(vm)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.deliver(entry); got != "start" {
		t.Fatalf("host error: %s, want start", got)
	}
	if got := e.calls("instances.start"); got != 1 {
		t.Fatalf("%d starts, want 1", got)
	}
	// Redelivered, then swept while it boots and after: never a second start.
	if got := e.deliver(entry); vmpolicy.Action(got).Mutates() {
		t.Errorf("redelivery: %s, want no second start", got)
	}
	e.clock.add(10 * time.Second)
	e.sweep(vm)
	e.clock.add(time.Minute)
	if got := e.sweep(vm); got != remediate.ActionRecord {
		t.Errorf("after the start: %s, want record", got)
	}
	if in, _ := e.fake.Instance(vm); in.Status != "RUNNING" {
		t.Errorf("after the start: %s", in.Status)
	}
	if got := e.calls("instances.start"); got != 1 || mutations(e) != 1 {
		t.Errorf("%d starts, %d mutations, want 1 and 1", got, mutations(e))
	}
	var r remediate.Record
	for _, x := range e.out.recs {
		if x.Action == "start" {
			r = x
		}
	}
	if r.AcceleratorType != "tpu7x-standard-4t" || r.Chips != 4 || len(r.Steps) != 1 || r.Steps[0].Name != "start" || r.Err != "" {
		t.Errorf("start record = %+v", r)
	}
}

func TestHostErrorWithAutomaticRestartIsLeftToComputeEngine(t *testing.T) {
	e := newEnv(t)
	vm := name("trainer-a") // automaticRestart true: Compute Engine restarts it after a minute
	entry, err := e.fake.HostError(vm)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.deliver(entry); got != remediate.ActionDefer {
		t.Fatalf("host error with automaticRestart: %s, want defer", got)
	}
	e.clock.add(2 * time.Minute)
	if got := e.sweep(vm); got != remediate.ActionRecord {
		t.Errorf("after Compute Engine's restart: %s, want record", got)
	}
	if mutations(e) != 0 {
		t.Errorf("%d mutations, want none", mutations(e))
	}
}

// shape is what an insert must keep of the instance it makes again.
type shape struct {
	Name, MachineType  string
	Scheduling         *compute.Scheduling
	ServiceAccounts    []*compute.ServiceAccount
	Networks           []string
	Labels             map[string]string
	Metadata           map[string]string
	Disks              []string
	ResourcePolicies   []string
	ShieldedInstance   *compute.ShieldedInstanceConfig
	CanIPForward       bool
	DeletionProtection bool
}

func shapeOf(in *compute.Instance) shape {
	s := shape{Name: in.Name, MachineType: in.MachineType[strings.LastIndexByte(in.MachineType, '/')+1:], Scheduling: in.Scheduling,
		ServiceAccounts: in.ServiceAccounts, Labels: in.Labels, Metadata: map[string]string{}, ResourcePolicies: in.ResourcePolicies,
		ShieldedInstance: in.ShieldedInstanceConfig, CanIPForward: in.CanIpForward, DeletionProtection: in.DeletionProtection}
	for _, n := range in.NetworkInterfaces {
		s.Networks = append(s.Networks, n.Network+" "+n.Subnetwork)
	}
	for _, it := range in.Metadata.Items {
		s.Metadata[it.Key] = *it.Value
	}
	for _, d := range in.Disks {
		s.Disks = append(s.Disks, d.DeviceName+" "+d.Source)
	}
	return s
}

func TestPreemptedSpotVMWithDeleteIsInsertedFromTheSavedSpec(t *testing.T) {
	e := newEnv(t)
	vm := name("spot-delete") // Spot, instanceTerminationAction DELETE
	before, _ := e.fake.Instance(vm)
	e.sweep(vm) // saves its spec
	entry, err := e.fake.Preempt(vm)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.deliver(entry); got != "recreate" {
		t.Fatalf("preempted and deleted: %s, want recreate", got)
	}
	if got := e.calls("instances.insert"); got != 1 {
		t.Fatalf("%d inserts, want 1", got)
	}
	// The insert's body is the spec saved before it broke, output-only
	// fields cleared.
	var body compute.Instance
	for _, r := range e.fake.Requests() {
		if r.Method == "instances.insert" {
			if err := json.Unmarshal(r.Body, &body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if body.Id != 0 || body.Status != "" || body.Fingerprint != "" || body.LastStartTimestamp != "" || body.Metadata.Fingerprint != "" || body.SelfLink != "" {
		t.Errorf("insert body carries output-only fields: %+v", body)
	}
	e.clock.add(computefake.DefaultInsertTime + time.Second)
	after, ok := e.fake.Instance(vm)
	if !ok || after.Status != "RUNNING" {
		t.Fatalf("after the insert: %v %+v", ok, after)
	}
	if diff := cmp.Diff(shapeOf(before), shapeOf(after)); diff != "" {
		t.Errorf("recreated instance differs from the one preempted (-before +after):\n%s", diff)
	}
	if got := e.sweep(vm); got != remediate.ActionRecord || mutations(e) != 1 {
		t.Errorf("after the insert: %s with %d mutations, want record and 1", got, mutations(e))
	}
}

func TestMIGInstanceIsRecordedThenRecreatedOnlyAfterTheStuckGrace(t *testing.T) {
	e := newEnv(t)
	mig := computefake.MIGName(project, zone, "serve-mig") // single-host VMs: each its own slice
	if err := e.fake.SetMIGStuck(mig, true); err != nil {
		t.Fatal(err)
	}
	vm := name("serve-mig-a1b2")
	entry, err := e.fake.HostError(vm)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.deliver(entry); got != remediate.ActionRecord {
		t.Fatalf("host error of a MIG's VM: %s, want record (the MIG repairs it)", got)
	}
	for _, d := range []time.Duration{5 * time.Minute, 20 * time.Minute} {
		e.clock.add(d)
		if got := e.sweep(vm); got != remediate.ActionRecord {
			t.Errorf("within the stuck grace: %s, want record", got)
		}
	}
	if got := e.calls("instanceGroupManagers.recreateInstances"); got != 0 {
		t.Fatalf("%d recreateInstances within the stuck grace, want 0", got)
	}
	e.clock.add(6 * time.Minute) // 31 minutes after the host error
	if got := e.sweep(vm); got != "recreateInstances" {
		t.Fatalf("past the stuck grace: %s, want recreateInstances", got)
	}
	e.clock.add(time.Minute)
	e.sweep(vm)
	if got := e.calls("instanceGroupManagers.recreateInstances"); got != 1 || mutations(e) != 1 {
		t.Errorf("%d recreateInstances, %d mutations, want 1 and 1", got, mutations(e))
	}
	if body := requestBody(e, "instanceGroupManagers.recreateInstances"); !strings.Contains(body, "serve-mig-a1b2") || strings.Contains(body, "serve-mig-c3d4") {
		t.Errorf("recreateInstances body %s, want only serve-mig-a1b2", body)
	}
}

func requestBody(e *env, method string) string {
	var out string
	for _, r := range e.fake.Requests() {
		if r.Method == method {
			out = string(r.Body)
		}
	}
	return out
}

func TestOneHostErrorInAFourVMSliceIsOneIncidentAndOneAction(t *testing.T) {
	e := newEnv(t)
	mig := stuckSlice(t, e) // slice-mig: workload policy, a 4-VM multi-host slice
	e.clock.add(31 * time.Minute)
	if got := e.sweep(mig); got != "recreateInstances" {
		t.Fatalf("past the stuck grace: %s, want recreateInstances", got)
	}
	e.clock.add(time.Minute)
	e.sweep(mig)
	if got := e.calls("instanceGroupManagers.recreateInstances"); got != 1 || mutations(e) != 1 {
		t.Fatalf("%d recreateInstances, %d mutations, want one action for the slice", got, mutations(e))
	}
	body := requestBody(e, "instanceGroupManagers.recreateInstances")
	for _, w := range []string{"w0", "w1", "w2", "w3"} {
		if !strings.Contains(body, "slice-mig-"+w) {
			t.Errorf("recreateInstances body %s lacks slice-mig-%s: the slice is recreated whole", body, w)
		}
	}
	// One incident: one claim in the ledger, for the slice.
	hist, err := e.ledger.History(context.Background(), mig, project, "", e.clock.now(), 24*time.Hour)
	if err != nil || hist.Recovery == nil || hist.Recovery.Generation != 1 || len(hist.Recreates) != 1 {
		t.Errorf("ledger history of the slice = %+v, %v", hist, err)
	}
}

func TestPersonsStopIsNeverUndone(t *testing.T) {
	e := newEnv(t)
	vm := name("reserved-1")
	e.sweep(vm)
	entries, err := e.fake.PersonStop(vm, "alice@acme.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		e.deliver(en)
	}
	for range 6 {
		e.clock.add(time.Hour)
		if got := e.sweep(vm); got != "held" {
			t.Errorf("swept after a person's stop: %s, want held", got)
		}
	}
	if mutations(e) != 0 { // the person's stop is not an API call of ours
		t.Errorf("%d mutations after a person's stop, want none", mutations(e))
	}
}

func TestGuardsDryRunAndPause(t *testing.T) {
	e := newEnv(t)
	e.rec.Config.DryRun = true
	vm := name("reserved-1")
	entry, err := e.fake.HostError(vm)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.deliver(entry); got != remediate.ActionSkip {
		t.Errorf("dry run: %s, want skip", got)
	}
	e.rec.Config.DryRun = false
	if err := e.ledger.SetPause(context.Background(), remediate.Pause{Scope: remediate.PauseZone, Zone: zone, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if got := e.sweep(vm); got != remediate.ActionSkip {
		t.Errorf("zone paused: %s, want skip", got)
	}
	if mutations(e) != 0 {
		t.Errorf("%d mutations under dry run and pause", mutations(e))
	}
}

func TestAStockoutOnInsertIsRetriedAfterTheCooldown(t *testing.T) {
	e := newEnv(t)
	vm := name("spot-delete")
	e.sweep(vm)
	e.fake.Fail(computefake.FailRule{Method: "instances.insert", Capacity: computefake.ZoneResourcePoolExhausted, Times: 1})
	entry, err := e.fake.Preempt(vm)
	if err != nil {
		t.Fatal(err)
	}
	e.deliver(entry)
	e.clock.add(computefake.DefaultInsertTime) // the insert's operation ends in the stockout
	if got := e.sweep(vm); got != remediate.ActionSkip {
		t.Errorf("within the cooldown after the stockout: %s, want skip", got)
	}
	e.clock.add(remediate.DefaultConfig().Cooldown)
	if got := e.sweep(vm); got != "recreate" {
		t.Fatalf("after the cooldown: %s, want recreate again", got)
	}
	e.clock.add(computefake.DefaultInsertTime + time.Second)
	if in, ok := e.fake.Instance(vm); !ok || in.Status != "RUNNING" {
		t.Errorf("after the retry: %v %+v", ok, in)
	}
	if got := e.calls("instances.insert"); got != 2 {
		t.Errorf("%d inserts, want 2 (the stockout, the retry)", got)
	}
}

func TestATransientFailureLosesNothingOnRedelivery(t *testing.T) {
	e := newEnv(t)
	vm := name("reserved-1")
	entry, err := e.fake.HostError(vm)
	if err != nil {
		t.Fatal(err)
	}
	e.fake.Fail(computefake.FailRule{Method: "instances.get", Resource: vm, Code: 503, Times: 1})
	ev, err := events.Parse(entry.JSON(), events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.rec.HandleEvent(context.Background(), ev); failure.KindOf(err) != failure.Transient {
		t.Fatalf("HandleEvent with instances.get failing: %v, want a transient error (redelivered)", err)
	}
	if got := e.deliver(entry); got != "start" {
		t.Errorf("redelivery: %s, want start (the host error kept as evidence)", got)
	}
}

// Every delivery's read fails (transient): the entry is dead-lettered, but
// its evidence was kept by the first, so the sweep recreates the VM.
func TestEvidenceIsKeptWhenEveryDeliverysReadFails(t *testing.T) {
	e := newEnv(t)
	vm := name("spot-delete") // Spot, termination action DELETE
	e.sweep(vm)               // saves its spec
	entry, err := e.fake.Preempt(vm)
	if err != nil {
		t.Fatal(err)
	}
	e.fake.Fail(computefake.FailRule{Method: "instances.get", Resource: vm, Code: 503, Times: 5})
	ev, err := events.Parse(entry.JSON(), events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := e.rec.HandleEvent(context.Background(), ev); failure.KindOf(err) != failure.Transient {
			t.Fatalf("HandleEvent with instances.get failing: %v, want a transient error", err)
		}
		e.clock.add(time.Minute)
	}
	e.clock.add(computefake.DefaultDeleteTime)
	if got := e.sweep(vm); got != "recreate" {
		t.Errorf("sweep after five failed deliveries: %s, want recreate (the preemption kept as evidence)", got)
	}
}

func TestAnInstanceThatIsNotOursIsLookedUpOncePerHour(t *testing.T) {
	e := newEnv(t)
	vm := name("web-1") // n2-standard-8, no opt-in label
	for range 3 {
		entry, err := e.fake.HostError(vm)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.deliver(entry); got != remediate.ActionRecord {
			t.Errorf("entry about web-1: %s, want record", got)
		}
		e.clock.add(5 * time.Minute) // web-1 restarts by itself
	}
	if got := e.fake.Count("instances.get", vm); got != 1 {
		t.Errorf("%d gets of web-1, want 1 (then cached)", got)
	}
	if ev, _ := e.rec.Store.Evidence(context.Background(), []string{vm}); len(ev) != 0 {
		t.Errorf("kept evidence about a VM that is not ours: %v", ev)
	}
}

func TestAMaintenanceNoticeIsDeliveredToEveryVMOfTheSliceOnce(t *testing.T) {
	e := newEnv(t)
	mig := computefake.MIGName(project, zone, "slice-mig")
	window := epoch.Add(7 * 24 * time.Hour)
	entries, err := e.fake.ScheduleMaintenance(name("slice-mig-w0"), computefake.Maintenance{WindowStart: window, WindowEnd: window.Add(4 * time.Hour), CanReschedule: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 {
		t.Fatalf("%d notices, want one per VM of the slice", len(entries))
	}
	if got := e.deliver(entries[0]); got != "prepare" {
		t.Fatalf("first notice: %s, want prepare", got)
	}
	e.clock.add(computefake.DefaultMetadataTime + time.Second)
	for _, en := range entries[1:] {
		if got := e.deliver(en); got != remediate.ActionRecord {
			t.Errorf("a later notice of the same window: %s, want record (delivered)", got)
		}
	}
	if got := e.sweep(mig); got != remediate.ActionRecord {
		t.Errorf("sweep after the notice: %s, want record", got)
	}
	if got := e.calls("instances.setMetadata"); got != 4 {
		t.Errorf("%d setMetadata calls, want 4 (one per VM, once)", got)
	}
	for _, w := range []string{"w0", "w1", "w2", "w3"} {
		in, _ := e.fake.Instance(name("slice-mig-" + w))
		var n remediate.MaintenanceNotice
		for _, it := range in.Metadata.Items {
			if it.Key == remediate.NoticeMetadataKey {
				_ = json.Unmarshal([]byte(*it.Value), &n)
			}
		}
		if n.Notice != window.Format(time.RFC3339) || !n.CanReschedule {
			t.Errorf("slice-mig-%s notice = %+v", w, n)
		}
		if len(in.Metadata.Items) < 3 {
			t.Errorf("slice-mig-%s lost metadata: %v", w, in.Metadata.Items)
		}
	}
	if mutations(e) != 0 {
		t.Errorf("%d recovery calls for a notice", mutations(e))
	}
}

func TestAnEntryAboutAVMThatIsNotOursWritesNoRecord(t *testing.T) {
	e := newEnv(t)
	entry, err := e.fake.HostError(name("web-1"))
	if err != nil {
		t.Fatal(err)
	}
	e.deliver(entry)
	for _, r := range e.out.recs {
		if r.Node == name("web-1") {
			t.Errorf("record about web-1, an n2 VM without the label: %+v (each would be an incident in reports)", r)
		}
	}
}

func TestAPersonsDeleteIsNeverUndoneAndItsSpecIsForgotten(t *testing.T) {
	e := newEnv(t)
	vm := name("reserved-1")
	e.sweep(vm) // saves its spec
	entries, err := e.fake.PersonDelete(vm, "alice@acme.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		e.deliver(en)
	}
	e.clock.add(computefake.DefaultDeleteTime + time.Second)
	if got := e.sweep(vm); got != "held" {
		t.Errorf("after a person's delete: %s, want held", got)
	}
	specs, _ := e.rec.Store.Specs(context.Background(), project, zone)
	if _, ok := specs[vm]; ok {
		t.Error("the spec of an instance a person deleted is still kept")
	}
	e.clock.add(time.Hour)
	res, err := e.rec.Sweep(context.Background(), []string{project}, []string{zone})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Records {
		if r.Node == vm {
			t.Errorf("a later sweep still decides about the deleted VM: %s %q", r.Action, r.Reason)
		}
	}
	if mutations(e) != 0 {
		t.Errorf("%d calls after a person's delete", mutations(e))
	}
}
