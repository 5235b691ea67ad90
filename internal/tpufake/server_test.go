package tpufake_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/api/googleapi"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

const (
	zone    = "projects/acme-ml/locations/us-central2-b"
	llm     = zone + "/nodes/llm-v4-128"
	stopped = zone + "/nodes/v4-8-stopped-by-user"
	spotQR  = "projects/acme-ml/locations/us-west4-a/queuedResources/qr-spot-v5e-16"
	spotQRN = "projects/acme-ml/locations/us-west4-a/nodes/qr-spot-v5e-16"
	msQR    = "projects/acme-ml/locations/us-east5-a/queuedResources/qr-multislice-v5p"
)

var clock = time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)

func fixedClock() time.Time { return clock }

// start runs a fake seeded from path ("" = empty fleet) and returns it with a
// real TPU v2 client talking to it.
func start(t *testing.T, path string, opts ...tpufake.Option) (*tpufake.Server, *tpu.Service) {
	t.Helper()
	var f tpufake.Fleet
	if path != "" {
		f = readFleet(t, path)
	}
	s := tpufake.New(f, append([]tpufake.Option{tpufake.WithClock(fixedClock)}, opts...)...)
	t.Cleanup(s.Close)
	svc, err := s.Service(context.Background())
	if err != nil {
		t.Fatalf("Service: %v", err)
	}
	return s, svc
}

// apiErr asserts err is a *googleapi.Error with the code and status.
func apiErr(t *testing.T, err error, code int, status string) *googleapi.Error {
	t.Helper()
	var herr *googleapi.Error
	if !errors.As(err, &herr) {
		t.Fatalf("error = %v (%T), want a *googleapi.Error", err, err)
	}
	if herr.Code != code {
		t.Errorf("error code = %d, want %d (%v)", herr.Code, code, err)
	}
	if !strings.Contains(herr.Body, `"status":"`+status+`"`) {
		t.Errorf("error body = %s, want status %s", herr.Body, status)
	}
	return herr
}

var ignoreServerResponse = cmpopts.IgnoreFields(tpu.Node{}, "ServerResponse")

func TestGetNode(t *testing.T) {
	s, svc := start(t, fleetFile)
	for _, want := range readFleet(t, fleetFile).Nodes {
		got, err := svc.Projects.Locations.Nodes.Get(want.Name).Do()
		if err != nil {
			t.Fatalf("get %s: %v", want.Name, err)
		}
		if diff := cmp.Diff(want, got, ignoreServerResponse); diff != "" {
			t.Errorf("get %s (-want +got):\n%s", want.Name, diff)
		}
	}
	_, err := svc.Projects.Locations.Nodes.Get(zone + "/nodes/absent").Do()
	herr := apiErr(t, err, 404, "NOT_FOUND")
	if !strings.Contains(herr.Message, "absent") {
		t.Errorf("404 message = %q, want it to name the node", herr.Message)
	}
	if got := s.Count("nodes.get", ""); got != 8 {
		t.Errorf("Count(nodes.get) = %d, want 8", got)
	}
}

func listAll(t *testing.T, svc *tpu.Service, parent string, pageSize int64) (names []string, pages int) {
	t.Helper()
	call := svc.Projects.Locations.Nodes.List(parent)
	if pageSize > 0 {
		call = call.PageSize(pageSize)
	}
	err := call.Pages(context.Background(), func(r *tpu.ListNodesResponse) error {
		pages++
		for _, n := range r.Nodes {
			names = append(names, n.Name[strings.LastIndex(n.Name, "/")+1:])
		}
		return nil
	})
	if err != nil {
		t.Fatalf("list %s: %v", parent, err)
	}
	return names, pages
}

