package computefake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/fleetjson"
)

// Fleet is the simulated Compute Engine's state in the fleet file format:
// Compute Engine Instance and InstanceGroupManager resources as the REST API
// and `gcloud compute instances describe --format=json` give them (zone,
// selfLink and machineType as URLs).
type Fleet struct {
	Instances             []*compute.Instance             `json:"instances"`
	InstanceGroupManagers []*compute.InstanceGroupManager `json:"instanceGroupManagers,omitempty"`
	// GuestAttributes are each instance's guest attributes (by instance
	// name), from a fleet file instance's "guestAttributes" (a field of the
	// fleet file, not of the resource).
	GuestAttributes map[string][]GuestAttribute `json:"-"`
}

// tpuFleetKeys are the keys of the TPU fake's fleet object: a combined
// fleet file holds both, and each fake reads only its own.
var tpuFleetKeys = []string{"nodes", "queuedResources"}

// ReadFleet reads a fleet file: a JSON array of instances; an object
// {"instances":[...],"instanceGroupManagers":[...]}, which may also hold the
// TPU fake's "nodes" and "queuedResources" (ignored here, so one file can
// seed both fakes); a single instance object (what `gcloud compute instances
// describe --format=json` prints); or several such objects one after another.
// Errors name the element and field, e.g. `fleet: instances[2].zone: …`.
// Fields this client version does not know are ignored, as the generated
// client ignores them.
func ReadFleet(r io.Reader) (Fleet, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Fleet{}, fmt.Errorf("fleet: read: %w", err)
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return Fleet{}, errors.New(`fleet: empty input: want a JSON array of instances or an object {"instances": [...]}`)
	}
	values, err := fleetjson.SplitValues(data)
	if err != nil {
		return Fleet{}, err
	}
	var rawInstances, rawMIGs []json.RawMessage
	switch {
	case len(values) > 1:
		for i, v := range values {
			if v[0] != '{' {
				return Fleet{}, fmt.Errorf("fleet: value %d of %d: concatenated values must each be an instance object (as instances describe --format=json prints it), got %q…", i+1, len(values), fleetjson.FirstBytes(v))
			}
		}
		rawInstances = values
	case data[0] == '[':
		if err := json.Unmarshal(data, &rawInstances); err != nil {
			return Fleet{}, fleetjson.Error("", data, err)
		}
	case data[0] == '{':
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(data, &keys); err != nil {
			return Fleet{}, fleetjson.Error("", data, err)
		}
		_, hasInstances := keys["instances"]
		_, hasMIGs := keys["instanceGroupManagers"]
		tpu := slices.ContainsFunc(tpuFleetKeys, func(k string) bool { _, ok := keys[k]; return ok })
		if !hasInstances && !hasMIGs && !tpu {
			if _, ok := keys["name"]; !ok {
				return Fleet{}, errors.New(`fleet: object has neither "instances" nor "instanceGroupManagers" (nor an instance's "name")`)
			}
			rawInstances = []json.RawMessage{data}
			break
		}
		for k := range keys {
			if k != "instances" && k != "instanceGroupManagers" && !slices.Contains(tpuFleetKeys, k) {
				return Fleet{}, fmt.Errorf(`fleet: unknown top-level field %q (want "instances" and "instanceGroupManagers", and the TPU fleet's "nodes" and "queuedResources")`, k)
			}
		}
		if err := json.Unmarshal(keys["instances"], &rawInstances); hasInstances && err != nil {
			return Fleet{}, fleetjson.Error("instances", keys["instances"], err)
		}
		if err := json.Unmarshal(keys["instanceGroupManagers"], &rawMIGs); hasMIGs && err != nil {
			return Fleet{}, fleetjson.Error("instanceGroupManagers", keys["instanceGroupManagers"], err)
		}
	default:
		return Fleet{}, fmt.Errorf("fleet: want a JSON array or object, got %q…", fleetjson.FirstBytes(data))
	}

	f := Fleet{Instances: make([]*compute.Instance, 0, len(rawInstances))}
	for i, raw := range rawInstances {
		var in *compute.Instance
		if err := json.Unmarshal(raw, &in); err != nil {
			return Fleet{}, fleetjson.Error(fmt.Sprintf("instances[%d]", i), raw, err)
		}
		f.Instances = append(f.Instances, in)
		var extra struct {
			GuestAttributes []GuestAttribute `json:"guestAttributes"`
		}
		if err := json.Unmarshal(raw, &extra); err != nil {
			return Fleet{}, fleetjson.Error(fmt.Sprintf("instances[%d].guestAttributes", i), raw, err)
		}
		for j, a := range extra.GuestAttributes {
			if !metadataKeyRE.MatchString(a.Namespace) || !metadataKeyRE.MatchString(a.Key) {
				return Fleet{}, fmt.Errorf("fleet: instances[%d].guestAttributes[%d]: namespace %q and key %q must be letters, digits, '-' and '_'", i, j, a.Namespace, a.Key)
			}
		}
		if len(extra.GuestAttributes) > 0 && in != nil {
			if f.GuestAttributes == nil {
				f.GuestAttributes = map[string][]GuestAttribute{}
			}
			if r, err := fleetInstanceRef(in); err == nil {
				f.GuestAttributes[r.String()] = extra.GuestAttributes
			}
		}
	}
	if f.InstanceGroupManagers, err = fleetjson.Resources[compute.InstanceGroupManager]("instanceGroupManagers", rawMIGs); err != nil {
		return Fleet{}, err
	}
	if err := f.validate(); err != nil {
		return Fleet{}, err
	}
	return f, nil
}

