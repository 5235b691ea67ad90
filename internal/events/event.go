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
)

// SinkFilter is the Cloud Logging filter that selects exactly the entries the
// function handles. The Terraform log sink uses this same string (checked by a
// test in terraform/), and `autoheal replay --from-logging` uses it by default.
const SinkFilter = `logName:"cloudaudit.googleapis.com%2Fsystem_event" AND protoPayload.serviceName="tpu.googleapis.com" AND (protoPayload.methodName="tpu.nodes.terminate" OR protoPayload.methodName="tpu.nodes.restart")`

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
}
