package tpuapi_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/googleapi"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

const (
	zone   = "projects/acme-ml/locations/us-central2-b"
	llm    = zone + "/nodes/llm-v4-128"
	spotQR = "projects/acme-ml/locations/us-west4-a/queuedResources/qr-spot-v5e-16"
)

// start runs a fake seeded from a testdata fleet and returns a Client on it.
func start(t *testing.T, file string, opts ...tpufake.Option) (*tpufake.Server, *tpuapi.Client) {
	t.Helper()
	f, err := tpufake.ReadFleetFile("../../testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	s := tpufake.New(f, opts...)
	t.Cleanup(s.Close)
	svc, err := s.Service(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := tpuapi.New(svc)
	return s, c
}

func TestRecreateThroughClient(t *testing.T) {
	ctx := context.Background()
	s, c := start(t, "fleet.json")

	spec, err := c.GetNode(ctx, llm)
	if err != nil {
		t.Fatalf("GetNode: %v", err)
	}
	if spec.State != "TERMINATED" {
		t.Fatalf("state = %s, want TERMINATED", spec.State)
	}
	op, err := c.DeleteNode(ctx, llm)
	if err != nil {
		t.Fatalf("DeleteNode: %v", err)
	}
	if err := waitOp(ctx, c, op); err != nil {
		t.Fatalf("WaitOperation(delete): %v", err)
	}
	if _, err := c.GetNode(ctx, llm); !isCode(err, 404) {
		t.Fatalf("GetNode after delete: %v, want 404", err)
	}
	spec.Metadata["startup-script"] = "resume"
	op, err = c.CreateNode(ctx, zone, "llm-v4-128", spec)
	if err != nil {
		t.Fatalf("CreateNode: %v", err)
	}
	if err := waitOp(ctx, c, op); err != nil {
		t.Fatalf("WaitOperation(create): %v", err)
	}
	got, err := c.GetNode(ctx, llm)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "READY" || got.Health != "HEALTHY" || got.Metadata["startup-script"] != "resume" {
		t.Errorf("recreated node = %s/%s metadata %v, want READY/HEALTHY with the startup script", got.State, got.Health, got.Metadata)
	}
	if s.Count("nodes.delete", llm) != 1 || s.Count("nodes.create", llm) != 1 {
		t.Errorf("deletes = %d, creates = %d, want 1 each", s.Count("nodes.delete", llm), s.Count("nodes.create", llm))
	}
}

func TestListNodesPaging(t *testing.T) {
	ctx := context.Background()
	s, c := start(t, "fleet.json")
	c.PageSize = 3
	var names []string
	token, pages := "", 0
	for {
		nodes, next, err := c.ListNodes(ctx, "projects/acme-ml/locations/-", token)
		if err != nil {
			t.Fatalf("ListNodes: %v", err)
		}
		pages++
		for _, n := range nodes {
			names = append(names, n.Name)
		}
		if next == "" {
			break
		}
		token = next
	}
	if len(names) != 7 || pages != 3 || s.Count("nodes.list", "") != 3 {
		t.Errorf("listed %d nodes in %d pages (%d requests), want 7 in 3", len(names), pages, s.Count("nodes.list", ""))
	}
}

func TestQueuedResourceThroughClient(t *testing.T) {
	ctx := context.Background()
	_, c := start(t, "fleet-queued.json")
	q, err := c.GetQueuedResource(ctx, spotQR)
	if err != nil {
		t.Fatalf("GetQueuedResource: %v", err)
	}
	if q.State.State != "SUSPENDED" {
		t.Errorf("state = %s, want SUSPENDED", q.State.State)
	}
	op, err := c.ResetQueuedResource(ctx, spotQR)
	if err != nil {
		t.Fatalf("ResetQueuedResource: %v", err)
	}
	if err := waitOp(ctx, c, op); err != nil {
		t.Fatalf("WaitOperation(reset): %v", err)
	}
	q, _ = c.GetQueuedResource(ctx, spotQR)
	if q.State.State != "ACTIVE" {
		t.Errorf("state after reset = %s, want ACTIVE", q.State.State)
	}
}

func isCode(err error, code int) bool {
	var herr *googleapi.Error
	return errors.As(err, &herr) && herr.Code == code
}

func TestImmediateErrorsKeepGoogleAPIError(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		rule     *tpufake.FailRule
		call     func(*tpuapi.Client) error
		wantCode int
		wantText string // context the wrapper adds
	}{
		{
			name:     "missing node is 404",
			call:     func(c *tpuapi.Client) error { _, err := c.GetNode(ctx, zone+"/nodes/absent"); return err },
			wantCode: 404, wantText: "get node " + zone + "/nodes/absent",
		},
		{
			name: "create over an existing node is 409",
			call: func(c *tpuapi.Client) error {
				_, err := c.CreateNode(ctx, zone, "llm-v4-128", &tpu.Node{AcceleratorType: "v4-128", RuntimeVersion: "r"})
				return err
			},
			wantCode: 409, wantText: "create node " + llm,
		},
		{
			name:     "delete of a missing node is 404",
			call:     func(c *tpuapi.Client) error { _, err := c.DeleteNode(ctx, zone+"/nodes/absent"); return err },
			wantCode: 404, wantText: "delete node",
		},
		{
			name:     "unavailable list is 503",
			rule:     &tpufake.FailRule{RPC: "nodes.list", Code: 503},
			call:     func(c *tpuapi.Client) error { _, _, err := c.ListNodes(ctx, zone, ""); return err },
			wantCode: 503, wantText: "list nodes in " + zone,
		},
		{
			name:     "permission denied get is 403",
			rule:     &tpufake.FailRule{RPC: "nodes.get", Status: "PERMISSION_DENIED"},
			call:     func(c *tpuapi.Client) error { _, err := c.GetNode(ctx, llm); return err },
			wantCode: 403, wantText: "get node " + llm,
		},
		{
			name: "missing queued resource is 404",
			call: func(c *tpuapi.Client) error {
				_, err := c.GetQueuedResource(ctx, zone+"/queuedResources/q")
				return err
			},
			wantCode: 404, wantText: "get queued resource",
		},
		{
			name:     "reset refused is 400",
			rule:     &tpufake.FailRule{RPC: "queuedResources.reset", Status: "FAILED_PRECONDITION"},
			call:     func(c *tpuapi.Client) error { _, err := c.ResetQueuedResource(ctx, spotQR); return err },
			wantCode: 400, wantText: "reset queued resource " + spotQR,
		},
		{
			name: "operations.get failing is kept",
			rule: &tpufake.FailRule{RPC: "operations.get", Code: 503},
			call: func(c *tpuapi.Client) error {
				_, err := c.GetOperation(ctx, zone+"/operations/operation-1")
				return err
			},
			wantCode: 503, wantText: "get operation",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := start(t, "fleet-queued.json")
			s.SetNode(&tpu.Node{Name: llm, State: "TERMINATED"})
			if tt.rule != nil {
				s.Fail(*tt.rule)
			}
			err := tt.call(c)
			if !isCode(err, tt.wantCode) {
				t.Errorf("error = %v, want a *googleapi.Error with code %d in the chain", err, tt.wantCode)
			}
			if err != nil && !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error = %q, want context %q", err, tt.wantText)
			}
		})
	}
}

