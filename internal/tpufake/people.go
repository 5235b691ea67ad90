package tpufake

import (
	"fmt"
	"maps"
	"time"

	tpu "google.golang.org/api/tpu/v2"
)

// People acting outside the caller: a person deletes a node, recreates it
// (a new node id under the same name), relabels it, stops it, starts its
// maintenance, or deletes a queued resource. Each act runs as a
// long-running operation of that person, audited under their principal
// (audit.go) unless NoAudit says the entry never reached the log, and is
// never failed by a FailRule (nor counted by Succeeded). An act runs now
// (Server.Act), at a time on the server's clock (Server.ActAt), or right
// after a call a FailRule matches (FailRule.Person): between two of the
// caller's steps.

// ActKind is what a person does.
type ActKind int

// Acts.
const (
	ActNone ActKind = iota
	// ActDelete deletes the node: DELETING for After, then gone.
	ActDelete
	// ActRecreate deletes the node and creates it again under the same
	// name from its spec: a new node id, CREATING for After, then READY and
	// HEALTHY, without upcomingMaintenance; Labels, when not nil, replace
	// its labels.
	ActRecreate
	// ActRelabel replaces the node's labels with Labels.
	ActRelabel
	// ActStop stops the node: STOPPING for After, then STOPPED.
	ActStop
	// ActStartMaintenance puts the node in maintenance (its notice ONGOING,
	// one made up if it had none) for After, then READY and HEALTHY; After
	// 0 means until EndMaintenance.
	ActStartMaintenance
	// ActDeleteQueuedResource deletes the queued resource Target and its
	// nodes: DELETING for After, then gone.
	ActDeleteQueuedResource
)

var actNames = [...]string{"none", "delete", "recreate", "relabel", "stop", "start-maintenance", "delete-queued-resource"}

func (k ActKind) String() string {
	if k >= 0 && int(k) < len(actNames) {
		return actNames[k]
	}
	return "act(?)"
}

// DefaultPerson is the principal of an act that names none.
const DefaultPerson = "alice@example.com"

// Act is one thing a person does.
type Act struct {
	Kind ActKind
	// Target is the node's (or queued resource's) full name; on a
	// FailRule's Person, "" means the request's.
	Target string
	// Principal is who acts (default DefaultPerson).
	Principal string
	// NoAudit: the act writes no audit entry (it never reached the log).
	NoAudit bool
	// Labels: ActRelabel's new labels; ActRecreate's when not nil.
	Labels map[string]string
	// After is how long the act's operation takes (see the kinds).
	After time.Duration
}

func (a Act) String() string {
	s := fmt.Sprintf("%s %s by %s", a.Kind, a.Target, a.principal())
	if a.After > 0 {
		s += fmt.Sprintf(" taking %v", a.After)
	}
	if a.NoAudit {
		s += " (no audit entry)"
	}
	return s
}

func (a Act) principal() string {
	if a.Principal == "" {
		return DefaultPerson
	}
	return a.Principal
}

// Act carries a out now and returns the audit entries it wrote at once (the
// first of each operation; the last too when the operation ended at once;
// none with NoAudit). An act on a resource that does not exist (or, for
// ActStartMaintenance, a node already in maintenance) is an error.
func (s *Server) Act(a Act) ([]AuditEntry, error) {
	s.runDue()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	var got []AuditEntry
	s.audit.capture = &got
	defer func() { s.audit.capture = nil }()
	if err := s.act(a); err != nil {
		return nil, err
	}
	return got, nil
}

// ActAt makes a happen at t on the server's clock: the first request (or
// Fleet, AuditLog, Act) at or after t carries it out first. Its errors are
// dropped: the resource may well be gone by then, as it would for a person.
func (s *Server) ActAt(t time.Time, a Act) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deferAt(t, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		_ = s.act(a)
	})
}