func TestListNodesPages(t *testing.T) {
	all := []string{"llm-v4-128", "v3-8-exp", "spot-v5e-8-preempted", "v4-8-stopped-by-user", "v4-32-not-opted-in", "v5p-16-unhealthy-maintenance", "v4-16-repairing"}
	tests := []struct {
		name      string
		opts      []tpufake.Option
		parent    string
		pageSize  int64
		wantNames []string
		wantPages int
	}{
		{"all locations in one default page", nil, "projects/acme-ml/locations/-", 0, all, 1},
		{"page size from the request", nil, "projects/acme-ml/locations/-", 2, all, 4},
		{"default page size from the option", []tpufake.Option{tpufake.WithPageSize(3)}, "projects/acme-ml/locations/-", 0, all, 3},
		{"one zone only", nil, zone, 1, []string{"llm-v4-128", "v4-8-stopped-by-user", "v4-32-not-opted-in", "v4-16-repairing"}, 4},
		{"other project is empty", nil, "projects/other/locations/-", 0, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, svc := start(t, fleetFile, tt.opts...)
			names, pages := listAll(t, svc, tt.parent, tt.pageSize)
			if diff := cmp.Diff(tt.wantNames, names); diff != "" {
				t.Errorf("listed nodes (-want +got):\n%s", diff)
			}
			if pages != tt.wantPages || s.Count("nodes.list", tt.parent) != tt.wantPages {
				t.Errorf("pages = %d, requests = %d, want %d", pages, s.Count("nodes.list", tt.parent), tt.wantPages)
			}
		})
	}
}

func TestListNodesPageTokenSurvivesDeletes(t *testing.T) {
	s, svc := start(t, fleetFile)
	first, err := svc.Projects.Locations.Nodes.List("projects/acme-ml/locations/-").PageSize(2).Do()
	if err != nil {
		t.Fatal(err)
	}
	s.DeleteNodeNow(first.Nodes[1].Name) // already returned: must not shift the next page
	next, err := svc.Projects.Locations.Nodes.List("projects/acme-ml/locations/-").PageSize(2).PageToken(first.NextPageToken).Do()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := next.Nodes[0].Name, "projects/acme-ml/locations/us-west4-a/nodes/spot-v5e-8-preempted"; got != want {
		t.Errorf("second page starts at %s, want %s", got, want)
	}
	_, err = svc.Projects.Locations.Nodes.List(zone).PageToken("garbage").Do()
	apiErr(t, err, 400, "INVALID_ARGUMENT")
}

func getOp(t *testing.T, svc *tpu.Service, name string) *tpu.Operation {
	t.Helper()
	op, err := svc.Projects.Locations.Operations.Get(name).Do()
	if err != nil {
		t.Fatalf("get operation %s: %v", name, err)
	}
	return op
}

func getNode(t *testing.T, svc *tpu.Service, name string) *tpu.Node {
	t.Helper()
	n, err := svc.Projects.Locations.Nodes.Get(name).Do()
	if err != nil {
		t.Fatalf("get node %s: %v", name, err)
	}
	return n
}

