package computefake

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/tpumachine"
)

// instance is one VM and what the fake knows of it beyond the resource.
type instance struct {
	res   *compute.Instance
	name  ref
	epoch int        // bumped by every lifecycle change; pending transitions check it
	busy  *operation // the lifecycle operation under way (insert, delete, start, stop, …)
	guest []GuestAttribute
	// outcome is the status an instance is left in after its maintenance
	// ("" = as before it: RUNNING again when it was running).
	outcome string
	// faulty is set while a host reported faulty is repaired.
	faulty bool
	// inMaint is set while the instance is in maintenance.
	inMaint bool
	mod     int // modification count, hashed into Instance.fingerprint
}

// key is the instance's resource name.
func (in *instance) key() string { return in.name.String() }

var (
	metadataKeyRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)
	labelKeyRE    = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	labelValueRE  = regexp.MustCompile(`^[a-z0-9_-]{0,63}$`)
)

// transitional are the lifecycle statuses an instance is busy in: another lifecycle call answers
// resourceNotReady.
var transitional = map[string]bool{
	"PROVISIONING": true, "STAGING": true, "STOPPING": true, "SUSPENDING": true,
	"PENDING_STOP": true, "DEPROVISIONING": true, "REPAIRING": true, "PENDING": true,
}

// put stores res (already normalized) as the instance under its name.
// Called with s.mu held.
func (s *Server) put(res *compute.Instance, guest []GuestAttribute) *instance {
	r, err := instanceRef(res)
	if err != nil {
		panic("computefake: put: " + err.Error())
	}
	in := &instance{res: res, name: r, guest: slices.Clone(guest)}
	s.instances[in.key()] = in
	s.remember(in.key())
	return in
}

// instanceRef is the name of res, from its zone URL and name.
func instanceRef(res *compute.Instance) (ref, error) {
	project, zone, err := parseZone(res.Zone)
	if err != nil {
		return ref{}, err
	}
	return parseZonal(InstanceName(project, zone, res.Name), "instances")
}

