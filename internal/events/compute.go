package events

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// instanceOf finds the project, zone and worker a compute.instances.* entry
// is about. protoPayload.resourceName is projects/P/zones/Z/instances/I
// (optionally prefixed //compute.googleapis.com/); the gce_instance labels
// project_id and zone, where present, must agree with it. The VMs of a TPU
// node are named t1v-n-<hash>-w-<worker> (worker set); a name that starts
// so but is not one is foreign-instance; any other instance has worker ""
// (KindInstance: a Compute Engine VM, perhaps a TPU one). The TPU node
// itself is not named by such an entry.
func instanceOf(resourceName string, labels labelSource) (located, error) {
	if resourceName == "" {
		return located{}, reject(CodeMissingNode, fieldResourceName, "no instance: a compute.instances entry needs protoPayload.resourceName projects/P/zones/Z/instances/I")
	}
	bad := func(why string) error {
		return reject(CodeInvalidNode, fieldResourceName, "%q is not projects/P/zones/Z/instances/I: %s", resourceName, why)
	}
	name := strings.TrimPrefix(resourceName, "//compute.googleapis.com/")
	seg, n := splitPath(name)
	if n != 6 {
		return located{}, bad(fmt.Sprintf("%d path segments", n))
	}
	if seg[0] != "projects" || seg[2] != "zones" || seg[4] != "instances" {
		return located{}, bad("unexpected collection")
	}
	for _, j := range []int{1, 3, 5} {
		if !validID(seg[j]) {
			return located{}, bad(fmt.Sprintf("%q is not a valid resource id", seg[j]))
		}
	}
	project, zone, instance := seg[1], seg[3], seg[5]
	for _, l := range []struct{ label, part, got string }{{"project_id", "project", project}, {"zone", "zone", zone}} {
		v := labels.get(l.label)
		if v == "" {
			continue
		}
		if !validID(v) {
			return located{}, reject(CodeInvalidNode, labelsPrefix+l.label, "%q is not a valid resource id", v)
		}
		if v != l.got {
			return located{}, reject(CodeNodeMismatch, fieldResourceName,
				"names %s %q but resource.labels.%s names %q", l.part, l.got, l.label, v)
		}
	}
	worker, ok := tpuWorker(instance)
	if !ok && strings.HasPrefix(instance, tpuInstancePrefix) {
		return located{}, reject(CodeForeignInstance, fieldResourceName,
			"instance %q is named like a TPU node's VM but is not one (t1v-n-<hash>-w-<worker>)", instance)
	}
	// worker "" : not a Cloud TPU worker (KindInstance).
	return located{NodeRef: NodeRef{Project: project, Zone: zone}, worker: worker, projectField: fieldResourceName, instance: instance}, nil
}

// tpuWorker returns <worker> of t1v-n-<hash>-w-<worker>: <hash> is letters
// and digits, <worker> digits.
func tpuWorker(instance string) (string, bool) {
	rest, ok := strings.CutPrefix(instance, tpuInstancePrefix)
	if !ok {
		return "", false
	}
	i := strings.LastIndex(rest, "-w-")
	if i <= 0 {
		return "", false
	}
	hash, worker := rest[:i], rest[i+3:]
	for _, c := range []byte(hash) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return "", false
		}
	}
	if worker == "" || len(worker) > 6 {
		return "", false
	}
	for _, c := range []byte(worker) {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return worker, true
}

// computeCause classifies a Compute Engine system event by its method: the
// method says what happened, and these entries carry no reason text. As for
// TPU entries, a customer principal makes it CauseUser.
func computeCause(method, principal string) Cause {
	if isCustomerPrincipal(principal) {
		return CauseUser
	}
	switch method {
	case MethodPreempted:
		return CausePreemption
	case MethodHostError:
		return CauseHardware
	default: // upcomingMaintenance, terminateOnHostMaintenance
		return CauseMaintenance
	}
}

// maintenanceFrom reads the notice of an upcomingMaintenance entry from its
// metadata: the fields of Compute Engine's UpcomingMaintenance, flat in the
// metadata or nested under upcomingMaintenance (flat ones win). It is
// lenient: a field of an unexpected JSON type is ignored; a window time that
// is a string but not RFC 3339 is rejected (bad-timestamp), since acting on
// a misread window is worse than not acting. It returns nil when no field is
// present.
func maintenanceFrom(r maintRaw) (*Maintenance, error) {
	var nested struct {
		MaintenanceStatus     json.RawMessage `json:"maintenanceStatus"`
		Type                  json.RawMessage `json:"type"`
		WindowStartTime       json.RawMessage `json:"windowStartTime"`
		WindowEndTime         json.RawMessage `json:"windowEndTime"`
		LatestWindowStartTime json.RawMessage `json:"latestWindowStartTime"`
		CanReschedule         json.RawMessage `json:"canReschedule"`
	}
	_ = json.Unmarshal(r.upcoming, &nested) // not an object: nothing nested
	pick := func(flat, n json.RawMessage) json.RawMessage {
		if len(flat) > 0 && string(flat) != "null" {
			return flat
		}
		return n
	}
	status := pick(r.status, nested.MaintenanceStatus)
	typ := pick(r.typ, nested.Type)
	start := pick(r.windowStart, nested.WindowStartTime)
	end := pick(r.windowEnd, nested.WindowEndTime)
	latest := pick(r.latestWindowStart, nested.LatestWindowStartTime)
	resched := pick(r.canReschedule, nested.CanReschedule)
	var m Maintenance
	found := false
	str := func(raw json.RawMessage) string {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			found = found || s != ""
		}
		return s
	}
	m.Status, m.Type = str(status), str(typ)
	for _, t := range []struct {
		field string
		raw   json.RawMessage
		dst   *time.Time
	}{{"windowStartTime", start, &m.WindowStart}, {"windowEndTime", end, &m.WindowEnd}, {"latestWindowStartTime", latest, &m.LatestWindowStart}} {
		v, err := parseTime("protoPayload.metadata."+t.field, str(t.raw))
		if err != nil {
			return nil, err
		}
		*t.dst = v
	}
	var b bool
	if len(resched) > 0 && string(resched) != "null" && json.Unmarshal(resched, &b) == nil {
		m.CanReschedule, found = b, true
	}
	if !found {
		return nil, nil
	}
	return &m, nil
}
