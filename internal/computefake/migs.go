package computefake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	compute "google.golang.org/api/compute/v1"
)

// Managed instance groups in the simulated Compute Engine. A MIG's members
// are the instances whose metadata created-by names it (as on Compute
// Engine, where the MIG writes that key), fixed when the fleet is loaded.
// A member that becomes TERMINATED or disappears, for whatever reason, is
// repaired: after the repair delay the MIG recreates it under the same name
// (a new id, the spec it was created with), unless the MIG is stuck, in which
// case listManagedInstances shows it RECREATING with a stockout as its last
// attempt's error, forever, until instanceGroupManagers.recreateInstances
// (which works on a stuck MIG too) or SetMIGStuck(…, false). A MIG with a
// workload policy (resourcePolicies.workloadPolicy) is a multi-host slice:
// whatever repairs or recreates one of its instances recreates all of them.

// mig is one zonal managed instance group.
type mig struct {
	res        *compute.InstanceGroupManager
	name       ref
	members    []string                     // instance names, in order
	specs      map[string]*compute.Instance // member → the spec it is recreated from
	stuck      bool
	recreating map[string]bool // member → a recreate under way
	repairDue  bool            // a repair is scheduled
}

// slice reports whether the MIG is a multi-host slice.
func (m *mig) slice() bool {
	return m.res.ResourcePolicies != nil && m.res.ResourcePolicies.WorkloadPolicy != ""
}

func (m *mig) instanceName(member string) string {
	return InstanceName(m.name.project, m.name.zone, member)
}

// migOf is the MIG the instance named key belongs to, nil if none.
// Called with s.mu held.
func (s *Server) migOf(key string) *mig {
	r, err := parseZonal(key, "instances")
	if err != nil {
		return nil
	}
	for _, m := range s.migs {
		if m.name.project == r.project && m.name.zone == r.zone && slices.Contains(m.members, r.name) {
			return m
		}
	}
	return nil
}

// createdBy parses an instance's created-by metadata into the MIG it names:
// projects/P/zones/Z/instanceGroupManagers/M, P a project id or number.
func createdBy(res *compute.Instance) (ref, bool, error) {
	v, ok := metadataValue(res, "created-by")
	if !ok {
		return ref{}, false, nil
	}
	r, err := parseZonal(v, "instanceGroupManagers")
	return r, true, err
}

func migResource(t ref, id uint64) LogResource {
	return LogResource{Type: "gce_instance_group_manager", Labels: map[string]string{
		"instance_group_manager_id":   strconv.FormatUint(id, 10),
		"instance_group_manager_name": t.name,
		"location":                    t.zone,
		"project_id":                  t.project,
	}}
}

// broken reports whether member needs repairing: TERMINATED or absent, not
// in maintenance. Called with s.mu held.
func (s *Server) broken(m *mig, member string) bool {
	in, ok := s.instances[m.instanceName(member)]
	return !ok || in.res.Status == "TERMINATED" && !in.inMaint
}

// brokenMember tells the instance's MIG, if any, that it may need a repair.
// Called with s.mu held.
func (s *Server) brokenMember(key string) {
	m := s.migOf(key)
	if m == nil || m.stuck || m.repairDue || m.recreating[lastSegment(key)] {
		return
	}
	m.repairDue = true
	s.after(s.repairDelay, func() {
		m.repairDue = false
		if m.stuck {
			return
		}
		var due []string
		for _, member := range m.members {
			if !m.recreating[member] && s.broken(m, member) {
				due = append(due, member)
			}
		}
		if len(due) == 0 {
			return
		}
		if m.slice() {
			due = slices.Clone(m.members)
		}
		s.recreate(m, due)
	})
}

