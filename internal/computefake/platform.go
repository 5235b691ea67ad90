package computefake

import (
	"fmt"
)

// The platform's part: what Compute Engine and people do to instances
// besides the API's callers. Each helper changes the fleet as Compute Engine
// would, records the audit entries it would write (AuditEntries), and
// returns them; instance names are projects/P/zones/Z/instances/I.

// isSpot reports whether the instance is a Spot (or preemptible) VM.
func isSpot(in *instance) bool {
	sc := in.res.Scheduling
	return sc.ProvisioningModel == "SPOT" || sc.Preemptible
}

// HostError fails the host of the named RUNNING instance: the instance is
// TERMINATED now (lastStopTimestamp set) and the compute.instances.hostError
// system event is returned. Then, as in managed capacity mode:
//   - with automaticRestart (the default, never for Spot VMs) Compute
//     Engine starts it again after the restart delay; an instance of a
//     multi-host slice (a MIG with a workload policy, or instances sharing a
//     resource policy) is restarted with its whole slice, which goes
//     TERMINATED with it;
//   - without, it stays TERMINATED; a MIG it belongs to recreates it (its
//     whole slice for a multi-host one) after the repair delay, unless the
//     MIG is stuck.
func (s *Server) HostError(name string) (LogEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	in, ok := s.instances[name]
	if !ok {
		return LogEntry{}, fmt.Errorf("computefake: HostError: no instance %s", name)
	}
	if in.res.Status != "RUNNING" {
		return LogEntry{}, fmt.Errorf("computefake: HostError: %s is %s, want RUNNING", name, in.res.Status)
	}
	restart := *in.res.Scheduling.AutomaticRestart && !isSpot(in)
	failed := []*instance{in}
	if restart {
		failed = s.sliceOf(in)
	}
	for _, f := range failed {
		if f.res.Status == "TERMINATED" {
			continue
		}
		s.guard(f)
		s.terminated(f)
		s.effect(f.key(), "hostError", SystemPrincipal)
	}
	entry := s.systemEvent(in, "compute.instances.hostError", "Instance terminated by Compute Engine.", nil)
	if restart {
		alive := s.guards(failed)
		s.after(s.restartDelay, func() {
			for i, f := range failed {
				if !alive[i]() || f.res.Status != "TERMINATED" {
					continue
				}
				s.effect(f.key(), "restart", SystemPrincipal)
				s.boot(f, s.delays["start"], func(ok bool) {
					if ok {
						s.systemEvent(f, "compute.instances.automaticRestart", "Instance automatically restarted by Compute Engine.", nil)
					}
				})
			}
		})
	}
	return entry, nil
}

// Preempt preempts the named RUNNING Spot VM and returns the
// compute.instances.preempted system event. Its instanceTerminationAction
// says what happens: STOP (the default) leaves it TERMINATED, DELETE deletes
// it. Compute Engine does not bring a preempted VM back; a MIG does, after
// its repair delay.
func (s *Server) Preempt(name string) (LogEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	in, ok := s.instances[name]
	if !ok {
		return LogEntry{}, fmt.Errorf("computefake: Preempt: no instance %s", name)
	}
	if !isSpot(in) {
		return LogEntry{}, fmt.Errorf("computefake: Preempt: %s is not a Spot VM (scheduling.provisioningModel %s)", name, in.res.Scheduling.ProvisioningModel)
	}
	if in.res.Status != "RUNNING" {
		return LogEntry{}, fmt.Errorf("computefake: Preempt: %s is %s, want RUNNING", name, in.res.Status)
	}
	entry := s.systemEvent(in, "compute.instances.preempted", "Instance was preempted.", nil)
	s.guard(in)
	s.effect(name, "preempted", SystemPrincipal)
	if in.res.Scheduling.InstanceTerminationAction == "DELETE" {
		s.remove(name)
	} else {
		s.terminated(in)
	}
	return entry, nil
}

// PersonStop stops the named instance as principal (a person, through the
// console or gcloud): a stop operation like the API's, whose user is
// principal, and its two v1.compute.instances.stop admin-activity entries:
// the first now, the last stamped when the operation ends (append it to
// what you deliver once the clock has passed its timestamp). The operation's
// name is their operation.id.
func (s *Server) PersonStop(name, principal string) ([]LogEntry, error) {
	return s.personal("instances.stop", name, principal)
}

// PersonDelete deletes the named instance as principal, as PersonStop stops it.
func (s *Server) PersonDelete(name, principal string) ([]LogEntry, error) {
	return s.personal("instances.delete", name, principal)
}

func (s *Server) personal(method, name, principal string) ([]LogEntry, error) {
	if principal == "" || principal == SystemPrincipal {
		return nil, fmt.Errorf("computefake: %s as %q: want a person's principal", method, principal)
	}
	t, err := parseZonal(name, "instances")
	if err != nil {
		return nil, fmt.Errorf("computefake: %s: %v", method, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	var op *operation
	var e *apiError
	s.acting = principal
	switch method {
	case "instances.stop":
		op, e = s.stopInstance(t, nil)
	case "instances.start":
		op, e = s.startInstance(t, nil)
	default:
		op, e = s.deleteInstance(t, nil)
	}
	s.acting = ""
	if e != nil {
		return nil, fmt.Errorf("computefake: %s %s: %v", method, name, e)
	}
	n := len(s.audit)
	s.activityEntry(op, t, instanceResource(t, op.res.TargetId), principal)
	if op.res.Status != "DONE" {
		// The last entry is written when the operation ends; return it now,
		// stamped with that time, so a test can deliver it in order.
		last := s.activity(op, t, instanceResource(t, op.res.TargetId), principal, "v1.compute."+method, false)
		ts, rts := timestamps(op.doneAt)
		last.Timestamp, last.ReceiveTimestamp = ts, rts
		return []LogEntry{s.audit[n], last}, nil
	}
	return append([]LogEntry(nil), s.audit[n:]...), nil
}
