package policy

import (
	"fmt"
	"strings"
	"time"
)

// PauseScope is how much of the fleet a pause covers.
type PauseScope string

// Pause scopes, narrowest last.
const (
	PauseProject PauseScope = "project" // every node of Project
	PauseZone    PauseScope = "zone"    // every node in Zone (of Project, or of every project when Project is "")
	PauseNode    PauseScope = "node"    // the one node Node
)

// Pause is a person's off switch (`autoheal pause`): while a pause covers a
// node, nothing is claimed or mutated for it, by events or sweeps. It lives
// in the ledger until `autoheal resume` removes it.
type Pause struct {
	Scope   PauseScope
	Project string // project scope and zone scope ("" with zone scope = every project)
	Zone    string // zone scope
	Node    string // node scope: full resource name
	Reason  string
	By      string // who paused (a person's account, or what they typed)
	Since   time.Time
}

// Covers reports whether the pause applies to node (a full resource name
// projects/P/locations/Z/nodes/N).
func (p Pause) Covers(node string) bool {
	project, zone := NodeProjectZone(node)
	switch p.Scope {
	case PauseNode:
		return p.Node == node
	case PauseZone:
		return p.Zone == zone && (p.Project == "" || p.Project == project)
	case PauseProject:
		return p.Project == project
	}
	return false
}

// What says what the pause covers, for people.
func (p Pause) What() string {
	switch p.Scope {
	case PauseNode:
		return "node " + p.Node
	case PauseZone:
		if p.Project == "" {
			return "zone " + p.Zone + " (every project)"
		}
		return "zone " + p.Zone + " of project " + p.Project
	case PauseProject:
		return "project " + p.Project
	}
	return string(p.Scope)
}

// Why is the reason a paused decision or claim gives; it starts with
// "paused by".
func (p Pause) Why() string {
	by := p.By
	if by == "" {
		by = "someone"
	}
	return fmt.Sprintf("paused by %s: %s (%s since %s; `autoheal resume` lifts it)",
		by, p.Reason, p.What(), p.Since.UTC().Format(time.RFC3339))
}

// PausedError is what Store.Claim returns while a pause covers the node. Its
// Error() starts with "paused by"; errors.Is(err, ErrPaused) holds.
type PausedError struct{ Pause Pause }

func (e *PausedError) Error() string { return e.Pause.Why() }

// Is makes errors.Is(err, ErrPaused) true.
func (e *PausedError) Is(target error) bool { return target == ErrPaused }

// ErrPaused matches every *PausedError.
var ErrPaused = fmt.Errorf("paused")

// NodeProjectZone splits projects/P/locations/Z/nodes/N into P and Z ("" for
// a name of another shape).
func NodeProjectZone(node string) (project, zone string) {
	parts := strings.Split(node, "/")
	if len(parts) != 6 || parts[0] != "projects" || parts[2] != "locations" || parts[4] != "nodes" {
		return "", ""
	}
	return parts[1], parts[3]
}

// pausedDecision turns a decision that would mutate the node (recreate,
// reset, prepare, maintain) into a skip while the pause covers it. The skip
// is looked at again later (Due), so a node paused in the middle of an
// incident is healed once the pause is lifted, without waiting for a sweep
// to list its zone. Every other decision (record, defer, reject, skip) is
// kept: it mutates nothing.
func pausedDecision(d Decision, p Pause, now time.Time) Decision {
	switch d.Action {
	case ActionRecreate, ActionReset, ActionPrepare, ActionMaintain:
	default:
		return d
	}
	due := now.Add(maxInFlightWait)
	return Decision{
		Action: ActionSkip,
		Due:    due,
		Reason: fmt.Sprintf("%s; would %s: %s; look again at %s", p.Why(), d.Action, d.Reason, due.UTC().Format(time.RFC3339)),
	}
}

// RecoveryAge is how long rec has been under way at now, the time it was
// paused not counted: what MaxRecoveryAge bounds.
func RecoveryAge(rec Recovery, now time.Time) time.Duration {
	return now.Sub(rec.StartedAt) - rec.Paused
}

// PausedTime is how long p held rec back by now: from the later of the
// pause and the recovery's start. The store adds it to Recovery.Paused
// when p is lifted (ClearPause).
func PausedTime(p Pause, rec Recovery, now time.Time) time.Duration {
	from := p.Since
	if rec.StartedAt.After(from) {
		from = rec.StartedAt
	}
	if d := now.Sub(from); d > 0 {
		return d
	}
	return 0
}

// ClearedPauseTime is what clearing p adds to rec.Paused at now: the time
// p held rec back that no pause still standing over rec (standing) also
// held. Every moment counts once however many pauses overlap it: a
// standing pause adds its own span when it is cleared in turn.
func ClearedPauseTime(p Pause, standing []Pause, rec Recovery, now time.Time) time.Duration {
	end := now
	for _, q := range standing {
		if !q.Covers(rec.Node) {
			continue
		}
		from := q.Since
		if rec.StartedAt.After(from) {
			from = rec.StartedAt
		}
		if from.Before(end) {
			end = from
		}
	}
	return PausedTime(p, rec, end)
}

// DeletedWhilePaused reports whether rec has sent its node's delete (the
// node is gone, or going) and not yet created it again: a pause covering
// it leaves the node deleted until `autoheal resume`, so status lists it
// first and every sweep writes a WARNING record about it.
func DeletedWhilePaused(rec *Recovery) bool {
	if rec == nil || !rec.Unfinished() || rec.Action == ActionReset || queuePhase(rec.Phase) {
		return false // queued: Google's queue goes on provisioning it (queue.go)
	}
	switch rec.Phase {
	case PhaseDeleted, PhaseCreating, PhaseCreated:
		return true
	}
	return rec.DeleteSent
}

// PausedDeletedReason says that rec's node was deleted by the recovery and
// stays deleted while p stands.
func PausedDeletedReason(rec Recovery, p Pause, now time.Time) string {
	return fmt.Sprintf("node deleted by recovery gen %d (phase %s) and left deleted while paused: it is created again only after `autoheal resume`; paused %s so far, not counted toward the recovery's %s bound",
		rec.Generation, rec.Phase, roundDur(PausedTime(p, rec, now)), MaxRecoveryAge)
}
