package computefake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	compute "google.golang.org/api/compute/v1"
)

// Maintenance in the simulated Compute Engine:
//
//   - ScheduleMaintenance gives every instance of a slice a notice,
//     resourceStatus.upcomingMaintenance PENDING, and returns the
//     compute.instances.upcomingMaintenance entries;
//   - at the window's start, or at once through instances.performMaintenance
//     (accepted only for a PENDING notice with canReschedule), the whole
//     slice goes into maintenance: the notice is ONGOING; an instance with
//     onHostMaintenance TERMINATE (every TPU VM) is TERMINATED, with a
//     compute.instances.terminateOnHostMaintenance entry;
//   - the maintenance lasts the "performMaintenance" delay; then the notice is
//     gone and a terminated instance is started again when automaticRestart
//     is on (compute.instances.automaticRestart), else it stays TERMINATED
//     (SetMaintenanceOutcome forces either).
//
// A host reported faulty (instances.reportHostAsFaulty, IMMEDIATE) is powered
// off when the report's operation ends (status PENDING) and runs again on the
// same host after the host repair time.

// Maintenance is a maintenance notice.
type Maintenance struct {
	WindowStart       time.Time
	WindowEnd         time.Time
	LatestWindowStart time.Time // zero: WindowStart
	CanReschedule     bool
	Type              string   // SCHEDULED (default) or UNSCHEDULED
	Reasons           []string // maintenanceReasons, e.g. PLANNED_UPDATE, FAILURE_TPU
}

// GuestAttribute is one guest attribute, as a fleet file instance's
// "guestAttributes" lists them.
type GuestAttribute struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	Value     string `json:"value"`
}

// guestAttributesOn reports whether the instance's guest can write guest
// attributes: metadata enable-guest-attributes is TRUE. (On Compute Engine
// the project's metadata can also turn them on; the fake has no project
// metadata, so a fleet sets it on the instance.)
func guestAttributesOn(res *compute.Instance) bool {
	v, _ := metadataValue(res, "enable-guest-attributes")
	return strings.EqualFold(v, "true")
}

// SetGuestAttribute sets (or replaces) one guest attribute of the instance,
// as its guest's PUT to the metadata server would. It fails, as that PUT
// does, when the instance is not RUNNING or has guest attributes turned off.
func (s *Server) SetGuestAttribute(name, namespace, key, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	in, ok := s.instances[name]
	switch {
	case !ok:
		return fmt.Errorf("computefake: SetGuestAttribute: no instance %s", name)
	case in.res.Status != "RUNNING":
		return fmt.Errorf("computefake: SetGuestAttribute: %s is %s: no guest runs to write", name, in.res.Status)
	case !guestAttributesOn(in.res):
		return fmt.Errorf("computefake: SetGuestAttribute: %s: guest attributes are off (metadata enable-guest-attributes is not TRUE)", name)
	case !metadataKeyRE.MatchString(namespace) || !metadataKeyRE.MatchString(key):
		return fmt.Errorf("computefake: SetGuestAttribute: %s: namespace %q and key %q must be letters, digits, '-' and '_'", name, namespace, key)
	}
	a := GuestAttribute{Namespace: namespace, Key: key, Value: value}
	for i, old := range in.guest {
		if old.Namespace == namespace && old.Key == key {
			in.guest[i] = a
			return nil
		}
	}
	in.guest = append(in.guest, a)
	return nil
}

