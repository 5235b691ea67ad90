package computevm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"cloud.google.com/go/firestore"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tpu-autoheal/autoheal/internal/seal"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// Collections of the instance path in the ledger's database (beside the
// ledger's own; prefixed like them).
const (
	CollectionSpecs    = "instanceSpecs"
	CollectionEvidence = "instanceEvidence"
	CollectionSlices   = "instanceSlices"
)

// Firestore is a Store in the ledger's Firestore database: one document per
// saved spec (its JSON), per evidence entry (by the entry's key, so a
// redelivery writes the same document) and per slice.
type Firestore struct {
	client *firestore.Client
	prefix string
}

var _ Store = (*Firestore)(nil)

// NewFirestore returns a Store on client's database; prefix prefixes the
// collection names (as ledger.WithPrefix does).
func NewFirestore(client *firestore.Client, prefix string) *Firestore {
	return &Firestore{client: client, prefix: prefix}
}

func (f *Firestore) col(name string) *firestore.CollectionRef {
	return f.client.Collection(f.prefix + name)
}

// docID is a document id for any string: a hash, so no name can escape
// its collection.
func docID(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

type specDoc struct {
	Name    string    `firestore:"name"`
	Project string    `firestore:"project"`
	Zone    string    `firestore:"zone"`
	Spec    string    `firestore:"spec"` // the instance JSON
	Saved   time.Time `firestore:"saved"`
	// KeyVersion and MAC are the spec's seal; LastStart the instance's
	// lastStartTimestamp when saved.
	KeyVersion string `firestore:"keyVersion"`
	MAC        []byte `firestore:"mac"`
	LastStart  string `firestore:"lastStart"`
}

// SaveSpec implements Store.
func (f *Firestore) SaveSpec(ctx context.Context, name string, spec SavedSpec) error {
	ref, err := ParseRef(name)
	if err != nil {
		return err
	}
	b, err := json.Marshal(spec.Spec)
	if err != nil {
		return err
	}
	d := specDoc{Name: name, Project: ref.Project, Zone: ref.Zone, Spec: string(b), Saved: spec.Seen,
		KeyVersion: spec.Seal.KeyVersion, MAC: spec.Seal.MAC, LastStart: spec.LastStart}
	_, err = f.col(CollectionSpecs).Doc(docID(name)).Set(ctx, d) // rest: firestore.projects.databases.documents.commit
	return err
}

// Specs implements Store.
func (f *Firestore) Specs(ctx context.Context, project, zone string) (map[string]SavedSpec, error) {
	out := map[string]SavedSpec{}
	it := f.col(CollectionSpecs).Where("project", "==", project).Where("zone", "==", zone).Documents(ctx) // rest: firestore.projects.databases.documents.runQuery
	defer it.Stop()
	for {
		s, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var d specDoc
		if err := s.DataTo(&d); err != nil {
			return nil, err
		}
		var in compute.Instance
		if err := json.Unmarshal([]byte(d.Spec), &in); err != nil {
			return nil, fmt.Errorf("saved spec of %s: %w", d.Name, err)
		}
		out[d.Name] = SavedSpec{Spec: &in, Seal: seal.Seal{KeyVersion: d.KeyVersion, MAC: d.MAC}, Seen: d.Saved, LastStart: d.LastStart}
	}
}

// ForgetSpec implements Store.
func (f *Firestore) ForgetSpec(ctx context.Context, name string) error {
	_, err := f.col(CollectionSpecs).Doc(docID(name)).Delete(ctx) // rest: firestore.projects.databases.documents.commit
	return err
}

type evidenceDoc struct {
	Instance string    `firestore:"instance"`
	Kind     string    `firestore:"kind"`
	Method   string    `firestore:"method"`
	Time     time.Time `firestore:"time"`
	InsertID string    `firestore:"insertId"`
}

// AddEvidence implements Store. Documents are keyed by the entry, so a
// redelivered entry rewrites its own; Evidence reads the newest MaxEvidence.
func (f *Firestore) AddEvidence(ctx context.Context, e vmpolicy.Evidence) error {
	d := evidenceDoc{Instance: e.Instance, Kind: string(e.Kind), Method: e.Method, Time: e.Time, InsertID: e.InsertID}
	_, err := f.col(CollectionEvidence).Doc(docID(e.Instance+"|"+e.InsertID)).Set(ctx, d) // rest: firestore.projects.databases.documents.commit
	return err
}

// Evidence implements Store.
func (f *Firestore) Evidence(ctx context.Context, instances []string) ([]vmpolicy.Evidence, error) {
	var out []vmpolicy.Evidence
	for _, name := range instances {
		it := f.col(CollectionEvidence).Where("instance", "==", name).Documents(ctx) // rest: firestore.projects.databases.documents.runQuery
		var list []vmpolicy.Evidence
		for {
			s, err := it.Next()
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				it.Stop()
				return nil, err
			}
			var d evidenceDoc
			if err := s.DataTo(&d); err != nil {
				it.Stop()
				return nil, err
			}
			list = append(list, vmpolicy.Evidence{Instance: d.Instance, Kind: vmpolicy.EvidenceKind(d.Kind), Method: d.Method, Time: d.Time, InsertID: d.InsertID})
		}
		it.Stop()
		sort.SliceStable(list, func(i, j int) bool { return list[i].Time.Before(list[j].Time) })
		if len(list) > MaxEvidence {
			list = list[len(list)-MaxEvidence:]
		}
		out = append(out, list...)
	}
	return out, nil
}

