package remediate_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// countingStore is the in-memory ledger counting its history reads: History
// per node, and the batched Histories with the nodes of each call.
type countingStore struct {
	*ledger.Memory
	mu        sync.Mutex
	history   []string   // node of each History call
	histories [][]string // nodes of each Histories call
}

func (s *countingStore) History(ctx context.Context, node, project, eventID string, now time.Time, window time.Duration) (remediate.History, error) {
	s.mu.Lock()
	s.history = append(s.history, node)
	s.mu.Unlock()
	return s.Memory.History(ctx, node, project, eventID, now, window)
}

func (s *countingStore) Histories(ctx context.Context, nodes []string, project string, now time.Time, window time.Duration) (map[string]remediate.History, error) {
	s.mu.Lock()
	s.histories = append(s.histories, append([]string(nil), nodes...))
	s.mu.Unlock()
	return s.Memory.Histories(ctx, nodes, project, now, window)
}

// historyOnly hides Histories: a Store without the batched read.
type historyOnly struct{ remediate.Store }

func TestSweepReadsTheLedgerOncePerListedPage(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{
		sweptNode("a", "READY", "HEALTHY"),
		sweptNode("b", "READY", "HEALTHY"),
		sweptNode("c", "READY", "HEALTHY"),
		sweptNode("d", "TERMINATED", ""),
		sweptNode("e", "STOPPED", ""),
	}}, tpufake.WithPageSize(2))
	cs := &countingStore{Memory: e.store}
	remediate.SetStore(e.h, cs)
	res, err := e.h.Sweep(context.Background(), remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone}})
	if err != nil || !res.Complete {
		t.Fatalf("Sweep = %+v, %v; want complete", res, err)
	}
	name := func(id string) string { return "projects/" + project + "/locations/" + zone + "/nodes/" + id }
	// Pages [a b] [c d] [e]: one batched read per page, of the nodes the
	// listing is enough for (healthy, stopped on purpose).
	wantBatches := [][]string{{name("a"), name("b")}, {name("c")}, {name("e")}}
	if diff := cmp.Diff(wantBatches, cs.histories); diff != "" {
		t.Errorf("Histories calls (-want +got):\n%s", diff)
	}
	// Only the broken node reads its own history (again, just before acting).
	for _, n := range cs.history {
		if n != name("d") {
			t.Errorf("History(%s) called: a healthy or stopped listed node must come from the page's batched read", n)
		}
	}
	if len(cs.history) == 0 {
		t.Errorf("History never called for the TERMINATED node d: it must be read fresh before a recovery")
	}
	if got := e.fake.Count("nodes.delete", ""); got != 1 {
		t.Errorf("deletes = %d, want 1 (node d)", got)
	}
}

func TestSweepWithoutBatchedReadReadsNodeByNode(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{
		sweptNode("a", "READY", "HEALTHY"),
		sweptNode("b", "READY", "HEALTHY"),
	}})
	cs := &countingStore{Memory: e.store}
	remediate.SetStore(e.h, historyOnly{cs})
	if _, err := e.h.Sweep(context.Background(), remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone}}); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if len(cs.histories) != 0 {
		t.Errorf("Histories called %d times through a Store that does not offer it", len(cs.histories))
	}
	if got := len(cs.history); got != 2 {
		t.Errorf("History calls = %d, want 2 (one per listed node)", got)
	}
}
