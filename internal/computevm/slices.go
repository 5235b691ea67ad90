package computevm

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"google.golang.org/api/iterator"
)

// KeptSlice is one slice's state as a Store keeps it, with its key (the
// slice's name: projects/P/zones/Z/instances/I for a single-host VM, the
// MIG's or the workload policy's for a multi-host slice).
type KeptSlice struct {
	Key   string
	State SliceState
	// Doc is the Firestore document id when the document does not hold
	// its key (written before keys were kept); "" otherwise.
	Doc string
}

// Slices returns every slice kept, by key. Only autoheal status lists them;
// the instance path reads one slice at a time.
func (m *Memory) Slices(context.Context) ([]KeptSlice, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]KeptSlice, 0, len(m.slices))
	for k, s := range m.slices {
		out = append(out, KeptSlice{Key: k, State: s})
	}
	sortSlices(out)
	return out, nil
}

// Slices returns every slice kept, by key.
func (f *Firestore) Slices(ctx context.Context) ([]KeptSlice, error) {
	it := f.col(CollectionSlices).Documents(ctx) // rest: firestore.projects.databases.documents.runQuery
	defer it.Stop()
	var out []KeptSlice
	for {
		s, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", f.prefix+CollectionSlices, err)
		}
		var d sliceDoc
		if err := s.DataTo(&d); err != nil {
			return nil, fmt.Errorf("read %s/%s: %w", f.prefix+CollectionSlices, s.Ref.ID, err)
		}
		k := KeptSlice{Key: d.Key, State: d.state()}
		if d.Key == "" {
			k.Doc = s.Ref.ID
		}
		out = append(out, k)
	}
	sortSlices(out)
	return out, nil
}

func sortSlices(s []KeptSlice) {
	sort.Slice(s, func(i, j int) bool {
		if s[i].Key != s[j].Key {
			return s[i].Key < s[j].Key
		}
		return s[i].Doc < s[j].Doc
	})
}
