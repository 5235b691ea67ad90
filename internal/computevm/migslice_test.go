package computevm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// A multi-host slice's members come from its MIG, not from the zone's
// listing (vmswarm seeds 297 with page-skip, 181 and 522 with slice-delete).

// stuckSlice makes the 4-VM slice's MIG stuck and breaks slice-mig-w1 by a
// host error, delivered: the MIG will not repair it.
func stuckSlice(t *testing.T, e *env) string {
	t.Helper()
	mig := computefake.MIGName(project, zone, "slice-mig")
	if err := e.fake.SetMIGStuck(mig, true); err != nil {
		t.Fatal(err)
	}
	entry, err := e.fake.HostError(name("slice-mig-w1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.deliver(entry); got != remediate.ActionRecord {
		t.Fatalf("host error in the slice: %s, want record", got)
	}
	return mig
}

// sweepFor sweeps the zone and returns the record about key, ok false when
// the sweep recorded none.
func sweepFor(t *testing.T, e *env, key string) (remediate.Record, []error, bool) {
	t.Helper()
	res, err := e.rec.Sweep(context.Background(), []string{project}, []string{zone})
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	for _, r := range res.Records {
		if r.Node == key {
			return r, res.Errors, true
		}
	}
	return remediate.Record{}, res.Errors, false
}

// A listing that passes over a page hides slice-mig-w2 and -w3 (page size
// 3: the first page ends at w1), w3 stopped by a person: the slice is
// decided from all four, held, and never a recreateInstances.
func TestAListingMissingAPageStillDecidesTheSliceWhole(t *testing.T) {
	e := newEnv(t, computefake.WithPageSize(3))
	mig := stuckSlice(t, e)
	entries, err := e.fake.PersonStop(name("slice-mig-w3"), "alice@acme.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		e.deliver(en)
	}
	e.clock.add(31 * time.Minute) // past the stuck grace
	e.fake.Fail(computefake.FailRule{Method: "instances.list", Page: computefake.PageSkip})
	for range 3 {
		rec, errs, ok := sweepFor(t, e, mig)
		if len(errs) > 0 {
			t.Fatalf("sweep errors: %v", errs)
		}
		if !ok {
			t.Fatal("the sweep recorded nothing about the slice (the listing showed w0 and w1)")
		}
		if rec.Action != "held" || rec.Chips != 16 {
			t.Errorf("slice with a VM a person stopped, listed in part: %s (%q), %d chips; want held, 16 chips (4 VMs)", rec.Action, rec.Reason, rec.Chips)
		}
		e.clock.add(10 * time.Minute)
	}
	if got := mutations(e); got != 0 {
		t.Errorf("%d mutations (recreateInstances body %s), want none", got, requestBody(e, "instanceGroupManagers.recreateInstances"))
	}
}

// A person deletes slice-mig-w2 (its entry delivered once it is gone: a
// MIG's VM has no saved spec), then w1 breaks: the slice is held, the
// MIG's four members decided together, never recreated (which would make
// the deleted VM again).
func TestAPersonsDeleteOfOneSliceVMHoldsTheSlice(t *testing.T) {
	e := newEnv(t)
	mig := stuckSlice(t, e)
	deleted := name("slice-mig-w2")
	entries, err := e.fake.PersonDelete(deleted, "alice@acme.example")
	if err != nil {
		t.Fatal(err)
	}
	e.clock.add(computefake.DefaultDeleteTime + time.Second)
	if _, ok := e.fake.Instance(deleted); ok {
		t.Fatal("slice-mig-w2 still there after the delete time")
	}
	for _, en := range entries {
		e.deliver(en)
	}
	for range 4 {
		e.clock.add(15 * time.Minute)
		rec, errs, ok := sweepFor(t, e, mig)
		if len(errs) > 0 || !ok {
			t.Fatalf("sweep: errors %v, recorded about the slice: %v", errs, ok)
		}
		if rec.Action != "held" {
			t.Errorf("slice with a VM a person deleted: %s (%q), want held", rec.Action, rec.Reason)
		}
	}
	if got := mutations(e); got != 0 {
		t.Errorf("%d mutations (recreateInstances body %s), want none", got, requestBody(e, "instanceGroupManagers.recreateInstances"))
	}
}

// The MIG's own listing passing over a page lists fewer members than its
// targetSize: the slice is not decided from part of it (a transient error:
// the next look decides), and once the listing is whole, it is recreated
// whole.
func TestAMIGListingShortOfItsTargetSizeDecidesNothing(t *testing.T) {
	e := newEnv(t, computefake.WithPageSize(3))
	mig := stuckSlice(t, e)
	e.clock.add(31 * time.Minute)
	e.fake.Fail(computefake.FailRule{Method: "instanceGroupManagers.listManagedInstances", Page: computefake.PageSkip, Times: 1})
	if _, errs, ok := sweepFor(t, e, mig); ok || len(errs) != 1 || !strings.Contains(errs[0].Error(), "targetSize is 4") {
		t.Fatalf("sweep with the MIG listed in part: recorded %v, errors %v; want no record and one error naming the targetSize", ok, errs)
	}
	if got := mutations(e); got != 0 {
		t.Fatalf("%d mutations from a MIG listed in part", got)
	}
	if rec, errs, _ := sweepFor(t, e, mig); rec.Action != "recreateInstances" || len(errs) > 0 {
		t.Fatalf("next sweep: %s %v, want recreateInstances", rec.Action, errs)
	}
	body := requestBody(e, "instanceGroupManagers.recreateInstances")
	for _, w := range []string{"w0", "w1", "w2", "w3"} {
		if !strings.Contains(body, "slice-mig-"+w+`"`) {
			t.Errorf("recreateInstances body %s lacks slice-mig-%s", body, w)
		}
	}
}

// abandoning is Compute Engine with the MIG saying one member is being
// abandoned (instanceGroupManagers.abandonInstances, which the fake does
// not serve).
type abandoning struct {
	computevm.Instances
	member string
}

func (a abandoning) ManagedInstances(ctx context.Context, mig string) ([]computevm.ManagedInstance, error) {
	ms, err := a.Instances.ManagedInstances(ctx, mig)
	for i := range ms {
		if ms[i].Instance == a.member {
			ms[i].CurrentAction = "ABANDONING"
		}
	}
	return ms, err
}

// A member the MIG is abandoning (or deleting) is a person's act on the
// slice: past the stuck grace, the slice is held, never recreated.
func TestAMemberTheMIGIsAbandoningHoldsTheSlice(t *testing.T) {
	e := newEnv(t)
	mig := stuckSlice(t, e)
	e.rec.Compute = abandoning{Instances: e.rec.Compute, member: name("slice-mig-w2")}
	e.clock.add(31 * time.Minute)
	rec, errs, ok := sweepFor(t, e, mig)
	if len(errs) > 0 || !ok || rec.Action != "held" || !strings.Contains(rec.Reason, "ABANDONING") {
		t.Fatalf("slice with a member being abandoned: %s (%q), errors %v; want held, naming ABANDONING", rec.Action, rec.Reason, errs)
	}
	if got := mutations(e); got != 0 {
		t.Errorf("%d mutations, want none", got)
	}
}
