package tpulegacy_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/tpu/apiv1/tpupb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/option"
	tpu "google.golang.org/api/tpu/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/tpulegacy"
	"github.com/tpu-autoheal/autoheal/internal/tpulegacy/legacyfake"
)

const (
	parent   = "projects/acme-ml/locations/us-central1-b"
	nodeName = parent + "/nodes/bert-v3-8"
)

var created = time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC)

func legacyNode() *tpupb.Node {
	return &tpupb.Node{
		Name:              nodeName,
		Description:       "bert fine-tuning",
		AcceleratorType:   "v3-8",
		TensorflowVersion: "2.12.0",
		Network:           "projects/acme-ml/global/networks/default",
		CidrBlock:         "10.240.0.0/29",
		ServiceAccount:    "service-123@cloud-tpu.iam.gserviceaccount.com",
		State:             tpupb.Node_TERMINATED,
		Health:            tpupb.Node_UNHEALTHY_MAINTENANCE,
		HealthDescription: "The TPU had a maintenance event",
		CreateTime:        timestamppb.New(created),
		SchedulingConfig:  &tpupb.SchedulingConfig{Preemptible: true, Reserved: true},
		NetworkEndpoints:  []*tpupb.NetworkEndpoint{{IpAddress: "10.240.0.2", Port: 8470}},
		Labels:            map[string]string{"tpu-autoheal": "enabled", "team": "nlp"},
		ApiVersion:        tpupb.Node_V1,
	}
}

