package computefake

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	compute "google.golang.org/api/compute/v1"
)

// LogEntry is a Cloud Logging entry carrying a Compute Engine audit log, in
// the JSON shape the log sink delivers and `gcloud logging read
// --format=json` prints: system events (compute.instances.hostError,
// preempted, upcomingMaintenance, terminateOnHostMaintenance,
// automaticRestart) in cloudaudit.googleapis.com%2Fsystem_event with
// principal system@google.com; admin activity (v1.compute.instances.stop,
// …) in cloudaudit.googleapis.com%2Factivity with the caller's principal, a
// first entry when the call starts its operation (request, response
// operation, operation.first) and a last one when the operation ends
// (operation.last). Marshal it with encoding/json (or JSON).
type LogEntry struct {
	InsertID         string        `json:"insertId"`
	LogName          string        `json:"logName"`
	Resource         LogResource   `json:"resource"`
	Timestamp        string        `json:"timestamp"`
	ReceiveTimestamp string        `json:"receiveTimestamp"`
	Severity         string        `json:"severity"`
	Operation        *LogOperation `json:"operation,omitempty"`
	ProtoPayload     AuditLog      `json:"protoPayload"`
}

// LogResource is the entry's monitored resource: gce_instance with
// instance_id, project_id and zone, or gce_instance_group_manager.
type LogResource struct {
	Type   string            `json:"type"`
	Labels map[string]string `json:"labels"`
}

// LogOperation ties the entries of one operation together: its id is the
// zone operation's name for admin activity ("operation-…"), a
// "systemevent-…" id for system events.
type LogOperation struct {
	ID       string `json:"id"`
	Producer string `json:"producer"`
	First    bool   `json:"first,omitempty"`
	Last     bool   `json:"last,omitempty"`
}

// AuditLog is the protoPayload (google.cloud.audit.AuditLog).
type AuditLog struct {
	Type               string              `json:"@type"`
	Status             *AuditStatus        `json:"status,omitempty"`
	AuthenticationInfo AuthenticationInfo  `json:"authenticationInfo"`
	RequestMetadata    *RequestMetadata    `json:"requestMetadata,omitempty"`
	ServiceName        string              `json:"serviceName"`
	MethodName         string              `json:"methodName"`
	AuthorizationInfo  []AuthorizationInfo `json:"authorizationInfo,omitempty"`
	ResourceName       string              `json:"resourceName"`
	ResourceLocation   *ResourceLocation   `json:"resourceLocation,omitempty"`
	Request            map[string]any      `json:"request,omitempty"`
	Response           map[string]any      `json:"response,omitempty"`
	Metadata           map[string]any      `json:"metadata,omitempty"`
}

