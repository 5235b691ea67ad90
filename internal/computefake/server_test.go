package computefake_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/tpumachine"
)

const (
	project   = "acme-ml"
	zone      = "us-central1-c"
	fleetFile = "testdata/fleet.json"
)

func name(instance string) string { return computefake.InstanceName(project, zone, instance) }

var epoch = time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)

// vclock is a virtual clock tests move by hand.
type vclock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *vclock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *vclock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fake is a server on a virtual clock with a real compute/v1 client.
type fake struct {
	*computefake.Server
	svc   *compute.Service
	clock *vclock
}

// start runs a fake seeded from path ("" = empty fleet) on a virtual clock.
func start(t *testing.T, path string, opts ...computefake.Option) *fake {
	t.Helper()
	var f computefake.Fleet
	if path != "" {
		var err error
		if f, err = computefake.ReadFleetFile(path); err != nil {
			t.Fatal(err)
		}
	}
	c := &vclock{t: epoch}
	s := computefake.New(f, append([]computefake.Option{computefake.WithClock(c.now)}, opts...)...)
	t.Cleanup(s.Close)
	svc, err := s.Service(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &fake{Server: s, svc: svc, clock: c}
}

func (f *fake) get(t *testing.T, instance string) *compute.Instance {
	t.Helper()
	in, err := f.svc.Instances.Get(project, zone, instance).Do()
	if err != nil {
		t.Fatalf("get %s: %v", instance, err)
	}
	return in
}

func (f *fake) status(t *testing.T, instance string) string {
	t.Helper()
	return f.get(t, instance).Status
}

func (f *fake) op(t *testing.T, op *compute.Operation) *compute.Operation {
	t.Helper()
	got, err := f.svc.ZoneOperations.Get(project, lastSegment(op.Zone), op.Name).Do()
	if err != nil {
		t.Fatalf("zoneOperations.get %s: %v", op.Name, err)
	}
	return got
}

func lastSegment(s string) string { return s[strings.LastIndexByte(s, '/')+1:] }

// apiErr asserts err is a *googleapi.Error with the code and reason.
func apiErr(t *testing.T, err error, code int, reason string) *googleapi.Error {
	t.Helper()
	var herr *googleapi.Error
	if !errors.As(err, &herr) {
		t.Fatalf("error = %v (%T), want a *googleapi.Error %d %s", err, err, code, reason)
	}
	if herr.Code != code {
		t.Errorf("error code = %d, want %d (%v)", herr.Code, code, err)
	}
	if len(herr.Errors) == 0 || herr.Errors[0].Reason != reason {
		t.Errorf("error reasons = %+v, want %q", herr.Errors, reason)
	}
	return herr
}

func TestClientReachesTheFakeUnderComputeV1(t *testing.T) {
	f := start(t, fleetFile)
	if got := f.svc.BasePath; got != f.URL()+"/compute/v1/" {
		t.Fatalf("client base path = %q, want the endpoint given", got)
	}
	if got := f.get(t, "trainer-a").Name; got != "trainer-a" {
		t.Fatalf("get = %q", got)
	}
	reqs := f.Requests()
	if got, want := reqs[len(reqs)-1].Path, "/compute/v1/projects/acme-ml/zones/us-central1-c/instances/trainer-a"; got != want {
		t.Errorf("request path = %q, want %q (as on compute.googleapis.com)", got, want)
	}
	// Without the trailing slash the client resolves projects/… against
	// /compute/: the fake says so instead of answering something else.
	for _, endpoint := range []string{f.URL() + "/compute/v1", f.URL() + "/"} {
		svc, err := compute.NewService(context.Background(), option.WithEndpoint(endpoint), option.WithoutAuthentication())
		if err != nil {
			t.Fatal(err)
		}
		_, err = svc.Instances.Get(project, zone, "trainer-a").Do()
		herr := apiErr(t, err, http.StatusNotFound, "notFound")
		if !strings.Contains(herr.Message, "/compute/v1/") {
			t.Errorf("endpoint %q: message %q should name the base path", endpoint, herr.Message)
		}
	}
}

func TestGetInstance(t *testing.T) {
	f := start(t, fleetFile)
	got := f.get(t, "trainer-a")
	want := "https://www.googleapis.com/compute/v1/projects/acme-ml/zones/us-central1-c/instances/trainer-a"
	if got.SelfLink != want || got.Status != "RUNNING" || got.Labels["tpu-autoheal"] != "enabled" || tpumachine.ChipsPerVM(got.MachineType) != 4 {
		t.Errorf("get = selfLink %q status %q labels %v machineType %q", got.SelfLink, got.Status, got.Labels, got.MachineType)
	}
	if got.Scheduling.AutomaticRestart == nil || !*got.Scheduling.AutomaticRestart {
		t.Errorf("automaticRestart = %v, want true", got.Scheduling.AutomaticRestart)
	}
	_, err := f.svc.Instances.Get(project, zone, "absent").Do()
	herr := apiErr(t, err, 404, "notFound")
	if !strings.Contains(herr.Message, "projects/acme-ml/zones/us-central1-c/instances/absent") {
		t.Errorf("404 message = %q, want the resource named", herr.Message)
	}
	_, err = f.svc.Instances.Get(project, "us-east5-a", "trainer-a").Do()
	apiErr(t, err, 404, "notFound")
}

func listNames(t *testing.T, f *fake, filter string, maxResults int64) (names []string, pages int) {
	t.Helper()
	call := f.svc.Instances.List(project, zone).Filter(filter)
	if maxResults > 0 {
		call = call.MaxResults(maxResults)
	}
	err := call.Pages(context.Background(), func(l *compute.InstanceList) error {
		pages++
		for _, in := range l.Items {
			names = append(names, in.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("list %q: %v", filter, err)
	}
	return names, pages
}

func TestListFiltersAndPages(t *testing.T) {
	optedIn := []string{"trainer-a", "spot-stop", "spot-delete", "reserved-1", "stopped-by-alice", "serve-mig-a1b2", "serve-mig-c3d4", "slice-mig-w0", "slice-mig-w1", "slice-mig-w2", "slice-mig-w3"}
	tests := []struct {
		name      string
		filter    string
		max       int64
		wantNames []string
		wantPages int
	}{
		{"opted-in label, one page", "labels.tpu-autoheal=enabled", 0, optedIn, 1},
		{"opted-in label, quoted, pages of 4", `labels.tpu-autoheal = "enabled"`, 4, optedIn, 3},
		{"label and status", "(labels.tpu-autoheal=enabled) AND (status=TERMINATED)", 0, []string{"stopped-by-alice"}, 1},
		{"label set", "labels.team:*", 0, append([]string{"trainer-a", "spot-stop", "spot-delete", "web-1"}, optedIn[3:]...), 1},
		{"not equal", "labels.tpu-autoheal!=enabled", 0, []string{"web-1"}, 1},
		{"name glob", "name:slice-mig-*", 2, []string{"slice-mig-w0", "slice-mig-w1", "slice-mig-w2", "slice-mig-w3"}, 2},
		{"machine type by name", "machineType=ct6e-standard-1t", 0, []string{"serve-mig-a1b2", "serve-mig-c3d4"}, 1},
		{"nothing", "labels.tpu-autoheal=disabled", 0, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := start(t, fleetFile)
			names, pages := listNames(t, f, tt.filter, tt.max)
			if diff := cmp.Diff(tt.wantNames, names); diff != "" {
				t.Errorf("listed (-want +got):\n%s", diff)
			}
			if pages != tt.wantPages {
				t.Errorf("pages = %d, want %d", pages, tt.wantPages)
			}
		})
	}
}

func TestListRefusesWhatItCannotRead(t *testing.T) {
	f := start(t, fleetFile)
	for _, filter := range []string{"labels.a=b OR labels.c=d", "cpuPlatform=x", "labels.a >= b", `name="unterminated`} {
		_, err := f.svc.Instances.List(project, zone).Filter(filter).Do()
		herr := apiErr(t, err, 400, "invalid")
		if !strings.Contains(herr.Message, "filter") {
			t.Errorf("filter %q: message %q should name the field", filter, herr.Message)
		}
	}
	_, err := f.svc.Instances.List(project, zone).MaxResults(501).Do()
	apiErr(t, err, 400, "invalid")
	_, err = f.svc.Instances.List(project, zone).PageToken("garbage").Do()
	apiErr(t, err, 400, "invalid")
}

func TestListPageTokenSurvivesDeletes(t *testing.T) {
	f := start(t, fleetFile)
	first, err := f.svc.Instances.List(project, zone).MaxResults(2).Do()
	if err != nil {
		t.Fatal(err)
	}
	f.DeleteInstanceNow(name(first.Items[1].Name)) // already returned: must not shift the next page
	next, err := f.svc.Instances.List(project, zone).MaxResults(2).PageToken(first.NextPageToken).Do()
	if err != nil {
		t.Fatal(err)
	}
	if got := next.Items[0].Name; got != "spot-delete" {
		t.Errorf("next page starts with %q, want spot-delete", got)
	}
}

func TestAggregatedListGroupsByZone(t *testing.T) {
	f := start(t, fleetFile)
	got := map[string][]string{}
	pages := 0
	err := f.svc.Instances.AggregatedList(project).Filter("labels.tpu-autoheal=enabled").MaxResults(5).Pages(context.Background(), func(l *compute.InstanceAggregatedList) error {
		pages++
		for scope, sl := range l.Items {
			for _, in := range sl.Instances {
				got[scope] = append(got[scope], in.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got["zones/us-central1-c"]) != 11 || len(got["zones/us-east5-a"]) != 2 || pages != 3 {
		t.Errorf("aggregated = %v in %d pages, want 11 in us-central1-c and 2 in us-east5-a in 3 pages", got, pages)
	}
}

// newTPUVM is an insert body for a TPU7x VM.
func newTPUVM(instance string) *compute.Instance {
	return &compute.Instance{
		Name:        instance,
		MachineType: "zones/" + zone + "/machineTypes/tpu7x-standard-4t",
		Labels:      map[string]string{"tpu-autoheal": "enabled"},
		Disks: []*compute.AttachedDisk{{
			Boot: true, AutoDelete: true,
			InitializeParams: &compute.AttachedDiskInitializeParams{SourceImage: "projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accelerator-2204-amd64-with-tpu", DiskSizeGb: 200},
		}},
		Scheduling: &compute.Scheduling{ProvisioningModel: "SPOT", InstanceTerminationAction: "DELETE", AutomaticRestart: new(false)},
		Metadata:   &compute.Metadata{Items: []*compute.MetadataItems{{Key: "enable-guest-attributes", Value: new("TRUE")}}},
	}
}

func TestInsertRunsOnTheVirtualClock(t *testing.T) {
	f := start(t, fleetFile)
	op, err := f.svc.Instances.Insert(project, zone, newTPUVM("trainer-b")).Do()
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != "RUNNING" || op.OperationType != "insert" || !strings.HasPrefix(op.Name, "operation-") || op.TargetLink != "https://www.googleapis.com/compute/v1/projects/acme-ml/zones/us-central1-c/instances/trainer-b" {
		t.Fatalf("insert answered %+v", op)
	}
	got := f.get(t, "trainer-b")
	if got.Status != "PROVISIONING" || got.Disks[0].Source == "" || got.Disks[0].InitializeParams != nil || got.Scheduling.OnHostMaintenance != "TERMINATE" {
		t.Errorf("right after insert: status %s, disk %+v, onHostMaintenance %s", got.Status, got.Disks[0], got.Scheduling.OnHostMaintenance)
	}
	f.clock.add(2 * time.Minute)
	if got := f.status(t, "trainer-b"); got != "STAGING" {
		t.Errorf("after 2 min: %s, want STAGING", got)
	}
	f.clock.add(time.Minute)
	done := f.op(t, op)
	if done.Status != "DONE" || done.Error != nil || done.EndTime == "" {
		t.Errorf("operation after 3 min = %+v, want DONE without error", done)
	}
	got = f.get(t, "trainer-b")
	if got.Status != "RUNNING" || got.LastStartTimestamp != "2026-11-20T04:03:00.000+00:00" {
		t.Errorf("after 3 min: %s since %q", got.Status, got.LastStartTimestamp)
	}
	if n := f.Succeeded("instances.insert"); n != 1 {
		t.Errorf("Succeeded(insert) = %d", n)
	}
	_, err = f.svc.Instances.Insert(project, zone, newTPUVM("trainer-b")).Do()
	apiErr(t, err, 409, "alreadyExists")
	bad := newTPUVM("trainer-c")
	bad.Disks = nil
	_, err = f.svc.Instances.Insert(project, zone, bad).Do()
	apiErr(t, err, 400, "invalid")
	bad = newTPUVM("trainer-c")
	bad.Scheduling.AutomaticRestart = new(true)
	_, err = f.svc.Instances.Insert(project, zone, bad).Do()
	herr := apiErr(t, err, 400, "invalid")
	if !strings.Contains(herr.Message, "resource.scheduling.automaticRestart") {
		t.Errorf("message %q should name the field", herr.Message)
	}
}

func TestStopStartDeleteOnTheVirtualClock(t *testing.T) {
	f := start(t, fleetFile)
	stop, err := f.svc.Instances.Stop(project, zone, "trainer-a").Do()
	if err != nil {
		t.Fatal(err)
	}
	if got := f.status(t, "trainer-a"); got != "STOPPING" {
		t.Fatalf("after stop: %s", got)
	}
	_, err = f.svc.Instances.Start(project, zone, "trainer-a").Do()
	apiErr(t, err, 400, "resourceNotReady") // still stopping
	f.clock.add(time.Minute)
	got := f.get(t, "trainer-a")
	if got.Status != "TERMINATED" || got.LastStopTimestamp != "2026-11-20T04:01:00.000+00:00" || f.op(t, stop).Status != "DONE" {
		t.Fatalf("after 1 min: %s since %q", got.Status, got.LastStopTimestamp)
	}
	startOp, err := f.svc.Instances.Start(project, zone, "trainer-a").Do()
	if err != nil {
		t.Fatal(err)
	}
	f.clock.add(30 * time.Second)
	if got := f.status(t, "trainer-a"); got != "RUNNING" || f.op(t, startOp).Status != "DONE" {
		t.Fatalf("after start + 30 s: %s", got)
	}
	// Starting a running instance succeeds and does nothing.
	again, err := f.svc.Instances.Start(project, zone, "trainer-a").Do()
	if err != nil || again.Status != "DONE" {
		t.Fatalf("start of a running instance = %+v, %v", again, err)
	}
	del, err := f.svc.Instances.Delete(project, zone, "trainer-a").Do()
	if err != nil {
		t.Fatal(err)
	}
	f.clock.add(59 * time.Second)
	f.get(t, "trainer-a") // still there
	f.clock.add(time.Second)
	_, err = f.svc.Instances.Get(project, zone, "trainer-a").Do()
	apiErr(t, err, 404, "notFound")
	if f.op(t, del).Status != "DONE" {
		t.Errorf("delete operation not DONE")
	}
	_, err = f.svc.Instances.Delete(project, zone, "trainer-a").Do()
	apiErr(t, err, 404, "notFound")
}

func TestZeroDelayOperationsAnswerDone(t *testing.T) {
	f := start(t, fleetFile, computefake.WithOperationDelay("stop", 0))
	op, err := f.svc.Instances.Stop(project, zone, "trainer-a").Do()
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != "DONE" || f.status(t, "trainer-a") != "TERMINATED" {
		t.Errorf("stop with delay 0 = %s, instance %s", op.Status, f.status(t, "trainer-a"))
	}
}

func TestSetMetadataChecksTheFingerprint(t *testing.T) {
	f := start(t, fleetFile)
	in := f.get(t, "trainer-a")
	md := in.Metadata
	md.Items = append(md.Items, &compute.MetadataItems{Key: "autoheal-maintenance", Value: new("2026-11-27T02:00:00Z")})
	op, err := f.svc.Instances.SetMetadata(project, zone, "trainer-a", md).Do()
	if err != nil {
		t.Fatal(err)
	}
	after := f.get(t, "trainer-a")
	if after.Metadata.Fingerprint == in.Metadata.Fingerprint || after.Fingerprint == in.Fingerprint {
		t.Errorf("fingerprints did not change: %s %s", after.Metadata.Fingerprint, after.Fingerprint)
	}
	if len(after.Metadata.Items) != 3 {
		t.Errorf("metadata = %d items, want 3", len(after.Metadata.Items))
	}
	f.clock.add(2 * time.Second)
	if f.op(t, op).Status != "DONE" {
		t.Errorf("setMetadata not DONE after 2 s")
	}
	// The stale fingerprint (read before the write) is refused.
	stale := in.Metadata
	_, err = f.svc.Instances.SetMetadata(project, zone, "trainer-a", stale).Do()
	herr := apiErr(t, err, http.StatusPreconditionFailed, "conditionNotMet")
	if herr.Message != "Supplied fingerprint does not match current metadata fingerprint." {
		t.Errorf("412 message = %q", herr.Message)
	}
	// No fingerprint at all is stale too.
	_, err = f.svc.Instances.SetMetadata(project, zone, "trainer-a", &compute.Metadata{}).Do()
	apiErr(t, err, http.StatusPreconditionFailed, "conditionNotMet")
}

func TestSetLabelsChecksTheFingerprint(t *testing.T) {
	f := start(t, fleetFile)
	in := f.get(t, "web-1")
	_, err := f.svc.Instances.SetLabels(project, zone, "web-1", &compute.InstancesSetLabelsRequest{
		LabelFingerprint: in.LabelFingerprint, Labels: map[string]string{"team": "web", "tpu-autoheal": "enabled"},
	}).Do()
	if err != nil {
		t.Fatal(err)
	}
	names, _ := listNames(t, f, "labels.tpu-autoheal=enabled", 0)
	if !strings.Contains(strings.Join(names, ","), "web-1") {
		t.Errorf("web-1 not listed after relabel: %v", names)
	}
	_, err = f.svc.Instances.SetLabels(project, zone, "web-1", &compute.InstancesSetLabelsRequest{LabelFingerprint: in.LabelFingerprint}).Do()
	apiErr(t, err, http.StatusPreconditionFailed, "conditionNotMet")
}

func TestGuestAttributesAsTheGuestWritesThem(t *testing.T) {
	f := start(t, fleetFile)
	if err := f.SetGuestAttribute(name("trainer-a"), "autoheal", "checkpoint", "step=42000"); err != nil {
		t.Fatal(err)
	}
	ga, err := f.svc.Instances.GetGuestAttributes(project, zone, "trainer-a").QueryPath("autoheal/").Do()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range ga.QueryValue.Items {
		got = append(got, it.Namespace+"/"+it.Key+"="+it.Value)
	}
	want := []string{"autoheal/resumed=2026-11-19T16:20:00Z step=41000", "autoheal/checkpoint=step=42000"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("guest attributes (-want +got):\n%s", diff)
	}
	one, err := f.svc.Instances.GetGuestAttributes(project, zone, "trainer-a").VariableKey("autoheal/checkpoint").Do()
	if err != nil || one.VariableValue != "step=42000" {
		t.Errorf("variableKey = %+v, %v", one, err)
	}
	_, err = f.svc.Instances.GetGuestAttributes(project, zone, "trainer-a").QueryPath("other/").Do()
	apiErr(t, err, 404, "notFound")
	if err := f.SetGuestAttribute(name("web-1"), "autoheal", "checkpoint", "x"); err == nil {
		t.Error("SetGuestAttribute on an instance without enable-guest-attributes succeeded")
	}
	if err := f.SetGuestAttribute(name("stopped-by-alice"), "autoheal", "checkpoint", "x"); err == nil {
		t.Error("SetGuestAttribute on a TERMINATED instance succeeded")
	}
}

func TestOperationsWaitAndGet(t *testing.T) {
	f := start(t, fleetFile, computefake.WithWaitTimeout(10*time.Second))
	op, err := f.svc.Instances.Stop(project, zone, "trainer-a").Do()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *compute.Operation)
	go func() {
		got, err := f.svc.ZoneOperations.Wait(project, zone, op.Name).Do()
		if err != nil {
			t.Error(err)
		}
		done <- got
	}()
	// The wait holds until the operation is DONE on the server's clock.
	for f.Count("zoneOperations.wait", "") == 0 {
		time.Sleep(time.Millisecond) // synchronisation with the goroutine's request, not timing
	}
	f.clock.add(time.Minute)
	if got := <-done; got.Status != "DONE" {
		t.Errorf("wait answered %s", got.Status)
	}
	_, err = f.svc.ZoneOperations.Get(project, "us-east5-a", op.Name).Do()
	apiErr(t, err, 404, "notFound")
	// Without a wait timeout, wait answers at once.
	g := start(t, fleetFile)
	op, err = g.svc.Instances.Stop(project, zone, "trainer-a").Do()
	if err != nil {
		t.Fatal(err)
	}
	got, err := g.svc.ZoneOperations.Wait(project, zone, op.Name).Do()
	if err != nil || got.Status != "RUNNING" {
		t.Errorf("wait without timeout = %v, %v; want RUNNING at once", got, err)
	}
}

func TestRequestIDMakesARetryIdempotent(t *testing.T) {
	f := start(t, fleetFile)
	const id = "3f1e2d4c-5b6a-4789-8abc-def012345678"
	first, err := f.svc.Instances.Stop(project, zone, "trainer-a").RequestId(id).Do()
	if err != nil {
		t.Fatal(err)
	}
	f.clock.add(time.Minute)
	if _, err := f.svc.Instances.Start(project, zone, "trainer-a").Do(); err != nil {
		t.Fatal(err)
	}
	again, err := f.svc.Instances.Stop(project, zone, "trainer-a").RequestId(id).Do()
	if err != nil {
		t.Fatal(err)
	}
	if again.Name != first.Name || again.Status != "DONE" {
		t.Errorf("retried stop answered %s %s, want the first operation %s, DONE", again.Name, again.Status, first.Name)
	}
	if got := f.status(t, "trainer-a"); got != "PROVISIONING" {
		t.Errorf("after the retry: %s, want the start under way (the stop not repeated)", got)
	}
	_, err = f.svc.Instances.Stop(project, zone, "trainer-a").RequestId("not-a-uuid").Do()
	apiErr(t, err, 400, "invalid")
}

func TestUnimplementedCallsSayWhat(t *testing.T) {
	f := start(t, fleetFile)
	_, err := f.svc.Instances.Reset(project, zone, "trainer-a").Do()
	herr := apiErr(t, err, http.StatusNotImplemented, "notImplemented")
	if !strings.Contains(herr.Message, "/reset") {
		t.Errorf("501 message = %q", herr.Message)
	}
}

func TestRequestLogAndCounts(t *testing.T) {
	f := start(t, fleetFile, computefake.WithRequestLog(2))
	for range 3 {
		f.get(t, "trainer-a")
	}
	_, _ = f.svc.Instances.Get(project, zone, "absent").Do()
	reqs := f.Requests()
	if len(reqs) != 2 || reqs[1].Status != 404 || reqs[0].Status != 200 || reqs[1].Resource != name("absent") {
		t.Errorf("ring = %+v", reqs)
	}
	if got := f.Count("instances.get", name("trainer-a")); got != 3 {
		t.Errorf("Count = %d, want 3", got)
	}
}