type sliceDoc struct {
	// Key is the slice's key (the document id is its hash), so that the
	// slices can be listed (autoheal status); "" in a document written
	// before it was kept.
	Key        string          `firestore:"key"`
	Since      time.Time       `firestore:"since"`
	Action     string          `firestore:"action"`
	At         time.Time       `firestore:"at"`
	Operations []string        `firestore:"operations"`
	Unknown    []unknownDoc    `firestore:"unknown"`
	Faulty     []faultyDoc     `firestore:"faulty"`
	Maintained []maintainedDoc `firestore:"maintained"`
	// CheckpointLate: SliceState.CheckpointLate.
	CheckpointLate string `firestore:"checkpointLate"`
	// MaintenanceUntil: SliceState.MaintenanceUntil.
	MaintenanceUntil time.Time `firestore:"maintenanceUntil"`
}

type maintainedDoc struct {
	Instance  string    `firestore:"instance"`
	ID        int64     `firestore:"id"`
	Window    string    `firestore:"window"`
	WindowEnd string    `firestore:"windowEnd"`
	At        time.Time `firestore:"at"`
	Operation string    `firestore:"operation"`
}

type faultyDoc struct {
	Instance  string    `firestore:"instance"`
	At        time.Time `firestore:"at"`
	Operation string    `firestore:"operation"`
}

type unknownDoc struct {
	Instance  string    `firestore:"instance"`
	Action    string    `firestore:"action"`
	RequestID string    `firestore:"requestId"`
	At        time.Time `firestore:"at"`
	Reads     int       `firestore:"reads"`
}

// Slice implements Store.
func (f *Firestore) Slice(ctx context.Context, key string) (SliceState, error) {
	s, err := f.col(CollectionSlices).Doc(docID(key)).Get(ctx) // rest: firestore.projects.databases.documents.get
	if status.Code(err) == codes.NotFound {
		return SliceState{}, nil
	}
	if err != nil {
		return SliceState{}, err
	}
	var d sliceDoc
	if err := s.DataTo(&d); err != nil {
		return SliceState{}, err
	}
	return d.state(), nil
}

// state is the slice's state the document holds.
func (d sliceDoc) state() SliceState {
	st := SliceState{Since: d.Since, Incident: vmpolicy.Incident{Action: vmpolicy.Action(d.Action), At: d.At}, Operations: d.Operations, CheckpointLate: d.CheckpointLate, MaintenanceUntil: d.MaintenanceUntil}
	for _, u := range d.Unknown {
		st.Unknown = append(st.Unknown, UnknownCall{Instance: u.Instance, Action: vmpolicy.Action(u.Action), RequestID: u.RequestID, At: u.At, Reads: u.Reads})
	}
	for _, f := range d.Faulty {
		//lint:ignore S1016 the document and the domain type stay apart on purpose: a field added to one must not change the other's shape unseen
		st.Faulty = append(st.Faulty, FaultyReport{Instance: f.Instance, At: f.At, Operation: f.Operation})
	}
	for _, m := range d.Maintained {
		st.Maintained = append(st.Maintained, MaintenanceSent{Instance: m.Instance, ID: uint64(m.ID), Window: m.Window, WindowEnd: m.WindowEnd, At: m.At, Operation: m.Operation})
	}
	return st
}

// SetSlice implements Store.
func (f *Firestore) SetSlice(ctx context.Context, key string, st SliceState) error {
	d := sliceDoc{Key: key, Since: st.Since, Action: string(st.Incident.Action), At: st.Incident.At, Operations: st.Operations, CheckpointLate: st.CheckpointLate, MaintenanceUntil: st.MaintenanceUntil}
	for _, u := range st.Unknown {
		d.Unknown = append(d.Unknown, unknownDoc{Instance: u.Instance, Action: string(u.Action), RequestID: u.RequestID, At: u.At, Reads: u.Reads})
	}
	for _, r := range st.Faulty {
		//lint:ignore S1016 the document and the domain type stay apart on purpose: a field added to one must not change the other's shape unseen
		d.Faulty = append(d.Faulty, faultyDoc{Instance: r.Instance, At: r.At, Operation: r.Operation})
	}
	for _, m := range st.Maintained {
		// Firestore integers are signed 64-bit: the id's bits are kept as they are.
		d.Maintained = append(d.Maintained, maintainedDoc{Instance: m.Instance, ID: int64(m.ID), Window: m.Window, WindowEnd: m.WindowEnd, At: m.At, Operation: m.Operation})
	}
	_, err := f.col(CollectionSlices).Doc(docID(key)).Set(ctx, d) // rest: firestore.projects.databases.documents.commit
	return err
}
