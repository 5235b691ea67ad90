package events

import "fmt"

// Routes says what an entry point does with each kind of entry. The
// function and replay both hand every accepted entry to Route, so which
// kinds there are, and that each goes to its own path, is decided once.
type Routes struct {
	Node     func(Event) error // KindNode: a node's terminate or restart
	Evidence func(Event) error // KindAdminActivity: who created or deleted a node
	Instance func(Event) error // KindInstance: a Compute Engine VM that is no TPU worker
	ZoneHint func(Event) error // KindZoneHint: a Compute Engine entry about a TPU worker VM
}

// Route calls the route of ev's kind. A kind without a route is an error
// (a new kind that an entry point has not been taught), never a silent
// fall-through to another kind's path.
func Route(ev Event, r Routes) error {
	var route func(Event) error
	switch ev.Kind {
	case KindNode:
		route = r.Node
	case KindAdminActivity:
		route = r.Evidence
	case KindInstance:
		route = r.Instance
	case KindZoneHint:
		route = r.ZoneHint
	}
	if route == nil {
		return fmt.Errorf("no route for %q entries (%s)", ev.Kind, ev.InsertID)
	}
	return route(ev)
}
