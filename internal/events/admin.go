package events

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Inputs from the audit log only.
//
// Every entry tpu-autoheal reads must come from the Cloud Audit Logs of the
// project it names: the system events (terminate, restart, the Compute
// Engine events of TPU VMs) from projects/P/logs/cloudaudit.googleapis.com%2Fsystem_event,
// the admin-activity entries of node creates and deletes from
// projects/P/logs/cloudaudit.googleapis.com%2Factivity. Only Google writes
// those logs; anyone who can write some other log, or publish to the topic,
// can make an entry that looks the same but for its logName, so an entry
// from any other log is rejected (foreign-log), and one without a logName
// too (missing-log-name) unless Options.AcceptMissingLogName says the input
// is hand-written replay input.
//
// Admin-activity entries (KindAdminActivity) record who created or deleted
// a node, or deleted a queued resource, through the TPU API: the principal,
// the time, the long-running operation's name. They are evidence for a
// recovery in flight (was a node gone because of our delete, or a
// person's?), never a reason to act by itself.

// Log IDs of the audit logs, as they appear (URL-encoded) in a logName.
const (
	LogSystemEvent = "cloudaudit.googleapis.com%2Fsystem_event"
	LogActivity    = "cloudaudit.googleapis.com%2Factivity"
)

// AuditLogName is the logName of project's audit log logID (LogSystemEvent
// or LogActivity).
func AuditLogName(project, logID string) string { return "projects/" + project + "/logs/" + logID }

// Change is what an admin-activity entry records.
type Change string

// Changes.
const (
	ChangeCreateNode           Change = "create-node"
	ChangeDeleteNode           Change = "delete-node"
	ChangeDeleteQueuedResource Change = "delete-queued-resource"

	// Changes of Compute Engine instances (InstanceAdminMethods).
	ChangeStopInstance    Change = "stop-instance"
	ChangeSuspendInstance Change = "suspend-instance"
	ChangeDeleteInstance  Change = "delete-instance"
	ChangeInsertInstance  Change = "insert-instance"
)

// instanceChange is the Change of an InstanceAdminMethods method, "" for
// any other method.
func instanceChange(method string) Change {
	if !slices.Contains(InstanceAdminMethods, method) {
		return ""
	}
	switch method[strings.LastIndexByte(method, '.')+1:] {
	case "stop":
		return ChangeStopInstance
	case "suspend":
		return ChangeSuspendInstance
	case "delete":
		return ChangeDeleteInstance
	}
	return ChangeInsertInstance
}

// AdminMethods are the admin-activity methods Parse accepts, in the order
// the sink filter names them: node creates and deletes of the TPU VM API
// (v2, v2alpha1) and of the legacy TPU Node API (v1, v1alpha1), and queued
// resource deletes (v2, v2alpha1; the legacy API has no queued resources).
var AdminMethods = func() []string {
	var ms []string
	for _, v := range []string{"v2", "v2alpha1", "v1", "v1alpha1"} {
		ms = append(ms, "google.cloud.tpu."+v+".Tpu.CreateNode", "google.cloud.tpu."+v+".Tpu.DeleteNode")
	}
	for _, v := range []string{"v2", "v2alpha1"} {
		ms = append(ms, "google.cloud.tpu."+v+".Tpu.DeleteQueuedResource")
	}
	return ms
}()

// adminChange is what each of AdminMethods changes.
var adminChange = func() map[string]Change {
	m := map[string]Change{}
	for _, method := range AdminMethods {
		switch {
		case strings.HasSuffix(method, ".CreateNode"):
			m[method] = ChangeCreateNode
		case strings.HasSuffix(method, ".DeleteNode"):
			m[method] = ChangeDeleteNode
		default:
			m[method] = ChangeDeleteQueuedResource
		}
	}
	return m
}()

// IsAdminMethod reports whether method is one of AdminMethods.
func IsAdminMethod(method string) bool {
	_, ok := adminChange[method]
	return ok
}

// AdminActivity is what an admin-activity entry says beyond the Event's
// Time, Principal and Node.
type AdminActivity struct {
	Change Change
	// OperationID is the long-running operation's name (the entry's
	// operation.id), "" when the entry has none.
	OperationID string `json:",omitempty"`
	// First and Last are operation.first and operation.last: the entry of
	// the call accepted, and of the operation ended.
	First bool `json:",omitempty"`
	Last  bool `json:",omitempty"`
	// Code is protoPayload.status.code: 0 for OK; on the last entry, how
	// the operation ended.
	Code int `json:",omitempty"`
	// QueuedResource is the queued resource a delete-queued-resource entry
	// is about (projects/P/locations/Z/queuedResources/Q); the Event's Node
	// then names only the project and zone.
	QueuedResource string `json:",omitempty"`
}

// EvidenceNote is the reason a record of an admin-activity event gives:
// what it says, and that it is kept as evidence, not acted on.
func EvidenceNote(ev Event) string {
	a := ev.Admin
	if a == nil {
		return "not an admin-activity entry"
	}
	what := ev.Node.Name()
	if ev.Kind == KindInstance {
		what = "projects/" + ev.Node.Project + "/zones/" + ev.Node.Zone + "/instances/" + ev.Instance
	}
	if a.QueuedResource != "" {
		what = a.QueuedResource
	}
	s := fmt.Sprintf("admin activity: %s of %s by %s", a.Change, what, ev.Principal)
	switch {
	case a.OperationID != "" && a.Last:
		s += fmt.Sprintf(" (operation %s ended, code %d)", a.OperationID, a.Code)
	case a.OperationID != "":
		s += fmt.Sprintf(" (operation %s started)", a.OperationID)
	case a.Code != 0:
		s += fmt.Sprintf(" (refused, code %d)", a.Code)
	}
	return s + "; kept as evidence, not acted on"
}

