package computefake

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	compute "google.golang.org/api/compute/v1"
)

// FailRule makes matching calls fail, hang, lose their answer, answer
// garbage, take effect although they fail (now or later), start an operation
// that ends in error (with or without its effect), hide their effect from
// reads for a while, or page oddly.
//
// A rule matches a call by Method and Resource and by its place among the
// matching calls (Nth, Times), so a test can say "the second stop of this
// instance answers 503 and stops it anyway 40 s later".
type FailRule struct {
	// Method is the call: "instances.get", "instances.list",
	// "instances.aggregatedList", "instances.insert", "instances.delete",
	// "instances.start", "instances.stop", "instances.setMetadata",
	// "instances.setLabels", "instances.performMaintenance",
	// "instances.getGuestAttributes", "instances.reportHostAsFaulty",
	// "zoneOperations.get", "zoneOperations.wait",
	// "instanceGroupManagers.get", "instanceGroupManagers.listManagedInstances"
	// or "instanceGroupManagers.recreateInstances". "operation:M" (the TPU
	// fake's spelling) is M with OperationError set.
	Method string
	// Resource is what the call is about ("" = any): the instance
	// (projects/P/zones/Z/instances/I, for insert the new one), the zone
	// (projects/P/zones/Z) for instances.list, the project (projects/P) for
	// aggregatedList, the operation (projects/P/zones/Z/operations/O), the
	// MIG (projects/P/zones/Z/instanceGroupManagers/M).
	Resource string
	// Nth is the first matching call the rule applies to, counting from 1
	// (0 = the first); Times how many it applies to from there (0 = all).
	Nth, Times int

	// Code is the HTTP status answered, Reason the errors[].reason
	// ("conditionNotMet"; default from Code), Message the message (default:
	// one naming the rule). With OperationError they are the operation's
	// httpErrorStatusCode, error code (e.g. "RESOURCE_NOT_READY"; default
	// "INTERNAL_ERROR") and message instead.
	Code    int
	Reason  string
	Message string
	// OperationError: the call is answered as usual, and the operation it
	// starts ends DONE with the error (Capacity, or Code/Reason/Message).
	OperationError bool
	// Capacity makes the operation end with one of Compute Engine's capacity
	// errors (implies OperationError).
	Capacity Capacity
	// QuotaMetric and QuotaLimit fill a quota error's message and
	// errorDetails (default "TPUS_PER_TPU_FAMILY" and 16).
	QuotaMetric string
	QuotaLimit  float64

	// Applied carries the call out although it answers the rule's error,
	// hangs, loses its answer or answers garbage, or although its operation
	// ends in error; AppliedAfter delays that effect on the server's clock
	// (the call fails now and takes effect d later). Lost always carries the
	// call out.
	Applied      bool
	AppliedAfter time.Duration
	// Hang holds the request until the caller gives up (its deadline) or
	// the server closes.
	Hang bool
	// Lost carries the call out, then drops the connection without an
	// answer: the caller sees a transport error, never the operation.
	Lost bool
	// Malformed answers 200 with a body that is not JSON.
	Malformed bool
	// Delay is waited, in real time, before anything else.
	Delay time.Duration

	// ReadLag (on a mutating call) makes gets and lists of the instance show
	// it as it was before the call for this long on the server's clock.
	ReadLag time.Duration
	// OtherWriter (on instances.setMetadata) is someone else's metadata
	// write that lands on arrival of the call, before it is carried out:
	// these keys are set on the instance (the others kept) and its metadata
	// fingerprint moves, as when a person or an agent writes between the
	// caller's read and its write. A call sent with the fingerprint it read
	// before is then refused 412 conditionNotMet, as Compute Engine refuses
	// it; the rule's other fields apply as usual.
	OtherWriter map[string]string
	// Page (on a list call) makes the page it answers odd.
	Page PageFault
}

// Capacity is a Compute Engine capacity error an operation can end with.
type Capacity string

