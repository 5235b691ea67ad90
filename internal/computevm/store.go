package computevm

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// Store keeps what the instance path needs beyond the ledger's claims and
// guards: the spec of every opted-in standalone TPU instance saved before
// it broke (a vanished VM cannot be read), the evidence of the audit log
// about each instance, and per slice when it was first seen broken and what
// was last done about it.
type Store interface {
	// SaveSpec saves the spec of the instance name (projects/P/zones/Z/instances/I).
	SaveSpec(ctx context.Context, name string, spec *compute.Instance) error
	// Specs returns the saved specs of a zone's instances, by name.
	Specs(ctx context.Context, project, zone string) (map[string]*compute.Instance, error)
	// ForgetSpec removes a saved spec (a person deleted the instance).
	ForgetSpec(ctx context.Context, name string) error
	// AddEvidence keeps an entry about an instance (deduplicated by
	// InsertID; the newest MaxEvidence per instance are kept).
	AddEvidence(ctx context.Context, e vmpolicy.Evidence) error
	// Evidence returns what is kept about the instances.
	Evidence(ctx context.Context, instances []string) ([]vmpolicy.Evidence, error)
	// Slice returns what is kept about a slice; SetSlice replaces it.
	Slice(ctx context.Context, key string) (SliceState, error)
	SetSlice(ctx context.Context, key string, s SliceState) error
}

// SliceState is what is kept about one slice.
type SliceState struct {
	// Since is when the slice was first seen not RUNNING (zero while it
	// is healthy).
	Since time.Time
	// Incident is the last mutating action sent and when.
	Incident vmpolicy.Incident
	// Operations are the zone operations of that action without a verdict
	// yet (projects/P/zones/Z/operations/O): one that ends in error
	// reopens the incident.
	Operations []string
}

// MaxEvidence is how many entries are kept per instance.
const MaxEvidence = 32

// Memory is a Store in memory, for tests, replay and simulate.
type Memory struct {
	mu       sync.Mutex
	specs    map[string][]byte // JSON, so a caller's later change cannot reach it
	evidence map[string][]vmpolicy.Evidence
	slices   map[string]SliceState
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{specs: map[string][]byte{}, evidence: map[string][]vmpolicy.Evidence{}, slices: map[string]SliceState{}}
}

// SaveSpec implements Store.
func (m *Memory) SaveSpec(_ context.Context, name string, spec *compute.Instance) error {
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.specs[name] = b
	return nil
}

// Specs implements Store.
func (m *Memory) Specs(_ context.Context, project, zone string) (map[string]*compute.Instance, error) {
	prefix := "projects/" + project + "/zones/" + zone + "/instances/"
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]*compute.Instance{}
	for name, b := range m.specs {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		var s compute.Instance
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, err
		}
		out[name] = &s
	}
	return out, nil
}

// ForgetSpec implements Store.
func (m *Memory) ForgetSpec(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.specs, name)
	return nil
}

// AddEvidence implements Store.
func (m *Memory) AddEvidence(_ context.Context, e vmpolicy.Evidence) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.evidence[e.Instance] = addEvidence(m.evidence[e.Instance], e)
	return nil
}

// addEvidence adds e to list unless an entry of its InsertID is there,
// keeping the newest MaxEvidence, oldest first.
func addEvidence(list []vmpolicy.Evidence, e vmpolicy.Evidence) []vmpolicy.Evidence {
	if e.InsertID != "" && slices.ContainsFunc(list, func(x vmpolicy.Evidence) bool { return x.InsertID == e.InsertID }) {
		return list
	}
	list = append(slices.Clone(list), e)
	slices.SortStableFunc(list, func(a, b vmpolicy.Evidence) int { return a.Time.Compare(b.Time) })
	if len(list) > MaxEvidence {
		list = list[len(list)-MaxEvidence:]
	}
	return list
}

// Evidence implements Store.
func (m *Memory) Evidence(_ context.Context, instances []string) ([]vmpolicy.Evidence, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []vmpolicy.Evidence
	for _, i := range instances {
		out = append(out, m.evidence[i]...)
	}
	return out, nil
}

// Slice implements Store.
func (m *Memory) Slice(_ context.Context, key string) (SliceState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.slices[key], nil
}

// SetSlice implements Store.
func (m *Memory) SetSlice(_ context.Context, key string, s SliceState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.slices[key] = s
	return nil
}
