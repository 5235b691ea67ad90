package computefake_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
)

// managed lists a MIG's instances as name → "STATUS/ACTION" (status empty
// for an instance that does not exist).
func (f *fake) managed(t *testing.T, mig string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := f.svc.InstanceGroupManagers.ListManagedInstances(project, zone, mig).MaxResults(3).Pages(context.Background(),
		func(r *compute.InstanceGroupManagersListManagedInstancesResponse) error {
			for _, mi := range r.ManagedInstances {
				out[mi.Name] = mi.InstanceStatus + "/" + mi.CurrentAction
			}
			return nil
		})
	if err != nil {
		t.Fatalf("listManagedInstances %s: %v", mig, err)
	}
	return out
}

func TestMIGGetAndListManagedInstances(t *testing.T) {
	f := start(t, fleetFile)
	m, err := f.svc.InstanceGroupManagers.Get(project, zone, "slice-mig").Do()
	if err != nil {
		t.Fatal(err)
	}
	if m.TargetSize != 4 || m.ResourcePolicies.WorkloadPolicy == "" || !m.Status.IsStable || m.CurrentActions.None != 4 {
		t.Errorf("get = targetSize %d, policies %+v, status %+v, actions %+v", m.TargetSize, m.ResourcePolicies, m.Status, m.CurrentActions)
	}
	want := map[string]string{"slice-mig-w0": "RUNNING/NONE", "slice-mig-w1": "RUNNING/NONE", "slice-mig-w2": "RUNNING/NONE", "slice-mig-w3": "RUNNING/NONE"}
	if diff := cmp.Diff(want, f.managed(t, "slice-mig")); diff != "" {
		t.Errorf("managed (-want +got):\n%s", diff)
	}
	// A PAGELESS group answers everything at once and refuses a token.
	r, err := f.svc.InstanceGroupManagers.ListManagedInstances(project, zone, "serve-mig").MaxResults(1).Do()
	if err != nil || len(r.ManagedInstances) != 2 || r.NextPageToken != "" {
		t.Errorf("pageless list = %+v, %v", r, err)
	}
	_, err = f.svc.InstanceGroupManagers.ListManagedInstances(project, zone, "serve-mig").PageToken("x").Do()
	apiErr(t, err, 400, "invalid")
	_, err = f.svc.InstanceGroupManagers.Get(project, zone, "absent").Do()
	apiErr(t, err, 404, "notFound")
}

func TestMIGRepairsATerminatedInstanceUnderTheSameName(t *testing.T) {
	f := start(t, fleetFile)
	before := f.get(t, "serve-mig-a1b2")
	if _, err := f.HostError(name("serve-mig-a1b2")); err != nil { // automaticRestart off: it stays down
		t.Fatal(err)
	}
	f.clock.add(2*time.Minute - time.Second)
	if got := f.managed(t, "serve-mig")["serve-mig-a1b2"]; got != "TERMINATED/NONE" {
		t.Fatalf("before the repair delay: %s", got)
	}
	f.clock.add(time.Second)
	if got := f.managed(t, "serve-mig")["serve-mig-a1b2"]; got != "TERMINATED/RECREATING" {
		t.Fatalf("at the repair delay: %s, want the MIG deleting it", got)
	}
	f.clock.add(time.Minute) // the delete
	if got := f.managed(t, "serve-mig")["serve-mig-a1b2"]; got != "PROVISIONING/RECREATING" {
		t.Fatalf("after the delete: %s, want it created again", got)
	}
	f.clock.add(3 * time.Minute)
	after := f.get(t, "serve-mig-a1b2")
	if after.Status != "RUNNING" || after.Id == before.Id {
		t.Errorf("after the repair: %s id %d (before %d), want RUNNING with a new id", after.Status, after.Id, before.Id)
	}
	if got := f.managed(t, "serve-mig"); got["serve-mig-a1b2"] != "RUNNING/NONE" || got["serve-mig-c3d4"] != "RUNNING/NONE" {
		t.Errorf("managed after the repair = %v", got)
	}
	if v := metadata(after, "created-by"); v == "" {
		t.Error("recreated instance lost its created-by metadata")
	}
}

func metadata(in *compute.Instance, key string) string {
	for _, it := range in.Metadata.Items {
		if it.Key == key && it.Value != nil {
			return *it.Value
		}
	}
	return ""
}