const (
	// ZoneResourcePoolExhausted: "The zone '…' does not have enough resources
	// available to fulfill the request.  Try a different zone, or try again
	// later." (HTTP 503 in the operation).
	ZoneResourcePoolExhausted Capacity = "ZONE_RESOURCE_POOL_EXHAUSTED"
	// ZoneResourcePoolExhaustedWithDetails: the same with
	// "'(resource type:compute)'." and an ErrorInfo detail.
	ZoneResourcePoolExhaustedWithDetails Capacity = "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
	// QuotaExceededRegion: "Quota 'M' exceeded.  Limit: L in region R."
	// (HTTP 403), with a quotaInfo detail whose dimensions name the region.
	QuotaExceededRegion Capacity = "QUOTA_EXCEEDED/region"
	// QuotaExceededZone: the same in a zone ("… in zone Z.").
	QuotaExceededZone Capacity = "QUOTA_EXCEEDED/zone"
)

// PageFault is an anomaly of one list page.
type PageFault string

const (
	// PageRepeat answers the page with a nextPageToken the caller has
	// already been given: the request's own token (the first page's, when
	// the request had none), so a caller that follows tokens blindly loops.
	PageRepeat PageFault = "repeat"
	// PageRestart answers a nextPageToken that leads back to the first page
	// (on a last page: a listing without end, whose tokens then repeat).
	PageRestart PageFault = "restart"
	// PageSkip answers a nextPageToken that skips the following page.
	PageSkip PageFault = "skip"
	// PageEmpty answers no items with a nextPageToken that goes on where the
	// page should have started.
	PageEmpty PageFault = "empty"
)