func TestCreateNode(t *testing.T) {
	s, svc := start(t, fleetFile)
	spec := readFleet(t, fleetFile).Nodes[0]
	spec.Name, spec.State, spec.Id = "ignored", "TERMINATED", 1 // output only: the API ignores them
	name := zone + "/nodes/llm-v4-128-b"

	op, err := svc.Projects.Locations.Nodes.Create(zone, spec).NodeId("llm-v4-128-b").Do()
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if op.Done || !strings.HasPrefix(op.Name, zone+"/operations/operation-") {
		t.Errorf("create operation = %+v, want a pending %s/operations/operation-N", op, zone)
	}
	var md map[string]any
	if err := json.Unmarshal(op.Metadata, &md); err != nil || md["target"] != name || md["verb"] != "create" {
		t.Errorf("operation metadata = %s, want target %s verb create", op.Metadata, name)
	}
	if got := getNode(t, svc, name).State; got != "CREATING" {
		t.Errorf("state before the operation is done = %s, want CREATING", got)
	}

	done := getOp(t, svc, op.Name)
	if !done.Done || done.Error != nil {
		t.Fatalf("operation after one poll = %+v, want done without error", done)
	}
	var resp tpu.Node
	if err := json.Unmarshal(done.Response, &resp); err != nil || resp.Name != name || resp.Metadata != nil {
		t.Errorf("operation response = %s, want the node's name only (no spec kept in done operations)", done.Response)
	}

	got := getNode(t, svc, name)
	if got.State != "READY" || got.Health != "HEALTHY" || got.Id == 1 || got.Id == 0 ||
		got.CreateTime != clock.Format(time.RFC3339Nano) || len(got.NetworkEndpoints) != 16 {
		t.Errorf("created node = state %s health %s id %d createTime %s endpoints %d; want READY HEALTHY, fresh id, createTime %s, 16 endpoints (v4-128)",
			got.State, got.Health, got.Id, got.CreateTime, len(got.NetworkEndpoints), clock.Format(time.RFC3339Nano))
	}
	want := readFleet(t, fleetFile).Nodes[0]
	ignoreOutputOnly := cmpopts.IgnoreFields(tpu.Node{}, "Name", "State", "Health", "HealthDescription", "Id", "CreateTime", "NetworkEndpoints", "ServerResponse")
	if diff := cmp.Diff(want, got, ignoreOutputOnly); diff != "" {
		t.Errorf("created node spec differs from the request (-want +got):\n%s", diff)
	}

	_, err = svc.Projects.Locations.Nodes.Create(zone, spec).NodeId("llm-v4-128").Do()
	apiErr(t, err, 409, "ALREADY_EXISTS")
	_, err = svc.Projects.Locations.Nodes.Create(zone, spec).Do()
	apiErr(t, err, 400, "INVALID_ARGUMENT")
	_, err = svc.Projects.Locations.Nodes.Create(zone, &tpu.Node{AcceleratorType: "v4-8"}).NodeId("no-runtime").Do()
	apiErr(t, err, 400, "INVALID_ARGUMENT")

	if got := s.Count("nodes.create", name); got != 1 {
		t.Errorf("Count(nodes.create, %s) = %d, want 1", name, got)
	}
}

func TestDeleteNode(t *testing.T) {
	_, svc := start(t, fleetFile)
	op, err := svc.Projects.Locations.Nodes.Delete(llm).Do()
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	if got := getNode(t, svc, llm).State; got != "DELETING" {
		t.Errorf("state before the operation is done = %s, want DELETING", got)
	}
	if done := getOp(t, svc, op.Name); !done.Done || done.Error != nil {
		t.Fatalf("operation = %+v, want done", done)
	}
	_, err = svc.Projects.Locations.Nodes.Get(llm).Do()
	apiErr(t, err, 404, "NOT_FOUND")
	_, err = svc.Projects.Locations.Nodes.Delete(llm).Do()
	apiErr(t, err, 404, "NOT_FOUND")
}

func TestOperationPolls(t *testing.T) {
	t.Run("done on the n-th poll", func(t *testing.T) {
		s, svc := start(t, fleetFile, tpufake.WithOperationPolls(3))
		op, err := svc.Projects.Locations.Nodes.Delete(llm).Do()
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 2; i++ {
			if getOp(t, svc, op.Name).Done {
				t.Fatalf("operation done after %d polls, want 3", i)
			}
		}
		if !getOp(t, svc, op.Name).Done {
			t.Fatal("operation not done after 3 polls")
		}
		if !getOp(t, svc, op.Name).Done {
			t.Fatal("done operation is not done when polled again")
		}
		if got := s.Count("operations.get", op.Name); got != 4 {
			t.Errorf("Count(operations.get) = %d, want 4", got)
		}
	})
	t.Run("zero polls: done when started", func(t *testing.T) {
		_, svc := start(t, fleetFile, tpufake.WithOperationPolls(0))
		op, err := svc.Projects.Locations.Nodes.Delete(llm).Do()
		if err != nil {
			t.Fatal(err)
		}
		if !op.Done {
			t.Errorf("operation = %+v, want done", op)
		}
		_, err = svc.Projects.Locations.Nodes.Get(llm).Do()
		apiErr(t, err, 404, "NOT_FOUND")
	})
	t.Run("unknown operation", func(t *testing.T) {
		_, svc := start(t, "")
		_, err := svc.Projects.Locations.Operations.Get(zone + "/operations/operation-99").Do()
		apiErr(t, err, 404, "NOT_FOUND")
	})
}

