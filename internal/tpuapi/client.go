package tpuapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

var _ remediate.TPU = (*Client)(nil)

// DefaultPollInterval is how often WaitOperation polls when PollInterval is 0.
const DefaultPollInterval = 2 * time.Second

// Client implements remediate.TPU with the TPU v2 REST API. Every error
// wraps the API's error (a *googleapi.Error) with what was being done.
type Client struct {
	svc *tpu.Service

	// PollInterval is the wait between two operations.get in WaitOperation
	// (0 = DefaultPollInterval).
	PollInterval time.Duration
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
func EndpointOptions(endpoint string) ([]option.ClientOption, error) {
	if endpoint == "" {
		return nil, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("tpu endpoint %q: want an http(s) URL", endpoint)
	}
	if u.Path == "" {
		endpoint += "/"
	}
	opts := []option.ClientOption{option.WithEndpoint(endpoint)}
	if u.Scheme == "http" {
		opts = append(opts, option.WithoutAuthentication())
	}
	return opts, nil
}

// GetNode reads a node (tpu.nodes.get).
func (c *Client) GetNode(ctx context.Context, name string) (*tpu.Node, error) {
	// rest: tpu.projects.locations.nodes.get
	n, err := c.svc.Projects.Locations.Nodes.Get(name).Context(ctx).Do()
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", name, err)
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
	// rest: tpu.projects.locations.nodes.list
	resp, err := call.Do()
	if err != nil {
		return nil, "", fmt.Errorf("list nodes in %s: %w", parent, err)
	}
	return resp.Nodes, resp.NextPageToken, nil
}

// DeleteNode starts deleting a node and returns the operation's name
// (tpu.nodes.delete).
func (c *Client) DeleteNode(ctx context.Context, name string) (string, error) {
	// rest: tpu.projects.locations.nodes.delete
	op, err := c.svc.Projects.Locations.Nodes.Delete(name).Context(ctx).Do()
	if err != nil {
		return "", fmt.Errorf("delete node %s: %w", name, err)
	}
	return op.Name, nil
}

// CreateNode starts creating parent/nodes/nodeID from node and returns the
// operation's name (tpu.nodes.create).
func (c *Client) CreateNode(ctx context.Context, parent, nodeID string, node *tpu.Node) (string, error) {
	// rest: tpu.projects.locations.nodes.create
	op, err := c.svc.Projects.Locations.Nodes.Create(parent, node).NodeId(nodeID).Context(ctx).Do()
	if err != nil {
		return "", fmt.Errorf("create node %s/nodes/%s: %w", parent, nodeID, err)
	}
	return op.Name, nil
}

// GetQueuedResource reads a queued resource (authorized as tpu.nodes.get; see Permissions).
func (c *Client) GetQueuedResource(ctx context.Context, name string) (*tpu.QueuedResource, error) {
	// rest: tpu.projects.locations.queuedResources.get
	q, err := c.svc.Projects.Locations.QueuedResources.Get(name).Context(ctx).Do()
	if err != nil {
		return nil, fmt.Errorf("get queued resource %s: %w", name, err)
	}
	return q, nil
}

// ResetQueuedResource starts resetting a queued resource (all its nodes, all
// slices of a multislice) and returns the operation's name.
func (c *Client) ResetQueuedResource(ctx context.Context, name string) (string, error) {
	// rest: tpu.projects.locations.queuedResources.reset
	op, err := c.svc.Projects.Locations.QueuedResources.Reset(name, &tpu.ResetQueuedResourceRequest{}).Context(ctx).Do()
	if err != nil {
		return "", fmt.Errorf("reset queued resource %s: %w", name, err)
	}
	return op.Name, nil
}

// WaitOperation polls the operation (tpu.operations.get) until it is done or
// ctx ends. A done operation with an error returns a *googleapi.Error whose
// Code is the HTTP equivalent of the operation's google.rpc code (e.g.
// RESOURCE_EXHAUSTED → 429), so callers classify it like any API error.
func (c *Client) WaitOperation(ctx context.Context, name string) error {
	interval := c.PollInterval
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for operation %s: %w", name, ctx.Err())
		case <-t.C:
		}
		// rest: tpu.projects.locations.operations.get
		op, err := c.svc.Projects.Locations.Operations.Get(name).Context(ctx).Do()
		if err != nil {
			return fmt.Errorf("wait for operation %s: %w", name, err)
		}
		if op.Done {
			if op.Error != nil {
				return fmt.Errorf("operation %s failed: %w", name, OperationError(op.Error))
			}
			return nil
		}
		t.Reset(interval)
	}
}

// OperationError converts an operation's google.rpc.Status into the
// *googleapi.Error a REST call failing the same way would return.
func OperationError(st *tpu.Status) *googleapi.Error {
	code := httpCode(st.Code)
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"code":    code,
		"message": st.Message,
		"status":  rpcName(st.Code),
	}})
	herr := &googleapi.Error{Code: code, Message: st.Message, Body: string(body)}
	for _, d := range st.Details {
		herr.Details = append(herr.Details, d)
	}
	if ae, ok := apierror.ParseError(herr, false); ok {
		herr.Wrap(ae)
	}
	return herr
}

// rpcNames are the google.rpc.Code names by number (google/rpc/code.proto).
var rpcNames = []string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
	"FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
	"INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
}

// httpCodes are the HTTP equivalents of the google.rpc codes, by number.
var httpCodes = []int{200, 499, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400, 501, 500, 503, 500, 401}

func rpcName(code int64) string {
	if code < 0 || code >= int64(len(rpcNames)) {
		return "UNKNOWN"
	}
	return rpcNames[code]
}

func httpCode(code int64) int {
	if code <= 0 || code >= int64(len(httpCodes)) {
		// OK with an error set, or a code from the future: not retryable
		// knowledge either way, so report it as UNKNOWN does.
		return 500
	}
	return httpCodes[code]
}