func TestMIGRepairsADeletedInstance(t *testing.T) {
	f := start(t, fleetFile, computefake.WithOperationDelay("delete", 0))
	if _, err := f.svc.Instances.Delete(project, zone, "serve-mig-c3d4").Do(); err != nil {
		t.Fatal(err)
	}
	if got := f.managed(t, "serve-mig")["serve-mig-c3d4"]; got != "/NONE" {
		t.Fatalf("right after the delete: %q", got)
	}
	f.clock.add(2 * time.Minute)
	f.clock.add(3 * time.Minute)
	if got := f.status(t, "serve-mig-c3d4"); got != "RUNNING" {
		t.Errorf("after repair delay + insert time: %s", got)
	}
}

func TestStuckMIGDoesNotRepairButRecreateInstancesDoes(t *testing.T) {
	f := start(t, fleetFile)
	mig := computefake.MIGName(project, zone, "serve-mig")
	if err := f.SetMIGStuck(mig, true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.HostError(name("serve-mig-a1b2")); err != nil {
		t.Fatal(err)
	}
	f.clock.add(time.Hour)
	r, err := f.svc.InstanceGroupManagers.ListManagedInstances(project, zone, "serve-mig").Do()
	if err != nil {
		t.Fatal(err)
	}
	mi := r.ManagedInstances[0]
	if mi.InstanceStatus != "TERMINATED" || mi.CurrentAction != "RECREATING" || mi.LastAttempt == nil ||
		mi.LastAttempt.Errors.Errors[0].Code != "ZONE_RESOURCE_POOL_EXHAUSTED" {
		t.Fatalf("stuck member after an hour = %+v (last attempt %+v)", mi, mi.LastAttempt)
	}
	op, err := f.svc.InstanceGroupManagers.RecreateInstances(project, zone, "serve-mig", &compute.InstanceGroupManagersRecreateInstancesRequest{
		Instances: []string{"zones/" + zone + "/instances/serve-mig-a1b2"},
	}).Do()
	if err != nil {
		t.Fatal(err)
	}
	f.clock.add(2 * time.Second)
	if got := f.op(t, op); got.Status != "DONE" || got.OperationType != "recreateInstances" {
		t.Errorf("recreateInstances operation = %s %s, want DONE once the flag is set", got.Status, got.OperationType)
	}
	f.clock.add(time.Minute + 3*time.Minute)
	if got := f.managed(t, "serve-mig"); got["serve-mig-a1b2"] != "RUNNING/NONE" || got["serve-mig-c3d4"] != "RUNNING/NONE" {
		t.Errorf("after recreateInstances = %v (only the named instance recreated)", got)
	}
	_, err = f.svc.InstanceGroupManagers.RecreateInstances(project, zone, "serve-mig", &compute.InstanceGroupManagersRecreateInstancesRequest{
		Instances: []string{"zones/" + zone + "/instances/trainer-a"},
	}).Do()
	apiErr(t, err, 400, "invalid")
}

func TestMultiHostSliceMIGIsRecoveredTogether(t *testing.T) {
	f := start(t, fleetFile)
	ids := map[string]uint64{}
	for _, w := range []string{"slice-mig-w0", "slice-mig-w1", "slice-mig-w2", "slice-mig-w3"} {
		ids[w] = f.get(t, w).Id
	}
	if _, err := f.HostError(name("slice-mig-w2")); err != nil {
		t.Fatal(err)
	}
	f.clock.add(2 * time.Minute)
	want := map[string]string{"slice-mig-w0": "STOPPING/RECREATING", "slice-mig-w1": "STOPPING/RECREATING", "slice-mig-w2": "TERMINATED/RECREATING", "slice-mig-w3": "STOPPING/RECREATING"}
	if diff := cmp.Diff(want, f.managed(t, "slice-mig")); diff != "" {
		t.Fatalf("at the repair (-want +got):\n%s", diff)
	}
	f.clock.add(time.Minute + 3*time.Minute)
	for w, old := range ids {
		if in := f.get(t, w); in.Status != "RUNNING" || in.Id == old {
			t.Errorf("%s after the slice's repair: %s id %d (was %d), want RUNNING, new", w, in.Status, in.Id, old)
		}
	}
	// recreateInstances of one VM of a slice recreates the slice.
	if _, err := f.svc.InstanceGroupManagers.RecreateInstances(project, zone, "slice-mig", &compute.InstanceGroupManagersRecreateInstancesRequest{
		Instances: []string{"https://www.googleapis.com/compute/v1/projects/acme-ml/zones/us-central1-c/instances/slice-mig-w0"},
	}).Do(); err != nil {
		t.Fatal(err)
	}
	got := f.managed(t, "slice-mig")
	for w, s := range got {
		if s != "STOPPING/RECREATING" {
			t.Errorf("%s after recreateInstances of w0: %s", w, s)
		}
	}
}