// getGuestAttributes answers instances.getGuestAttributes: one variableKey
// ("ns/key"), or every attribute under queryPath ("" or "/" all, "ns/" a
// namespace, "ns/key" one key). Nothing there is a 404 naming the path.
func (s *Server) getGuestAttributes(t ref, queryPath, variableKey string) (*compute.GuestAttributes, *apiError) {
	in, e := s.lookup(t)
	if e != nil {
		return nil, e
	}
	base := t.String() + "/guestAttributes/"
	if variableKey != "" {
		ns, key, _ := strings.Cut(variableKey, "/")
		for _, a := range in.guest {
			if a.Namespace == ns && a.Key == key {
				return &compute.GuestAttributes{Kind: "compute#guestAttributes", VariableKey: variableKey, VariableValue: a.Value, SelfLink: selfLink(base + variableKey)}, nil
			}
		}
		return nil, notFound(base + variableKey)
	}
	resp := &compute.GuestAttributes{Kind: "compute#guestAttributes", QueryPath: queryPath, SelfLink: selfLink(base + queryPath), QueryValue: &compute.GuestAttributesValue{}}
	for _, a := range in.guest {
		if queryMatches(queryPath, a) {
			resp.QueryValue.Items = append(resp.QueryValue.Items, &compute.GuestAttributesEntry{Namespace: a.Namespace, Key: a.Key, Value: a.Value})
		}
	}
	if len(resp.QueryValue.Items) == 0 {
		return nil, notFound(base + queryPath)
	}
	return resp, nil
}

// queryMatches: "" or "/" is everything, "ns/" or "ns" a namespace,
// "ns/key" one key.
func queryMatches(q string, a GuestAttribute) bool {
	q = strings.TrimPrefix(q, "/")
	if q == "" {
		return true
	}
	ns, key, _ := strings.Cut(q, "/")
	return ns == a.Namespace && (key == "" || key == a.Key)
}

// ScheduleMaintenance gives every instance of the slice of the named instance
// (the instance alone when it is a single-host VM) the notice m, PENDING,
// and returns their compute.instances.upcomingMaintenance entries. The
// maintenance starts by itself at m.WindowStart on the server's clock.
func (s *Server) ScheduleMaintenance(name string, m Maintenance) ([]LogEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	in, ok := s.instances[name]
	if !ok {
		return nil, fmt.Errorf("computefake: ScheduleMaintenance: no instance %s", name)
	}
	if m.WindowStart.IsZero() || !m.WindowEnd.After(m.WindowStart) {
		return nil, fmt.Errorf("computefake: ScheduleMaintenance: want WindowStart before WindowEnd, got %v and %v", m.WindowStart, m.WindowEnd)
	}
	if m.Type == "" {
		m.Type = "SCHEDULED"
	}
	if m.LatestWindowStart.IsZero() {
		m.LatestWindowStart = m.WindowStart
	}
	var entries []LogEntry
	slice := s.sliceOf(in)
	for _, member := range slice {
		if member.res.ResourceStatus == nil {
			member.res.ResourceStatus = &compute.ResourceStatus{}
		}
		member.res.ResourceStatus.UpcomingMaintenance = &compute.UpcomingMaintenance{
			CanReschedule:         m.CanReschedule,
			WindowStartTime:       m.WindowStart.UTC().Format(time.RFC3339),
			WindowEndTime:         m.WindowEnd.UTC().Format(time.RFC3339),
			LatestWindowStartTime: m.LatestWindowStart.UTC().Format(time.RFC3339),
			MaintenanceStatus:     "PENDING",
			Type:                  m.Type,
			MaintenanceReasons:    slices.Clone(m.Reasons),
		}
		s.changed(member)
		entries = append(entries, s.systemEvent(member, "compute.instances.upcomingMaintenance", "", noticeMetadata(member.res.ResourceStatus.UpcomingMaintenance)))
	}
	pending := s.guards(slice)
	s.afterAt(m.WindowStart, func() {
		var due []*instance
		for i, member := range slice {
			if pending[i]() && noticeStatus(member) == "PENDING" {
				due = append(due, member)
			}
		}
		if len(due) > 0 {
			s.maintain(due, s.delays["performMaintenance"], nil)
		}
	})
	return entries, nil
}