// checkLogName rejects an entry whose logName is not logID of project; a
// missing one only when opts do not accept it.
func checkLogName(logName, project, logID string, opts Options) error {
	if logName == "" {
		if opts.AcceptMissingLogName {
			return nil
		}
		return reject(CodeMissingLogName, "logName", "missing: want %s (only an entry of the audit log is acted on)", AuditLogName(project, logID))
	}
	rest, ok := strings.CutPrefix(logName, "projects/")
	if ok {
		rest, ok = strings.CutPrefix(rest, project)
	}
	if ok {
		rest, ok = strings.CutPrefix(rest, "/logs/")
	}
	if !ok || rest != logID {
		return reject(CodeForeignLog, "logName", "%q is not the audit log %s of the project the entry names", logName, AuditLogName(project, logID))
	}
	return nil
}

// adminWire is what an admin-activity entry has beyond wire, decoded in a
// second pass of such entries only: every other entry decodes as before,
// allocating nothing more for members it does not need.
type adminWire struct {
	Operation    json.RawMessage `json:"operation"`
	ProtoPayload struct {
		Status  json.RawMessage `json:"status"`
		Request json.RawMessage `json:"request"`
	} `json:"protoPayload"`
}

// readAdmin adds to e, when it is an admin-activity entry, its operation,
// status and request from data (the entry's bytes, valid JSON).
func readAdmin(data []byte, e *entry) {
	if !(e.service == ServiceTPU && IsAdminMethod(e.method)) && !(e.service == ServiceCompute && instanceChange(e.method) != "") {
		return
	}
	var a adminWire
	if json.Unmarshal(data, &a) != nil {
		return // protoPayload is not an object: wire's decoding has said so
	}
	e.operation, e.status, e.request = a.Operation, a.ProtoPayload.Status, a.ProtoPayload.Request
}

// adminOf reads what an admin-activity entry is about: the node (or, for a
// queued resource delete, its project and zone) and the operation.
func adminOf(w *entry, labels labelSource) (located, *AdminActivity, error) {
	a := &AdminActivity{Change: adminChange[w.method]}
	var loc located
	var err error
	if a.Change == ChangeDeleteQueuedResource {
		loc, a.QueuedResource, err = queuedResourceOf(w.resourceName, labels)
	} else {
		loc, _, err = nodeOf(createdNodeName(w.resourceName, w.request), labels)
	}
	if err != nil {
		return located{}, nil, err
	}
	loc.worker = ""
	readOperation(w, a)
	return loc, a, nil
}

// readOperation fills a's operation and status from the entry.
func readOperation(w *entry, a *AdminActivity) {
	var op struct {
		ID    json.RawMessage `json:"id"`
		First json.RawMessage `json:"first"`
		Last  json.RawMessage `json:"last"`
	}
	if json.Unmarshal(w.operation, &op) == nil { // not an object: no operation
		_ = json.Unmarshal(op.ID, &a.OperationID)
		_ = json.Unmarshal(op.First, &a.First)
		_ = json.Unmarshal(op.Last, &a.Last)
	}
	var status struct {
		Code json.RawMessage `json:"code"`
	}
	if json.Unmarshal(w.status, &status) == nil {
		_ = json.Unmarshal(status.Code, &a.Code)
	}
}

// createdNodeName is a CreateNode entry's node: its resourceName, or, when
// that names the location only, the location and the request's nodeId.
func createdNodeName(resourceName string, request json.RawMessage) string {
	if _, n := splitPath(strings.TrimPrefix(resourceName, "//tpu.googleapis.com/")); n != 4 || len(request) == 0 {
		return resourceName
	}
	var req struct {
		NodeID string `json:"nodeId"`
	}
	if json.Unmarshal(request, &req) != nil || req.NodeID == "" {
		return resourceName
	}
	return strings.TrimSuffix(resourceName, "/") + "/nodes/" + req.NodeID
}

// queuedResourceOf parses projects/P/locations/Z/queuedResources/Q
// (optionally prefixed //tpu.googleapis.com/); resource.labels project_id,
// where present, must agree.
func queuedResourceOf(resourceName string, labels labelSource) (located, string, error) {
	bad := func(why string) error {
		return reject(CodeInvalidNode, fieldResourceName, "%q is not projects/P/locations/Z/queuedResources/Q: %s", resourceName, why)
	}
	if resourceName == "" {
		return located{}, "", reject(CodeMissingNode, fieldResourceName, "no queued resource: a queued resource delete needs protoPayload.resourceName")
	}
	name := strings.TrimPrefix(resourceName, "//tpu.googleapis.com/")
	seg, n := splitPath(name)
	if n != 6 {
		return located{}, "", bad(fmt.Sprintf("%d path segments", n))
	}
	if seg[0] != "projects" || seg[2] != "locations" || seg[4] != "queuedResources" {
		return located{}, "", bad("unexpected collection")
	}
	for _, j := range []int{1, 3, 5} {
		if !validID(seg[j]) {
			return located{}, "", bad(fmt.Sprintf("%q is not a valid resource id", seg[j]))
		}
	}
	if v := labels.get("project_id"); v != "" && v != seg[1] {
		return located{}, "", reject(CodeNodeMismatch, fieldResourceName, "names project %q but resource.labels.project_id names %q", seg[1], v)
	}
	loc := located{NodeRef: NodeRef{Project: seg[1], Zone: seg[3]}, projectField: fieldResourceName}
	return loc, "projects/" + seg[1] + "/locations/" + seg[3] + "/queuedResources/" + seg[5], nil
}