func TestFailedOperationIsClassifiedByItsCode(t *testing.T) {
	tests := []struct {
		status string
		want   remediate.Kind
	}{
		{"RESOURCE_EXHAUSTED", remediate.KindStockout}, // the fake's default message is a stockout
		{"ALREADY_EXISTS", remediate.KindAlreadyExists},
		{"NOT_FOUND", remediate.KindNotFound},
		{"UNAVAILABLE", remediate.KindTransient},
		{"INTERNAL", remediate.KindTransient},
		{"DEADLINE_EXCEEDED", remediate.KindTransient},
		{"PERMISSION_DENIED", remediate.KindPermanent},
		{"INVALID_ARGUMENT", remediate.KindPermanent},
		{"FAILED_PRECONDITION", remediate.KindPermanent},
	}
	for _, tt := range tests {
		t.Run(tt.status, func(t *testing.T) {
			ctx := context.Background()
			s, c := start(t, "fleet.json")
			s.Fail(tpufake.FailRule{RPC: "operation:nodes.create", Status: tt.status})
			op, err := c.CreateNode(ctx, zone, "fresh", &tpu.Node{AcceleratorType: "v4-8", RuntimeVersion: "r"})
			if err != nil {
				t.Fatalf("CreateNode: %v", err)
			}
			done, err := c.GetOperation(ctx, op)
			if !done || err == nil {
				t.Fatalf("GetOperation = %v, %v; want done with an error", done, err)
			}
			if got := remediate.KindOf(err); got != tt.want {
				t.Errorf("KindOf(%v) = %s, want %s", err, got, tt.want)
			}
			if !strings.Contains(err.Error(), op) {
				t.Errorf("error %q does not name the operation %s", err, op)
			}
		})
	}
}