func newClient(t *testing.T, nodes ...*tpupb.Node) (*tpulegacy.Client, *legacyfake.Server) {
	t.Helper()
	fake := legacyfake.New(nodes...)
	t.Cleanup(fake.Close)
	c, err := tpulegacy.NewFromOptions(context.Background(), fake.ClientOptions()...)
	if err != nil {
		t.Fatalf("NewFromOptions: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, fake
}

func TestGetNodeConvertsEveryFieldToTheV2Shape(t *testing.T) {
	c, _ := newClient(t, legacyNode())
	got, err := c.GetNode(context.Background(), nodeName)
	if err != nil {
		t.Fatalf("GetNode: %v", err)
	}
	want := &tpu.Node{
		Name:              nodeName,
		Description:       "bert fine-tuning",
		AcceleratorType:   "v3-8",
		RuntimeVersion:    "2.12.0",
		NetworkConfig:     &tpu.NetworkConfig{Network: "projects/acme-ml/global/networks/default"},
		CidrBlock:         "10.240.0.0/29",
		ServiceAccount:    &tpu.ServiceAccount{Email: "service-123@cloud-tpu.iam.gserviceaccount.com"},
		State:             "TERMINATED",
		Health:            "UNHEALTHY_MAINTENANCE",
		HealthDescription: "The TPU had a maintenance event",
		CreateTime:        "2026-11-20T03:00:00Z",
		SchedulingConfig:  &tpu.SchedulingConfig{Preemptible: true, Reserved: true},
		NetworkEndpoints:  []*tpu.NetworkEndpoint{{IpAddress: "10.240.0.2", Port: 8470}},
		Labels:            map[string]string{"tpu-autoheal": "enabled", "team": "nlp"},
		ApiVersion:        "V1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetNode (-want +got):\n%s", diff)
	}
}

func TestSpecSurvivesTheRoundTripThroughV2(t *testing.T) {
	n := legacyNode()
	n.UseServiceNetworking = true
	n.CidrBlock = ""
	got := tpulegacy.ToV1(tpulegacy.ToV2(n))
	want := &tpupb.Node{
		Name: nodeName, Description: n.Description, AcceleratorType: n.AcceleratorType,
		TensorflowVersion: n.TensorflowVersion, Network: n.Network, ServiceAccount: n.ServiceAccount,
		SchedulingConfig: n.SchedulingConfig, Labels: n.Labels, UseServiceNetworking: true,
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("ToV1(ToV2(node)) (-want +got):\n%s", diff)
	}
}

func TestErrorsAreClassifiedLikeV2Errors(t *testing.T) {
	c, fake := newClient(t, legacyNode())
	ctx := context.Background()

	_, err := c.GetNode(ctx, parent+"/nodes/gone")
	if !remediate.IsNotFound(err) {
		t.Errorf("GetNode of a missing node: IsNotFound(%v) = false, want true", err)
	}
	_, err = c.CreateNode(ctx, parent, "bert-v3-8", tpulegacy.ToV2(legacyNode()))
	if !remediate.IsAlreadyExists(err) {
		t.Errorf("CreateNode of an existing node: IsAlreadyExists(%v) = false, want true", err)
	}
	_, err = c.DeleteNode(ctx, parent+"/nodes/gone")
	if !remediate.IsNotFound(err) {
		t.Errorf("DeleteNode of a missing node: IsNotFound(%v) = false, want true", err)
	}
	fake.Fail(legacyfake.FailRule{RPC: legacyfake.RPCGet, Code: codes.Unavailable, Message: "try again", Times: 1})
	_, err = c.GetNode(ctx, nodeName)
	if !remediate.IsTransient(err) || status.Code(errors.Unwrap(errors.Unwrap(err))) != codes.Unavailable {
		t.Errorf("GetNode on UNAVAILABLE: err %v, want transient with the gRPC status kept", err)
	}
	if _, err := c.GetQueuedResource(ctx, parent+"/queuedResources/q"); !errors.Is(err, tpulegacy.ErrNoQueuedResources) || remediate.IsTransient(err) {
		t.Errorf("GetQueuedResource: err %v, want permanent ErrNoQueuedResources", err)
	}
	if _, err := c.ResetQueuedResource(ctx, parent+"/queuedResources/q"); !errors.Is(err, tpulegacy.ErrNoQueuedResources) {
		t.Errorf("ResetQueuedResource: err %v, want ErrNoQueuedResources", err)
	}
}

func TestDeleteAndCreateRunAsOperations(t *testing.T) {
	c, fake := newClient(t, legacyNode())
	ctx := context.Background()
	op, err := c.DeleteNode(ctx, nodeName)
	if err != nil {
		t.Fatalf("DeleteNode: %v", err)
	}
	if err := waitOp(ctx, c, op); err != nil {
		t.Fatalf("WaitOperation(delete): %v", err)
	}
	if n := fake.Node(nodeName); n != nil {
		t.Fatalf("node after delete = %v, want gone", n)
	}
	spec := tpulegacy.ToV2(legacyNode())
	op, err = c.CreateNode(ctx, parent, "bert-v3-8", spec)
	if err != nil {
		t.Fatalf("CreateNode: %v", err)
	}
	if err := waitOp(ctx, c, op); err != nil {
		t.Fatalf("WaitOperation(create): %v", err)
	}
	got, err := c.GetNode(ctx, nodeName)
	if err != nil {
		t.Fatalf("GetNode after create: %v", err)
	}
	if got.State != "READY" || got.Health != "HEALTHY" || got.RuntimeVersion != "2.12.0" || got.ApiVersion != "V1" {
		t.Errorf("node after create: state %s health %s runtime %s api %s, want READY HEALTHY 2.12.0 V1",
			got.State, got.Health, got.RuntimeVersion, got.ApiVersion)
	}
	reqs := fake.Creates()
	if len(reqs) != 1 {
		t.Fatalf("create requests = %d, want 1", len(reqs))
	}
	wantNode := legacyNode()
	wantNode.Name, wantNode.State, wantNode.Health, wantNode.HealthDescription = "", 0, 0, ""
	wantNode.CreateTime, wantNode.NetworkEndpoints, wantNode.ApiVersion = nil, nil, 0
	if diff := cmp.Diff(wantNode, reqs[0].GetNode(), protocmp.Transform()); diff != "" {
		t.Errorf("created node (-want +got):\n%s", diff)
	}
}

func TestFailedCreateOperationIsAStockoutNotATransientError(t *testing.T) {
	c, fake := newClient(t)
	fake.Fail(legacyfake.FailRule{RPC: legacyfake.RPCCreateResult, Code: codes.ResourceExhausted, Message: "There is no more capacity in the zone"})
	ctx := context.Background()
	op, err := c.CreateNode(ctx, parent, "bert-v3-8", tpulegacy.ToV2(legacyNode()))
	if err != nil {
		t.Fatalf("CreateNode: %v", err)
	}
	done, err := c.GetOperation(ctx, op)
	if !done || remediate.KindOf(err) != remediate.KindStockout {
		t.Errorf("GetOperation = %v, %v (%s); want done, stockout", done, err, remediate.KindOf(err))
	}
}

func TestListNodesPages(t *testing.T) {
	var nodes []*tpupb.Node
	for _, id := range []string{"a", "b", "c"} {
		n := legacyNode()
		n.Name = parent + "/nodes/" + id
		nodes = append(nodes, n)
	}
	other := legacyNode()
	other.Name = "projects/acme-ml/locations/europe-west4-a/nodes/d"
	c, _ := newClient(t, append(nodes, other)...)
	c.PageSize = 2
	var got []string
	token := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("ListNodes never ends")
		}
		page, next, err := c.ListNodes(context.Background(), "projects/acme-ml/locations/-", token)
		if err != nil {
			t.Fatalf("ListNodes: %v", err)
		}
		for _, n := range page {
			got = append(got, n.Name)
		}
		if token = next; token == "" {
			break
		}
	}
	want := []string{other.Name, parent + "/nodes/a", parent + "/nodes/b", parent + "/nodes/c"} // by name
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listed (-want +got):\n%s", diff)
	}
}

func TestNewFromOptionsDoesNoNetworkIO(t *testing.T) {
	// Nothing listens on port 1: a client that dialled at construction
	// (or blocked on the connection) would fail or hang here.
	c, err := tpulegacy.NewFromOptions(context.Background(),
		option.WithEndpoint("127.0.0.1:1"), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatalf("NewFromOptions: %v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.GetNode(ctx, nodeName); err == nil {
		t.Errorf("GetNode against a closed port succeeded, want an error from the first call")
	}
}

func TestPermissionsAreCoveredByTheV2Set(t *testing.T) {
	// function.Permissions (Terraform's custom role) is built from
	// tpuapi.Permissions: the v1 calls must need nothing more.
	have := map[string]bool{}
	for _, p := range tpuapi.Permissions {
		have[p] = true
	}
	for _, p := range tpulegacy.Permissions {
		if !have[p] {
			t.Errorf("tpulegacy permission %s is not in tpuapi.Permissions", p)
		}
	}
}

// waitOp looks at an operation until it is done.
func waitOp(ctx context.Context, c remediate.TPU, op string) error {
	for range 100 {
		done, err := c.GetOperation(ctx, op)
		if done || err != nil {
			return err
		}
	}
	return fmt.Errorf("operation %s not done after 100 looks", op)
}