func TestQueuedResourceReset(t *testing.T) {
	s, svc := start(t, queuedFleetFile)
	q, err := svc.Projects.Locations.QueuedResources.Get(spotQR).Do()
	if err != nil {
		t.Fatalf("get queued resource: %v", err)
	}
	if q.State.State != "SUSPENDED" {
		t.Errorf("state = %s, want SUSPENDED", q.State.State)
	}
	old := getNode(t, svc, spotQRN)

	op, err := svc.Projects.Locations.QueuedResources.Reset(spotQR, &tpu.ResetQueuedResourceRequest{}).Do()
	if err != nil {
		t.Fatalf("reset: %v", err)
	}
	if got := getNode(t, svc, spotQRN).State; got != "DELETING" {
		t.Errorf("node during reset = %s, want DELETING", got)
	}
	q, _ = svc.Projects.Locations.QueuedResources.Get(spotQR).Do()
	if q.State.State != "WAITING_FOR_RESOURCES" {
		t.Errorf("queued resource during reset = %s, want WAITING_FOR_RESOURCES", q.State.State)
	}
	_, err = svc.Projects.Locations.QueuedResources.Reset(spotQR, &tpu.ResetQueuedResourceRequest{}).Do()
	apiErr(t, err, 400, "FAILED_PRECONDITION")

	if done := getOp(t, svc, op.Name); !done.Done || done.Error != nil {
		t.Fatalf("reset operation = %+v, want done", done)
	}
	q, _ = svc.Projects.Locations.QueuedResources.Get(spotQR).Do()
	if q.State.State != "ACTIVE" {
		t.Errorf("queued resource after reset = %s, want ACTIVE", q.State.State)
	}
	n := getNode(t, svc, spotQRN)
	if n.State != "READY" || n.Health != "HEALTHY" || n.QueuedResource != spotQR || n.Id == old.Id || n.Labels["tpu-autoheal"] != "enabled" {
		t.Errorf("node after reset = %s/%s qr %q id %d (old %d) labels %v; want a fresh READY HEALTHY node of %s from the spec",
			n.State, n.Health, n.QueuedResource, n.Id, old.Id, n.Labels, spotQR)
	}

	_, err = svc.Projects.Locations.QueuedResources.Reset(zone+"/queuedResources/absent", &tpu.ResetQueuedResourceRequest{}).Do()
	apiErr(t, err, 404, "NOT_FOUND")
	_, err = svc.Projects.Locations.QueuedResources.Get(zone + "/queuedResources/absent").Do()
	apiErr(t, err, 404, "NOT_FOUND")
	if got := s.Count("queuedResources.reset", spotQR); got != 2 {
		t.Errorf("Count(queuedResources.reset) = %d, want 2", got)
	}
}

func TestMultisliceResetRecreatesEverySlice(t *testing.T) {
	s, svc := start(t, queuedFleetFile)
	op, err := svc.Projects.Locations.QueuedResources.Reset(msQR, &tpu.ResetQueuedResourceRequest{}).Do()
	if err != nil {
		t.Fatal(err)
	}
	getOp(t, svc, op.Name)
	var got []string
	for _, n := range s.Fleet().Nodes {
		if n.QueuedResource == msQR {
			got = append(got, fmt.Sprintf("%s %s %v", n.Name[strings.LastIndex(n.Name, "/")+1:], n.State, n.MultisliceNode))
		}
	}
	want := []string{"ms-v5p-0 READY true", "ms-v5p-1 READY true"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slices after reset (-want +got):\n%s", diff)
	}
}

