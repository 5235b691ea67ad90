package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

// Evidence, never inference from one read.
//
// Once a recovery has sent its delete it owns every outcome of it: a node
// later NOT FOUND or DELETING is its own doing, whatever the delete's
// answer was (an error, a lost answer, a deadline), and it goes on to
// create from the saved spec. A person's delete is known only from
// evidence: the admin-activity audit entry of that delete (the sink routes
// them; Handler.Evidence keeps those about a node with an unfinished
// recovery in the ledger, Store.KeepEvidence). An entry is ours when its
// operation is one this recovery started (SentOps) or its principal is
// Config.Actor; a person's otherwise. After a delete whose outcome was
// ambiguous the recovery waits Config.EvidenceWait for such an entry
// before it creates.
//
// A create is finished when its operation succeeded or the node was seen
// READY with our generation label. A node that vanishes before that is a
// failed create (created again), unless a person's delete of it is in
// evidence; after it, NOT FOUND is a person's delete: the recovery waits
// EvidenceWait for the entry to name, then closes, never creating twice.

// evidenceWait is Config.EvidenceWait, or DefaultEvidenceWait.
func evidenceWait(cfg Config) time.Duration {
	if cfg.EvidenceWait > 0 {
		return cfg.EvidenceWait
	}
	return DefaultEvidenceWait
}

// deleteAmbiguous reports whether a delete rec sent may have taken effect
// with no operation of ours to show for it.
func deleteAmbiguous(rec Recovery) bool {
	return rec.DeleteUnanswered || !rec.DeleteAnswered
}

// opID is an operation's id, the last segment of its name: an audit
// entry's operation.id and an API answer may differ in their prefix.
func opID(op string) string {
	return op[strings.LastIndexByte(op, '/')+1:]
}

// OurEntry reports whether e is of an operation rec started, or by the
// identity the recovery acts as.
func OurEntry(rec Recovery, e Evidence, cfg Config) bool {
	if cfg.Actor != "" && strings.EqualFold(e.Principal, cfg.Actor) {
		return true
	}
	if e.Principal != "" && slices.ContainsFunc(rec.Actors, func(a string) bool { return strings.EqualFold(a, e.Principal) }) {
		return true // a call another process of ours sent (replay, then the function)
	}
	if e.OperationID == "" {
		return false
	}
	return slices.ContainsFunc(rec.SentOps, func(op string) bool { return opID(op) == opID(e.OperationID) })
}

// personsDelete is the first kept entry of a delete of the node (change:
// delete-node or delete-queued-resource) at or after since that is not
// ours, nil when there is none. An entry of a delete refused, or whose
// operation ended in error, shows no delete. unattributable says whether
// an entry matched by neither operation nor principal may still be ours
// (a delete of ours whose operation we never learned, with no Actor
// configured): such entries then show nothing.
func personsDelete(rec Recovery, change events.Change, since time.Time, cfg Config, unattributable bool) *Evidence {
	for i := range rec.Evidence {
		e := &rec.Evidence[i]
		if e.Change != change || e.Code != 0 || e.Time.Before(since) || OurEntry(rec, *e, cfg) {
			continue
		}
		if unattributable && cfg.Actor == "" {
			continue
		}
		return e
	}
	return nil
}

// describeEvidence names an entry in a record: who, when, which operation.
func describeEvidence(e *Evidence) string {
	s := fmt.Sprintf("%s at %s", e.Principal, e.Time.UTC().Format(time.RFC3339))
	if e.OperationID != "" {
		s += " (operation " + e.OperationID + ")"
	}
	if e.InsertID != "" {
		s += ", audit entry " + e.InsertID
	}
	return s
}

// EvidenceOf is what an admin-activity event says, as the ledger keeps it.
func EvidenceOf(ev events.Event) Evidence {
	e := Evidence{InsertID: ev.InsertID, Principal: ev.Principal, Time: ev.Time}
	if a := ev.Admin; a != nil {
		e.Change, e.OperationID, e.Last, e.Code, e.QueuedResource = a.Change, a.OperationID, a.Last, a.Code, a.QueuedResource
	}
	return e
}

// changeSeenReady marks an entry the recovery keeps itself, no audit
// entry: its node was seen READY with its generation label.
const changeSeenReady events.Change = "autoheal-seen-ready"

// seenReady is the entry a paused look keeps when it sees rec's create
// finished (phase creating, the node READY with our generation label):
// a paused recovery is not claimed and so not advanced, and without it a
// person's delete during the pause, its audit entry lost, would read as a
// failed create after the resume and the node be created twice. nil when
// there is nothing to keep, or it is kept already.
func seenReady(rec *Recovery, node *tpu.Node, now time.Time) *Evidence {
	if rec == nil || !rec.Unfinished() || rec.Action == ActionReset || (rec.Phase != PhaseCreating && rec.Phase != PhaseQueued) ||
		node == nil || !ourGeneration(*rec, node) || !Healthy(node) || createSeen(*rec) {
		return nil
	}
	return &Evidence{InsertID: fmt.Sprintf("autoheal-seen-ready-gen-%d", rec.Generation), Change: changeSeenReady, Time: now, Last: true}
}

// IsMarker reports whether e is an entry the recovery keeps itself
// (seenReady), not an audit entry: a store that bounds the evidence it
// keeps never trims one away, or a later look would read our finished
// create as a failed one and create the node again.
func IsMarker(e Evidence) bool { return e.Change == changeSeenReady }

// createSeen reports whether rec's create was seen finished (seenReady).
func createSeen(rec Recovery) bool {
	return slices.ContainsFunc(rec.Evidence, func(e Evidence) bool {
		return e.Change == changeSeenReady && e.InsertID == fmt.Sprintf("autoheal-seen-ready-gen-%d", rec.Generation)
	})
}