func TestGetOperationLooksOnce(t *testing.T) {
	t.Run("running, then done", func(t *testing.T) {
		s, c := start(t, "fleet.json", tpufake.WithOperationPolls(3))
		op, err := c.DeleteNode(context.Background(), llm)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []bool{false, false, true} {
			done, err := c.GetOperation(context.Background(), op)
			if err != nil || done != want {
				t.Fatalf("look %d: GetOperation = %v, %v; want %v, nil", i+1, done, err, want)
			}
		}
		if got := s.Count("operations.get", op); got != 3 {
			t.Errorf("polled %d times, want 3 (one per look)", got)
		}
	})
	t.Run("unknown operation is not found", func(t *testing.T) {
		_, c := start(t, "fleet.json")
		done, err := c.GetOperation(context.Background(), zone+"/operations/operation-404")
		if done || !remediate.IsNotFound(err) {
			t.Errorf("GetOperation = %v, %v; want not done, NOT FOUND", done, err)
		}
	})
	t.Run("429 on a poll is transient", func(t *testing.T) {
		s, c := start(t, "fleet.json")
		op, err := c.DeleteNode(context.Background(), llm)
		if err != nil {
			t.Fatal(err)
		}
		s.Fail(tpufake.FailRule{RPC: "operations.get", Code: 429, Message: "Quota exceeded for quota metric 'Read requests' and limit 'Read requests per minute'"})
		done, err := c.GetOperation(context.Background(), op)
		if done || remediate.KindOf(err) != remediate.KindTransient {
			t.Errorf("GetOperation = %v, %v (%s); want not done, transient", done, err, remediate.KindOf(err))
		}
	})
}

func TestNewFromOptionsWithEndpoint(t *testing.T) {
	s := tpufake.New(tpufake.Fleet{Nodes: []*tpu.Node{{Name: llm, State: "TERMINATED"}}})
	defer s.Close()
	opts, err := tpuapi.EndpointOptions(s.URL()) // no trailing slash, as an env var would have it
	if err != nil {
		t.Fatal(err)
	}
	c, err := tpuapi.NewFromOptions(context.Background(), opts...)
	if err != nil {
		t.Fatalf("NewFromOptions: %v", err)
	}
	n, err := c.GetNode(context.Background(), llm)
	if err != nil || n.State != "TERMINATED" {
		t.Errorf("GetNode through the endpoint override = %v, %v; want the TERMINATED node", n, err)
	}
}

func TestEndpointOptions(t *testing.T) {
	tests := []struct {
		endpoint string
		wantN    int
		wantErr  bool
	}{
		{"", 0, false},
		{"https://tpu.example.test/", 1, false},
		{"http://127.0.0.1:8080", 2, false}, // plain http: no credentials
		{"127.0.0.1:8080", 0, true},
		{"ftp://host/", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.endpoint, func(t *testing.T) {
			got, err := tpuapi.EndpointOptions(tt.endpoint)
			if (err != nil) != tt.wantErr || len(got) != tt.wantN {
				t.Errorf("EndpointOptions(%q) = %d options, %v; want %d, error %v", tt.endpoint, len(got), err, tt.wantN, tt.wantErr)
			}
		})
	}
}

func TestPermissionsCoverEveryCall(t *testing.T) {
	want := []string{"tpu.nodes.get", "tpu.nodes.list", "tpu.nodes.create", "tpu.nodes.delete", "tpu.operations.get", "tpu.nodes.reset"}
	if diff := cmp.Diff(want, tpuapi.Permissions); diff != "" {
		t.Errorf("Permissions (-want +got):\n%s", diff)
	}
}

func TestConcurrentClients(t *testing.T) {
	s, c := start(t, "fleet.json", tpufake.WithOperationPolls(2))
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("c-%d", i)
			op, err := c.CreateNode(ctx, zone, id, &tpu.Node{AcceleratorType: "v4-8", RuntimeVersion: "r"})
			if err != nil {
				t.Errorf("CreateNode: %v", err)
				return
			}
			if err := waitOp(ctx, c, op); err != nil {
				t.Errorf("WaitOperation: %v", err)
			}
			if _, _, err := c.ListNodes(ctx, zone, ""); err != nil {
				t.Errorf("ListNodes: %v", err)
			}
			op, err = c.DeleteNode(ctx, zone+"/nodes/"+id)
			if err != nil {
				t.Errorf("DeleteNode: %v", err)
				return
			}
			if err := waitOp(ctx, c, op); err != nil {
				t.Errorf("WaitOperation: %v", err)
			}
		}()
	}
	wg.Wait()
	if got := len(s.Fleet().Nodes); got != 7 {
		t.Errorf("fleet has %d nodes after create+delete by 8 goroutines, want the original 7", got)
	}
}

// waitOp looks at an operation until it is done (the fake finishes it
// within a few looks).
func waitOp(ctx context.Context, c remediate.TPU, op string) error {
	for range 100 {
		done, err := c.GetOperation(ctx, op)
		if done || err != nil {
			return err
		}
	}
	return fmt.Errorf("operation %s not done after 100 looks", op)
}