// noticeMetadata is an upcomingMaintenance entry's metadata: the notice's
// fields, flat, as the events parser reads them.
func noticeMetadata(um *compute.UpcomingMaintenance) map[string]any {
	return map[string]any{
		"@type":                 "type.googleapis.com/google.cloud.audit.AuditLogMetadata",
		"maintenanceStatus":     um.MaintenanceStatus,
		"type":                  um.Type,
		"windowStartTime":       um.WindowStartTime,
		"windowEndTime":         um.WindowEndTime,
		"latestWindowStartTime": um.LatestWindowStartTime,
		"canReschedule":         um.CanReschedule,
	}
}

func noticeStatus(in *instance) string {
	if in.res.ResourceStatus == nil || in.res.ResourceStatus.UpcomingMaintenance == nil {
		return ""
	}
	return in.res.ResourceStatus.UpcomingMaintenance.MaintenanceStatus
}

// afterAt schedules fn at t (at once when t is not after now).
func (s *Server) afterAt(t time.Time, fn func()) { s.after(t.Sub(s.at()), fn) }

// guards returns, for each instance, whether it is still that instance
// (not deleted or recreated): identity only, unlike guard.
func (s *Server) guards(ins []*instance) []func() bool {
	out := make([]func() bool, len(ins))
	for i, in := range ins {
		out[i] = func() bool { return s.instances[in.key()] == in }
	}
	return out
}

// maintain puts the instances into maintenance for d, then brings them out;
// done runs at the end. Called with s.mu held.
func (s *Server) maintain(ins []*instance, d time.Duration, done func()) {
	alive := s.guards(ins)
	for _, in := range ins {
		in.inMaint = true
		um := in.res.ResourceStatus.UpcomingMaintenance
		um.MaintenanceStatus, um.CanReschedule = "ONGOING", false
		s.changed(in)
		if in.res.Scheduling.OnHostMaintenance == "TERMINATE" && in.res.Status != "TERMINATED" {
			s.guard(in) // cancels what was under way
			in.res.LastStopTimestamp = stamp(s.at())
			s.setStatus(in, "TERMINATED")
			s.effect(in.key(), "terminateOnHostMaintenance", SystemPrincipal)
			s.systemEvent(in, "compute.instances.terminateOnHostMaintenance", "Instance terminated during Compute Engine maintenance.", nil)
		}
	}
	s.after(d, func() {
		for i, in := range ins {
			if alive[i]() {
				s.endMaintenance(in)
			}
		}
		if done != nil {
			done()
		}
	})
}

// endMaintenance brings in out of its maintenance. Called with s.mu held.
func (s *Server) endMaintenance(in *instance) {
	in.inMaint = false
	in.res.ResourceStatus.UpcomingMaintenance = nil
	s.changed(in)
	if in.res.Status != "TERMINATED" {
		return
	}
	switch {
	case in.outcome == "TERMINATED" || in.outcome == "" && !*in.res.Scheduling.AutomaticRestart:
		s.brokenMember(in.key())
	default:
		s.effect(in.key(), "restart", SystemPrincipal)
		s.boot(in, s.delays["start"], func(ok bool) {
			if ok {
				s.systemEvent(in, "compute.instances.automaticRestart", "Instance automatically restarted by Compute Engine.", nil)
			}
		})
	}
}

