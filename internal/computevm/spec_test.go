package computevm_test

import (
	"testing"

	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

func TestSpecOfClearsOutputOnlyFieldsAndKeepsTheRest(t *testing.T) {
	v := func(s string) *string { return &s }
	restart := false
	in := &compute.Instance{
		Id: 42, Name: "trainer-a", Status: "RUNNING", SelfLink: "https://x/instances/trainer-a", Fingerprint: "f", LabelFingerprint: "l",
		CreationTimestamp: "t", LastStartTimestamp: "t", LastStopTimestamp: "t", CpuPlatform: "AMD Turin",
		MachineType: "zones/z/machineTypes/tpu7x-standard-4t", Labels: map[string]string{"tpu-autoheal": "enabled"},
		Scheduling:      &compute.Scheduling{ProvisioningModel: "SPOT", InstanceTerminationAction: "DELETE", AutomaticRestart: &restart},
		ServiceAccounts: []*compute.ServiceAccount{{Email: "trainer@p.iam.gserviceaccount.com"}},
		Metadata: &compute.Metadata{Fingerprint: "m", Items: []*compute.MetadataItems{
			{Key: "startup-script", Value: v("resume")}, {Key: "autoheal-source-image", Value: v("projects/p/global/images/tpu")},
			{Key: remediate.NoticeMetadataKey, Value: v(`{"notice":"w"}`)}}},
		NetworkInterfaces: []*compute.NetworkInterface{{Network: "n", Subnetwork: "s", NetworkIP: "10.0.0.2", Name: "nic0",
			AccessConfigs: []*compute.AccessConfig{{NatIP: "1.2.3.4", Type: "ONE_TO_ONE_NAT"}}}},
		Disks: []*compute.AttachedDisk{
			{Boot: true, AutoDelete: true, DeviceName: "trainer-a", Source: "https://x/zones/z/disks/trainer-a", DiskSizeGb: 200, Licenses: []string{"l"}},
			{DeviceName: "data", Source: "https://x/zones/z/disks/data"},
		},
		ResourceStatus: &compute.ResourceStatus{},
	}
	s := computevm.SpecOf(in)
	if s.Id != 0 || s.Status != "" || s.SelfLink != "" || s.Fingerprint != "" || s.LabelFingerprint != "" || s.CreationTimestamp != "" ||
		s.LastStartTimestamp != "" || s.LastStopTimestamp != "" || s.CpuPlatform != "" || s.ResourceStatus != nil || s.Metadata.Fingerprint != "" {
		t.Errorf("output-only fields kept: %+v", s)
	}
	if n := s.NetworkInterfaces[0]; n.NetworkIP != "" || n.AccessConfigs[0].NatIP != "" || n.Network != "n" || n.Subnetwork != "s" || n.AccessConfigs[0].Type != "ONE_TO_ONE_NAT" {
		t.Errorf("network interface = %+v", n)
	}
	boot := s.Disks[0]
	if boot.Source != "" || boot.InitializeParams == nil || boot.InitializeParams.DiskName != "trainer-a" || boot.InitializeParams.DiskSizeGb != 200 ||
		boot.InitializeParams.SourceImage != "projects/p/global/images/tpu" || boot.Licenses != nil {
		t.Errorf("auto-deleted boot disk = %+v (%+v)", boot, boot.InitializeParams)
	}
	if d := s.Disks[1]; d.Source != "https://x/zones/z/disks/data" || d.InitializeParams != nil {
		t.Errorf("a surviving disk is not re-attached by source: %+v", d)
	}
	var keys []string
	for _, it := range s.Metadata.Items {
		keys = append(keys, it.Key)
	}
	if len(keys) != 2 || keys[0] != "startup-script" || keys[1] != "autoheal-source-image" {
		t.Errorf("metadata keys = %v, want the startup script and the image, not the maintenance notice", keys)
	}
	if s.Name != "trainer-a" || s.Scheduling.InstanceTerminationAction != "DELETE" || s.ServiceAccounts[0].Email != "trainer@p.iam.gserviceaccount.com" || s.Labels["tpu-autoheal"] != "enabled" {
		t.Errorf("kept fields = %+v", s)
	}
	if in.Id != 42 || in.Metadata.Fingerprint != "m" || len(in.Metadata.Items) != 3 {
		t.Error("SpecOf changed the instance it copied")
	}
}
