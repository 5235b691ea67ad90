package swarm

import (
	"context"
	"errors"
	"sync"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// A loop that is bounded only by time never ends on a virtual clock that
// stands still during a delivery: the function's TPU clients are wrapped so
// that one delivery gets at most callBudget calls. The call over it fails
// and cancels the delivery, so the run goes on (and reports the loop as a
// broken bound) the same way in every run, whatever the wall clock.

// callBudget is how many calls one delivery may make before it is cut.
const callBudget = 4 * maxCallsPerDelivery

var errBudget = errors.New("swarm: this delivery spent its call budget (a loop without a bound)")

// budget counts the calls of the delivery under way.
type budget struct {
	mu     sync.Mutex
	n      int
	cut    bool
	cancel context.CancelFunc
	qr     qrCounter
}

// start begins a delivery whose context cancel cancels.
func (b *budget) start(cancel context.CancelFunc) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n, b.cut, b.cancel = 0, false, cancel
}

// take counts a call; false when the budget is spent.
func (b *budget) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	if b.n <= callBudget {
		return true
	}
	if !b.cut && b.cancel != nil {
		b.cut = true
		b.cancel()
	}
	return false
}

func (b *budget) wasCut() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.cut }

// budgetTPU is remediate.TPU within the budget.
type budgetTPU struct {
	remediate.TPU
	b *budget
}

func (t budgetTPU) GetNode(ctx context.Context, name string) (*tpu.Node, error) {
	if !t.b.take() {
		return nil, errBudget
	}
	return t.TPU.GetNode(ctx, name)
}

func (t budgetTPU) ListNodes(ctx context.Context, parent, pageToken string) ([]*tpu.Node, string, error) {
	if !t.b.take() {
		return nil, "", errBudget
	}
	return t.TPU.ListNodes(ctx, parent, pageToken)
}

func (t budgetTPU) DeleteNode(ctx context.Context, name string) (string, error) {
	if !t.b.take() {
		return "", errBudget
	}
	return t.TPU.DeleteNode(ctx, name)
}

func (t budgetTPU) CreateNode(ctx context.Context, parent, nodeID string, node *tpu.Node) (string, error) {
	if !t.b.take() {
		return "", errBudget
	}
	op, err := t.TPU.CreateNode(ctx, parent, nodeID, node)
	if remediate.KindOf(err).Exhausted() {
		t.b.countRefused(parent + "/nodes/" + nodeID)
	}
	return op, err
}

func (t budgetTPU) GetOperation(ctx context.Context, operation string) (bool, error) {
	if !t.b.take() {
		return false, errBudget
	}
	return t.TPU.GetOperation(ctx, operation)
}

func (t budgetTPU) GetQueuedResource(ctx context.Context, name string) (*tpu.QueuedResource, error) {
	if !t.b.take() {
		return nil, errBudget
	}
	return t.TPU.GetQueuedResource(ctx, name)
}

func (t budgetTPU) ResetQueuedResource(ctx context.Context, name string) (string, error) {
	if !t.b.take() {
		return "", errBudget
	}
	return t.TPU.ResetQueuedResource(ctx, name)
}

func (t budgetTPU) CreateQueuedResource(ctx context.Context, parent, id string, q *tpu.QueuedResource) (string, error) {
	if !t.b.take() {
		return "", errBudget
	}
	t.b.countQR(q)
	return t.TPU.CreateQueuedResource(ctx, parent, id, q)
}

func (t budgetTPU) DeleteQueuedResource(ctx context.Context, name string) (string, error) {
	if !t.b.take() {
		return "", errBudget
	}
	return t.TPU.DeleteQueuedResource(ctx, name)
}

// budgetMaintenance is remediate.MaintenanceTPU within the budget.
type budgetMaintenance struct {
	m remediate.MaintenanceTPU
	b *budget
}

func (t budgetMaintenance) GetNode(ctx context.Context, name string) (*tpu.Node, error) {
	if !t.b.take() {
		return nil, errBudget
	}
	return t.m.GetNode(ctx, name)
}

func (t budgetMaintenance) PatchNodeMetadata(ctx context.Context, name string, metadata map[string]string) (string, error) {
	if !t.b.take() {
		return "", errBudget
	}
	return t.m.PatchNodeMetadata(ctx, name, metadata)
}

func (t budgetMaintenance) GetGuestAttributes(ctx context.Context, node, queryPath string) ([]remediate.GuestAttribute, error) {
	if !t.b.take() {
		return nil, errBudget
	}
	return t.m.GetGuestAttributes(ctx, node, queryPath)
}

func (t budgetMaintenance) PerformMaintenance(ctx context.Context, node string) (string, error) {
	if !t.b.take() {
		return "", errBudget
	}
	return t.m.PerformMaintenance(ctx, node)
}

func (t budgetMaintenance) PerformMaintenanceQueuedResource(ctx context.Context, queuedResource string, nodes []string) (string, error) {
	if !t.b.take() {
		return "", errBudget
	}
	return t.m.PerformMaintenanceQueuedResource(ctx, queuedResource, nodes)
}