// SetMaintenanceOutcome says how the named instance comes out of its
// maintenance: "TERMINATED" (it stays down) or "" (as its automaticRestart
// says).
func (s *Server) SetMaintenanceOutcome(name, status string) error {
	if status != "" && status != "TERMINATED" {
		return fmt.Errorf("computefake: SetMaintenanceOutcome: status %q, want \"\" or TERMINATED", status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[name]
	if !ok {
		return fmt.Errorf("computefake: SetMaintenanceOutcome: no instance %s", name)
	}
	in.outcome = status
	return nil
}

func (s *Server) performMaintenance(t ref, fail *FailRule) (*operation, *apiError) {
	in, e := s.lookup(t)
	if e != nil {
		return nil, e
	}
	um := (*compute.UpcomingMaintenance)(nil)
	if in.res.ResourceStatus != nil {
		um = in.res.ResourceStatus.UpcomingMaintenance
	}
	if um == nil || um.MaintenanceStatus != "PENDING" || !um.CanReschedule {
		return nil, errorf(http.StatusBadRequest, "invalid", "The instance '%s' has no pending maintenance that can be started now (resourceStatus.upcomingMaintenance must be PENDING with canReschedule).", t)
	}
	if e := s.busyError(in); e != nil {
		return nil, e
	}
	op := s.startOp("instances.performMaintenance", in, fail)
	d := s.delays["performMaintenance"]
	if op.applies() {
		// A multi-host slice is maintained as a whole: starting the
		// maintenance of one of its VMs starts it for all.
		var due []*instance
		for _, member := range s.sliceOf(in) {
			if noticeStatus(member) == "PENDING" {
				due = append(due, member)
			}
		}
		s.maintain(due, d, nil)
	}
	return s.launch(op, d, nil), nil
}

// faultReasons are the behaviors reportHostAsFaulty accepts.
var faultBehaviors = []string{"BEHAVIOR_UNSPECIFIED", "CHIP_ERROR", "PERFORMANCE", "SILENT_DATA_CORRUPTION", "UNRECOVERABLE_GPU_ERROR"}

func (s *Server) reportHostAsFaulty(t ref, body []byte, fail *FailRule) (*operation, *apiError) {
	in, e := s.lookup(t)
	if e != nil {
		return nil, e
	}
	var req compute.InstancesReportHostAsFaultyRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, errorf(http.StatusBadRequest, "parseError", "Invalid JSON payload received: %v", err)
	}
	if req.DisruptionSchedule != "IMMEDIATE" && req.DisruptionSchedule != "FUTURE" {
		return nil, invalid("disruptionSchedule", req.DisruptionSchedule, "Must be IMMEDIATE or FUTURE.")
	}
	for i, r := range req.FaultReasons {
		if r == nil || !slices.Contains(faultBehaviors, r.Behavior) {
			return nil, invalid(fmt.Sprintf("faultReasons[%d].behavior", i), behaviorOf(r), "Must be one of "+strings.Join(faultBehaviors, ", ")+".")
		}
	}
	if in.res.Status != "RUNNING" {
		return nil, errorf(http.StatusBadRequest, "invalid", "The instance '%s' is %s: only a RUNNING instance's host can be reported faulty.", t, in.res.Status)
	}
	if in.res.Scheduling.ProvisioningModel != "RESERVATION_BOUND" {
		return nil, errorf(http.StatusBadRequest, "invalid", "The instance '%s' is not reservation-bound: only VMs of an All Capacity mode reservation can report their host faulty.", t)
	}
	if e := s.busyError(in); e != nil {
		return nil, e
	}
	op := s.startOp("instances.reportHostAsFaulty", in, fail)
	alive := func() bool { return s.instances[in.key()] == in }
	immediate := req.DisruptionSchedule == "IMMEDIATE"
	return s.launch(op, s.delays["reportHostAsFaulty"], func(ok bool) {
		if !alive() {
			// "If you delete a TPU VM while the reportHostAsFaulty operation
			// is in progress, then the operation fails."
			op.fault = &opFault{code: "RESOURCE_NOT_FOUND", httpStatus: http.StatusNotFound,
				message: fmt.Sprintf("The resource '%s' was deleted while its host was being reported faulty", t)}
			return
		}
		if !ok || !immediate {
			return
		}
		s.guard(in)
		in.faulty = true
		in.res.LastStopTimestamp = stamp(s.at())
		s.setStatus(in, "PENDING")
		repaired := s.guard(in)
		s.after(s.hostRepair, func() {
			if repaired() {
				in.faulty = false
				s.boot(in, s.delays["start"], nil)
			}
		})
	}), nil
}

func behaviorOf(r *compute.InstancesReportHostAsFaultyRequestFaultReason) string {
	if r == nil {
		return ""
	}
	return r.Behavior
}
