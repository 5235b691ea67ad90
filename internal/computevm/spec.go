package computevm

import (
	"encoding/json"
	"strings"
	"time"

	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpumachine"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// OptInLabel and OptInValue are the opt-in label, the same as for nodes.
const (
	OptInLabel = "tpu-autoheal"
	OptInValue = "enabled"
)

// IsTPU reports whether the instance has a TPU machine type.
func IsTPU(in *compute.Instance) bool { return tpumachine.IsTPU(in.MachineType) }

// OptedIn reports whether the instance carries the opt-in label.
func OptedIn(in *compute.Instance) bool { return in.Labels[OptInLabel] == OptInValue }

// metadataValue is the value of a metadata key, "" when absent.
func metadataValue(in *compute.Instance, key string) string {
	if in.Metadata == nil {
		return ""
	}
	for _, it := range in.Metadata.Items {
		if it != nil && it.Key == key && it.Value != nil {
			return *it.Value
		}
	}
	return ""
}

// MIGOf is the MIG that owns the instance of project
// (projects/P/zones/Z/instanceGroupManagers/M), from its created-by
// metadata, which Compute Engine sets on a MIG's instances; "" for a
// standalone instance. created-by names the project by number; a MIG is in
// its instances' project, so the name uses project (the id the rest of the
// code and the ledger use).
func MIGOf(in *compute.Instance, project string) string {
	_, zone, name, err := parseMIG(metadataValue(in, "created-by"))
	if err != nil {
		return ""
	}
	return "projects/" + project + "/zones/" + zone + "/instanceGroupManagers/" + name
}

// SliceKey names the slice the instance belongs to: its MIG
// (projects/P/zones/Z/instanceGroupManagers/M) when migIsSlice (a MIG with
// a workload policy: a multi-host slice); else its first resource policy (a
// workload or placement policy shared by a standalone multi-host slice's
// VMs), as projects/P/zones/Z/resourcePolicies/R, the zone kept because the
// policy is regional; else the instance itself (a single-host VM, or one VM
// of a MIG of single-host VMs, is its own slice). The ledger claims, cools
// down and caps by this key.
func SliceKey(in *compute.Instance, ref Ref, migIsSlice bool) string {
	if m := MIGOf(in, ref.Project); m != "" {
		if migIsSlice {
			return m
		}
		return ref.String()
	}
	if len(in.ResourcePolicies) > 0 {
		p := in.ResourcePolicies[0]
		return "projects/" + ref.Project + "/zones/" + ref.Zone + "/resourcePolicies/" + p[strings.LastIndexByte(p, '/')+1:]
	}
	return ref.String()
}

// Observe is what vmpolicy needs of an instance (nil: NOT FOUND, described
// by its saved spec, which may be nil too).
func Observe(ref Ref, in, spec *compute.Instance) vmpolicy.Instance {
	o := vmpolicy.Instance{Name: ref.String(), HasSpec: spec != nil}
	if in == nil {
		if spec != nil {
			o.OptedIn = OptedIn(spec) && IsTPU(spec)
			o.MIG = MIGOf(spec, ref.Project)
		}
		return o
	}
	o.Found, o.ID, o.Status = true, in.Id, in.Status
	o.OptedIn = OptedIn(in) && IsTPU(in)
	o.MIG = MIGOf(in, ref.Project)
	if t, err := time.Parse(time.RFC3339Nano, in.LastStopTimestamp); err == nil {
		o.LastStop = t
	}
	if t, err := time.Parse(time.RFC3339Nano, in.LastStartTimestamp); err == nil {
		o.LastStart = t
	}
	if in.Scheduling != nil && in.Scheduling.AutomaticRestart != nil {
		o.AutomaticRestart = *in.Scheduling.AutomaticRestart
	}
	o.ReservationBound = in.Scheduling != nil && in.Scheduling.ProvisioningModel == "RESERVATION_BOUND"
	ws, we := "", ""
	if rs := in.ResourceStatus; rs != nil && rs.UpcomingMaintenance != nil {
		ws, we = rs.UpcomingMaintenance.WindowStartTime, rs.UpcomingMaintenance.WindowEndTime
		if rs.UpcomingMaintenance.MaintenanceStatus == "PENDING" {
			o.Maintenance = ws
			o.CanReschedule = rs.UpcomingMaintenance.CanReschedule
		}
	}
	var sent remediate.MaintenanceNotice
	if v := metadataValue(in, remediate.NoticeMetadataKey); v != "" && json.Unmarshal([]byte(v), &sent) == nil && !sent.SentAt.IsZero() {
		// A notice without sentAt is not one prepare wrote: the checkpoint
		// timeout could not run from it, so it counts as not delivered
		// (prepare writes ours over it).
		o.Notified, o.NoticeSent = sent.Notice, sent.SentAt
		if ws == "" { // the maintenance is over: its notice is gone, ours stays
			ws, we = sent.WindowStart, sent.WindowEnd
		}
	}
	// The window of its notice, PENDING or ONGOING, else of the notice
	// prepare wrote: a terminateOnHostMaintenance inside it is that
	// maintenance, not a stuck VM, until its end (vmpolicy).
	o.WindowStart, _ = time.Parse(time.RFC3339Nano, ws)
	o.WindowEnd, _ = time.Parse(time.RFC3339Nano, we)
	return o
}

// SpecOf is the instance as instances.insert takes it to make it again:
// a deep copy with the output-only fields cleared (id, status, timestamps,
// fingerprints, selfLink, cpuPlatform, resourceStatus, ephemeral addresses),
// a boot disk Compute Engine deletes with the instance given as
// initializeParams (its name and size, and the image named by the
// instance's autoheal-source-image metadata key: an attached disk does not
// say its image and this version does not call disks.get; without the key
// the image stays empty and a real insert answers invalid, which the record
// says), and every other disk re-attached by source.
func SpecOf(in *compute.Instance) *compute.Instance {
	b, err := json.Marshal(in)
	if err != nil {
		return nil
	}
	var s compute.Instance
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	s.Id, s.Status, s.StatusMessage, s.SelfLink, s.Kind = 0, "", "", "", ""
	s.CreationTimestamp, s.LastStartTimestamp, s.LastStopTimestamp, s.LastSuspendedTimestamp = "", "", "", ""
	s.Fingerprint, s.LabelFingerprint, s.CpuPlatform, s.ResourceStatus = "", "", "", nil
	s.SatisfiesPzi, s.SatisfiesPzs, s.StartRestricted = false, false, false
	s.Zone = ""
	if s.Metadata != nil {
		s.Metadata.Fingerprint, s.Metadata.Kind = "", ""
		// A maintenance notice belongs to the VM it was sent to, not to one
		// made again from its spec.
		items := s.Metadata.Items[:0]
		for _, it := range s.Metadata.Items {
			if it != nil && it.Key != remediate.NoticeMetadataKey {
				items = append(items, it)
			}
		}
		s.Metadata.Items = items
	}
	if s.Tags != nil {
		s.Tags.Fingerprint = ""
	}
	for _, n := range s.NetworkInterfaces {
		if n == nil {
			continue
		}
		n.Fingerprint, n.Kind, n.NetworkIP, n.Name = "", "", "", ""
		for _, a := range n.AccessConfigs {
			if a != nil {
				a.NatIP, a.Kind = "", ""
			}
		}
	}
	image := metadataValue(in, "autoheal-source-image")
	for _, d := range s.Disks {
		if d == nil {
			continue
		}
		d.Kind, d.Index, d.Licenses, d.GuestOsFeatures, d.ShieldedInstanceInitialState = "", 0, nil, nil, nil
		if d.Boot && d.AutoDelete {
			name := d.Source[strings.LastIndexByte(d.Source, '/')+1:]
			d.InitializeParams = &compute.AttachedDiskInitializeParams{DiskName: name, DiskSizeGb: d.DiskSizeGb, SourceImage: image}
			d.Source, d.DiskSizeGb = "", 0
		}
	}
	return &s
}
