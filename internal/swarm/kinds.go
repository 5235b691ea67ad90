package swarm

import (
	"slices"
	"strings"

	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// Kind names one kind of fault the simulation can inject. Every drawn fault
// is of exactly one kind, and a seed draws only from the kinds it is given,
// so a kind that breaks an invariant of the engine can be left out of CI
// (see Enabled) until the engine is fixed, and turned on by one line.
type Kind string

// Kinds. The ambiguous ones are a mutating call (or its long-running
// operation) that fails and takes effect anyway: now, later, after the
// caller's deadline, with its answer lost, or half-way.
const (
	AmbiguousDelete      Kind = "ambiguous-delete"      // nodes.delete and its operation
	AmbiguousCreate      Kind = "ambiguous-create"      // nodes.create and its operation
	AmbiguousPatch       Kind = "ambiguous-patch"       // nodes.patch (maintenance notices) and its operation
	AmbiguousMaintenance Kind = "ambiguous-maintenance" // nodes.performMaintenance and its operation
	Errors               Kind = "errors"                // clean transient failures of any call
	Lag                  Kind = "lag"                   // a read answers the state of up to 5 min ago
	PageRepeat           Kind = "page-repeat"           // a page's nextPageToken is its own token
	PageLoop             Kind = "page-loop"             // the last page's token names the first page (sometimes forever)
	PageSkip             Kind = "page-skip"             // a token passes over a page
	PageEmpty            Kind = "page-empty"            // an empty page with a token
	PersonDelete         Kind = "person-delete"         // a person deletes a node
	PersonRecreate       Kind = "person-recreate"       // a person deletes and recreates a node (new id, maybe new labels)
	PersonRelabel        Kind = "person-relabel"        // a person replaces a node's labels (opting it out)
	PersonStop           Kind = "person-stop"           // a person stops a node
	PersonMaintenance    Kind = "person-maintenance"    // a person starts a node's maintenance
	PersonPause          Kind = "person-pause"          // a person pauses a node or a zone (autoheal pause) and resumes it later
	Unaudited            Kind = "unaudited"             // some people's audit entries never reach the function
	LedgerAbort          Kind = "ledger-abort"          // a ledger write fails and did nothing (an aborted transaction)
	LedgerLostCommit     Kind = "ledger-lost-commit"    // a ledger write took effect and its answer was lost
	Forged               Kind = "forged"                // entries from a log that is not the audit log
	Stockout             Kind = "stockout"              // a zone or node without capacity for a while (capacity.go), or a quota refusal
	QueueFail            Kind = "queue-fail"            // a waiting queued resource of ours SUSPENDED
	ZoneMove             Kind = "zone-move"             // nodes draw autoheal-stockout zones:…, some specs pinned to their zone (zones.go)
)

// AllKinds is every kind, in the order they are reported.
var AllKinds = []Kind{
	AmbiguousDelete, AmbiguousCreate, AmbiguousPatch, AmbiguousMaintenance,
	Errors, Lag,
	PageRepeat, PageLoop, PageSkip, PageEmpty,
	PersonDelete, PersonRecreate, PersonRelabel, PersonStop, PersonMaintenance, PersonPause, Unaudited,
	LedgerAbort, LedgerLostCommit,
	Forged,
	Stockout, QueueFail, ZoneMove,
}

// Enabled is the kinds the default run (go test ./... and CI) draws from:
// every kind the engine keeps the invariants under. A kind left out here
// breaks one today; its failing seeds and why are written down where the
// lead tracks them. To turn one on, add it here.
var Enabled = []Kind{
	AmbiguousDelete, AmbiguousCreate, AmbiguousPatch, AmbiguousMaintenance,
	Errors, Lag,
	PageRepeat, PageLoop, PageSkip, PageEmpty,
	PersonDelete, PersonRecreate, PersonRelabel, PersonStop, PersonMaintenance, PersonPause, Unaudited,
	LedgerAbort, LedgerLostCommit,
	Forged,
	Stockout, QueueFail, ZoneMove,
	// ZoneMove is on since it went in: seeds 1–3000 keep the invariants
	// with nodes moved between the fleet's two zones (zones.go).
	// Stockout and QueueFail are on since seeds 1656 and 2879 of -kinds
	// all keep the invariants: 1656's check took a person's recreate
	// (our labels copied) of the node our queued resource made for our
	// direct create's node; 2879's create, its answer lost, read the node
	// CREATING without our label (a person relabelled it) and closed as
	// someone else's — a CREATING node is no longer judged. Seeds 109 and
	// 5 were fixed before (the queue reads the node before its first
	// queued resource; an opt-out read while our create runs does not
	// close the recovery).
	// PersonDelete is on since a paused look that sees the create finished
	// (READY with our generation label) keeps that in the ledger: a
	// person's delete during the pause, its audit entry lost, no longer
	// makes the node a second time after the resume (seed 802 of -kinds
	// all). PersonStop, PersonRelabel, PersonMaintenance and
	// PersonRecreate are on since a recovery whose delete was sent is no
	// longer closed on one read; AmbiguousDelete and the page kinds since
	// the evidence and bounds work (TestSwarmRegressions).
}

// ParseKinds reads a comma-separated list of kinds; "all" is AllKinds and
// "default" Enabled.
func ParseKinds(s string) ([]Kind, error) {
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		switch f = strings.TrimSpace(f); f {
		case "":
		case "all":
			out = append(out, AllKinds...)
		case "default":
			out = append(out, Enabled...)
		default:
			if !slices.Contains(AllKinds, Kind(f)) {
				return nil, &unknownKindError{f}
			}
			out = append(out, Kind(f))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

type unknownKindError struct{ kind string }

func (e *unknownKindError) Error() string {
	names := make([]string, len(AllKinds))
	for i, k := range AllKinds {
		names[i] = string(k)
	}
	return "unknown fault kind " + e.kind + " (want all, default, or some of " + strings.Join(names, ",") + ")"
}

// kindOf is the kind of a rule tpufake.Draw drew.
func kindOf(r tpufake.FailRule) Kind {
	switch {
	case r.Person != nil:
		return personKind(r.Person.Kind)
	case r.Page != tpufake.PageNone:
		return map[tpufake.PageFault]Kind{
			tpufake.PageRepeat: PageRepeat, tpufake.PageLoopToFirst: PageLoop,
			tpufake.PageSkip: PageSkip, tpufake.PageEmpty: PageEmpty,
		}[r.Page]
	case r.Stale > 0:
		return Lag
	case r.Effect != tpufake.EffectNone || r.Lost || r.Malformed || r.Drop || r.Hang:
		switch strings.TrimPrefix(r.RPC, "operation:") {
		case "nodes.delete":
			return AmbiguousDelete
		case "nodes.create":
			return AmbiguousCreate
		case "nodes.patch":
			return AmbiguousPatch
		default:
			return AmbiguousMaintenance
		}
	}
	return Errors
}

func personKind(k tpufake.ActKind) Kind {
	switch k {
	case tpufake.ActDelete, tpufake.ActDeleteQueuedResource:
		return PersonDelete
	case tpufake.ActRecreate:
		return PersonRecreate
	case tpufake.ActRelabel:
		return PersonRelabel
	case tpufake.ActStop:
		return PersonStop
	default:
		return PersonMaintenance
	}
}