// ReadFleetFile reads the fleet file at path (see ReadFleet).
func ReadFleetFile(path string) (Fleet, error) { return fleetjson.ReadFile(path, ReadFleet) }

// Write writes f in the fleet file format, indented: a JSON array of
// instances when there are no MIGs, else the object form; each instance's
// guest attributes as its "guestAttributes", so the file reads back as the
// same fleet.
func (f Fleet) Write(w io.Writer) error {
	instances := make([]json.RawMessage, 0, len(f.Instances))
	for i, in := range f.Instances {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("fleet: encode instances[%d]: %w", i, err)
		}
		if r, err := instanceRef(in); err == nil && len(f.GuestAttributes[r.String()]) > 0 {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(data, &m); err != nil {
				return fmt.Errorf("fleet: encode instances[%d]: %w", i, err)
			}
			m["guestAttributes"], _ = json.Marshal(f.GuestAttributes[r.String()])
			data, _ = json.Marshal(m)
		}
		instances = append(instances, data)
	}
	var v any = instances
	if len(f.InstanceGroupManagers) > 0 {
		v = struct {
			Instances             []json.RawMessage               `json:"instances"`
			InstanceGroupManagers []*compute.InstanceGroupManager `json:"instanceGroupManagers"`
		}{instances, f.InstanceGroupManagers}
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("fleet: encode: %w", err)
	}
	if _, err := w.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("fleet: write: %w", err)
	}
	return nil
}

