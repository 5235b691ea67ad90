package events

import "strings"

// SinkFilter is the Cloud Logging filter that selects exactly the entries the
// function handles. The Terraform log sink uses this same string (checked by a
// test in terraform/), and `autoheal replay --from-logging` uses it by default.
//
// It selects, from the system-event audit log, the TPU API's terminate and
// restart events and the four Compute Engine events of instances named
// t1v-n-* (the VMs of TPU nodes), which become zone hints; and, from the
// admin-activity audit log, the TPU API's node creates and deletes and
// queued resource deletes (AdminMethods), which are evidence of who changed a
// node. The logs are named by exact log_id() terms, never by a substring of
// logName: a log of any other name, however it is spelled, is not routed
// (and Parse rejects an entry of one; see admin.go).
var SinkFilter = sinkFilter(false)

// InstanceSinkFilter is SinkFilter plus the instance path's entries, the
// sinks' filter when the function watches Compute Engine TPU VMs
// (Terraform's compute_instances, AUTOHEAL_COMPUTE_INSTANCES): for
// instances not named t1v-n-* (KindInstance), the system events of
// InstanceMethods and persons' InstanceAdminMethods entries. Those are
// about every VM of a project, not only TPU VMs (the function drops one
// that is not an opted-in TPU VM after one cached lookup;
// docs/computeengine.md estimates the volume), which is why SinkFilter,
// the default, leaves them out.
var InstanceSinkFilter = sinkFilter(true)

func sinkFilter(instances bool) string {
	or := func(field string, values []string) string {
		terms := make([]string, len(values))
		for i, v := range values {
			terms[i] = field + `="` + v + `"`
		}
		return strings.Join(terms, " OR ")
	}
	// Wrapped whole, so that a filter appended with AND (replay's time
	// range) reads the same whatever the reader takes AND and OR's
	// precedence to be.
	if !instances {
		return `((log_id("cloudaudit.googleapis.com/system_event") AND (` +
			`(protoPayload.serviceName="` + ServiceTPU + `" AND (` + or("protoPayload.methodName", []string{MethodTerminate, MethodRestart}) + `))` +
			` OR ` +
			`(protoPayload.serviceName="` + ServiceCompute + `" AND protoPayload.resourceName:"/instances/` + tpuInstancePrefix + `" AND (` +
			or("protoPayload.methodName", ComputeMethods) + `))))` +
			` OR ` +
			`(log_id("cloudaudit.googleapis.com/activity") AND protoPayload.serviceName="` + ServiceTPU + `" AND (` +
			or("protoPayload.methodName", AdminMethods) + `)))`
	}
	return `((log_id("cloudaudit.googleapis.com/system_event") AND (` +
		`(protoPayload.serviceName="` + ServiceTPU + `" AND (` + or("protoPayload.methodName", []string{MethodTerminate, MethodRestart}) + `))` +
		` OR ` +
		`(protoPayload.serviceName="` + ServiceCompute + `" AND protoPayload.resourceName:"/instances/` + tpuInstancePrefix + `" AND (` +
		or("protoPayload.methodName", ComputeMethods) + `))` +
		` OR ` +
		`(protoPayload.serviceName="` + ServiceCompute + `" AND NOT protoPayload.resourceName:"/instances/` + tpuInstancePrefix + `" AND (` +
		or("protoPayload.methodName", InstanceMethods) + `))))` +
		` OR ` +
		`(log_id("cloudaudit.googleapis.com/activity") AND ((protoPayload.serviceName="` + ServiceTPU + `" AND (` +
		or("protoPayload.methodName", AdminMethods) + `))` +
		` OR ` +
		`(protoPayload.serviceName="` + ServiceCompute + `" AND NOT protoPayload.resourceName:"/instances/` + tpuInstancePrefix + `" AND (` +
		or("protoPayload.methodName", InstanceAdminMethods) + `)))))`
}
