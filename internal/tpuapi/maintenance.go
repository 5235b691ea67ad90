package tpuapi

import (
	"context"
	"fmt"
	"strconv"

	"google.golang.org/api/option"
	tpu "google.golang.org/api/tpu/v2"
	tpualpha "google.golang.org/api/tpu/v2alpha1"

	"github.com/tpu-autoheal/autoheal/internal/googleerr"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

var _ remediate.MaintenanceTPU = (*Maintenance)(nil)

// Maintenance implements remediate.MaintenanceTPU: the v2 API for reads and
// the metadata patch, v2alpha1 (which alone has performMaintenance) for
// starting maintenance. Both services talk to the same endpoint.
//
// IAM: nodes.patch is tpu.nodes.update, and the API also checks
// iam.serviceAccounts.actAs on the node's service account (granted on that
// account, not in the TPU role); nodes.getGuestAttributes is tpu.nodes.get;
// v2alpha1 nodes.performMaintenance and
// queuedResources.performMaintenanceQueuedResource are
// tpu.nodes.performMaintenance. The module derives these from the REST
// method named on each call.
type Maintenance struct {
	v2    *tpu.Service
	alpha *tpualpha.Service
}

// newMaintenance wraps existing v2 and v2alpha1 services.
func newMaintenance(v2 *tpu.Service, alpha *tpualpha.Service) *Maintenance {
	return &Maintenance{v2: v2, alpha: alpha}
}

// NewMaintenanceFromOptions builds both services from the same client
// options (EndpointOptions for a simulated control plane).
func NewMaintenanceFromOptions(ctx context.Context, opts ...option.ClientOption) (*Maintenance, error) {
	v2, err := tpu.NewService(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tpu v2 client: %w", err)
	}
	alpha, err := tpualpha.NewService(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tpu v2alpha1 client: %w", err)
	}
	return newMaintenance(v2, alpha), nil
}

// GetNode reads a node.
func (m *Maintenance) GetNode(ctx context.Context, name string) (*tpu.Node, error) {
	// rest: tpu.projects.locations.nodes.get
	n, err := m.v2.Projects.Locations.Nodes.Get(name).Context(ctx).Do()
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", name, googleerr.FromAPI(err))
	}
	return n, nil
}

// PatchNodeMetadata replaces the node's metadata (updateMask=metadata: no
// other field is sent or changed) and returns the operation's name.
func (m *Maintenance) PatchNodeMetadata(ctx context.Context, name string, metadata map[string]string) (string, error) {
	node := &tpu.Node{Metadata: metadata, ForceSendFields: []string{"Metadata"}}
	// rest: tpu.projects.locations.nodes.patch
	op, err := m.v2.Projects.Locations.Nodes.Patch(name, node).UpdateMask("metadata").Context(ctx).Do()
	if err != nil {
		return "", fmt.Errorf("patch metadata of node %s: %w", name, googleerr.FromAPI(err))
	}
	return op.Name, nil
}

// GetGuestAttributes reads every worker's guest attributes under queryPath.
// The API answers one entry per worker, in worker order; Worker is its index.
func (m *Maintenance) GetGuestAttributes(ctx context.Context, node, queryPath string) ([]remediate.GuestAttribute, error) {
	req := &tpu.GetGuestAttributesRequest{QueryPath: queryPath}
	// rest: tpu.projects.locations.nodes.getGuestAttributes
	resp, err := m.v2.Projects.Locations.Nodes.GetGuestAttributes(node, req).Context(ctx).Do()
	if err != nil {
		return nil, fmt.Errorf("get guest attributes %s of node %s: %w", queryPath, node, googleerr.FromAPI(err))
	}
	var out []remediate.GuestAttribute
	for w, ga := range resp.GuestAttributes {
		if ga == nil || ga.QueryValue == nil {
			continue
		}
		for _, it := range ga.QueryValue.Items {
			if it == nil {
				continue
			}
			out = append(out, remediate.GuestAttribute{Worker: strconv.Itoa(w), Namespace: it.Namespace, Key: it.Key, Value: it.Value})
		}
	}
	return out, nil
}

// PerformMaintenance starts the node's pending maintenance now (v2alpha1)
// and returns the operation's name.
func (m *Maintenance) PerformMaintenance(ctx context.Context, node string) (string, error) {
	// rest: tpu.projects.locations.nodes.performMaintenance
	op, err := m.alpha.Projects.Locations.Nodes.PerformMaintenance(node, &tpualpha.PerformMaintenanceRequest{}).Context(ctx).Do()
	if err != nil {
		return "", fmt.Errorf("perform maintenance of node %s: %w", node, googleerr.FromAPI(err))
	}
	return op.Name, nil
}

// PerformMaintenanceQueuedResource starts the pending maintenance of nodes
// (full node names) of a queued resource now (v2alpha1).
func (m *Maintenance) PerformMaintenanceQueuedResource(ctx context.Context, qr string, nodes []string) (string, error) {
	req := &tpualpha.PerformMaintenanceQueuedResourceRequest{NodeNames: nodes}
	// rest: tpu.projects.locations.queuedResources.performMaintenanceQueuedResource
	op, err := m.alpha.Projects.Locations.QueuedResources.PerformMaintenanceQueuedResource(qr, req).Context(ctx).Do()
	if err != nil {
		return "", fmt.Errorf("perform maintenance of %v in queued resource %s: %w", nodes, qr, googleerr.FromAPI(err))
	}
	return op.Name, nil
}
