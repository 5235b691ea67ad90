package computevm

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/seal"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// Store keeps what the instance path needs beyond the ledger's claims and
// guards: the spec of every opted-in standalone TPU instance saved before
// it broke (a vanished VM cannot be read), the evidence of the audit log
// about each instance, and per slice when it was first seen broken and what
// was last done about it.
type Store interface {
	// SaveSpec saves the spec of the instance name (projects/P/zones/Z/instances/I).
	SaveSpec(ctx context.Context, name string, spec SavedSpec) error
	// Specs returns the saved specs of a zone's instances, by name.
	Specs(ctx context.Context, project, zone string) (map[string]SavedSpec, error)
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

// SavedSpec is a spec as the store keeps it: the instance as insert takes
// it (SpecOf), its seal, when it was saved and the instance's
// lastStartTimestamp then.
type SavedSpec struct {
	Spec *compute.Instance
	// Seal is the MAC over the spec (specMessage): the ledger is not a
	// trust root, so a spec whose seal does not verify is never inserted.
	// Zero when no Sealer is configured (local runs).
	Seal seal.Seal
	// Seen is when a sweep saved it, the instance RUNNING: a system event
	// dated before it did not make the instance vanish. The seal covers it.
	Seen time.Time
	// LastStart is the instance's lastStartTimestamp when it was saved: a
	// spec is saved again when the instance was started since, so Seen
	// follows the instance's restarts.
	LastStart string
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
	// Unknown are the starts and inserts sent whose outcome is unknown
	// (the answer lost or unclear): no other call is made for the slice
	// until each is seen in effect or concluded not to be.
	Unknown []UnknownCall
	// Faulty are the faulty-host reports sent, the newest per instance.
	Faulty []FaultyReport
	// Maintained are the performMaintenance calls sent (mode early), one
	// per instance id and window: never sent again for that window.
	Maintained []MaintenanceSent
	// CheckpointLate is the notice (window start) a look concluded was not
	// checkpointed within AUTOHEAL_CHECKPOINT_TIMEOUT (vmpolicy's
	// Decision.CheckpointLate): never started early, its guests no longer
	// read. "" for none.
	CheckpointLate string
	// MaintenanceUntil is the end of the maintenance window a look found
	// the broken slice in (vmpolicy's Decision.MaintenanceUntil): not
	// stuck before it plus the stuck grace. Zero again once the slice is
	// healthy.
	MaintenanceUntil time.Time
}

// MaintenanceSent is one instances.performMaintenance sent, or whose
// answer was lost or unclear (it may have taken effect).
type MaintenanceSent struct {
	Instance  string // projects/P/zones/Z/instances/I
	ID        uint64 // the instance id it was sent to
	Window    string // the notice's windowStartTime
	WindowEnd string // its windowEndTime: not stuck until then plus the stuck grace (vmpolicy)
	At        time.Time
	Operation string
}

// maintained is the window performMaintenance was sent for to the
// instance with that id, "" for none.
func (s SliceState) maintained(instance string, id uint64) string {
	for _, m := range s.Maintained {
		if m.Instance == instance && m.ID == id {
			return m.Window
		}
	}
	return ""
}

// maintainedUntil is when the maintenance performMaintenance was sent for
// to the instance with that id may hold it down until (zero: none, or
// unreadable). Started early, the maintenance runs from the send, not from
// the window's start: it is bounded by the send plus the window's length,
// so a notice a week ahead started today does not exempt a VM that stays
// down for the week; never past the window's end.
func (s SliceState) maintainedUntil(instance string, id uint64) time.Time {
	for _, m := range s.Maintained {
		if m.Instance == instance && m.ID == id {
			end, err := time.Parse(time.RFC3339Nano, m.WindowEnd)
			if err != nil {
				return time.Time{}
			}
			start, err := time.Parse(time.RFC3339Nano, m.Window)
			if err == nil && !m.At.IsZero() && end.After(start) {
				if bound := m.At.Add(end.Sub(start)); bound.Before(end) {
					return bound
				}
			}
			return end
		}
	}
	return time.Time{}
}

// FaultyReport is one instances.reportHostAsFaulty sent.
type FaultyReport struct {
	Instance  string
	At        time.Time
	Operation string // the zone operation's name, "" when its answer was lost
}

// faultyReported is when the host of instance was last reported faulty
// (zero: never).
func (s SliceState) faultyReported(instance string) time.Time {
	for _, f := range s.Faulty {
		if f.Instance == instance {
			return f.At
		}
	}
	return time.Time{}
}

// perInstance is what a slice keeps one of per instance: the newest
// faulty-host report, the newest performMaintenance sent.
type perInstance interface {
	FaultyReport | MaintenanceSent
	instance() string
}

func (f FaultyReport) instance() string    { return f.Instance }
func (m MaintenanceSent) instance() string { return m.Instance }

// setPerInstance replaces the entry about x's instance in list with x
// (x first): one entry per instance.
func setPerInstance[T perInstance](list []T, x T) []T {
	out := []T{x}
	for _, y := range list {
		if y.instance() != x.instance() {
			out = append(out, y)
		}
	}
	return out
}

// MaxEvidence is how many entries are kept per instance.
const MaxEvidence = 32

// Memory is a Store in memory, for tests, replay and simulate.
type Memory struct {
	mu       sync.Mutex
	specs    map[string]memSpec
	evidence map[string][]vmpolicy.Evidence
	slices   map[string]SliceState
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{specs: map[string]memSpec{}, evidence: map[string][]vmpolicy.Evidence{}, slices: map[string]SliceState{}}
}

// memSpec is a SavedSpec with its spec as JSON, so a caller's later change
// cannot reach it.
type memSpec struct {
	spec []byte
	s    SavedSpec
}

// TamperSeen moves the Seen time of the saved spec of name by d, its seal
// kept (tests of the seal).
func (m *Memory) TamperSeen(name string, d time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms, ok := m.specs[name]
	if ok {
		ms.s.Seen = ms.s.Seen.Add(d)
		m.specs[name] = ms
	}
	return ok
}

// SaveSpec implements Store.
func (m *Memory) SaveSpec(_ context.Context, name string, spec SavedSpec) error {
	b, err := json.Marshal(spec.Spec)
	if err != nil {
		return err
	}
	spec.Spec = nil
	m.mu.Lock()
	defer m.mu.Unlock()
	m.specs[name] = memSpec{spec: b, s: spec}
	return nil
}

// Tamper rewrites the saved spec of name in place, its seal kept, as
// someone who can write the ledger could (tests of the seal).
func (m *Memory) Tamper(name string, f func(*compute.Instance)) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms, ok := m.specs[name]
	if !ok {
		return false
	}
	var in compute.Instance
	if json.Unmarshal(ms.spec, &in) != nil {
		return false
	}
	f(&in)
	b, err := json.Marshal(&in)
	if err != nil {
		return false
	}
	ms.spec = b
	m.specs[name] = ms
	return true
}

// Specs implements Store.
func (m *Memory) Specs(_ context.Context, project, zone string) (map[string]SavedSpec, error) {
	prefix := "projects/" + project + "/zones/" + zone + "/instances/"
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]SavedSpec{}
	for name, ms := range m.specs {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		var s compute.Instance
		if err := json.Unmarshal(ms.spec, &s); err != nil {
			return nil, err
		}
		saved := ms.s
		saved.Spec = &s
		out[name] = saved
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