// validate checks what the fake relies on: every instance named by a zone
// URL (or a selfLink) and a name, unique; a machine type in its zone; a MIG
// named by its zone and name, unique; every created-by naming a MIG of the
// fleet; a MIG's targetSize, when set, its number of instances.
func (f Fleet) validate() error {
	seen := map[string]int{}
	migs := map[string]int{}
	for i, m := range f.InstanceGroupManagers {
		at := fmt.Sprintf("instanceGroupManagers[%d]", i)
		if m == nil {
			return fmt.Errorf("fleet: %s: null", at)
		}
		r, err := migRef(m)
		if err != nil {
			return fmt.Errorf("fleet: %s.%v", at, err)
		}
		if j, dup := migs[r.String()]; dup {
			return fmt.Errorf("fleet: %s: %s is a duplicate of instanceGroupManagers[%d]", at, r, j)
		}
		migs[r.String()] = i
	}
	members := map[string]int{}
	for i, in := range f.Instances {
		at := fmt.Sprintf("instances[%d]", i)
		if in == nil {
			return fmt.Errorf("fleet: %s: null instance", at)
		}
		r, err := fleetInstanceRef(in)
		if err != nil {
			return fmt.Errorf("fleet: %s.%v", at, err)
		}
		if j, dup := seen[r.String()]; dup {
			return fmt.Errorf("fleet: %s: %s is a duplicate of instances[%d]", at, r, j)
		}
		seen[r.String()] = i
		if _, err := normalizeMachineType(in.MachineType, r.project, r.zone); err != nil {
			return fmt.Errorf("fleet: %s.machineType: %v", at, err)
		}
		if sc := in.Scheduling; sc != nil {
			if a := sc.InstanceTerminationAction; a != "" && a != "STOP" && a != "DELETE" {
				return fmt.Errorf("fleet: %s.scheduling.instanceTerminationAction: %q, want STOP or DELETE", at, a)
			}
		}
		owner, ok, err := createdBy(in)
		switch {
		case err != nil:
			return fmt.Errorf("fleet: %s.metadata.created-by: %v", at, err)
		case ok:
			key := MIGName(r.project, owner.zone, owner.name)
			if _, known := migs[key]; !known || owner.zone != r.zone {
				return fmt.Errorf("fleet: %s.metadata.created-by: %q names no instance group manager of the fleet in zone %s (want projects/%s/zones/%s/instanceGroupManagers/M, M among instanceGroupManagers)", at, trimURL(mustValue(in, "created-by")), r.zone, r.project, r.zone)
			}
			members[key]++
		}
	}
	for i, m := range f.InstanceGroupManagers {
		r, _ := migRef(m)
		if m.TargetSize != 0 && m.TargetSize != int64(members[r.String()]) {
			return fmt.Errorf("fleet: instanceGroupManagers[%d].targetSize: %d, but %d instances name it in metadata created-by", i, m.TargetSize, members[r.String()])
		}
	}
	return nil
}

func mustValue(in *compute.Instance, key string) string {
	v, _ := metadataValue(in, key)
	return v
}

// fleetInstanceRef names a fleet instance by its zone and name, or its
// selfLink; both, when given, must agree. The error names the field.
func fleetInstanceRef(in *compute.Instance) (ref, error) {
	if in.Name == "" && in.SelfLink == "" {
		return ref{}, errors.New("name: missing")
	}
	var fromLink ref
	if in.SelfLink != "" {
		r, err := parseZonal(in.SelfLink, "instances")
		if err != nil {
			return ref{}, fmt.Errorf("selfLink: %v", err)
		}
		fromLink = r
	}
	if in.Name != "" && !resourceIDRE.MatchString(in.Name) {
		if strings.Contains(in.Name, "/nodes/") {
			return ref{}, fmt.Errorf("name: %q is a TPU node's name: put nodes under \"nodes\" (the TPU fleet), instances under \"instances\"", in.Name)
		}
		return ref{}, fmt.Errorf("name: %q must be 1-63 lower-case letters, digits and hyphens, starting with a letter", in.Name)
	}
	if in.Zone == "" {
		if in.SelfLink == "" {
			return ref{}, fmt.Errorf("zone: missing (want %sprojects/P/zones/Z, as instances describe prints it)", SelfLinkBase)
		}
		if in.Name != "" && in.Name != fromLink.name {
			return ref{}, fmt.Errorf("name: %q, but selfLink names %q", in.Name, fromLink.name)
		}
		return fromLink, nil
	}
	project, zone, err := parseZone(in.Zone)
	if err != nil {
		return ref{}, fmt.Errorf("zone: %v", err)
	}
	name := in.Name
	if name == "" {
		name = fromLink.name
	}
	r := ref{project: project, zone: zone, collection: "instances", name: name}
	if in.SelfLink != "" && fromLink != r {
		return ref{}, fmt.Errorf("selfLink: %q does not name %s (its zone and name)", in.SelfLink, r)
	}
	return r, nil
}

// migRef names a fleet MIG by its zone and name, or its selfLink.
func migRef(m *compute.InstanceGroupManager) (ref, error) {
	if m.Zone == "" && m.SelfLink == "" {
		if m.Region != "" {
			return ref{}, fmt.Errorf("region: %q: regional MIGs are not simulated (want a zonal one, with zone)", m.Region)
		}
		return ref{}, fmt.Errorf("zone: missing (want %sprojects/P/zones/Z)", SelfLinkBase)
	}
	if m.Zone == "" {
		r, err := parseZonal(m.SelfLink, "instanceGroupManagers")
		if err != nil {
			return ref{}, fmt.Errorf("selfLink: %v", err)
		}
		return r, nil
	}
	project, zone, err := parseZone(m.Zone)
	if err != nil {
		return ref{}, fmt.Errorf("zone: %v", err)
	}
	if !resourceIDRE.MatchString(m.Name) {
		return ref{}, fmt.Errorf("name: %q must be 1-63 lower-case letters, digits and hyphens, starting with a letter", m.Name)
	}
	return ref{project: project, zone: zone, collection: "instanceGroupManagers", name: m.Name}, nil
}