// String describes the rule as the request log records it.
func (f *FailRule) String() string {
	var parts []string
	add := func(format string, args ...any) { parts = append(parts, fmt.Sprintf(format, args...)) }
	switch {
	case f.Capacity != "":
		add("operation %s", f.Capacity)
	case f.OperationError:
		add("operation error %d %s", f.Code, f.Reason)
	case f.Code != 0 || f.Reason != "":
		add("error %d %s", f.Code, f.Reason)
	}
	if f.Hang {
		add("hang")
	}
	if f.Lost {
		add("lost answer")
	}
	if f.Malformed {
		add("malformed body")
	}
	if f.Applied || f.Lost {
		if f.AppliedAfter > 0 {
			add("takes effect after %s", f.AppliedAfter)
		} else {
			add("takes effect")
		}
	}
	if f.Delay > 0 {
		add("delay %s", f.Delay)
	}
	if f.ReadLag > 0 {
		add("read lag %s", f.ReadLag)
	}
	if f.Page != "" {
		add("page %s", f.Page)
	}
	if len(f.OtherWriter) > 0 {
		add("another writer sets metadata %s first", strings.Join(slices.Sorted(maps.Keys(f.OtherWriter)), ","))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// rule is a FailRule and how many matching calls it has seen.
type rule struct {
	FailRule
	seen int
}

// Fail adds a rule. Rules are tried in the order added; the first that
// matches a call applies (before any drawn by FailRandomly). It panics on a
// rule that cannot apply to its method (a paging fault on a get, an
// operation error on a read), naming the field.
func (s *Server) Fail(r FailRule) {
	r = normalizeRule(r)
	if err := r.check(); err != nil {
		panic("computefake.Fail: " + err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, &rule{FailRule: r})
}

func normalizeRule(r FailRule) FailRule {
	if m, ok := strings.CutPrefix(r.Method, "operation:"); ok {
		r.Method, r.OperationError = m, true
	}
	if r.Capacity != "" {
		r.OperationError = true
	}
	if r.Lost {
		r.Applied = true
	}
	return r
}

// methods are the methods the fake serves.
var methods = []string{
	"instances.get", "instances.list", "instances.aggregatedList", "instances.insert", "instances.delete",
	"instances.start", "instances.stop", "instances.setMetadata", "instances.setLabels",
	"instances.performMaintenance", "instances.getGuestAttributes", "instances.reportHostAsFaulty",
	"zoneOperations.get", "zoneOperations.wait", "instanceGroupManagers.get",
	"instanceGroupManagers.listManagedInstances", "instanceGroupManagers.recreateInstances",
}

func (f FailRule) check() error {
	if !slices.Contains(methods, f.Method) {
		return fmt.Errorf("FailRule.Method %q is not a method the fake serves (%s)", f.Method, strings.Join(methods, ", "))
	}
	if f.Nth < 0 || f.Times < 0 {
		return fmt.Errorf("FailRule.Nth %d, Times %d: want 0 or more", f.Nth, f.Times)
	}
	mut := mutating[f.Method]
	switch {
	case f.OperationError && !mut:
		return fmt.Errorf("FailRule.OperationError/Capacity on %s: only mutating calls start operations", f.Method)
	case (f.Applied || f.AppliedAfter > 0) && !mut:
		return fmt.Errorf("FailRule.Applied on %s: only mutating calls take effect", f.Method)
	case f.ReadLag > 0 && !mut:
		return fmt.Errorf("FailRule.ReadLag on %s: a read lag follows a mutating call", f.Method)
	case f.Page != "" && !listing[f.Method]:
		return fmt.Errorf("FailRule.Page on %s: only list calls page", f.Method)
	case len(f.OtherWriter) > 0 && f.Method != "instances.setMetadata":
		return fmt.Errorf("FailRule.OtherWriter on %s: another writer's metadata write races instances.setMetadata only", f.Method)
	case f.AppliedAfter > 0 && !f.Applied:
		return fmt.Errorf("FailRule.AppliedAfter without Applied")
	case f.OperationError && (f.Hang || f.Lost || f.Malformed || f.Code >= 200 && f.Code < 300):
		return fmt.Errorf("FailRule.OperationError with Hang, Lost or Malformed: the call must answer its operation")
	}
	switch f.Capacity {
	case "", ZoneResourcePoolExhausted, ZoneResourcePoolExhaustedWithDetails, QuotaExceededRegion, QuotaExceededZone:
	default:
		return fmt.Errorf("FailRule.Capacity %q is not one of the capacity errors", f.Capacity)
	}
	switch f.Page {
	case "", PageRepeat, PageRestart, PageSkip, PageEmpty:
	default:
		return fmt.Errorf("FailRule.Page %q is not one of the paging faults", f.Page)
	}
	return nil
}

// matchRule returns the rule that applies to the call, counting it, or nil:
// the explicit rules first, then a draw from FailRandomly's generator.
// Called with s.mu held.
func (s *Server) matchRule(rt route) *FailRule {
	if rt.err != nil {
		return nil
	}
	for i := 0; i < len(s.rules); i++ {
		r := s.rules[i]
		if r.Method != rt.method || r.Resource != "" && r.Resource != rt.resource {
			continue
		}
		r.seen++
		first := max(r.Nth, 1)
		if r.seen < first {
			continue
		}
		if r.Times > 0 && r.seen >= first+r.Times-1 {
			s.rules = slices.Delete(s.rules, i, i+1)
		}
		f := r.FailRule
		return &f
	}
	return s.drawFault(rt)
}

// err is the error a sync rule answers with, nil when the rule has none
// (it only delays, lags, pages, or fails the operation instead).
func (f *FailRule) err(rt route) *apiError {
	if f.OperationError || f.Code == 0 && f.Reason == "" {
		return nil
	}
	code := f.Code
	if code == 0 {
		code = http.StatusInternalServerError
	}
	reason := f.Reason
	if reason == "" {
		reason = defaultReason[code]
		if reason == "" {
			reason = "backendError"
		}
	}
	msg := f.Message
	if msg == "" {
		msg = defaultMessage(code, rt)
	}
	return &apiError{Code: code, Reason: reason, Message: msg}
}

// defaultMessage is an injected error's message: Compute Engine's wording
// where it has a usual one, naming the call.
func defaultMessage(code int, rt route) string {
	switch code {
	case http.StatusForbidden:
		return fmt.Sprintf("Required '%s' permission for '%s'", permission(rt.method), rt.resource)
	case http.StatusNotFound:
		return fmt.Sprintf("The resource '%s' was not found", rt.resource)
	case http.StatusConflict:
		return fmt.Sprintf("The resource '%s' already exists", rt.resource)
	case http.StatusPreconditionFailed:
		return "Supplied fingerprint does not match current metadata fingerprint."
	case http.StatusTooManyRequests:
		return fmt.Sprintf("Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service 'compute.googleapis.com' for consumer '%s'.", strings.SplitN(rt.resource, "/zones/", 2)[0])
	case http.StatusServiceUnavailable:
		return "The service is currently unavailable."
	case http.StatusInternalServerError:
		return "Internal error. Please try again or contact Google Support."
	}
	return fmt.Sprintf("computefake: injected %d on %s %s", code, rt.method, rt.resource)
}

// permission is the IAM permission a method checks (compute.instances.stop);
// the get of an operation checks compute.zoneOperations.get.
func permission(method string) string {
	switch method {
	case "instances.insert":
		return "compute.instances.create"
	case "instances.aggregatedList":
		return "compute.instances.list"
	case "zoneOperations.wait":
		return "compute.zoneOperations.get"
	case "instanceGroupManagers.listManagedInstances":
		return "compute.instanceGroupManagers.get"
	case "instanceGroupManagers.recreateInstances":
		return "compute.instanceGroupManagers.update"
	}
	return "compute." + method
}

// opFault is the error an OperationError rule makes the operation on target
// end with.
func (f *FailRule) opFault(target ref) *opFault {
	region := target.zone
	if i := strings.LastIndexByte(region, '-'); i > 0 {
		region = region[:i]
	}
	metric := f.QuotaMetric
	if metric == "" {
		metric = "TPUS_PER_TPU_FAMILY"
	}
	limit := f.QuotaLimit
	if limit == 0 {
		limit = 16
	}
	zp := zonePath(target.project, target.zone)
	out := &opFault{applied: f.Applied}
	switch f.Capacity {
	case ZoneResourcePoolExhausted:
		out.code, out.httpStatus = string(f.Capacity), http.StatusServiceUnavailable
		out.message = fmt.Sprintf("The zone '%s' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.", zp)
	case ZoneResourcePoolExhaustedWithDetails:
		out.code, out.httpStatus = string(f.Capacity), http.StatusServiceUnavailable
		out.message = fmt.Sprintf("The zone '%s' does not have enough resources available to fulfill the request.  '(resource type:compute)'.", zp)
		out.details = []*compute.OperationErrorErrorsErrorDetails{{ErrorInfo: &compute.ErrorInfo{
			Domain: "compute.googleapis.com", Reason: "resource_availability",
			Metadatas: map[string]string{"zone": target.zone, "vmType": "tpu"},
		}}}
	case QuotaExceededRegion, QuotaExceededZone:
		where, dim := "region "+region, map[string]string{"region": region}
		limitName := metric + "-per-project-region"
		if f.Capacity == QuotaExceededZone {
			where, dim, limitName = "zone "+target.zone, map[string]string{"zone": target.zone}, metric+"-per-project-zone"
		}
		out.code, out.httpStatus = "QUOTA_EXCEEDED", http.StatusForbidden
		out.message = fmt.Sprintf("Quota '%s' exceeded.  Limit: %.1f in %s.", metric, limit, where)
		out.details = []*compute.OperationErrorErrorsErrorDetails{{QuotaInfo: &compute.QuotaExceededInfo{
			MetricName: "compute.googleapis.com/" + strings.ToLower(metric), LimitName: limitName, Limit: limit, Dimensions: dim,
		}}}
	default:
		out.code, out.httpStatus, out.message = f.Reason, f.Code, f.Message
		if out.code == "" {
			out.code = "INTERNAL_ERROR"
		}
		if out.httpStatus == 0 {
			out.httpStatus = http.StatusInternalServerError
		}
		if out.message == "" {
			out.message = fmt.Sprintf("computefake: injected operation error on %s", target)
		}
	}
	if f.Message != "" {
		out.message = f.Message
	}
	return out
}
