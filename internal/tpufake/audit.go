package tpufake

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Admin-activity audit log entries.
//
// Every mutating call the server carries out, and every act of a person,
// writes the admin-activity entries Cloud Audit Logs writes for it: a
// long-running operation has two, one when it starts (operation.first) and
// one when it ends (operation.last, with the operation's error in
// protoPayload.status). They are shaped as Cloud Logging delivers them
// (LogEntry JSON, an AuditLog protoPayload, logName
// projects/P/logs/cloudaudit.googleapis.com%2Factivity, resource type
// audited_resource, the operation's name in operation.id), so a test can feed
// them to the function as the log sink would. A request's body is not
// copied into protoPayload.request beyond the names it carries (a create's
// node spec holds its startup script).
//
// The server keeps the last DefaultAuditLog entries (WithAuditLog); a
// person's act also returns its entries.

// DefaultAuditLog is how many audit entries AuditLog keeps by default.
const DefaultAuditLog = 256

// WithAuditLog keeps the last n audit entries for AuditLog (0: none).
func WithAuditLog(n int) Option { return func(s *Server) { s.audit.cap = n } }

// DefaultCaller is the principal API calls are audited as by default: the
// function's service account in project.
func DefaultCaller(project string) string {
	return "tpu-autoheal@" + project + ".iam.gserviceaccount.com"
}

// AuditLogName is the admin-activity log of project.
func AuditLogName(project string) string {
	return "projects/" + project + "/logs/cloudaudit.googleapis.com%2Factivity"
}

// AuditEntry is one admin-activity audit log entry the server wrote.
type AuditEntry struct {
	Time      time.Time
	Method    string // protoPayload.methodName, e.g. google.cloud.tpu.v2.Tpu.DeleteNode
	Resource  string // protoPayload.resourceName: the node or queued resource
	Principal string // protoPayload.authenticationInfo.principalEmail
	Operation string // operation.id: the long-running operation's name
	First     bool   // operation.first: the call was accepted
	Last      bool   // operation.last: the operation ended
	Code      int    // protoPayload.status.code on the last entry (0: OK)
	JSON      []byte // the whole LogEntry, as Cloud Logging delivers it
}

// auditLog is the ring of entries. Guarded by Server.mu.
type auditLog struct {
	cap     int
	entries []AuditEntry
	next    int
	seq     int
	capture *[]AuditEntry // Act: the entries it writes
}

// auditMethod is each operation's audited method and the permission it
// checks.
var auditMethod = map[string][2]string{
	"nodes.create":             {"google.cloud.tpu.v2.Tpu.CreateNode", "tpu.nodes.create"},
	"nodes.delete":             {"google.cloud.tpu.v2.Tpu.DeleteNode", "tpu.nodes.delete"},
	"nodes.patch":              {"google.cloud.tpu.v2.Tpu.UpdateNode", "tpu.nodes.update"},
	"nodes.stop":               {"google.cloud.tpu.v2.Tpu.StopNode", "tpu.nodes.stop"},
	"queuedResources.reset":    {"google.cloud.tpu.v2.Tpu.ResetQueuedResource", "tpu.queuedResources.reset"},
	"queuedResources.delete":   {"google.cloud.tpu.v2.Tpu.DeleteQueuedResource", "tpu.queuedResources.delete"},
	"nodes.performMaintenance": {"google.cloud.tpu.v2alpha1.Tpu.PerformMaintenance", "tpu.nodes.update"},
	"queuedResources.performMaintenanceQueuedResource": {"google.cloud.tpu.v2alpha1.Tpu.PerformMaintenanceQueuedResource", "tpu.queuedResources.update"},
}

// requestType is the request message of each audited method.
var requestType = map[string]string{
	"nodes.create":             "CreateNodeRequest",
	"nodes.delete":             "DeleteNodeRequest",
	"nodes.patch":              "UpdateNodeRequest",
	"nodes.stop":               "StopNodeRequest",
	"queuedResources.reset":    "ResetQueuedResourceRequest",
	"queuedResources.delete":   "DeleteQueuedResourceRequest",
	"nodes.performMaintenance": "PerformMaintenanceRequest",
	"queuedResources.performMaintenanceQueuedResource": "PerformMaintenanceQueuedResourceRequest",
}

// AuditLog returns the audit entries kept (see WithAuditLog), oldest first.
func (s *Server) AuditLog() []AuditEntry {
	s.runDue()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	out := make([]AuditEntry, 0, len(s.audit.entries))
	out = append(out, s.audit.entries[s.audit.next:]...)
	return append(out, s.audit.entries[:s.audit.next]...)
}

// principalOf is who op is audited as. Called with s.mu held.
func (s *Server) principalOf(op *operation) string {
	switch {
	case op.person != "":
		return op.person
	}
	project, _ := splitLocation(op.target)
	return DefaultCaller(project)
}