// normalize fills in the output-only fields Compute Engine sets and checks
// the ones the fake relies on; field names in errors are the resource's.
// Called with s.mu held.
func (s *Server) normalize(res *compute.Instance, r ref) error {
	res.Kind = "compute#instance"
	res.Name = r.name
	res.Zone = zoneURL(r.project, r.zone)
	res.SelfLink = selfLink(r.String())
	if res.Id == 0 {
		res.Id = s.newID()
	}
	if res.CreationTimestamp == "" {
		res.CreationTimestamp = stamp(s.at())
	}
	mt, err := normalizeMachineType(res.MachineType, r.project, r.zone)
	if err != nil {
		return fmt.Errorf("machineType: %v", err)
	}
	res.MachineType = mt
	if res.Status == "" {
		res.Status = "RUNNING"
	}
	if res.Scheduling == nil {
		res.Scheduling = &compute.Scheduling{}
	}
	sc := res.Scheduling
	spot := sc.ProvisioningModel == "SPOT" || sc.Preemptible
	if sc.ProvisioningModel == "" {
		sc.ProvisioningModel = "STANDARD"
		if sc.Preemptible {
			sc.ProvisioningModel = "SPOT"
		}
	}
	if sc.AutomaticRestart == nil {
		sc.AutomaticRestart = new(!spot)
	}
	if spot && *sc.AutomaticRestart {
		return fmt.Errorf("scheduling.automaticRestart: true, but a Spot VM cannot restart automatically")
	}
	tpu := tpumachine.IsTPU(mt)
	if sc.OnHostMaintenance == "" {
		sc.OnHostMaintenance = "MIGRATE"
		if tpu || spot {
			sc.OnHostMaintenance = "TERMINATE"
		}
	}
	if tpu && sc.OnHostMaintenance == "MIGRATE" {
		return fmt.Errorf("scheduling.onHostMaintenance: MIGRATE, but TPU VMs cannot be live-migrated (want TERMINATE)")
	}
	if spot && sc.InstanceTerminationAction == "" {
		sc.InstanceTerminationAction = "STOP"
	}
	if a := sc.InstanceTerminationAction; a != "" && a != "STOP" && a != "DELETE" {
		return fmt.Errorf("scheduling.instanceTerminationAction: %q, want STOP or DELETE", a)
	}
	if res.Metadata == nil {
		res.Metadata = &compute.Metadata{}
	}
	res.Metadata.Kind = "compute#metadata"
	res.Metadata.Fingerprint = metadataFingerprint(res.Metadata.Items)
	res.LabelFingerprint = labelFingerprint(res.Labels)
	for i, d := range res.Disks {
		if d == nil {
			return fmt.Errorf("disks[%d]: null", i)
		}
		d.Kind, d.Index = "compute#attachedDisk", int64(i)
		if d.DeviceName == "" {
			d.DeviceName = fmt.Sprintf("persistent-disk-%d", i)
			if d.Boot {
				d.DeviceName = res.Name
			}
		}
		if d.Type == "" {
			d.Type = "PERSISTENT"
		}
		if d.Mode == "" {
			d.Mode = "READ_WRITE"
		}
		if d.Source == "" && d.InitializeParams != nil {
			// Compute Engine creates the disk and answers its source; the
			// initializeParams it was made from are not part of the resource.
			diskName := d.InitializeParams.DiskName
			if diskName == "" {
				diskName = d.DeviceName
			}
			d.Source = selfLink(zonePath(r.project, r.zone) + "/disks/" + diskName)
			d.InitializeParams = nil
		}
	}
	for i, n := range res.NetworkInterfaces {
		if n == nil {
			return fmt.Errorf("networkInterfaces[%d]: null", i)
		}
		n.Kind = "compute#networkInterface"
		if n.Name == "" {
			n.Name = fmt.Sprintf("nic%d", i)
		}
		if n.NetworkIP == "" {
			n.NetworkIP = fmt.Sprintf("10.%d.%d.%d", 128+i, (res.Id>>8)%256, res.Id%254+1)
		}
	}
	s.refingerprint(res, 0)
	return nil
}

// refingerprint sets Instance.fingerprint, which changes with every change.
func (s *Server) refingerprint(res *compute.Instance, mod int) {
	res.Fingerprint = fingerprint(fmt.Sprintf("%d/%d/%s/%s/%s", res.Id, mod, res.Status, res.Metadata.Fingerprint, res.LabelFingerprint))
}

// changed marks in as modified. Called with s.mu held.
func (s *Server) changed(in *instance) {
	in.mod++
	s.refingerprint(in.res, in.mod)
}

// fingerprint is Compute Engine's fingerprint shape: 8 bytes, base64.
func fingerprint(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base64.StdEncoding.EncodeToString(sum[:8])
}

func metadataFingerprint(items []*compute.MetadataItems) string {
	var b strings.Builder
	for _, it := range sortedItems(items) {
		v := ""
		if it.Value != nil {
			v = *it.Value
		}
		fmt.Fprintf(&b, "%q=%q;", it.Key, v)
	}
	return fingerprint("metadata:" + b.String())
}

func labelFingerprint(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%q=%q;", k, labels[k])
	}
	return fingerprint("labels:" + b.String())
}

