package computefake

import (
	"fmt"
	"time"

	compute "google.golang.org/api/compute/v1"
)

// Effect is one change the fake carried out on an instance, and who made
// it: the simulation's ground truth. The audit log says which calls were
// made; an effect says which of them changed something (a call that failed
// without its effect, or a start of a RUNNING instance, has none; one that
// failed and took effect anyway, now or later, has one, stamped when it
// landed). Randomized simulations check their invariants against Effects,
// never against the records of the code under test.
type Effect struct {
	Time     time.Time
	Instance string // projects/P/zones/Z/instances/I
	// What changed: "insert", "start", "stop", "delete", "setLabels" (a
	// caller's or a person's); "recreateInstances" (a caller flagged the
	// instance for its MIG to recreate); "recreate" (a MIG made the
	// instance again, by itself or flagged); "restart" (Compute Engine's
	// automatic restart); "hostError", "preempted",
	// "terminateOnHostMaintenance" (the platform broke it).
	What string
	// By is the principal: the API's caller (WithCaller), a person's,
	// SystemPrincipal for the platform, the MIG's name for a MIG's recreate.
	By string
	// Labels are the labels a setLabels left.
	Labels map[string]string
}

// Effects returns every effect so far, oldest first.
func (s *Server) Effects() []Effect {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	return append([]Effect(nil), s.effects...)
}

// effect records what changed on instance by principal by. Called with s.mu held.
func (s *Server) effect(instance, what, by string) {
	s.effects = append(s.effects, Effect{Time: s.at(), Instance: instance, What: what, By: by})
}

// actor is who the call being carried out is by: the person of a Person…
// helper, else the API's caller. Called with s.mu held.
func (s *Server) actor() string {
	if s.acting != "" {
		return s.acting
	}
	return s.caller
}

// PersonStart starts the named instance as principal, as PersonStop stops it.
func (s *Server) PersonStart(name, principal string) ([]LogEntry, error) {
	return s.personal("instances.start", name, principal)
}

// PersonRelabel replaces the named instance's labels as principal (opting
// it out, when tpu-autoheal is not among them), as PersonStop stops it.
func (s *Server) PersonRelabel(name, principal string, labels map[string]string) ([]LogEntry, error) {
	if principal == "" || principal == SystemPrincipal {
		return nil, fmt.Errorf("computefake: instances.setLabels as %q: want a person's principal", principal)
	}
	t, err := parseZonal(name, "instances")
	if err != nil {
		return nil, fmt.Errorf("computefake: instances.setLabels: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	in, e := s.lookup(t)
	if e != nil {
		return nil, fmt.Errorf("computefake: instances.setLabels %s: %v", name, e)
	}
	body, err := (&compute.InstancesSetLabelsRequest{Labels: labels, LabelFingerprint: in.res.LabelFingerprint}).MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("computefake: instances.setLabels %s: %v", name, err)
	}
	s.acting = principal
	defer func() { s.acting = "" }()
	op, e := s.setLabels(t, body, nil)
	if e != nil {
		return nil, fmt.Errorf("computefake: instances.setLabels %s: %v", name, e)
	}
	n := len(s.audit)
	s.activityEntry(op, t, instanceResource(t, op.res.TargetId), principal)
	return append([]LogEntry(nil), s.audit[n:]...), nil
}
