package ledger

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// CollectionIncidents holds one document per node (its node key): the
// node's latest incident, open or closed. Open ones are queried by the
// field "open".
const CollectionIncidents = "incidents"

// MemoryIncidents is a remediate.IncidentStore in memory, for replay and
// tests. It is safe for concurrent use.
type MemoryIncidents struct {
	mu    sync.Mutex
	nodes map[string]remediate.Incident // node → latest incident
}

var _ remediate.IncidentStore = (*MemoryIncidents)(nil)

// NewMemoryIncidents returns an empty store.
func NewMemoryIncidents() *MemoryIncidents {
	return &MemoryIncidents{nodes: map[string]remediate.Incident{}}
}

// OpenIncident implements remediate.IncidentStore.
func (m *MemoryIncidents) OpenIncident(ctx context.Context, inc remediate.Incident) (remediate.Incident, bool, error) {
	if inc.Node == "" {
		return remediate.Incident{}, false, errors.New("open incident: empty node")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.nodes[inc.Node]; ok && !remediate.NewIncident(cur, inc) {
		return cur, false, nil
	}
	inc.ClosedAt, inc.CloseReason = time.Time{}, ""
	m.nodes[inc.Node] = inc
	return inc, true, nil
}

// OpenIncidentOf implements remediate.IncidentStore.
func (m *MemoryIncidents) OpenIncidentOf(ctx context.Context, node string) (remediate.Incident, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.nodes[node]
	if !ok || !cur.Open() {
		return remediate.Incident{}, false, nil
	}
	return cur, true, nil
}

// OpenIncidents implements remediate.IncidentStore.
func (m *MemoryIncidents) OpenIncidents(ctx context.Context) ([]remediate.Incident, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []remediate.Incident
	for _, inc := range m.nodes {
		if inc.Open() {
			out = append(out, inc)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

// MarkHealthy implements remediate.IncidentStore.
func (m *MemoryIncidents) MarkHealthy(ctx context.Context, node string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.nodes[node]; ok && cur.Open() && cur.HealthyAt.IsZero() {
		cur.HealthyAt = at
		m.nodes[node] = cur
	}
	return nil
}

// CloseIncident implements remediate.IncidentStore.
func (m *MemoryIncidents) CloseIncident(ctx context.Context, node string, at time.Time, reason string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.nodes[node]; ok && cur.Open() {
		cur.ClosedAt, cur.CloseReason = at, reason
		m.nodes[node] = cur
	}
	return nil
}

// All returns every node's latest incident, open or closed, by node (for
// tests and replay output).
func (m *MemoryIncidents) All() []remediate.Incident {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]remediate.Incident, 0, len(m.nodes))
	for _, inc := range m.nodes {
		out = append(out, inc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// FirestoreIncidents is a remediate.IncidentStore on a Firestore database,
// collection incidents (prefixed by WithPrefix). Opening and updating run
// in transactions, so two function instances opening the same node's
// incident keep the first event.
type FirestoreIncidents struct {
	client *firestore.Client
	prefix string
}

var _ remediate.IncidentStore = (*FirestoreIncidents)(nil)

// NewFirestoreIncidents returns a store on client's database (WithPrefix
// applies; WithClock is ignored: every time is the caller's).
func NewFirestoreIncidents(client *firestore.Client, opts ...Option) *FirestoreIncidents {
	o := buildOptions(opts)
	return &FirestoreIncidents{client: client, prefix: o.prefix}
}

// incidentDoc is the incidents document of one node.
type incidentDoc struct {
	Node            string    `firestore:"node"`
	Project         string    `firestore:"project"`
	Zone            string    `firestore:"zone"`
	Cause           string    `firestore:"cause"`
	InsertID        string    `firestore:"insertId"`
	FirstEvent      time.Time `firestore:"firstEvent"`
	OpenedAt        time.Time `firestore:"openedAt"`
	AcceleratorType string    `firestore:"acceleratorType"`
	Chips           int       `firestore:"chips"`
	HealthyAt       time.Time `firestore:"healthyAt"`
	ClosedAt        time.Time `firestore:"closedAt"`
	CloseReason     string    `firestore:"closeReason"`
	Open            bool      `firestore:"open"` // queried by OpenIncidents
}

func toIncidentDoc(i remediate.Incident) incidentDoc {
	return incidentDoc{
		Node: i.Node, Project: i.Project, Zone: i.Zone, Cause: string(i.Cause), InsertID: i.InsertID,
		FirstEvent: i.FirstEvent, OpenedAt: i.OpenedAt, AcceleratorType: i.AcceleratorType, Chips: i.Chips,
		HealthyAt: i.HealthyAt, ClosedAt: i.ClosedAt, CloseReason: i.CloseReason, Open: i.Open(),
	}
}

func (d incidentDoc) incident() remediate.Incident {
	return remediate.Incident{
		Node: d.Node, Project: d.Project, Zone: d.Zone, Cause: events.Cause(d.Cause), InsertID: d.InsertID,
		FirstEvent: d.FirstEvent, OpenedAt: d.OpenedAt, AcceleratorType: d.AcceleratorType, Chips: d.Chips,
		HealthyAt: d.HealthyAt, ClosedAt: d.ClosedAt, CloseReason: d.CloseReason,
	}
}

func (f *FirestoreIncidents) ref(node string) *firestore.DocumentRef {
	return f.client.Collection(f.prefix + CollectionIncidents).Doc(docID(node))
}

func readIncident(tx *firestore.Transaction, ref *firestore.DocumentRef) (remediate.Incident, bool, error) {
	s, err := tx.Get(ref) // rest: firestore.projects.databases.documents.get
	if status.Code(err) == codes.NotFound {
		return remediate.Incident{}, false, nil
	}
	if err != nil {
		return remediate.Incident{}, false, err
	}
	var d incidentDoc
	if err := s.DataTo(&d); err != nil {
		return remediate.Incident{}, false, fmt.Errorf("read %s: %w", ref.Path, err)
	}
	return d.incident(), true, nil
}

// update runs change on the node's current incident in a transaction and
// writes the result when change says so.
func (f *FirestoreIncidents) update(ctx context.Context, node string, change func(cur remediate.Incident, exists bool) (remediate.Incident, bool)) (remediate.Incident, bool, error) {
	ref := f.ref(node)
	var got remediate.Incident
	var wrote bool
	// rest: firestore.projects.databases.documents.beginTransaction
	// rest: firestore.projects.databases.documents.commit
	err := f.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		cur, exists, err := readIncident(tx, ref)
		if err != nil {
			return err
		}
		next, write := change(cur, exists)
		got, wrote = next, write
		if !write {
			return nil
		}
		return tx.Set(ref, toIncidentDoc(next))
	})
	return got, wrote, err
}

// OpenIncident implements remediate.IncidentStore.
func (f *FirestoreIncidents) OpenIncident(ctx context.Context, inc remediate.Incident) (remediate.Incident, bool, error) {
	if inc.Node == "" {
		return remediate.Incident{}, false, errors.New("open incident: empty node")
	}
	inc.ClosedAt, inc.CloseReason = time.Time{}, ""
	// The burst of one event (an entry per worker of a pod) finds the
	// incident open: a plain read answers it without a transaction on the
	// one document they all share.
	if cur, ok, err := f.OpenIncidentOf(ctx, inc.Node); err == nil && ok {
		return cur, false, nil
	}
	got, opened, err := f.update(ctx, inc.Node, func(cur remediate.Incident, exists bool) (remediate.Incident, bool) {
		if exists && !remediate.NewIncident(cur, inc) {
			return cur, false
		}
		return inc, true
	})
	if err != nil {
		return remediate.Incident{}, false, fmt.Errorf("open incident of %s: %w", inc.Node, err)
	}
	return got, opened, nil
}

// OpenIncidentOf implements remediate.IncidentStore.
func (f *FirestoreIncidents) OpenIncidentOf(ctx context.Context, node string) (remediate.Incident, bool, error) {
	s, err := f.ref(node).Get(ctx) // rest: firestore.projects.databases.documents.get
	if status.Code(err) == codes.NotFound {
		return remediate.Incident{}, false, nil
	}
	if err != nil {
		return remediate.Incident{}, false, fmt.Errorf("read incident of %s: %w", node, err)
	}
	var d incidentDoc
	if err := s.DataTo(&d); err != nil {
		return remediate.Incident{}, false, fmt.Errorf("read %s: %w", s.Ref.Path, err)
	}
	if !d.Open {
		return remediate.Incident{}, false, nil
	}
	return d.incident(), true, nil
}

// OpenIncidents implements remediate.IncidentStore.
func (f *FirestoreIncidents) OpenIncidents(ctx context.Context) ([]remediate.Incident, error) {
	var out []remediate.Incident
	err := eachDoc(f.client.Collection(f.prefix+CollectionIncidents).Where("open", "==", true).Documents(ctx), func(d incidentDoc) error { // rest: firestore.projects.databases.documents.runQuery
		out = append(out, d.incident())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list open incidents: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

// MarkHealthy implements remediate.IncidentStore.
func (f *FirestoreIncidents) MarkHealthy(ctx context.Context, node string, at time.Time) error {
	_, _, err := f.update(ctx, node, func(cur remediate.Incident, exists bool) (remediate.Incident, bool) {
		if !exists || !cur.Open() || !cur.HealthyAt.IsZero() {
			return cur, false
		}
		cur.HealthyAt = at
		return cur, true
	})
	if err != nil {
		return fmt.Errorf("mark incident of %s healthy: %w", node, err)
	}
	return nil
}

// CloseIncident implements remediate.IncidentStore.
func (f *FirestoreIncidents) CloseIncident(ctx context.Context, node string, at time.Time, reason string) error {
	_, _, err := f.update(ctx, node, func(cur remediate.Incident, exists bool) (remediate.Incident, bool) {
		if !exists || !cur.Open() {
			return cur, false
		}
		cur.ClosedAt, cur.CloseReason = at, reason
		return cur, true
	})
	if err != nil {
		return fmt.Errorf("close incident of %s: %w", node, err)
	}
	return nil
}