func TestFailRules(t *testing.T) {
	tests := []struct {
		name       string
		rule       tpufake.FailRule
		call       func(*tpu.Service) error
		wantErrs   []int // per call, 0 = success
		wantStatus string
	}{
		{
			name:     "fails the given number of times then succeeds",
			rule:     tpufake.FailRule{RPC: "nodes.get", Code: 503, Times: 2},
			call:     func(svc *tpu.Service) error { _, err := svc.Projects.Locations.Nodes.Get(llm).Do(); return err },
			wantErrs: []int{503, 503, 0}, wantStatus: "UNAVAILABLE",
		},
		{
			name:     "times 0 fails always",
			rule:     tpufake.FailRule{RPC: "nodes.list", Status: "PERMISSION_DENIED"},
			call:     func(svc *tpu.Service) error { _, err := svc.Projects.Locations.Nodes.List(zone).Do(); return err },
			wantErrs: []int{403, 403, 403}, wantStatus: "PERMISSION_DENIED",
		},
		{
			name:     "name-specific rule leaves other nodes alone",
			rule:     tpufake.FailRule{RPC: "nodes.get", Name: stopped, Code: 500},
			call:     func(svc *tpu.Service) error { _, err := svc.Projects.Locations.Nodes.Get(llm).Do(); return err },
			wantErrs: []int{0, 0},
		},
		{
			name: "create fails before anything is created",
			rule: tpufake.FailRule{RPC: "nodes.create", Name: zone + "/nodes/new", Code: 429},
			call: func(svc *tpu.Service) error {
				_, err := svc.Projects.Locations.Nodes.Create(zone, &tpu.Node{AcceleratorType: "v4-8", RuntimeVersion: "r"}).NodeId("new").Do()
				return err
			},
			wantErrs: []int{429, 429}, wantStatus: "RESOURCE_EXHAUSTED",
		},
		{
			name: "delete on one node",
			rule: tpufake.FailRule{RPC: "nodes.delete", Name: llm, Code: 409, Status: "ABORTED", Times: 1},
			call: func(svc *tpu.Service) error {
				_, err := svc.Projects.Locations.Nodes.Delete(llm).Do()
				return err
			},
			wantErrs: []int{409, 0}, wantStatus: "ABORTED",
		},
		{
			name: "queued resource get",
			rule: tpufake.FailRule{RPC: "queuedResources.get", Code: 504},
			call: func(svc *tpu.Service) error {
				_, err := svc.Projects.Locations.QueuedResources.Get(spotQR).Do()
				return err
			},
			wantErrs: []int{504}, wantStatus: "DEADLINE_EXCEEDED",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, svc := start(t, queuedFleetFile)
			s.SetNode(&tpu.Node{Name: llm, State: "TERMINATED"})
			s.SetNode(&tpu.Node{Name: stopped, State: "STOPPED"})
			s.Fail(tt.rule)
			for i, want := range tt.wantErrs {
				err := tt.call(svc)
				if want == 0 {
					if err != nil {
						t.Errorf("call %d: %v, want success", i+1, err)
					}
					continue
				}
				apiErr(t, err, want, tt.wantStatus)
			}
		})
	}
	t.Run("failed create leaves no node", func(t *testing.T) {
		s, svc := start(t, "")
		s.Fail(tpufake.FailRule{RPC: "nodes.create", Code: 503})
		_, err := svc.Projects.Locations.Nodes.Create(zone, &tpu.Node{AcceleratorType: "v4-8", RuntimeVersion: "r"}).NodeId("new").Do()
		apiErr(t, err, 503, "UNAVAILABLE")
		if got := len(s.Fleet().Nodes); got != 0 {
			t.Errorf("fleet has %d nodes after a failed create, want 0", got)
		}
	})
	t.Run("custom message", func(t *testing.T) {
		s, svc := start(t, fleetFile)
		s.Fail(tpufake.FailRule{RPC: "nodes.get", Status: "UNAVAILABLE", Message: "backend flaked"})
		_, err := svc.Projects.Locations.Nodes.Get(llm).Do()
		if herr := apiErr(t, err, 503, "UNAVAILABLE"); herr.Message != "backend flaked" {
			t.Errorf("message = %q, want %q", herr.Message, "backend flaked")
		}
	})
}

