// Package tpulegacy adapts the Cloud TPU v1 API (cloud.google.com/go/tpu/apiv1,
// gRPC) to remediate.TPU, for legacy TPU Nodes: the architecture created
// through the v1 API, which the v2 API does not recreate (a v2 create makes
// a TPU VM). It converts v1 nodes to and from the v2 tpu.Node shape the rest
// of the system uses and gRPC errors to the domain's failure kinds (googleerr.FromAPI). It only translates calls; it never decides
// anything, and it has no queued resources (those calls fail permanently).
package tpulegacy

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	tpuv1 "cloud.google.com/go/tpu/apiv1"
	"cloud.google.com/go/tpu/apiv1/tpupb"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/failure"
	"github.com/tpu-autoheal/autoheal/internal/googleerr"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

var _ remediate.TPU = (*Client)(nil)

// DefaultPageSize is the nodes.list page size when PageSize is 0.
const DefaultPageSize = 100

// ErrNoQueuedResources is returned by the queued resource calls: legacy TPU
// Nodes are never owned by a queued resource. It is permanent (not a
// transient or API error).
var ErrNoQueuedResources = &failure.Error{Kind: failure.Permanent, Err: errors.New("legacy TPU nodes (TPU v1 API) have no queued resources")}

// Client implements remediate.TPU with the TPU v1 gRPC API.
type Client struct {
	c *tpuv1.Client

	// PageSize is the nodes.list page size (0 = DefaultPageSize).
	PageSize int
}

// New wraps an existing v1 client.
func New(c *tpuv1.Client) *Client { return &Client{c: c} }

// NewFromOptions builds the v1 client from client options (none for the
// real API with Application Default Credentials). The gRPC connection is
// dialled lazily: building the client does no network I/O.
func NewFromOptions(ctx context.Context, opts ...option.ClientOption) (*Client, error) {
	c, err := tpuv1.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tpu v1 client: %w", err)
	}
	return New(c), nil
}

// Close closes the gRPC connection.
func (c *Client) Close() error { return c.c.Close() }

// GetNode reads a legacy node (tpu.nodes.get).
func (c *Client) GetNode(ctx context.Context, name string) (*tpu.Node, error) {
	n, err := c.c.GetNode(ctx, &tpupb.GetNodeRequest{Name: name}) // rest: tpu.projects.locations.nodes.get
	if err != nil {
		return nil, fmt.Errorf("get legacy node %s: %w", name, googleerr.FromAPI(err))
	}
	return ToV2(n), nil
}

// ListNodes reads one page of the legacy nodes under parent (tpu.nodes.list).
func (c *Client) ListNodes(ctx context.Context, parent, pageToken string) ([]*tpu.Node, string, error) {
	size := c.PageSize
	if size <= 0 {
		size = DefaultPageSize
	}
	it := c.c.ListNodes(ctx, &tpupb.ListNodesRequest{Parent: parent}) // rest: tpu.projects.locations.nodes.list
	var page []*tpupb.Node
	next, err := iterator.NewPager(it, size, pageToken).NextPage(&page)
	if err != nil {
		return nil, "", fmt.Errorf("list legacy nodes in %s: %w", parent, googleerr.FromAPI(err))
	}
	nodes := make([]*tpu.Node, 0, len(page))
	for _, n := range page {
		nodes = append(nodes, ToV2(n))
	}
	return nodes, next, nil
}

// DeleteNode starts deleting a legacy node and returns the operation's name
// (tpu.nodes.delete).
func (c *Client) DeleteNode(ctx context.Context, name string) (string, error) {
	op, err := c.c.DeleteNode(ctx, &tpupb.DeleteNodeRequest{Name: name}) // rest: tpu.projects.locations.nodes.delete
	if err != nil {
		return "", fmt.Errorf("delete legacy node %s: %w", name, googleerr.FromAPI(err))
	}
	return op.Name(), nil
}

// CreateNode starts creating the legacy node parent/nodes/nodeID from the
// v2-shaped node (see ToV1) and returns the operation's name
// (tpu.nodes.create).
func (c *Client) CreateNode(ctx context.Context, parent, nodeID string, node *tpu.Node) (string, error) {
	n := ToV1(node)
	n.Name = ""
	op, err := c.c.CreateNode(ctx, &tpupb.CreateNodeRequest{Parent: parent, NodeId: nodeID, Node: n}) // rest: tpu.projects.locations.nodes.create
	if err != nil {
		return "", fmt.Errorf("create legacy node %s/nodes/%s: %w", parent, nodeID, googleerr.FromAPI(err))
	}
	return op.Name(), nil
}

// GetOperation looks at an operation once (tpu.operations.get); a finished
// operation's error is classified by its google.rpc code.
func (c *Client) GetOperation(ctx context.Context, name string) (bool, error) {
	op, err := c.c.GetOperation(ctx, &longrunningpb.GetOperationRequest{Name: name}) // rest: tpu.projects.locations.operations.get
	if err != nil {
		return false, fmt.Errorf("get legacy operation %s: %w", name, googleerr.FromAPI(err))
	}
	if !op.GetDone() {
		return false, nil
	}
	if st := op.GetError(); st != nil {
		return true, googleerr.Operation(name, st.GetCode(), st.GetMessage())
	}
	return true, nil
}

// GetQueuedResource always fails with ErrNoQueuedResources.
func (c *Client) GetQueuedResource(_ context.Context, name string) (*tpu.QueuedResource, error) {
	return nil, fmt.Errorf("get queued resource %s: %w", name, ErrNoQueuedResources)
}

// ResetQueuedResource always fails with ErrNoQueuedResources.
func (c *Client) ResetQueuedResource(_ context.Context, name string) (string, error) {
	return "", fmt.Errorf("reset queued resource %s: %w", name, ErrNoQueuedResources)
}

// CreateQueuedResource always fails with ErrNoQueuedResources.
func (c *Client) CreateQueuedResource(_ context.Context, parent, id string, _ *tpu.QueuedResource) (string, error) {
	return "", fmt.Errorf("create queued resource %s/queuedResources/%s: %w", parent, id, ErrNoQueuedResources)
}

// DeleteQueuedResource always fails with ErrNoQueuedResources.
func (c *Client) DeleteQueuedResource(_ context.Context, name string) (string, error) {
	return "", fmt.Errorf("delete queued resource %s: %w", name, ErrNoQueuedResources)
}