// recreate recreates the members: a running one is deleted first (the
// "delete" delay), then each is created again from its spec (the "insert"
// delay) with a new id. Called with s.mu held.
func (s *Server) recreate(m *mig, members []string) {
	for _, member := range members {
		if m.recreating[member] {
			continue
		}
		m.recreating[member] = true
		key := m.instanceName(member)
		create := func() {
			spec := clone(m.specs[member])
			spec.Id, spec.Status, spec.CreationTimestamp = 0, "", ""
			spec.LastStartTimestamp, spec.LastStopTimestamp, spec.ResourceStatus = "", "", nil
			if err := s.normalize(spec, m.name.withInstance(member)); err != nil {
				panic(fmt.Sprintf("computefake: MIG %s: recreate %s: %v", m.name, member, err))
			}
			in := s.put(spec, nil)
			s.effect(key, "recreate", m.name.String())
			s.boot(in, s.delays["insert"], func(bool) { delete(m.recreating, member) })
		}
		in, ok := s.instances[key]
		if !ok {
			create()
			continue
		}
		alive := s.guard(in)
		if in.res.Status != "TERMINATED" {
			s.setStatus(in, "STOPPING")
		}
		s.after(s.delays["delete"], func() {
			if alive() {
				delete(s.instances, key)
			}
			if _, taken := s.instances[key]; !taken {
				create()
			} else {
				delete(m.recreating, member)
			}
		})
	}
}

// withInstance is the instance member of the MIG's zone.
func (r ref) withInstance(member string) ref {
	return ref{project: r.project, zone: r.zone, collection: "instances", name: member}
}

// lookupMIG finds the MIG t names. Called with s.mu held.
func (s *Server) lookupMIG(t ref) (*mig, *apiError) {
	m, ok := s.migs[t.String()]
	if !ok {
		return nil, notFound(t.String())
	}
	return m, nil
}

// currentAction is what the MIG is doing with member, and its last
// attempt's error (a stuck MIG's stockout).
func (s *Server) currentAction(m *mig, member string) (string, *compute.ManagedInstanceLastAttempt) {
	switch {
	case m.recreating[member]:
		return "RECREATING", nil
	case m.stuck && s.broken(m, member):
		return "RECREATING", &compute.ManagedInstanceLastAttempt{Errors: &compute.ManagedInstanceLastAttemptErrors{
			Errors: []*compute.ManagedInstanceLastAttemptErrorsErrors{{
				Code:    string(ZoneResourcePoolExhausted),
				Message: fmt.Sprintf("The zone '%s' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.", zonePath(m.name.project, m.name.zone)),
			}},
		}}
	}
	return "NONE", nil
}

func (s *Server) getMIG(t ref) (*compute.InstanceGroupManager, *apiError) {
	m, e := s.lookupMIG(t)
	if e != nil {
		return nil, e
	}
	return s.migView(m), nil
}

// migView is the MIG as get answers it, its counts current. Called with s.mu held.
func (s *Server) migView(m *mig) *compute.InstanceGroupManager {
	res := clone(m.res)
	res.TargetSize = int64(len(m.members))
	acts := &compute.InstanceGroupManagerActionsSummary{}
	for _, member := range m.members {
		switch a, _ := s.currentAction(m, member); a {
		case "RECREATING":
			acts.Recreating++
		default:
			acts.None++
		}
	}
	res.CurrentActions = acts
	if res.Status == nil {
		res.Status = &compute.InstanceGroupManagerStatus{}
	}
	res.Status.IsStable = acts.Recreating == 0
	res.Status.ForceSendFields = []string{"IsStable"}
	return res
}

func (s *Server) listManagedInstances(t ref, maxResults, tok string, fail *FailRule) (*compute.InstanceGroupManagersListManagedInstancesResponse, *apiError) {
	m, e := s.lookupMIG(t)
	if e != nil {
		return nil, e
	}
	var all []*compute.ManagedInstance
	for _, member := range m.members {
		mi := &compute.ManagedInstance{Instance: selfLink(m.instanceName(member)), Name: member}
		if in, ok := s.instances[m.instanceName(member)]; ok {
			mi.Id, mi.InstanceStatus = in.res.Id, in.res.Status
		}
		mi.CurrentAction, mi.LastAttempt = s.currentAction(m, member)
		if m.res.InstanceTemplate != "" {
			mi.Version = &compute.ManagedInstanceVersion{InstanceTemplate: m.res.InstanceTemplate}
		}
		all = append(all, mi)
	}
	resp := &compute.InstanceGroupManagersListManagedInstancesResponse{}
	if m.res.ListManagedInstancesResults != "PAGINATED" {
		// "The pageToken query parameter is supported only if the group's
		// listManagedInstancesResults field is set to PAGINATED."
		if tok != "" {
			return nil, invalid("pageToken", tok, "The group's listManagedInstancesResults is PAGELESS.")
		}
		resp.ManagedInstances = all
		return resp, nil
	}
	size, e := pageSize(maxResults, s.pageSize)
	if e != nil {
		return nil, e
	}
	index := map[*compute.ManagedInstance]int{}
	for i, mi := range all {
		index[mi] = i + 1
	}
	page, next, e := paginate(all, func(mi *compute.ManagedInstance) int { return index[mi] }, tok, size, pageFault(fail))
	if e != nil {
		return nil, e
	}
	resp.ManagedInstances, resp.NextPageToken = page, next
	return resp, nil
}