func TestOperationFailRules(t *testing.T) {
	t.Run("stockout fails the create operation and leaves no node", func(t *testing.T) {
		s, svc := start(t, fleetFile)
		s.Fail(tpufake.FailRule{RPC: "operation:nodes.create", Name: zone + "/nodes/again", Status: "RESOURCE_EXHAUSTED"})
		op, err := svc.Projects.Locations.Nodes.Create(zone, &tpu.Node{AcceleratorType: "v4-8", RuntimeVersion: "r"}).NodeId("again").Do()
		if err != nil {
			t.Fatalf("create request: %v (the request succeeds; its operation fails)", err)
		}
		done := getOp(t, svc, op.Name)
		if !done.Done || done.Error == nil || done.Error.Code != 8 || !strings.Contains(done.Error.Message, "no more capacity") || done.Response != nil {
			t.Errorf("operation = done %v error %+v response %s; want done with code 8 (RESOURCE_EXHAUSTED) stockout and no response", done.Done, done.Error, done.Response)
		}
		_, err = svc.Projects.Locations.Nodes.Get(zone + "/nodes/again").Do()
		apiErr(t, err, 404, "NOT_FOUND")
	})
	t.Run("failed delete restores the node's state", func(t *testing.T) {
		s, svc := start(t, fleetFile)
		s.Fail(tpufake.FailRule{RPC: "operation:nodes.delete", Code: 503, Times: 1})
		op, err := svc.Projects.Locations.Nodes.Delete(llm).Do()
		if err != nil {
			t.Fatal(err)
		}
		if done := getOp(t, svc, op.Name); done.Error == nil || done.Error.Code != 14 {
			t.Errorf("operation error = %+v, want code 14 (UNAVAILABLE)", done.Error)
		}
		if got := getNode(t, svc, llm).State; got != "TERMINATED" {
			t.Errorf("state after failed delete = %s, want TERMINATED", got)
		}
		op, _ = svc.Projects.Locations.Nodes.Delete(llm).Do()
		if done := getOp(t, svc, op.Name); done.Error != nil {
			t.Errorf("second delete failed: %+v (rule had Times 1)", done.Error)
		}
	})
	t.Run("failed reset leaves the queued resource FAILED", func(t *testing.T) {
		s, svc := start(t, queuedFleetFile)
		s.Fail(tpufake.FailRule{RPC: "operation:queuedResources.reset", Name: spotQR, Status: "RESOURCE_EXHAUSTED"})
		op, err := svc.Projects.Locations.QueuedResources.Reset(spotQR, &tpu.ResetQueuedResourceRequest{}).Do()
		if err != nil {
			t.Fatal(err)
		}
		if done := getOp(t, svc, op.Name); done.Error == nil || done.Error.Code != 8 {
			t.Errorf("operation error = %+v, want code 8", done.Error)
		}
		q, _ := svc.Projects.Locations.QueuedResources.Get(spotQR).Do()
		if q.State.State != "FAILED" || q.State.FailedData == nil || q.State.FailedData.Error.Code != 8 {
			t.Errorf("queued resource state = %+v, want FAILED with the error", q.State)
		}
	})
}