// AuditStatus is the AuditLog's google.rpc.Status.
type AuditStatus struct {
	Code    int    `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// AuthenticationInfo names the principal.
type AuthenticationInfo struct {
	PrincipalEmail string `json:"principalEmail"`
}

// RequestMetadata is where the call came from.
type RequestMetadata struct {
	CallerIP                string `json:"callerIp"`
	CallerSuppliedUserAgent string `json:"callerSuppliedUserAgent"`
}

// AuthorizationInfo is one permission checked.
type AuthorizationInfo struct {
	Permission         string            `json:"permission"`
	Granted            bool              `json:"granted"`
	ResourceAttributes map[string]string `json:"resourceAttributes"`
}

// ResourceLocation is where the resource is.
type ResourceLocation struct {
	CurrentLocations []string `json:"currentLocations"`
}

// JSON is the entry's JSON.
func (e LogEntry) JSON() []byte {
	data, err := json.Marshal(e)
	if err != nil {
		panic(fmt.Sprintf("computefake: LogEntry: %v", err))
	}
	return data
}

// SystemPrincipal is the principal of Compute Engine's system events.
const SystemPrincipal = "system@google.com"

// AuditEntries returns every audit entry the fake has produced so far, in
// the order it produced them: system events of what the platform did (the
// scenario helpers' and the ones that follow by themselves, such as
// terminateOnHostMaintenance and automaticRestart), and admin activity of
// every operation a call or a person started (first and last entries).
func (s *Server) AuditEntries() []LogEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	return append([]LogEntry(nil), s.audit...)
}

// nextEntry gives an entry its insertId and its sequence number.
func (s *Server) nextEntry() (insertID string, n int) {
	s.entrySeq++
	return fmt.Sprintf("-%011x", uint64(s.entrySeq)*0x5bd1e995%(1<<44)), s.entrySeq
}

// instanceResource is the monitored resource of instance t with id id.
func instanceResource(t ref, id uint64) LogResource {
	return LogResource{Type: "gce_instance", Labels: map[string]string{
		"instance_id": strconv.FormatUint(id, 10),
		"project_id":  t.project,
		"zone":        t.zone,
	}}
}

func timestamps(t time.Time) (string, string) {
	return t.UTC().Format(time.RFC3339Nano), t.Add(800 * time.Millisecond).UTC().Format(time.RFC3339Nano)
}

// systemEvent records and returns the system event method about in, now.
// Called with s.mu held.
func (s *Server) systemEvent(in *instance, method, message string, metadata map[string]any) LogEntry {
	id, n := s.nextEntry()
	ts, rts := timestamps(s.at())
	e := LogEntry{
		InsertID:         id,
		LogName:          "projects/" + in.name.project + "/logs/cloudaudit.googleapis.com%2Fsystem_event",
		Resource:         instanceResource(in.name, in.res.Id),
		Timestamp:        ts,
		ReceiveTimestamp: rts,
		Severity:         "INFO",
		Operation: &LogOperation{
			ID:       fmt.Sprintf("systemevent-%d-%013x-%08x-%08x", s.at().UnixMilli(), uint64(n)*0x9e3779b1, uint32(n*40503), uint32(n)),
			Producer: method, First: true, Last: true,
		},
		ProtoPayload: AuditLog{
			Type:               "type.googleapis.com/google.cloud.audit.AuditLog",
			Status:             &AuditStatus{Message: message},
			AuthenticationInfo: AuthenticationInfo{PrincipalEmail: SystemPrincipal},
			ServiceName:        "compute.googleapis.com",
			MethodName:         method,
			ResourceName:       in.key(),
			Request:            map[string]any{"@type": "type.googleapis.com/" + method},
			Metadata:           metadata,
		},
	}
	s.audit = append(s.audit, e)
	return e
}

// callerAgent is the user agent the fake writes for a principal's calls:
// gcloud's for a person, the Go client's for the API's callers.
func (s *Server) callerAgent(principal string) string {
	if principal == s.caller {
		return "google-api-go-client/0.5 computefake"
	}
	return "google-cloud-sdk gcloud/551.0.0 command/gcloud.compute.instances"
}

// activityEntry records and returns the first admin-activity entry of op
// (started by principal), and arranges its last entry for when op ends.
// Called with s.mu held.
func (s *Server) activityEntry(op *operation, target ref, resource LogResource, principal string) LogEntry {
	method := "v1.compute." + op.method
	op.res.User = principal
	first := s.activity(op, target, resource, principal, method, true)
	s.audit = append(s.audit, first)
	last := func() { s.audit = append(s.audit, s.activity(op, target, resource, principal, method, false)) }
	if op.res.Status == "DONE" {
		last()
	} else {
		op.onDone = append(op.onDone, last)
	}
	return first
}

func (s *Server) activity(op *operation, target ref, resource LogResource, principal, method string, first bool) LogEntry {
	// One operation's entries have ids derived from it, so the last entry
	// PersonStop returns ahead is the one recorded when the operation ends.
	id := fmt.Sprintf("-%011xa", op.res.Id%(1<<44))
	if !first {
		id = fmt.Sprintf("-%011xz", op.res.Id%(1<<44))
	}
	ts, rts := timestamps(s.at())
	e := LogEntry{
		InsertID:         id,
		LogName:          "projects/" + target.project + "/logs/cloudaudit.googleapis.com%2Factivity",
		Resource:         resource,
		Timestamp:        ts,
		ReceiveTimestamp: rts,
		Severity:         "NOTICE",
		Operation:        &LogOperation{ID: op.res.Name, Producer: "compute.googleapis.com", First: first, Last: !first},
		ProtoPayload: AuditLog{
			Type:               "type.googleapis.com/google.cloud.audit.AuditLog",
			AuthenticationInfo: AuthenticationInfo{PrincipalEmail: principal},
			RequestMetadata:    &RequestMetadata{CallerIP: "203.0.113.7", CallerSuppliedUserAgent: s.callerAgent(principal)},
			ServiceName:        "compute.googleapis.com",
			MethodName:         method,
			ResourceName:       target.String(),
		},
	}
	if !first {
		if op.res.Error != nil && len(op.res.Error.Errors) > 0 {
			e.Severity = "ERROR"
			e.ProtoPayload.Status = &AuditStatus{Code: 3, Message: op.res.Error.Errors[0].Code}
		}
		return e
	}
	e.ProtoPayload.AuthorizationInfo = []AuthorizationInfo{{
		Permission: permission(op.method), Granted: true,
		ResourceAttributes: map[string]string{"name": target.String(), "service": "compute", "type": "compute." + target.collection},
	}}
	e.ProtoPayload.ResourceLocation = &ResourceLocation{CurrentLocations: []string{target.zone}}
	e.ProtoPayload.Request = map[string]any{"@type": "type.googleapis.com/compute." + op.method}
	e.ProtoPayload.Response = operationSummary(op.res)
	return e
}

// operationSummary is the audit entry's response: the operation as started.
func operationSummary(res *compute.Operation) map[string]any {
	return map[string]any{
		"@type":         "type.googleapis.com/operation",
		"id":            strconv.FormatUint(res.Id, 10),
		"name":          res.Name,
		"operationType": res.OperationType,
		"progress":      "0",
		"insertTime":    res.InsertTime,
		"selfLink":      res.SelfLink,
		"status":        "RUNNING",
		"targetId":      strconv.FormatUint(res.TargetId, 10),
		"targetLink":    res.TargetLink,
		"user":          res.User,
		"zone":          res.Zone,
	}
}
