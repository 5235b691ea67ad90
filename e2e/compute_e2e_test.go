//go:build emulator

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/google/go-cmp/cmp"
	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// The instance path end to end: `autoheal serve` with
// AUTOHEAL_COMPUTE_INSTANCES and AUTOHEAL_COMPUTE_ENDPOINT pointed at the
// simulated Compute Engine (the real compute/v1 client), its ledger and
// instance store in the Firestore emulator, the fake's audit entries
// published to the Pub/Sub emulator and pushed to the function.

const (
	ceProject = "acme-ml" // the fake fleet's project and zone
	ceZone    = "us-central1-c"
	// The image the saved spec's boot disk is made from (the instance's
	// autoheal-source-image metadata: an attached disk does not name it).
	ceImage = "projects/ubuntu-os-accelerator-images/global/images/ubuntu-accelerator-2204-amd64-tpu-v20261101"
	// ceStuckGrace is AUTOHEAL_STUCK_GRACE of the served function,
	// compressed from 30m.
	ceStuckGrace = 20 * time.Second
)

func ceName(instance string) string { return computefake.InstanceName(ceProject, ceZone, instance) }

// computeFleet is the fake's fleet file with three changes: trainer-a
// (standalone TPU7x) does not restart by itself (with automaticRestart the
// function defers its start for a 5-minute restart grace, and the fake
// restarts it first), spot-delete names its boot image, and trainer-b is
// trainer-a's twin that does restart by itself.
func computeFleet(t *testing.T) computefake.Fleet {
	t.Helper()
	f, err := computefake.ReadFleetFile("../internal/computefake/testdata/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	off := false
	var twin compute.Instance
	for _, in := range f.Instances {
		switch in.Name {
		case "trainer-a":
			b, _ := json.Marshal(in)
			if err := json.Unmarshal(b, &twin); err != nil {
				t.Fatal(err)
			}
			in.Scheduling.AutomaticRestart = &off
		case "spot-delete":
			in.Metadata.Items = append(in.Metadata.Items, &compute.MetadataItems{Key: "autoheal-source-image", Value: strPtr(ceImage)})
		}
	}
	twin.Name, twin.Id = "trainer-b", 4521879902345678199
	twin.SelfLink = strings.Replace(twin.SelfLink, "trainer-a", "trainer-b", 1)
	twin.Disks[0].DeviceName, twin.Disks[0].Source = "trainer-b", strings.Replace(twin.Disks[0].Source, "trainer-a", "trainer-b", 1)
	f.Instances = append(f.Instances, &twin)
	return f
}

func strPtr(s string) *string { return &s }

// ceEntries writes the fake's audit entries as one JSON line each.
func ceEntries(t *testing.T, es ...computefake.LogEntry) string {
	t.Helper()
	var b bytes.Buffer
	for _, e := range es {
		b.Write(e.JSON())
		b.WriteByte('\n')
	}
	file := filepath.Join(t.TempDir(), "entries.jsonl")
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// ceRecord is the part of an instance decision record the test checks.
type ceRecord struct {
	Action string `json:"action"`
	Reason string `json:"reason"`
	Node   string `json:"node"` // the slice: an instance, or the MIG of a multi-host slice
}

func ceRecords(out []string, node string) []ceRecord {
	var rs []ceRecord
	for _, l := range out {
		var r ceRecord
		if json.Unmarshal([]byte(l), &r) == nil && r.Action != "" && r.Node == node {
			rs = append(rs, r)
		}
	}
	return rs
}

func actions(rs []ceRecord) map[string]int {
	m := map[string]int{}
	for _, r := range rs {
		m[r.Action]++
	}
	return m
}

// mutations are the calls that change something (not reads) the fake
// answered about resource, by method, and how many of them succeeded.
func mutations(fake *computefake.Server, resource string) (calls, ok map[string]int) {
	calls, ok = map[string]int{}, map[string]int{}
	for _, r := range fake.Requests() {
		// listManagedInstances is a read sent as a POST, as on the real API.
		if r.Resource != resource || r.HTTP == http.MethodGet || r.Method == "instanceGroupManagers.listManagedInstances" {
			continue
		}
		calls[r.Method]++
		if r.Status/100 == 2 {
			ok[r.Method]++
		}
	}
	return calls, ok
}

func TestComputeInstancesEndToEnd(t *testing.T) {
	startEmulators(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	fake := computefake.New(computeFleet(t),
		computefake.WithOperationDelay("insert", 0), computefake.WithOperationDelay("delete", 0),
		computefake.WithOperationDelay("start", 0), computefake.WithOperationDelay("stop", 0),
		computefake.WithOperationDelay("setMetadata", 0), computefake.WithOperationDelay("recreateInstances", 0),
		computefake.WithRestartDelay(0))
	t.Cleanup(fake.Close)
	tpuSrv := tpufake.New(tpufake.Fleet{}) // no Cloud TPU nodes: the node sweep lists nothing
	t.Cleanup(tpuSrv.Close)
	bin := buildCLI(t)
	env := []string{
		"AUTOHEAL_PROJECT=" + project,
		"AUTOHEAL_PROJECTS=" + ceProject,
		"AUTOHEAL_ZONES=" + ceZone,
		"AUTOHEAL_TPU_ENDPOINT=" + tpuSrv.URL(),
		"AUTOHEAL_COMPUTE_INSTANCES=true",
		"AUTOHEAL_COMPUTE_ENDPOINT=" + fake.URL(),
		"AUTOHEAL_STUCK_GRACE=" + ceStuckGrace.String(),
		"AUTOHEAL_RECORD_TO=stdout",
		"AUTOHEAL_SWEEP_MIN_INTERVAL=0s",
		"AUTOHEAL_MAINTENANCE=early", // slice-mig's notices: prepare, then maintain once every guest checkpointed
		fmt.Sprintf("AUTOHEAL_FIRESTORE_DATABASE=e2e-compute-%d", time.Now().UnixNano()%1e9),
	}
	// Two function instances on one Firestore database: the first one's
	// sweep saves the specs, the second one (nothing in memory) gets the
	// pushes and sweeps after.
	first, _ := serve(t, bin, env)
	addr, out := serve(t, bin, env)
	proxy := httptest.NewServer(&pushCounter{target: "http://" + addr})
	t.Cleanup(proxy.Close)
	client, err := pubsub.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/" + project + "/subscriptions/" + topicID + "-push", Topic: topic,
		PushConfig: &pubsubpb.PushConfig{PushEndpoint: proxy.URL + "/" + topic}, AckDeadlineSeconds: 60,
	}); err != nil {
		t.Fatalf("create push subscription: %v", err)
	}
	// Cloud Scheduler's sweep, posted straight to the function and waited
	// for.
	sweepAt := func(addr string) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"message": map[string]any{
			"data": base64.StdEncoding.EncodeToString([]byte(events.SweepMessage)), "messageId": "sweep",
		}, "subscription": "projects/" + project + "/subscriptions/scheduler"})
		resp, err := http.Post("http://"+addr+"/"+topic, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("sweep: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("sweep answered %d", resp.StatusCode)
		}
	}
	sweep := func() { sweepAt(addr) }

	trainer, spotDelete, spotStop, twin := ceName("trainer-a"), ceName("spot-delete"), ceName("spot-stop"), ceName("trainer-b")
	serveVM := ceName("serve-mig-a1b2")
	serveMIG := computefake.MIGName(ceProject, ceZone, "serve-mig")
	sliceMIG := computefake.MIGName(ceProject, ceZone, "slice-mig")
	sliceVMs := []string{ceName("slice-mig-w0"), ceName("slice-mig-w1"), ceName("slice-mig-w2"), ceName("slice-mig-w3")}

	// The first sweep saves the specs of the opted-in standalone VMs: a
	// vanished VM cannot be read.
	sweepAt(first)

	// Phase 1, all at once: a host error on trainer-a, spot-delete
	// preempted (Compute Engine deletes it), a person stops spot-stop, a
	// host error on serve-mig's VM (the MIG is stuck), a maintenance notice
	// for the 4-VM slice-mig.
	hostErr, err := fake.HostError(trainer)
	if err != nil {
		t.Fatal(err)
	}
	preempted, err := fake.Preempt(spotDelete)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fake.Instance(spotDelete); ok {
		t.Fatal("spot-delete still exists after its preemption")
	}
	stopped, err := fake.PersonStop(spotStop, "alice@acme-ml.example")
	if err != nil {
		t.Fatal(err)
	}
	// trainer-b: a host error, Compute Engine restarts it, then a person
	// stops it; the host error's entry arrives with the stop's. Without
	// the person's entry this is a TERMINATED VM with a system event
	// (start, after the restart grace: a defer first).
	twinErr, err := fake.HostError(twin)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "trainer-b's automatic restart", func() bool {
		fake.Tick()
		in, ok := fake.Instance(twin)
		return ok && in.Status == "RUNNING"
	})
	time.Sleep(time.Second)
	twinStopped, err := fake.PersonStop(twin, "bob@acme-ml.example")
	if err != nil {
		t.Fatal(err)
	}
	if err := fake.SetMIGStuck(serveMIG, true); err != nil {
		t.Fatal(err)
	}
	migErr, err := fake.HostError(serveVM)
	if err != nil {
		t.Fatal(err)
	}
	migErrAt := time.Now()
	window := time.Now().Add(7 * 24 * time.Hour).UTC().Truncate(time.Hour)
	notices, err := fake.ScheduleMaintenance(sliceVMs[0], computefake.Maintenance{WindowStart: window, WindowEnd: window.Add(4 * time.Hour), CanReschedule: true})
	if err != nil {
		t.Fatal(err)
	}
	phase1 := []computefake.LogEntry{hostErr, preempted, migErr, twinErr}
	phase1 = append(append(append(phase1, stopped...), twinStopped...), notices...)
	file := ceEntries(t, phase1...)
	publish(t, bin, file)

	waitFor(ctx, t, "trainer-a's start", func() bool { return fake.Count("instances.start", trainer) >= 1 })
	waitFor(ctx, t, "spot-delete's insert", func() bool { return fake.Count("instances.insert", spotDelete) >= 1 })
	waitFor(ctx, t, "the notice in every VM of slice-mig", func() bool {
		for _, vm := range sliceVMs {
			if _, ok := mutations(fake, vm); ok["instances.setMetadata"] < 1 {
				return false
			}
		}
		return true
	})
	// The notice, as the node path writes it, in every VM of the slice,
	// their other metadata kept.
	for _, vm := range sliceVMs {
		in, _ := fake.Instance(vm)
		md := map[string]string{}
		for _, it := range in.Metadata.Items {
			md[it.Key] = *it.Value
		}
		var notice remediate.MaintenanceNotice
		if err := json.Unmarshal([]byte(md[remediate.NoticeMetadataKey]), &notice); err != nil || notice.Notice != window.Format(time.RFC3339) {
			t.Errorf("%s: notice %q (%v), want one for %s", vm, md[remediate.NoticeMetadataKey], err, window.Format(time.RFC3339))
		}
		if md["startup-script"] != "#!/bin/bash\nexec /opt/autoheal/resume.sh" {
			t.Errorf("%s: metadata %v, the startup script lost", vm, md)
		}
	}
	for _, vm := range sliceVMs {
		// Concurrent deliveries of the 4 notices race on the fingerprint: a
		// loser's setMetadata answers 412; one write per VM succeeds.
		if _, ok := mutations(fake, vm); !cmp.Equal(ok, map[string]int{"instances.setMetadata": 1}) {
			t.Errorf("%s: successful calls %v, want one setMetadata", vm, ok)
		}
	}
	if got := actions(ceRecords(out.all(), sliceMIG)); got["prepare"] < 1 {
		t.Errorf("slice-mig's records %v, want prepare", got)
	}
	waitFor(ctx, t, "serve-mig's record", func() bool { return actions(ceRecords(out.all(), serveVM))["record"] >= 1 })
	if time.Since(migErrAt) < ceStuckGrace {
		if got := fake.Count("instanceGroupManagers.recreateInstances", serveMIG); got != 0 {
			t.Errorf("recreateInstances of %s within the stuck grace: %d", serveMIG, got)
		}
	}

	t.Run("spot-delete is inserted from its saved spec", func(t *testing.T) {
		var body []byte
		for _, r := range fake.Requests() {
			if r.Method == "instances.insert" && r.Resource == spotDelete {
				body = r.Body
			}
		}
		var got compute.Instance
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("insert body %s: %v", body, err)
		}
		// Field by field against the fleet file's spot-delete, output-only
		// fields cleared.
		if got.Name != "spot-delete" {
			t.Errorf("name %q", got.Name)
		}
		if want := "https://www.googleapis.com/compute/v1/projects/acme-ml/zones/us-central1-c/machineTypes/tpu7x-standard-4t"; got.MachineType != want {
			t.Errorf("machineType %q, want %q", got.MachineType, want)
		}
		if s := got.Scheduling; s == nil || s.ProvisioningModel != "SPOT" || s.InstanceTerminationAction != "DELETE" ||
			s.OnHostMaintenance != "TERMINATE" || s.AutomaticRestart == nil || *s.AutomaticRestart {
			t.Errorf("scheduling %+v, want SPOT, DELETE, TERMINATE, no automatic restart", s)
		}
		if len(got.ServiceAccounts) != 1 || got.ServiceAccounts[0].Email != "trainer@acme-ml.iam.gserviceaccount.com" ||
			!cmp.Equal(got.ServiceAccounts[0].Scopes, []string{"https://www.googleapis.com/auth/cloud-platform"}) {
			t.Errorf("serviceAccounts %+v", got.ServiceAccounts)
		}
		if len(got.NetworkInterfaces) != 1 {
			t.Fatalf("networkInterfaces %+v", got.NetworkInterfaces)
		}
		nic := got.NetworkInterfaces[0]
		if nic.Network != "https://www.googleapis.com/compute/v1/projects/acme-ml/global/networks/default" ||
			nic.Subnetwork != "https://www.googleapis.com/compute/v1/projects/acme-ml/regions/us-central1/subnetworks/default" ||
			nic.NicType != "GVNIC" || nic.StackType != "IPV4_ONLY" {
			t.Errorf("network interface %+v", nic)
		}
		if nic.NetworkIP != "" {
			t.Errorf("networkIP %q kept: the preempted VM's address", nic.NetworkIP)
		}
		if diff := cmp.Diff(map[string]string{"tpu-autoheal": "enabled", "team": "llm"}, got.Labels); diff != "" {
			t.Errorf("labels (-want +got):\n%s", diff)
		}
		md := map[string]string{}
		if got.Metadata != nil {
			for _, it := range got.Metadata.Items {
				md[it.Key] = *it.Value
			}
		}
		if diff := cmp.Diff(map[string]string{
			"enable-guest-attributes": "TRUE",
			"startup-script":          "#!/bin/bash\nexec /opt/autoheal/resume.sh",
			"autoheal-source-image":   ceImage,
		}, md); diff != "" {
			t.Errorf("metadata (-want +got):\n%s", diff)
		}
		if got.Tags == nil || !cmp.Equal(got.Tags.Items, []string{"tpu-train"}) {
			t.Errorf("tags %+v", got.Tags)
		}
		if c := got.ShieldedInstanceConfig; c == nil || !c.EnableIntegrityMonitoring || c.EnableSecureBoot || !c.EnableVtpm {
			t.Errorf("shieldedInstanceConfig %+v", c)
		}
		if len(got.Disks) != 1 {
			t.Fatalf("disks %+v", got.Disks)
		}
		d := got.Disks[0]
		if !d.Boot || !d.AutoDelete || d.Source != "" || d.DeviceName != "spot-delete" || d.Interface != "NVME" || d.Mode != "READ_WRITE" {
			t.Errorf("boot disk %+v", d)
		}
		if p := d.InitializeParams; p == nil || p.DiskName != "spot-delete" || p.DiskSizeGb != 200 || p.SourceImage != ceImage {
			t.Errorf("boot disk initializeParams %+v, want spot-delete, 200 GB, %s", p, ceImage)
		}
		if got.Id != 0 || got.Status != "" || got.SelfLink != "" || got.Fingerprint != "" || got.CreationTimestamp != "" || got.CpuPlatform != "" {
			t.Errorf("output-only fields sent: id %d status %q selfLink %q fingerprint %q created %q cpu %q",
				got.Id, got.Status, got.SelfLink, got.Fingerprint, got.CreationTimestamp, got.CpuPlatform)
		}
	})

	// Phase 2: slice-mig, stuck, loses one VM to a host error.
	if err := fake.SetMIGStuck(sliceMIG, true); err != nil {
		t.Fatal(err)
	}
	sliceErr, err := fake.HostError(sliceVMs[1])
	if err != nil {
		t.Fatal(err)
	}
	sliceErrAt := time.Now()
	publish(t, bin, ceEntries(t, sliceErr))
	waitFor(ctx, t, "slice-mig's record", func() bool {
		for _, r := range ceRecords(out.all(), sliceMIG) {
			if r.Action == "record" && strings.Contains(r.Reason, "the MIG repairs it") {
				return true
			}
		}
		return false
	})
	if time.Since(sliceErrAt) < ceStuckGrace {
		if got := fake.Count("instanceGroupManagers.recreateInstances", sliceMIG); got != 0 {
			t.Errorf("recreateInstances of %s within the stuck grace: %d", sliceMIG, got)
		}
	}
	// Sweeps past the stuck grace: each stuck MIG gets recreateInstances.
	for time.Since(sliceErrAt) < ceStuckGrace+5*time.Second {
		sweep()
		time.Sleep(2 * time.Second)
	}
	waitFor(ctx, t, "slice-mig's recreateInstances", func() bool {
		return fake.Count("instanceGroupManagers.recreateInstances", sliceMIG) >= 1
	})
	// Redeliveries and more sweeps change nothing.
	publish(t, bin, file)
	publish(t, bin, ceEntries(t, sliceErr))
	for range 3 {
		sweep()
		time.Sleep(time.Second)
	}
	time.Sleep(3 * time.Second)

	// Every call that changed something, per resource: nothing but the one
	// action of each incident (a person's stop: nothing at all).
	for _, c := range []struct {
		resource string
		want     map[string]int
	}{
		{trainer, map[string]int{"instances.start": 1}},
		{spotDelete, map[string]int{"instances.insert": 1}},
		{spotStop, map[string]int{}},
		{twin, map[string]int{}},
		{serveVM, map[string]int{}},
		{serveMIG, map[string]int{"instanceGroupManagers.recreateInstances": 1}},
		{sliceMIG, map[string]int{"instanceGroupManagers.recreateInstances": 1}},
	} {
		if calls, _ := mutations(fake, c.resource); !cmp.Equal(calls, c.want) {
			t.Errorf("calls about %s: %v, want %v", c.resource, calls, c.want)
		}
	}
	for _, vm := range sliceVMs {
		// The recreated VMs get the notice again (the MIG made them from its
		// template): setMetadata only.
		calls, _ := mutations(fake, vm)
		for m := range calls {
			if m != "instances.setMetadata" {
				t.Errorf("%s of %s (a member of a MIG's slice): %d calls", m, vm, calls[m])
			}
		}
	}
	t.Run("the 4-VM slice is recreated whole, once", func(t *testing.T) {
		var bodies []string
		for _, r := range fake.Requests() {
			if r.Method == "instanceGroupManagers.recreateInstances" && r.Resource == sliceMIG {
				bodies = append(bodies, string(r.Body))
			}
		}
		if len(bodies) != 1 {
			t.Fatalf("recreateInstances of %s: %q", sliceMIG, bodies)
		}
		var req compute.InstanceGroupManagersRecreateInstancesRequest
		if err := json.Unmarshal([]byte(bodies[0]), &req); err != nil {
			t.Fatal(err)
		}
		want := []string{"zones/us-central1-c/instances/slice-mig-w0", "zones/us-central1-c/instances/slice-mig-w1",
			"zones/us-central1-c/instances/slice-mig-w2", "zones/us-central1-c/instances/slice-mig-w3"}
		if diff := cmp.Diff(want, req.Instances); diff != "" {
			t.Errorf("instances recreated (-want +got):\n%s", diff)
		}
	})
	t.Run("serve-mig's one VM is recreated after the stuck grace", func(t *testing.T) {
		for _, r := range fake.Requests() {
			if r.Method != "instanceGroupManagers.recreateInstances" || r.Resource != serveMIG {
				continue
			}
			if r.Time.Sub(migErrAt) < ceStuckGrace {
				t.Errorf("recreateInstances %v after the host error, within the stuck grace %v", r.Time.Sub(migErrAt), ceStuckGrace)
			}
			var req compute.InstanceGroupManagersRecreateInstancesRequest
			json.Unmarshal(r.Body, &req)
			if diff := cmp.Diff([]string{"zones/us-central1-c/instances/serve-mig-a1b2"}, req.Instances); diff != "" {
				t.Errorf("instances recreated (-want +got):\n%s", diff)
			}
		}
	})
	t.Run("records", func(t *testing.T) {
		all := out.all()
		if got := actions(ceRecords(all, trainer)); got["start"] != 1 {
			t.Errorf("trainer-a's records %v, want one start", got)
		}
		if got := actions(ceRecords(all, spotDelete)); got["recreate"] != 1 {
			t.Errorf("spot-delete's records %v, want one recreate", got)
		}
		// A person's stop: held from the first look that has the stop's
		// entry on. trainer-b's host error may be delivered before the
		// stop: that look sees a TERMINATED VM with automaticRestart and a
		// system event, and defers.
		for _, vm := range []string{spotStop, twin} {
			held := false
			var seq []string
			for _, r := range ceRecords(all, vm) {
				seq = append(seq, r.Action)
				switch {
				case r.Action == "held":
					held = true
				case r.Action == "record", r.Action == "defer" && !held && vm == twin:
				default:
					t.Errorf("%s (a person's stop): a %q record", vm, r.Action)
				}
			}
			if !held {
				t.Errorf("%s's records %v, want held", vm, seq)
			}
		}
		if got := actions(ceRecords(all, serveVM)); got["recreateInstances"] != 1 {
			t.Errorf("serve-mig-a1b2's records %v, want one recreateInstances", got)
		}
		// One incident for the slice: its records are the MIG's, none
		// about one of its VMs alone.
		if got := actions(ceRecords(all, sliceMIG)); got["recreateInstances"] != 1 || got["start"] != 0 || got["recreate"] != 0 {
			t.Errorf("slice-mig's records %v, want one recreateInstances", got)
		}
		for _, vm := range sliceVMs {
			if rs := ceRecords(all, vm); len(rs) != 0 {
				t.Errorf("records of %s alone, not of its slice: %v", vm, rs)
			}
		}
	})
	t.Run("guest checkpoints then one performMaintenance per VM in early", func(t *testing.T) {
		// The slice, recreated whole above, runs again (its MIG no longer
		// stuck) and gets a second notice. The served function is in mode
		// early (AUTOHEAL_MAINTENANCE): prepare on all 4 VMs, then, once
		// every guest reported its checkpoint for this notice, one
		// performMaintenance per VM. Only sweeps, one at a time, look at
		// the slice from here on: each call below is one look's.
		if err := fake.SetMIGStuck(sliceMIG, false); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, "slice-mig's VMs running", func() bool {
			fake.Tick()
			for _, vm := range sliceVMs {
				if in, ok := fake.Instance(vm); !ok || in.Status != "RUNNING" {
					return false
				}
			}
			return true
		})
		window2 := window.Add(24 * time.Hour)
		notice2 := window2.Format(time.RFC3339)
		notices2, err := fake.ScheduleMaintenance(sliceVMs[0], computefake.Maintenance{WindowStart: window2, WindowEnd: window2.Add(4 * time.Hour), CanReschedule: true})
		if err != nil {
			t.Fatal(err)
		}
		publish(t, bin, ceEntries(t, notices2...))
		holds := func(vm string) bool {
			in, ok := fake.Instance(vm)
			if !ok || in.Metadata == nil {
				return false
			}
			for _, it := range in.Metadata.Items {
				var n remediate.MaintenanceNotice
				if it.Key == remediate.NoticeMetadataKey && it.Value != nil && json.Unmarshal([]byte(*it.Value), &n) == nil {
					return n.Notice == notice2
				}
			}
			return false
		}
		waitFor(ctx, t, "the second notice in every VM of slice-mig", func() bool {
			for _, vm := range sliceVMs {
				if !holds(vm) {
					return false
				}
			}
			return true
		})
		time.Sleep(3 * time.Second) // the pushes of the notices' entries answered
		report := func(vm string) {
			t.Helper()
			b, _ := json.Marshal(remediate.CheckpointReport{Notice: notice2, Checkpoint: "gs://acme-ml-ckpt/run-7/step-4200", Time: time.Now().UTC().Format(time.RFC3339)})
			if err := fake.SetGuestAttribute(vm, remediate.CheckpointNamespace, remediate.CheckpointKey, string(b)); err != nil {
				t.Fatal(err)
			}
		}
		perVM := func() map[string]int {
			m := map[string]int{}
			for _, vm := range sliceVMs {
				if n := fake.Count("instances.performMaintenance", vm); n > 0 {
					m[vm] = n
				}
			}
			return m
		}
		// Three of four guests report: nothing is started, however many
		// looks.
		for _, vm := range sliceVMs[:3] {
			report(vm)
		}
		for range 3 {
			sweep()
		}
		if got := perVM(); len(got) != 0 {
			t.Fatalf("performMaintenance with slice-mig-w3's checkpoint missing: %v", got)
		}
		if rs := ceRecords(out.all(), sliceMIG); len(rs) == 0 || rs[len(rs)-1].Action != "record" ||
			!strings.Contains(rs[len(rs)-1].Reason, "waiting for the checkpoint of "+sliceVMs[3]) {
			t.Errorf("slice-mig's records %+v, the last one not a record waiting for the checkpoint of %s", rs, sliceVMs[3])
		}
		// The fourth reports: the next look starts the maintenance.
		report(sliceVMs[3])
		sweep()
		for range 3 {
			sweep()
		}
		want := map[string]int{}
		for _, vm := range sliceVMs {
			want[vm] = 1
		}
		if diff := cmp.Diff(want, perVM()); diff != "" {
			t.Errorf("performMaintenance calls per VM (-want +got):\n%s", diff)
		}
		accepted := 0
		for _, vm := range sliceVMs {
			_, ok := mutations(fake, vm)
			accepted += ok["instances.performMaintenance"]
		}
		if accepted < 1 {
			t.Errorf("no performMaintenance accepted, want the slice's maintenance started")
		}
		for _, vm := range sliceVMs {
			in, _ := fake.Instance(vm)
			if in.Status != "TERMINATED" && (in.ResourceStatus == nil || in.ResourceStatus.UpcomingMaintenance == nil ||
				in.ResourceStatus.UpcomingMaintenance.MaintenanceStatus == "PENDING") {
				t.Errorf("%s: %s, notice %+v: its maintenance was not started", vm, in.Status, in.ResourceStatus)
			}
		}
		if got := actions(ceRecords(out.all(), sliceMIG)); got["maintain"] != 1 {
			t.Errorf("slice-mig's records %v, want one maintain", got)
		}
	})
	if t.Failed() {
		for _, l := range out.all() {
			t.Log(l)
		}
	}
}