func TestFailRuleDelay(t *testing.T) {
	t.Run("slow request honours the client's deadline", func(t *testing.T) {
		s, svc := start(t, fleetFile)
		s.Fail(tpufake.FailRule{RPC: "nodes.get", Delay: time.Minute})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := svc.Projects.Locations.Nodes.Get(llm).Context(ctx).Do()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error = %v, want context.DeadlineExceeded", err)
		}
	})
	t.Run("delay then answer", func(t *testing.T) {
		s, svc := start(t, fleetFile)
		const delay = 30 * time.Millisecond
		s.Fail(tpufake.FailRule{RPC: "nodes.get", Delay: delay, Times: 1})
		begin := time.Now()
		if _, err := svc.Projects.Locations.Nodes.Get(llm).Do(); err != nil {
			t.Fatal(err)
		}
		if elapsed := time.Since(begin); elapsed < delay {
			t.Errorf("answered after %v, want at least the %v delay", elapsed, delay)
		}
	})
	t.Run("delayed operation completion", func(t *testing.T) {
		s, svc := start(t, fleetFile)
		s.Fail(tpufake.FailRule{RPC: "operation:nodes.delete", Delay: time.Minute})
		op, err := svc.Projects.Locations.Nodes.Delete(llm).Do()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err = svc.Projects.Locations.Operations.Get(op.Name).Context(ctx).Do()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error = %v, want context.DeadlineExceeded", err)
		}
		if got := getNode(t, svc, llm).State; got != "DELETING" {
			t.Errorf("state = %s, want DELETING while the completion is delayed", got)
		}
	})
	t.Run("close cuts delays short", func(t *testing.T) {
		s := tpufake.New(tpufake.Fleet{})
		svc, err := s.Service(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		s.Fail(tpufake.FailRule{RPC: "nodes.get", Delay: time.Hour})
		errc := make(chan error, 1)
		go func() { _, err := svc.Projects.Locations.Nodes.Get(llm).Do(); errc <- err }()
		for s.Count("nodes.get", "") == 0 {
			time.Sleep(time.Millisecond)
		}
		s.Close() // must not wait an hour
		if err := <-errc; err == nil {
			t.Error("delayed request succeeded after Close")
		}
	})
}

func TestRequestLog(t *testing.T) {
	s, svc := start(t, fleetFile)
	getNode(t, svc, llm)
	_, _ = svc.Projects.Locations.Nodes.Get(zone + "/nodes/absent").Do()
	op, err := svc.Projects.Locations.Nodes.Create(zone, &tpu.Node{AcceleratorType: "v4-8", RuntimeVersion: "r", Metadata: map[string]string{"startup-script": "resume"}}).NodeId("n2").Do()
	if err != nil {
		t.Fatal(err)
	}
	getOp(t, svc, op.Name)
	_, err = svc.Projects.Locations.Nodes.Stop(llm, &tpu.StopNodeRequest{}).Do()
	apiErr(t, err, 501, "UNIMPLEMENTED")

	type entry struct{ RPC, Name, Method, Path string }
	var got []entry
	for _, r := range s.Requests() {
		got = append(got, entry{r.RPC, r.Name, r.Method, r.Path})
		if !r.Time.Equal(clock) {
			t.Errorf("request time = %v, want the injected clock %v", r.Time, clock)
		}
	}
	want := []entry{
		{"nodes.get", llm, "GET", "/v2/" + llm},
		{"nodes.get", zone + "/nodes/absent", "GET", "/v2/" + zone + "/nodes/absent"},
		{"nodes.create", zone + "/nodes/n2", "POST", "/v2/" + zone + "/nodes"},
		{"operations.get", op.Name, "GET", "/v2/" + op.Name},
		{"unknown", llm + ":stop", "POST", "/v2/" + llm + ":stop"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request log (-want +got):\n%s", diff)
	}
	if body := string(s.Requests()[2].Body); !strings.Contains(body, `"startup-script":"resume"`) {
		t.Errorf("create body = %s, want the node spec sent", body)
	}
	if got := s.Count("nodes.get", llm); got != 1 {
		t.Errorf("Count(nodes.get, llm) = %d, want 1", got)
	}
}

func TestFleetSnapshot(t *testing.T) {
	s, svc := start(t, fleetFile)
	snap := s.Fleet()
	snap.Nodes[0].Labels["tpu-autoheal"] = "mutated"
	if got := s.Fleet().Nodes[0].Labels["tpu-autoheal"]; got != "enabled" {
		t.Errorf("mutating a snapshot changed the server: label = %q", got)
	}

	// A recreated node keeps its place; new nodes go last.
	op, _ := svc.Projects.Locations.Nodes.Delete(llm).Do()
	getOp(t, svc, op.Name)
	op, err := svc.Projects.Locations.Nodes.Create(zone, &tpu.Node{AcceleratorType: "v4-128", RuntimeVersion: "r"}).NodeId("llm-v4-128").Do()
	if err != nil {
		t.Fatal(err)
	}
	getOp(t, svc, op.Name)
	s.SetNode(&tpu.Node{Name: zone + "/nodes/added", State: "READY"})
	s.DeleteNodeNow(stopped)
	var got []string
	for _, n := range s.Fleet().Nodes {
		got = append(got, n.Name[strings.LastIndex(n.Name, "/")+1:]+" "+n.State)
	}
	want := []string{
		"llm-v4-128 READY", "v3-8-exp READY", "spot-v5e-8-preempted PREEMPTED", "v4-32-not-opted-in TERMINATED",
		"v5p-16-unhealthy-maintenance READY", "v4-16-repairing REPAIRING", "added READY",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fleet after recreate, SetNode and DeleteNodeNow (-want +got):\n%s", diff)
	}
}

func TestNewPanicsOnInvalidFleet(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "nodes[0].name") {
			t.Errorf("recover() = %v, want a panic naming nodes[0].name", r)
		}
	}()
	tpufake.New(tpufake.Fleet{Nodes: []*tpu.Node{{Name: "short"}}})
}

