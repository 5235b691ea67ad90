// Package events turns Cloud Logging entries about TPU nodes into Events.
//
// It is pure: it reads bytes and returns values. It must never perform I/O,
// call a Google API or decide what to do about an event; that is remediate's job.
package events

import (
	"fmt"
	"time"
)

// Audit log identifiers of the entries tpu-autoheal handles.
const (
	ServiceTPU      = "tpu.googleapis.com"
	MethodTerminate = "tpu.nodes.terminate"
	MethodRestart   = "tpu.nodes.restart"

	// Compute Engine system events about the VMs of TPU nodes (instances
	// named t1v-n-<hash>-w-<worker>). They name the instance, not the node,
	// and become zone hints (KindZoneHint).
	ServiceCompute                   = "compute.googleapis.com"
	MethodUpcomingMaintenance        = "compute.instances.upcomingMaintenance"
	MethodPreempted                  = "compute.instances.preempted"
	MethodHostError                  = "compute.instances.hostError"
	MethodTerminateOnHostMaintenance = "compute.instances.terminateOnHostMaintenance"
	tpuInstancePrefix                = "t1v-n-"

	// System events routed for Compute Engine TPU VMs (KindInstance) only.
	MethodAutomaticRestart         = "compute.instances.automaticRestart"
	MethodUpcomingInfraMaintenance = "compute.instances.upcomingInfraMaintenance"
)

// InstanceMethods are the system events of Compute Engine instances that
// are not Cloud TPU workers (KindInstance), in the order the sink filter
// names them.
var InstanceMethods = []string{MethodHostError, MethodPreempted, MethodTerminateOnHostMaintenance, MethodUpcomingMaintenance, MethodUpcomingInfraMaintenance, MethodAutomaticRestart}

// InstanceAdminMethods are the admin-activity methods of a person's change
// to an instance (v1 and beta), evidence for the instance path
// (KindInstance with Admin set), never a reason to act.
var InstanceAdminMethods = func() []string {
	var ms []string
	for _, v := range []string{"v1", "beta"} {
		for _, m := range []string{"delete", "stop", "suspend", "insert", "bulkInsert"} {
			ms = append(ms, v+".compute.instances."+m)
		}
	}
	return ms
}()

// ComputeMethods are the Compute Engine system events Parse accepts, in the
// order the sink filter names them.
var ComputeMethods = []string{MethodUpcomingMaintenance, MethodPreempted, MethodHostError, MethodTerminateOnHostMaintenance}

var knownMethods = []string{MethodTerminate, MethodRestart, MethodUpcomingMaintenance, MethodPreempted, MethodHostError, MethodTerminateOnHostMaintenance}

// SweepMessage is the Pub/Sub message body Cloud Scheduler publishes to ask
// the function for a sweep. Terraform publishes these exact bytes.
const SweepMessage = `{"autoheal":"sweep"}`

// Cause is why a node went down, as far as the log entry tells.
type Cause string

// Causes, as printed by replay and recorded.
const (
	CauseMaintenance Cause = "maintenance"
	CausePreemption  Cause = "preemption"
	CauseHardware    Cause = "hardware"
	CauseUser        Cause = "user"
	CauseUnknown     Cause = "unknown"
)

// NodeRef names a TPU node.
type NodeRef struct {
	Project string
	Zone    string // the location, e.g. us-central2-b
	Node    string // the node id, e.g. llm-v4-128
}

// Name is the node's full resource name, projects/P/locations/Z/nodes/N, or
// "" when the reference is incomplete.
func (r NodeRef) Name() string {
	if r.Project == "" || r.Zone == "" || r.Node == "" {
		return ""
	}
	return fmt.Sprintf("projects/%s/locations/%s/nodes/%s", r.Project, r.Zone, r.Node)
}

// Parent is the node's location, projects/P/locations/Z.
func (r NodeRef) Parent() string {
	return fmt.Sprintf("projects/%s/locations/%s", r.Project, r.Zone)
}

// Kind says what an Event names.
type Kind string

// Kinds of events. KindNode is the zero value, so an Event built without a
// Kind is about a node, as every Event was before zone hints.
const (
	// KindNode: a tpu.nodes.* entry naming a node (Node complete).
	KindNode Kind = ""
	// KindZoneHint: a compute.instances.* entry about a VM of some TPU node
	// in Node.Project and Node.Zone; Node.Node is empty. The instance name is
	// only a hint: look at the opted-in nodes of that project and zone.
	KindZoneHint Kind = "zone-hint"
	// KindAdminActivity: an admin-activity entry of a node create or delete
	// (or a queued resource delete), Admin set (admin.go): evidence of who
	// changed a node, never a reason to act by itself.
	KindAdminActivity Kind = "admin-activity"
	// KindInstance: a compute.instances.* entry about an instance that is
	// not a Cloud TPU worker (a Compute Engine TPU VM, or any other VM of
	// the project: the function discards a non-TPU one after one lookup).
	// Node.Project and Node.Zone are set, Node.Node is empty, Instance is
	// its name; Admin is set for a person's admin-activity entry (Change
	// stop-instance, …), nil for a system event.
	KindInstance Kind = "instance"
)

// Maintenance is the notice a compute.instances.upcomingMaintenance entry
// carries, as far as it does (fields it lacks stay zero).
type Maintenance struct {
	Status            string    // maintenanceStatus: PENDING, ONGOING
	Type              string    // type: SCHEDULED, UNSCHEDULED
	WindowStart       time.Time // windowStartTime
	WindowEnd         time.Time // windowEndTime
	LatestWindowStart time.Time // latestWindowStartTime
	CanReschedule     bool      // canReschedule
}

// Event is one TPU audit log entry, parsed and classified.
type Event struct {
	InsertID        string
	Time            time.Time // the entry's timestamp
	ReceiveTime     time.Time
	LogName         string
	Service         string // protoPayload.serviceName
	Method          string // protoPayload.methodName
	ResourceType    string // resource.type
	ResourceLabels  map[string]string
	Principal       string // protoPayload.authenticationInfo.principalEmail
	Node            NodeRef
	Worker          string // worker id, "" when the entry is about the whole node
	TerminateReason string // protoPayload.metadata.terminateReason, verbatim
	Cause           Cause

	// Kind is KindNode or KindZoneHint (the new fields are omitted from
	// JSON when empty, so node events print as before).
	Kind Kind `json:",omitempty"`
	// Instance is the Compute Engine instance a zone hint is about,
	// t1v-n-<hash>-w-<worker> (Worker then holds <worker>), or the one an
	// instance event is about.
	Instance string `json:",omitempty"`
	// Maintenance is the notice of an upcomingMaintenance entry, nil otherwise.
	Maintenance *Maintenance `json:",omitempty"`
	// Admin is what an admin-activity entry says (KindAdminActivity), nil
	// otherwise.
	Admin *AdminActivity `json:",omitempty"`
}

// Key is Cloud Logging's identity of the entry: its insertId, its timestamp
// (RFC 3339 with nanoseconds, UTC) and its logName, joined by '|'. Cloud
// Logging treats entries with the same insertId and timestamp in the same log
// as duplicates of one entry, so this is the key to deduplicate deliveries by.
func (e Event) Key() string {
	return e.InsertID + "|" + e.Time.UTC().Format(time.RFC3339Nano) + "|" + e.LogName
}
