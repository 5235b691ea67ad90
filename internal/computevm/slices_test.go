package computevm_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// twoSlices are the states that checkSlicesListed sets and expects back.
func twoSlices() []computevm.KeptSlice {
	at := time.Date(2026, 11, 20, 3, 44, 36, 123456000, time.UTC)
	return []computevm.KeptSlice{
		{Key: "projects/acme-ml/zones/us-central1-c/instanceGroupManagers/slice-mig", State: computevm.SliceState{
			Since: at, Incident: vmpolicy.Incident{Action: vmpolicy.ActionRecreateInstances, At: at.Add(time.Minute)},
			Operations: []string{"projects/acme-ml/zones/us-central1-c/operations/op-1"},
		}},
		{Key: "projects/acme-ml/zones/us-central1-c/instances/trainer-a", State: computevm.SliceState{
			Since:    at,
			Incident: vmpolicy.Incident{Action: vmpolicy.ActionStart, At: at},
			Unknown:  []computevm.UnknownCall{{Instance: "projects/acme-ml/zones/us-central1-c/instances/trainer-a", Action: vmpolicy.ActionStart, RequestID: "r-1", At: at, Reads: 2}},
		}},
	}
}

// checkSlicesListed sets twoSlices in s (in reverse key order) and checks
// that Slices lists both, by key, with their states.
func checkSlicesListed(t *testing.T, s interface {
	computevm.Store
	Slices(context.Context) ([]computevm.KeptSlice, error)
}) {
	t.Helper()
	ctx := context.Background()
	if got, err := s.Slices(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Slices of an empty store = %v, %v; want none", got, err)
	}
	want := twoSlices()
	for i := len(want) - 1; i >= 0; i-- {
		if err := s.SetSlice(ctx, want[i].Key, want[i].State); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Slices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Slices (-want +got):\n%s", diff)
	}
}

func TestMemoryListsSlicesByKey(t *testing.T) { checkSlicesListed(t, computevm.NewMemory()) }
