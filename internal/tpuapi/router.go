package tpuapi

import (
	"context"
	"fmt"
	"strings"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/failure"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

var _ remediate.TPU = Router{}

// V1OperationPrefix marks the operations Router started through the v1 API
// (legacy TPU Nodes), so GetOperation looks at them there, also after a
// restart: the prefixed name is what the ledger saves.
const V1OperationPrefix = "tpuv1:"

// Page token prefixes of Router.ListNodes: which API the next page is from.
const (
	v2PagePrefix = "v2:"
	v1PagePrefix = "v1:"
)

// Router implements remediate.TPU over both TPU architectures: TPU VMs
// through V2 (the v2 REST API) and legacy TPU Nodes through V1 (the v1 API,
// tpulegacy). With V1 nil it behaves exactly as V2 alone: that is the case
// when an endpoint override (AUTOHEAL_TPU_ENDPOINT) points V2 at a simulated
// or private v2 endpoint, for which there is no v1 counterpart.
//
// A node is legacy when V2 does not know it and V1 does, or when V2 reports
// it with ApiVersion V1 or V1_ALPHA1. Nodes read through V1 carry ApiVersion
// "V1", which remediate keeps in the saved spec, so CreateNode routes by the
// spec alone (also when the node is already deleted).
type Router struct {
	V2, V1 remediate.TPU
}

// isLegacy reports whether a node's (or spec's) ApiVersion is a v1 one.
func isLegacy(n *tpu.Node) bool {
	return n != nil && (n.ApiVersion == "V1" || n.ApiVersion == "V1_ALPHA1")
}

// GetNode reads the node through V2, and through V1 when V2 does not find it
// or says it is a legacy node. When V2 does not find it and V1 fails other
// than transiently (NOT FOUND, or refused), the error is V2's NOT FOUND
// annotated with V1's.
func (r Router) GetNode(ctx context.Context, name string) (*tpu.Node, error) {
	n, err := r.V2.GetNode(ctx, name)
	if r.V1 == nil || (err == nil && !isLegacy(n)) {
		return n, err
	}
	if err != nil && !failure.IsNotFound(err) {
		return nil, err
	}
	ln, lerr := r.V1.GetNode(ctx, name)
	if lerr != nil && err != nil && !failure.IsTransient(lerr) {
		// V2's NOT FOUND stands unless V1 says something it may later
		// take back: a v1 refusal (no v1 in that zone, say) must not turn
		// a node we deleted into "cannot read it".
		return nil, fmt.Errorf("%w (legacy TPU v1 API: %v)", err, lerr)
	}
	return ln, lerr
}

// legacy probes which API owns an existing node: true for V1. When V2 does
// not find the node, notFound is V2's NOT FOUND (and legacy is true: only
// V1 may still have it).
func (r Router) legacy(ctx context.Context, name string) (legacy bool, notFound, err error) {
	if r.V1 == nil {
		return false, nil, nil
	}
	n, err := r.V2.GetNode(ctx, name)
	switch {
	case err == nil:
		return isLegacy(n), nil, nil
	case failure.IsNotFound(err):
		return true, err, nil
	}
	return false, nil, err
}

// DeleteNode deletes through the API that owns the node (a V2 read first;
// a node V2 does not find is deleted through V1, whose NOT FOUND is then
// the answer). V1 operation names get V1OperationPrefix.
func (r Router) DeleteNode(ctx context.Context, name string) (string, error) {
	legacy, notFound, err := r.legacy(ctx, name)
	if err != nil {
		return "", fmt.Errorf("delete node %s: find its API: %w", name, err)
	}
	if !legacy {
		return r.V2.DeleteNode(ctx, name)
	}
	op, err := r.V1.DeleteNode(ctx, name)
	if err != nil {
		if notFound != nil && !failure.IsTransient(err) {
			// Neither API has it, or V1 refuses to say: V2's NOT FOUND
			// stands, as for GetNode.
			return "", fmt.Errorf("%w (legacy TPU v1 API: %v)", notFound, err)
		}
		return "", err
	}
	return V1OperationPrefix + op, nil
}

// CreateNode creates a legacy node through V1 when the spec's ApiVersion is
// V1 or V1_ALPHA1 (and V1 is set), else a TPU VM through V2. ApiVersion is
// output-only, so it is not sent.
func (r Router) CreateNode(ctx context.Context, parent, nodeID string, node *tpu.Node) (string, error) {
	legacy := isLegacy(node) && r.V1 != nil
	if node != nil && node.ApiVersion != "" {
		c := *node
		c.ApiVersion = ""
		node = &c
	}
	if !legacy {
		return r.V2.CreateNode(ctx, parent, nodeID, node)
	}
	op, err := r.V1.CreateNode(ctx, parent, nodeID, node)
	if err != nil {
		return "", err
	}
	return V1OperationPrefix + op, nil
}

// GetOperation looks through V1 at a V1OperationPrefix name, else V2.
func (r Router) GetOperation(ctx context.Context, operation string) (bool, error) {
	name, ok := strings.CutPrefix(operation, V1OperationPrefix)
	if !ok {
		return r.V2.GetOperation(ctx, operation)
	}
	if r.V1 == nil {
		return false, &failure.Error{Kind: failure.Permanent, Err: fmt.Errorf("get operation %s: a legacy TPU v1 operation, and the TPU v1 API is not configured (an endpoint override is set)", operation)}
	}
	return r.V1.GetOperation(ctx, name)
}

// ListNodes lists V2's nodes, then V1's: the page token says which API the
// page is from ("v2:..." or "v1:..."; "" is V2's first page). With V1 set,
// legacy nodes are listed once, from V1 (V2's legacy entries are skipped).
// With V1 nil, tokens pass through unchanged, and a "v1:" token left by an
// earlier configuration ends the listing.
func (r Router) ListNodes(ctx context.Context, parent, pageToken string) ([]*tpu.Node, string, error) {
	if v1tok, ok := strings.CutPrefix(pageToken, v1PagePrefix); ok {
		if r.V1 == nil {
			return nil, "", nil
		}
		nodes, next, err := r.V1.ListNodes(ctx, parent, v1tok)
		if err != nil {
			return nil, "", err
		}
		if next != "" {
			next = v1PagePrefix + next
		}
		return nodes, next, nil
	}
	v2tok := strings.TrimPrefix(pageToken, v2PagePrefix)
	nodes, next, err := r.V2.ListNodes(ctx, parent, v2tok)
	if err != nil || r.V1 == nil {
		return nodes, next, err
	}
	kept := nodes[:0:0]
	for _, n := range nodes {
		if !isLegacy(n) {
			kept = append(kept, n)
		}
	}
	if next == "" {
		return kept, v1PagePrefix, nil
	}
	return kept, v2PagePrefix + next, nil
}

// GetQueuedResource reads through V2: only TPU VMs have queued resources.
func (r Router) GetQueuedResource(ctx context.Context, name string) (*tpu.QueuedResource, error) {
	return r.V2.GetQueuedResource(ctx, name)
}

// ResetQueuedResource resets through V2.
func (r Router) ResetQueuedResource(ctx context.Context, name string) (string, error) {
	return r.V2.ResetQueuedResource(ctx, name)
}

// CreateQueuedResource creates through V2: only TPU VMs have queued resources.
func (r Router) CreateQueuedResource(ctx context.Context, parent, id string, q *tpu.QueuedResource) (string, error) {
	return r.V2.CreateQueuedResource(ctx, parent, id, q)
}

// DeleteQueuedResource deletes through V2.
func (r Router) DeleteQueuedResource(ctx context.Context, name string) (string, error) {
	return r.V2.DeleteQueuedResource(ctx, name)
}