// waitOp polls until done; safe to call from any goroutine (no t.Fatal).
func waitOp(t *testing.T, svc *tpu.Service, name string) {
	for {
		op, err := svc.Projects.Locations.Operations.Get(name).Do()
		if err != nil {
			t.Errorf("get operation %s: %v", name, err)
			return
		}
		if op.Done {
			return
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	s, svc := start(t, fleetFile, tpufake.WithOperationPolls(2))
	const workers, rounds = 8, 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				// Everyone races to create the same node; exactly one wins per round.
				op, err := svc.Projects.Locations.Nodes.Create(zone, &tpu.Node{AcceleratorType: "v4-8", RuntimeVersion: "r"}).NodeId(fmt.Sprintf("race-%d", i)).Do()
				if err == nil {
					mu.Lock()
					created++
					mu.Unlock()
					waitOp(t, svc, op.Name)
				} else {
					var herr *googleapi.Error
					if !errors.As(err, &herr) || herr.Code != 409 {
						t.Errorf("create race-%d: %v, want success or 409", i, err)
					}
				}
				own := fmt.Sprintf("%s/nodes/own-%d-%d", zone, w, i)
				s.SetNode(&tpu.Node{Name: own, State: "TERMINATED"})
				if op, err := svc.Projects.Locations.Nodes.Delete(own).Do(); err != nil {
					t.Errorf("delete %s: %v", own, err)
				} else {
					waitOp(t, svc, op.Name)
				}
				_, _ = svc.Projects.Locations.Nodes.List("projects/acme-ml/locations/-").PageSize(3).Do()
				s.Fail(tpufake.FailRule{RPC: "nodes.get", Name: own, Code: 503, Times: 1})
				_ = s.Fleet()
				_ = s.Requests()
				_ = s.Count("nodes.get", "")
			}
		}()
	}
	wg.Wait()
	if created != rounds {
		t.Errorf("%d creates succeeded, want exactly one per name (%d)", created, rounds)
	}
	if got, want := len(s.Fleet().Nodes), 7+rounds; got != want {
		t.Errorf("fleet has %d nodes, want %d (own nodes deleted, race nodes created once)", got, want)
	}
	if got, want := s.Count("nodes.create", ""), workers*rounds; got != want {
		t.Errorf("Count(nodes.create) = %d, want %d", got, want)
	}
}
