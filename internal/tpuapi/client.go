package tpuapi

import (
	"context"
	"fmt"

	"google.golang.org/api/option"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/endpoint"
	"github.com/tpu-autoheal/autoheal/internal/googleerr"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

var _ remediate.TPU = (*Client)(nil)

// Client implements remediate.TPU with the TPU v2 REST API. Every error
// is classified (googleerr.FromAPI) and says what was being done.
type Client struct {
	svc *tpu.Service

	// PageSize is the nodes.list page size ListNodes asks for (0 = the
	// API's default).
	PageSize int64
}

// New wraps an existing TPU v2 service.
func New(svc *tpu.Service) *Client { return &Client{svc: svc} }

// NewFromOptions builds the service from client options: none for the real
// API with Application Default Credentials, or EndpointOptions for a
// simulated control plane.
func NewFromOptions(ctx context.Context, opts ...option.ClientOption) (*Client, error) {
	svc, err := tpu.NewService(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tpu client: %w", err)
	}
	return New(svc), nil
}

// EndpointOptions returns the client options for an endpoint override
// (AUTOHEAL_TPU_ENDPOINT): nil for "" (the real API), the endpoint for an
// https URL, and the endpoint without authentication for a plain http URL
// (a local simulator such as `autoheal replay --fleet`), so credentials are
// never sent in clear text.
func EndpointOptions(e string) ([]option.ClientOption, error) {
	return endpoint.Options("tpu endpoint", e, "")
}

// GetNode reads a node (tpu.nodes.get).
func (c *Client) GetNode(ctx context.Context, name string) (*tpu.Node, error) {
	n, err := c.svc.Projects.Locations.Nodes.Get(name).Context(ctx).Do() // rest: tpu.projects.locations.nodes.get
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", name, googleerr.FromAPI(err))
	}
	return n, nil
}

// ListNodes reads one page of the nodes under parent
// (projects/P/locations/Z, Z may be "-"; tpu.nodes.list).
func (c *Client) ListNodes(ctx context.Context, parent, pageToken string) ([]*tpu.Node, string, error) {
	call := c.svc.Projects.Locations.Nodes.List(parent).Context(ctx)
	if pageToken != "" {
		call = call.PageToken(pageToken)
	}
	if c.PageSize > 0 {
		call = call.PageSize(c.PageSize)
	}
	resp, err := call.Do() // rest: tpu.projects.locations.nodes.list
	if err != nil {
		return nil, "", fmt.Errorf("list nodes in %s: %w", parent, googleerr.FromAPI(err))
	}
	return resp.Nodes, resp.NextPageToken, nil
}

// DeleteNode starts deleting a node and returns the operation's name
// (tpu.nodes.delete).
func (c *Client) DeleteNode(ctx context.Context, name string) (string, error) {
	op, err := c.svc.Projects.Locations.Nodes.Delete(name).Context(ctx).Do() // rest: tpu.projects.locations.nodes.delete
	if err != nil {
		return "", fmt.Errorf("delete node %s: %w", name, googleerr.FromAPI(err))
	}
	return op.Name, nil
}

// CreateNode starts creating parent/nodes/nodeID from node and returns the
// operation's name (tpu.nodes.create).
func (c *Client) CreateNode(ctx context.Context, parent, nodeID string, node *tpu.Node) (string, error) {
	op, err := c.svc.Projects.Locations.Nodes.Create(parent, node).NodeId(nodeID).Context(ctx).Do() // rest: tpu.projects.locations.nodes.create
	if err != nil {
		return "", fmt.Errorf("create node %s/nodes/%s: %w", parent, nodeID, googleerr.FromAPI(err))
	}
	return op.Name, nil
}

// GetQueuedResource reads a queued resource (authorized as tpu.nodes.get; see Permissions).
func (c *Client) GetQueuedResource(ctx context.Context, name string) (*tpu.QueuedResource, error) {
	q, err := c.svc.Projects.Locations.QueuedResources.Get(name).Context(ctx).Do() // rest: tpu.projects.locations.queuedResources.get
	if err != nil {
		return nil, fmt.Errorf("get queued resource %s: %w", name, googleerr.FromAPI(err))
	}
	return q, nil
}

// ResetQueuedResource starts resetting a queued resource (all its nodes, all
// slices of a multislice) and returns the operation's name.
func (c *Client) ResetQueuedResource(ctx context.Context, name string) (string, error) {
	op, err := c.svc.Projects.Locations.QueuedResources.Reset(name, &tpu.ResetQueuedResourceRequest{}).Context(ctx).Do() // rest: tpu.projects.locations.queuedResources.reset
	if err != nil {
		return "", fmt.Errorf("reset queued resource %s: %w", name, googleerr.FromAPI(err))
	}
	return op.Name, nil
}

// CreateQueuedResource starts creating parent/queuedResources/id from q
// and returns the operation's name (v2 queuedResources.create: its spot
// and guaranteed tiers, reservation and queueing policy are all the queue
// fallback sends; v2alpha1's best-effort tier is not used).
func (c *Client) CreateQueuedResource(ctx context.Context, parent, id string, q *tpu.QueuedResource) (string, error) {
	op, err := c.svc.Projects.Locations.QueuedResources.Create(parent, q).QueuedResourceId(id).Context(ctx).Do() // rest: tpu.projects.locations.queuedResources.create
	if err != nil {
		return "", fmt.Errorf("create queued resource %s/queuedResources/%s: %w", parent, id, googleerr.FromAPI(err))
	}
	return op.Name, nil
}

// DeleteQueuedResource starts deleting a queued resource and its nodes
// (force) and returns the operation's name.
func (c *Client) DeleteQueuedResource(ctx context.Context, name string) (string, error) {
	op, err := c.svc.Projects.Locations.QueuedResources.Delete(name).Force(true).Context(ctx).Do() // rest: tpu.projects.locations.queuedResources.delete
	if err != nil {
		return "", fmt.Errorf("delete queued resource %s: %w", name, googleerr.FromAPI(err))
	}
	return op.Name, nil
}

// GetOperation looks at an operation once (tpu.operations.get): done false
// while it runs; done true when it finished, with the operation's error
// classified by its google.rpc code (RESOURCE_EXHAUSTED a stockout,
// INTERNAL transient, PERMISSION_DENIED permanent, …).
func (c *Client) GetOperation(ctx context.Context, name string) (bool, error) {
	op, err := c.svc.Projects.Locations.Operations.Get(name).Context(ctx).Do() // rest: tpu.projects.locations.operations.get
	if err != nil {
		return false, fmt.Errorf("get operation %s: %w", name, googleerr.FromAPI(err))
	}
	if !op.Done {
		return false, nil
	}
	if op.Error != nil {
		return true, googleerr.Operation(name, int32(op.Error.Code), op.Error.Message)
	}
	return true, nil
}