func sortedItems(items []*compute.MetadataItems) []*compute.MetadataItems {
	out := slices.Clone(items)
	slices.SortStableFunc(out, func(a, b *compute.MetadataItems) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// metadataValue is the value of key in res's metadata.
func metadataValue(res *compute.Instance, key string) (string, bool) {
	if res.Metadata == nil {
		return "", false
	}
	for _, it := range res.Metadata.Items {
		if it != nil && it.Key == key && it.Value != nil {
			return *it.Value, true
		}
	}
	return "", false
}

// lookup finds the instance t names. Called with s.mu held.
func (s *Server) lookup(t ref) (*instance, *apiError) {
	in, ok := s.instances[t.String()]
	if !ok {
		return nil, notFound(t.String())
	}
	return in, nil
}

// --- reads ---

func (s *Server) getInstance(t ref) (*compute.Instance, *apiError) {
	v, ok := s.view(t.String())
	if !ok {
		return nil, notFound(t.String())
	}
	return clone(v), nil
}

// listInstances answers instances.list of one zone.
func (s *Server) listInstances(rt route, filter, maxResults, tok string, fail *FailRule) (*compute.InstanceList, *apiError) {
	page, next, e := s.listPage(func(r ref) bool { return r.project == rt.project && r.zone == rt.zone }, filter, maxResults, tok, fail)
	if e != nil {
		return nil, e
	}
	zp := zonePath(rt.project, rt.zone)
	resp := &compute.InstanceList{Kind: "compute#instanceList", Id: zp + "/instances", SelfLink: selfLink(zp + "/instances"), NextPageToken: next}
	for _, v := range page {
		resp.Items = append(resp.Items, clone(v))
	}
	return resp, nil
}

// aggregatedList answers instances.aggregatedList of a project: the zones
// that have instances on the page, each with its instances.
func (s *Server) aggregatedList(rt route, filter, maxResults, tok string, fail *FailRule) (*compute.InstanceAggregatedList, *apiError) {
	page, next, e := s.listPage(func(r ref) bool { return r.project == rt.project }, filter, maxResults, tok, fail)
	if e != nil {
		return nil, e
	}
	resp := &compute.InstanceAggregatedList{
		Kind: "compute#instanceAggregatedList", Id: "projects/" + rt.project + "/aggregated/instances",
		SelfLink: selfLink("projects/" + rt.project + "/aggregated/instances"), NextPageToken: next,
		Items: map[string]compute.InstancesScopedList{},
	}
	for _, v := range page {
		scope := "zones/" + lastSegment(v.Zone)
		sl := resp.Items[scope]
		sl.Instances = append(sl.Instances, clone(v))
		resp.Items[scope] = sl
	}
	return resp, nil
}

// listPage is the page of the instances where is true that pass filter.
func (s *Server) listPage(where func(ref) bool, filter, maxResults, tok string, fail *FailRule) ([]*compute.Instance, string, *apiError) {
	f, err := parseFilter(filter)
	if err != nil {
		return nil, "", invalid("filter", filter, err.Error())
	}
	size, e := pageSize(maxResults, s.pageSize)
	if e != nil {
		return nil, "", e
	}
	return paginate(s.visible(where, f), s.seqOf, tok, size, pageFault(fail))
}

func pageFault(fail *FailRule) PageFault {
	if fail == nil {
		return ""
	}
	return fail.Page
}

// seqOf is the first-seen sequence of an instance resource's name.
func (s *Server) seqOf(v *compute.Instance) int {
	r, _ := instanceRef(v)
	return s.order[r.String()]
}

// visible lists what reads see of the instances where is true that pass f,
// in first-seen order (read lag included). Called with s.mu held.
func (s *Server) visible(where func(ref) bool, f listFilter) []*compute.Instance {
	names := map[string]bool{}
	for k := range s.instances {
		names[k] = true
	}
	for k := range s.lags {
		names[k] = true
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return s.order[a] - s.order[b] })
	var out []*compute.Instance
	for _, k := range keys {
		r, err := parseZonal(k, "instances")
		if err != nil || !where(r) {
			continue
		}
		if v, ok := s.view(k); ok && f.keep(v) {
			out = append(out, v)
		}
	}
	return out
}

// --- lifecycle ---

// setStatus changes in's status. Called with s.mu held.
func (s *Server) setStatus(in *instance, status string) {
	in.res.Status = status
	s.changed(in)
}

// running marks in RUNNING now.
func (s *Server) running(in *instance) {
	in.res.LastStartTimestamp = stamp(s.at())
	s.setStatus(in, "RUNNING")
}

// terminated marks in TERMINATED now and tells its MIG.
func (s *Server) terminated(in *instance) {
	in.res.LastStopTimestamp = stamp(s.at())
	s.setStatus(in, "TERMINATED")
	s.brokenMember(in.key())
}

// remove deletes the instance now and tells its MIG. Called with s.mu held.
func (s *Server) remove(key string) {
	if _, ok := s.instances[key]; !ok {
		return
	}
	delete(s.instances, key)
	s.brokenMember(key)
}

// guard returns a function reporting whether in is still the instance, in
// the same lifecycle step, as when guard was called: what a transition
// scheduled for later checks first.
func (s *Server) guard(in *instance) func() bool {
	in.epoch++
	epoch := in.epoch
	return func() bool { return s.instances[in.key()] == in && in.epoch == epoch }
}

// boot takes in from now to RUNNING over d: PROVISIONING, STAGING at two
// thirds of d, RUNNING at d; then runs done (also for d <= 0, at once).
// Called with s.mu held.
func (s *Server) boot(in *instance, d time.Duration, done func(ok bool)) {
	ok := s.guard(in)
	if d <= 0 {
		s.running(in)
		if done != nil {
			done(true)
		}
		return
	}
	s.setStatus(in, "PROVISIONING")
	s.after(d*2/3, func() {
		if ok() {
			s.setStatus(in, "STAGING")
		}
	})
	s.after(d, func() {
		alive := ok()
		if alive {
			s.running(in)
		}
		if done != nil {
			done(alive)
		}
	})
}

// busyError is what a lifecycle call on an instance in the middle of
// another answers.
func (s *Server) busyError(in *instance) *apiError {
	if in.busy != nil && in.busy.res.Status != "DONE" || transitional[in.res.Status] || in.inMaint {
		return notReady(in.key())
	}
	return nil
}

// startOp registers a lifecycle operation on in. Called with s.mu held.
func (s *Server) startOp(method string, in *instance, fail *FailRule) *operation {
	op := s.newOperation(method, in.name, in.res.Id, fail)
	in.busy = op
	return op
}

func (s *Server) insertInstance(rt route, q map[string][]string, body []byte, fail *FailRule) (*operation, *apiError) {
	var res *compute.Instance
	if err := json.Unmarshal(body, &res); err != nil || res == nil {
		return nil, errorf(http.StatusBadRequest, "parseError", "Invalid JSON payload received: %v", err)
	}
	if q["sourceInstanceTemplate"] != nil || q["sourceMachineImage"] != nil {
		return nil, errorf(http.StatusNotImplemented, "notImplemented", "computefake: instances.insert from a template or machine image is not implemented")
	}
	if !resourceIDRE.MatchString(res.Name) {
		return nil, invalid("resource.name", res.Name, "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'")
	}
	t := rt.target
	if _, ok := s.instances[t.String()]; ok {
		return nil, errorf(http.StatusConflict, "alreadyExists", "The resource '%s' already exists", t)
	}
	hasBoot := false
	for _, d := range res.Disks {
		hasBoot = hasBoot || d != nil && d.Boot
	}
	if !hasBoot {
		return nil, invalid("resource.disks", "", "Boot disk must be specified.")
	}
	res.Zone = zoneURL(t.project, t.zone)
	res.Id, res.Status, res.CreationTimestamp = 0, "", ""
	res.LastStartTimestamp, res.LastStopTimestamp, res.ResourceStatus = "", "", nil
	if err := s.normalize(res, t); err != nil {
		field, why, _ := strings.Cut(err.Error(), ": ")
		return nil, invalid("resource."+field, "", why)
	}
	in := s.put(res, nil)
	op := s.startOp("instances.insert", in, fail)
	d := s.delays["insert"]
	if op.applies() {
		s.effect(t.String(), "insert", s.actor())
		s.boot(in, d, nil)
		return s.launch(op, d, nil), nil
	}
	// The insert fails: the instance it began vanishes when its operation
	// ends.
	ok := s.guard(in)
	s.setStatus(in, "PROVISIONING")
	return s.launch(op, d, func(bool) {
		if ok() {
			delete(s.instances, in.key())
		}
	}), nil
}

func (s *Server) deleteInstance(t ref, fail *FailRule) (*operation, *apiError) {
	in, e := s.lookup(t)
	if e != nil {
		return nil, e
	}
	if in.busy != nil && in.busy.method == "instances.delete" && in.busy.res.Status != "DONE" {
		return nil, notReady(t.String())
	}
	op := s.startOp("instances.delete", in, fail)
	if !op.applies() {
		return s.launch(op, s.delays["delete"], nil), nil
	}
	s.effect(t.String(), "delete", s.actor())
	ok := s.guard(in)
	if in.res.Status != "TERMINATED" {
		s.setStatus(in, "STOPPING")
	}
	return s.launch(op, s.delays["delete"], func(bool) {
		if ok() {
			s.remove(in.key())
		}
	}), nil
}

func (s *Server) startInstance(t ref, fail *FailRule) (*operation, *apiError) {
	in, e := s.lookup(t)
	if e != nil {
		return nil, e
	}
	if in.res.Status == "RUNNING" {
		// Starting a running instance does nothing, successfully.
		return s.launch(s.startOp("instances.start", in, fail), 0, nil), nil
	}
	if e := s.busyError(in); e != nil {
		return nil, e
	}
	if in.res.Status == "SUSPENDED" {
		return nil, errorf(http.StatusBadRequest, "resourceNotReady", "The resource '%s' is suspended: resume it instead", t)
	}
	op := s.startOp("instances.start", in, fail)
	if !op.applies() {
		return s.launch(op, s.delays["start"], nil), nil
	}
	s.effect(t.String(), "start", s.actor())
	s.boot(in, s.delays["start"], nil)
	return s.launch(op, s.delays["start"], nil), nil
}

func (s *Server) stopInstance(t ref, fail *FailRule) (*operation, *apiError) {
	in, e := s.lookup(t)
	if e != nil {
		return nil, e
	}
	if in.res.Status == "TERMINATED" || in.res.Status == "STOPPED" {
		return s.launch(s.startOp("instances.stop", in, fail), 0, nil), nil
	}
	if in.busy != nil && in.busy.res.Status != "DONE" && in.res.Status != "PROVISIONING" && in.res.Status != "STAGING" {
		return nil, notReady(t.String())
	}
	op := s.startOp("instances.stop", in, fail)
	if !op.applies() {
		return s.launch(op, s.delays["stop"], nil), nil
	}
	s.effect(t.String(), "stop", s.actor())
	s.stopping(in, s.delays["stop"], nil)
	return s.launch(op, s.delays["stop"], nil), nil
}

// stopping takes in to TERMINATED over d (STOPPING meanwhile), then runs
// done. Called with s.mu held.
func (s *Server) stopping(in *instance, d time.Duration, done func()) {
	ok := s.guard(in)
	if d <= 0 {
		s.terminated(in)
		if done != nil {
			done()
		}
		return
	}
	s.setStatus(in, "STOPPING")
	s.after(d, func() {
		if ok() {
			s.terminated(in)
			if done != nil {
				done()
			}
		}
	})
}

func (s *Server) setMetadata(t ref, body []byte, fail *FailRule) (*operation, *apiError) {
	in, e := s.lookup(t)
	if e != nil {
		return nil, e
	}
	var md compute.Metadata
	if err := json.Unmarshal(body, &md); err != nil {
		return nil, errorf(http.StatusBadRequest, "parseError", "Invalid JSON payload received: %v", err)
	}
	if md.Fingerprint != in.res.Metadata.Fingerprint {
		return nil, errorf(http.StatusPreconditionFailed, "conditionNotMet", "Supplied fingerprint does not match current metadata fingerprint.")
	}
	seen := map[string]bool{}
	for i, it := range md.Items {
		if it == nil || !metadataKeyRE.MatchString(it.Key) {
			return nil, invalid(fmt.Sprintf("metadata.items[%d].key", i), itemKey(it), "Must be a match of regex '[a-zA-Z0-9-_]{1,128}'")
		}
		if seen[it.Key] {
			return nil, invalid(fmt.Sprintf("metadata.items[%d].key", i), it.Key, "Duplicate key.")
		}
		seen[it.Key] = true
	}
	op := s.startMetaOp("instances.setMetadata", in, fail)
	if op.applies() {
		in.res.Metadata = &compute.Metadata{Kind: "compute#metadata", Items: md.Items}
		in.res.Metadata.Fingerprint = metadataFingerprint(md.Items)
		s.changed(in)
	}
	return s.launch(op, s.delays["setMetadata"], nil), nil
}

// otherMetadataWrite is someone else's write of the named keys of the
// instance's metadata (FailRule.OtherWriter): the other keys kept, the
// fingerprint moved even when a value is the one already there (their write
// is a new version). No audit entry: the writer is not the API's caller.
// Called with s.mu held; an instance that does not exist is left to the call
// to report.
func (s *Server) otherMetadataWrite(t ref, set map[string]string) {
	in, e := s.lookup(t)
	if e != nil {
		return
	}
	var items []*compute.MetadataItems
	for _, it := range in.res.Metadata.Items {
		if _, ok := set[it.Key]; !ok {
			items = append(items, it)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		items = append(items, &compute.MetadataItems{Key: k, Value: new(set[k])})
	}
	s.otherWrites++
	in.res.Metadata = &compute.Metadata{Kind: "compute#metadata", Items: items,
		Fingerprint: fingerprint(fmt.Sprintf("%s/other-writer/%d", metadataFingerprint(items), s.otherWrites))}
	s.changed(in)
}

func itemKey(it *compute.MetadataItems) string {
	if it == nil {
		return ""
	}
	return it.Key
}

func (s *Server) setLabels(t ref, body []byte, fail *FailRule) (*operation, *apiError) {
	in, e := s.lookup(t)
	if e != nil {
		return nil, e
	}
	var req compute.InstancesSetLabelsRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, errorf(http.StatusBadRequest, "parseError", "Invalid JSON payload received: %v", err)
	}
	if req.LabelFingerprint != in.res.LabelFingerprint {
		return nil, errorf(http.StatusPreconditionFailed, "conditionNotMet", "Labels fingerprint either invalid or resource labels have changed")
	}
	for k, v := range req.Labels {
		if !labelKeyRE.MatchString(k) || !labelValueRE.MatchString(v) {
			return nil, invalid("labels."+k, v, "Label keys must start with a lower-case letter; keys and values are lower-case letters, digits, '-' and '_', at most 63 characters.")
		}
	}
	op := s.startMetaOp("instances.setLabels", in, fail)
	if op.applies() {
		in.res.Labels = req.Labels
		in.res.LabelFingerprint = labelFingerprint(req.Labels)
		s.changed(in)
		s.effects = append(s.effects, Effect{Time: s.at(), Instance: t.String(), What: "setLabels", By: s.actor(), Labels: maps.Clone(req.Labels)})
	}
	return s.launch(op, s.delays["setLabels"], nil), nil
}

// startMetaOp registers a metadata or labels operation: it does not make the
// instance busy for lifecycle calls.
func (s *Server) startMetaOp(method string, in *instance, fail *FailRule) *operation {
	return s.newOperation(method, in.name, in.res.Id, fail)
}