// personAfter carries out a FailRule's act after its request. Called
// without s.mu.
func (s *Server) personAfter(a *Act, rt route) {
	if a == nil {
		return
	}
	act := *a
	s.mu.Lock()
	defer s.mu.Unlock()
	if act.Target == "" {
		act.Target = rt.name
		if op := s.ops[rt.name]; rt.rpc == "operations.get" && op != nil {
			act.Target = op.target
		}
	}
	_ = s.act(act)
}

// act carries a out. Called with s.mu held.
func (s *Server) act(a Act) error {
	who := a.principal()
	var n *tpu.Node
	if a.Kind != ActDeleteQueuedResource {
		var ok bool
		if n, ok = s.nodes[a.Target]; !ok {
			return notFound(a.Target)
		}
	}
	switch a.Kind {
	case ActDelete:
		s.personDelete(a, who, n, a.After)
	case ActRecreate:
		spec := clone(n)
		s.personDelete(a, who, n, 0)
		if a.Labels != nil {
			spec.Labels = maps.Clone(a.Labels)
		}
		create := s.personOp("nodes.create", "create", a, who)
		s.startNode(a.Target, spec, "")
		s.launchPerson(create, a.After)
	case ActRelabel:
		op := s.personOp("nodes.patch", "update", a, who)
		op.prevMetadata = n.Metadata
		s.touch(a.Target)
		n.Labels = maps.Clone(a.Labels)
		s.launchPerson(op, 0)
	case ActStop:
		op := s.personOp("nodes.stop", "stop", a, who)
		s.touch(a.Target)
		n.State, n.Health = "STOPPING", ""
		s.launchPerson(op, a.After)
	case ActStartMaintenance:
		s.maint.init()
		if _, busy := s.maint.inMaint[a.Target]; busy {
			return errorf("FAILED_PRECONDITION", "node '%s' is in maintenance already", a.Target)
		}
		op := s.personOp("nodes.performMaintenance", "performMaintenance", a, who)
		s.startMaintenance(op, []string{a.Target})
		if a.After > 0 {
			s.launchPerson(op, a.After)
		} else {
			s.auditFirst(op) // until EndMaintenance
		}
	case ActDeleteQueuedResource:
		q, ok := s.qrs[a.Target]
		if !ok {
			return notFound(a.Target)
		}
		op := s.personOp("queuedResources.delete", "delete", a, who)
		s.touchQR(a.Target)
		q.State = &tpu.QueuedResourceState{State: "DELETING", StateInitiator: "USER"}
		for name, n := range s.nodes {
			if n.QueuedResource == a.Target {
				s.touch(name)
				n.State = "DELETING"
			}
		}
		s.launchPerson(op, a.After)
	default:
		return errorf("INVALID_ARGUMENT", "tpufake: unknown act %v", a.Kind)
	}
	return nil
}

// personDelete starts a's delete of node n, done after d. Called with
// s.mu held.
func (s *Server) personDelete(a Act, who string, n *tpu.Node, d time.Duration) {
	op := s.personOp("nodes.delete", "delete", a, who)
	op.prevState, op.nodeID = n.State, n.Id
	s.touch(a.Target)
	n.State = "DELETING"
	s.launchPerson(op, d)
}

// personOp is a person's operation on a.Target. Called with s.mu held.
func (s *Server) personOp(rpc, verb string, a Act, who string) *operation {
	op := s.newOperation(rpc, verb, a.Target)
	op.person = who
	op.silent = a.NoAudit
	if !op.doneAt.IsZero() { // WithOperationDelay is for the caller's operations
		op.doneAt = time.Time{}
		delete(s.timed, op)
	}
	return op
}

// launchPerson starts a person's operation, done after d (0: at once).
// Called with s.mu held.
func (s *Server) launchPerson(op *operation, d time.Duration) {
	s.auditFirst(op)
	if d <= 0 {
		s.finish(op, nil)
		return
	}
	op.doneAt = s.now().Add(d)
	s.timed[op] = struct{}{}
}