// load seeds the server with f. Called from New, before serving.
func (s *Server) load(f Fleet) error {
	if err := f.validate(); err != nil {
		return err
	}
	for _, res := range f.InstanceGroupManagers {
		res = clone(res)
		r, _ := migRef(res)
		res.Kind, res.Name = "compute#instanceGroupManager", r.name
		res.Zone, res.SelfLink = zoneURL(r.project, r.zone), selfLink(r.String())
		if res.Id == 0 {
			res.Id = s.newID()
		}
		if res.BaseInstanceName == "" {
			res.BaseInstanceName = r.name
		}
		if res.InstanceGroup == "" {
			res.InstanceGroup = selfLink(zonePath(r.project, r.zone) + "/instanceGroups/" + r.name)
		}
		if res.ListManagedInstancesResults == "" {
			res.ListManagedInstancesResults = "PAGELESS"
		}
		if res.CreationTimestamp == "" {
			res.CreationTimestamp = stamp(s.now())
		}
		s.migs[r.String()] = &mig{res: res, name: r, specs: map[string]*compute.Instance{}, recreating: map[string]bool{}}
		s.remember(r.String())
	}
	for _, res := range f.Instances {
		res = clone(res)
		r, _ := fleetInstanceRef(res)
		res.Name = r.name
		if err := s.normalize(res, r); err != nil {
			return fmt.Errorf("fleet: %s: %v", r, err)
		}
		s.put(res, f.GuestAttributes[r.String()])
		if owner, ok, _ := createdBy(res); ok {
			m := s.migs[MIGName(r.project, owner.zone, owner.name)]
			m.members = append(m.members, r.name)
			m.specs[r.name] = clone(res)
		}
	}
	return nil
}

// Fleet returns a deep copy of the current state, instances and MIGs in the
// order they were first seen, with their guest attributes.
func (s *Server) Fleet() Fleet {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	f := Fleet{Instances: []*compute.Instance{}}
	for _, k := range sortedKeys(s.order, s.instances) {
		in := s.instances[k]
		f.Instances = append(f.Instances, clone(in.res))
		if len(in.guest) > 0 {
			if f.GuestAttributes == nil {
				f.GuestAttributes = map[string][]GuestAttribute{}
			}
			f.GuestAttributes[k] = slices.Clone(in.guest)
		}
	}
	for _, k := range sortedKeys(s.order, s.migs) {
		f.InstanceGroupManagers = append(f.InstanceGroupManagers, s.migView(s.migs[k]))
	}
	return f
}

// Instance returns a copy of the named instance as it is now (read lag
// aside), or false.
func (s *Server) Instance(name string) (*compute.Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	in, ok := s.instances[name]
	if !ok {
		return nil, false
	}
	return clone(in.res), true
}

// SetInstance puts a copy of res into the fleet, replacing any instance of
// its name (output-only fields it lacks are filled in as for a fleet file).
func (s *Server) SetInstance(res *compute.Instance) error {
	if res == nil {
		return errors.New("computefake: SetInstance: nil instance")
	}
	r, err := fleetInstanceRef(res)
	if err != nil {
		return fmt.Errorf("computefake: SetInstance: %v", err)
	}
	res = clone(res)
	res.Name = r.name
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.normalize(res, r); err != nil {
		return fmt.Errorf("computefake: SetInstance: %v", err)
	}
	var guest []GuestAttribute
	if old, ok := s.instances[r.String()]; ok {
		guest = old.guest
	}
	s.put(res, guest)
	return nil
}

// DeleteInstanceNow removes the named instance at once, without an
// operation or an audit entry (its MIG, if any, repairs it).
func (s *Server) DeleteInstanceNow(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(name)
}