func (s *Server) recreateInstances(t ref, body []byte, fail *FailRule) (*operation, *apiError) {
	m, e := s.lookupMIG(t)
	if e != nil {
		return nil, e
	}
	var req compute.InstanceGroupManagersRecreateInstancesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, errorf(http.StatusBadRequest, "parseError", "Invalid JSON payload received: %v", err)
	}
	if len(req.Instances) == 0 {
		return nil, invalid("instances", "", "At least one instance must be given.")
	}
	var members []string
	for i, u := range req.Instances {
		r, err := parseZonal(u, "instances")
		if p := trimURL(u); err != nil {
			// A partial URL zones/Z/instances/I names the MIG's project.
			if r2, err2 := parseZonal("projects/"+t.project+"/"+p, "instances"); err2 == nil {
				r, err = r2, nil
			}
		}
		if err != nil || r.project != t.project || r.zone != t.zone || !slices.Contains(m.members, r.name) {
			return nil, invalid(fmt.Sprintf("instances[%d]", i), u, fmt.Sprintf("The instance is not a member of '%s'.", t))
		}
		members = append(members, r.name)
	}
	op := s.newOperation("instanceGroupManagers.recreateInstances", t, m.res.Id, fail)
	if op.applies() {
		// "Flags the specified VM instances … to be immediately recreated.
		// This operation is marked as DONE when the flag is set even if the
		// instances have not yet been recreated." A multi-host slice is
		// recreated as a whole.
		if m.slice() {
			members = slices.Clone(m.members)
		}
		for _, member := range members {
			s.effect(m.instanceName(member), "recreateInstances", s.actor())
		}
		s.recreate(m, members)
	}
	return s.launch(op, s.delays["recreateInstances"], nil), nil
}

// SetMIGStuck makes the named MIG stop (true) or resume (false) repairing
// its instances. A MIG that resumes repairs what broke meanwhile, after the
// repair delay.
func (s *Server) SetMIGStuck(name string, stuck bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	m, ok := s.migs[name]
	if !ok {
		return fmt.Errorf("computefake: SetMIGStuck: no MIG %s", name)
	}
	m.stuck = stuck
	if !stuck {
		for _, member := range m.members {
			if s.broken(m, member) {
				s.brokenMember(m.instanceName(member))
				break
			}
		}
	}
	return nil
}

// sliceOf is the instances recovered and maintained with in: its MIG's when
// that MIG is a multi-host slice, else every instance of its zone sharing one
// of its resource policies (the fake cannot tell a workload policy from
// another kind and treats every shared policy as one), else in alone.
// Called with s.mu held.
func (s *Server) sliceOf(in *instance) []*instance {
	if m := s.migOf(in.key()); m != nil && m.slice() {
		var out []*instance
		for _, member := range m.members {
			if x, ok := s.instances[m.instanceName(member)]; ok {
				out = append(out, x)
			}
		}
		return out
	}
	if len(in.res.ResourcePolicies) == 0 {
		return []*instance{in}
	}
	mine := map[string]bool{}
	for _, p := range in.res.ResourcePolicies {
		mine[trimURL(p)] = true
	}
	var out []*instance
	for _, k := range sortedKeys(s.order, s.instances) {
		x := s.instances[k]
		if x.name.project != in.name.project || x.name.zone != in.name.zone {
			continue
		}
		for _, p := range x.res.ResourcePolicies {
			if mine[trimURL(p)] {
				out = append(out, x)
				break
			}
		}
	}
	return out
}