// auditFirst writes op's first entry (the call accepted). Called with s.mu
// held, when op is launched.
func (s *Server) auditFirst(op *operation) {
	if op.audited {
		return
	}
	op.audited = true
	s.addAudit(op, true)
}

// auditLast writes op's last entry (it ended, with its error). Called with
// s.mu held, when op finishes.
func (s *Server) auditLast(op *operation) {
	if !op.audited {
		return // an operation of no audited method, or finished before it started
	}
	s.addAudit(op, false)
}

func (s *Server) addAudit(op *operation, first bool) {
	m, ok := auditMethod[op.rpc]
	if !ok || op.silent {
		return
	}
	e := s.auditEntry(op, m[0], m[1], first)
	if s.audit.capture != nil {
		*s.audit.capture = append(*s.audit.capture, e)
	}
	if s.audit.cap <= 0 {
		return
	}
	if len(s.audit.entries) < s.audit.cap {
		s.audit.entries = append(s.audit.entries, e)
		return
	}
	s.audit.entries[s.audit.next] = e
	s.audit.next = (s.audit.next + 1) % s.audit.cap
}

// auditEntry makes the entry. Called with s.mu held.
func (s *Server) auditEntry(op *operation, method, permission string, first bool) AuditEntry {
	s.audit.seq++
	now := s.now().UTC()
	project, zone := splitLocation(op.target)
	principal := s.principalOf(op)
	e := AuditEntry{Time: now, Method: method, Resource: op.target, Principal: principal, Operation: op.op.Name, First: first, Last: !first}
	status := map[string]any{}
	severity := "NOTICE"
	if !first && op.op.Error != nil {
		e.Code = int(op.op.Error.Code)
		status = map[string]any{"code": op.op.Error.Code, "message": op.op.Error.Message}
		severity = "ERROR"
	}
	proto := map[string]any{
		"@type":              "type.googleapis.com/google.cloud.audit.AuditLog",
		"status":             status,
		"authenticationInfo": map[string]any{"principalEmail": principal},
		"requestMetadata": map[string]any{
			"callerIp":                "10.128.0.2",
			"callerSuppliedUserAgent": "google-api-go-client/0.5 tpufake",
			"requestAttributes":       map[string]any{"time": now.Format(time.RFC3339Nano), "auth": map[string]any{}},
			"destinationAttributes":   map[string]any{},
		},
		"serviceName": "tpu.googleapis.com",
		"methodName":  method,
		"authorizationInfo": []any{map[string]any{
			"resource": op.target, "permission": permission, "granted": true, "resourceAttributes": map[string]any{},
		}},
		"resourceName":     op.target,
		"resourceLocation": map[string]any{"currentLocations": []string{zone}},
	}
	version := method[len("google.cloud.tpu.") : len("google.cloud.tpu.")+strings.IndexByte(method[len("google.cloud.tpu."):], '.')]
	if first {
		req := map[string]any{"@type": "type.googleapis.com/google.cloud.tpu." + version + "." + requestType[op.rpc]}
		if op.rpc == "nodes.create" {
			req["parent"] = "projects/" + project + "/locations/" + zone
			req["nodeId"] = op.target[strings.LastIndexByte(op.target, '/')+1:]
		} else {
			req["name"] = op.target
		}
		proto["request"] = req
		proto["response"] = map[string]any{"@type": "type.googleapis.com/google.longrunning.Operation", "name": op.op.Name}
	} else if op.op.Error == nil {
		switch op.rpc {
		case "nodes.create", "nodes.patch", "nodes.stop":
			proto["response"] = map[string]any{"@type": "type.googleapis.com/google.cloud.tpu." + version + ".Node", "name": op.target}
		default:
			proto["response"] = map[string]any{"@type": "type.googleapis.com/google.protobuf.Empty"}
		}
	}
	operation := map[string]any{"id": op.op.Name, "producer": "tpu.googleapis.com"}
	if first {
		operation["first"] = true
	} else {
		operation["last"] = true
	}
	entry := map[string]any{
		"protoPayload":     proto,
		"insertId":         fmt.Sprintf("tpufake%08x", s.audit.seq),
		"resource":         map[string]any{"type": "audited_resource", "labels": map[string]string{"service": "tpu.googleapis.com", "method": method, "project_id": project}},
		"timestamp":        now.Format(time.RFC3339Nano),
		"severity":         severity,
		"logName":          AuditLogName(project),
		"operation":        operation,
		"receiveTimestamp": now.Add(700 * time.Millisecond).Format(time.RFC3339Nano),
	}
	data, err := json.Marshal(entry)
	if err != nil {
		panic(fmt.Sprintf("tpufake: encode audit entry: %v", err))
	}
	e.JSON = data
	return e
}
