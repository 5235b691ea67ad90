// Package remediate decides what to do about a TPU node and does it.
//
// The deciding is internal/policy's, pure: a function of the event, the
// observed node, the node's recovery history, the clock and the config
// (policy.Decide, policy.Advance; policy_alias.go keeps their names here).
// The Handler is the interpreter: the only part that talks to the TPU API
// (through the small TPU interface), the ledger (Store) and the audit trail
// (Recorder). Nothing here may delete a node unless the TPU API, read just
// before, says the node needs it.
package remediate

import (
	"context"
	"time"

	tpu "google.golang.org/api/tpu/v2"
)

// TPU is the part of the TPU API the handler uses. Errors are classified by
// KindOf (the adapters wrap them in *Error). No method waits for an
// operation: GetOperation looks at it once.
type TPU interface {
	GetNode(ctx context.Context, name string) (*tpu.Node, error)
	ListNodes(ctx context.Context, parent, pageToken string) (nodes []*tpu.Node, next string, err error)
	DeleteNode(ctx context.Context, name string) (operation string, err error)
	CreateNode(ctx context.Context, parent, nodeID string, node *tpu.Node) (operation string, err error)
	// GetOperation looks at an operation once: done false while it runs
	// (err is then the poll's own failure); done true when it finished,
	// err being the finished operation's error, classified by its code.
	GetOperation(ctx context.Context, operation string) (done bool, err error)
	GetQueuedResource(ctx context.Context, name string) (*tpu.QueuedResource, error)
	ResetQueuedResource(ctx context.Context, name string) (operation string, err error)
}

// Store is the ledger: dedupe, claims, spec snapshots, history, deferrals.
// Claim is atomic: of many concurrent claims of one node exactly one succeeds
// while a live lease is held, and it re-checks the cooldown and caps inside
// the same transaction.
type Store interface {
	// MarkEvent records id as processed until expire; first is false when
	// it had already been marked.
	MarkEvent(ctx context.Context, id string, expire time.Time) (first bool, err error)
	// History returns what the ledger knows about node, for event id ("" for
	// none: EventSeen is then false). Recovery is the node's latest recovery
	// in any phase. Recreates are the start times, within (now-window, now],
	// of the node's recoveries that became destructive (counted from the
	// delete request, so a crash cannot bypass the guards). InFlight counts
	// the unfinished recoveries (failed ones included) of the project's
	// other nodes.
	History(ctx context.Context, node, project, eventID string, now time.Time, window time.Duration) (History, error)
	// Claim starts a recovery of the node (Phase claimed, Generation one more
	// than the last) or takes over an unfinished one whose lease expired
	// (phase, spec and ops kept; Attempts+1). Errors: ErrClaimed or a guard error.
	// A live lease blocks every claimant, the same Holder included (one
	// holder id is shared by the concurrent calls of a function instance).
	// A takeover does not re-check the guards: finishing a recovery already
	// started is never worse than leaving the node deleted. The returned
	// (Holder, Generation, Attempts) is the token Update checks.
	Claim(ctx context.Context, req ClaimRequest) (Recovery, error)
	// Update saves the recovery's progress and renews the lease; ErrLeaseLost
	// when rec.Holder no longer holds it. It never shortens the lease: the
	// lease becomes the latest of rec.LeaseUntil, the current one and
	// UpdatedAt plus the claim's lease. The Handler relies on this: a
	// recovery saved as PhaseFailed keeps its lease for Config.Lease, which
	// is the back-off before the next attempt (no retry storm on a stockout).
	Update(ctx context.Context, rec Recovery) error
	// Unfinished lists recoveries not in PhaseDone or PhaseAbandoned (failed
	// ones included),
	// whatever their lease.
	Unfinished(ctx context.Context) ([]Recovery, error)
	// SetDeferral records or replaces the node's deferral; ClearDeferral removes it.
	SetDeferral(ctx context.Context, d Deferral) error
	ClearDeferral(ctx context.Context, node string) error
	// DueDeferrals lists deferrals due at or before now. SetDeferral stores
	// d as given; the Handler keeps Since of an existing deferral itself.
	DueDeferrals(ctx context.Context, now time.Time) ([]Deferral, error)
	// SetHold records that a user terminated the node; ClearHold removes
	// the hold (clearing an absent hold is not an error). History returns it.
	SetHold(ctx context.Context, h Hold) error
	ClearHold(ctx context.Context, node string) error
	// SweepCursor returns where the last sweep stopped ("" = start over);
	// SetSweepCursor saves it, so a sweep cut short by its time budget
	// resumes there.
	SweepCursor(ctx context.Context) (string, error)
	SetSweepCursor(ctx context.Context, cursor string) error
	// KeepEvidence adds e to node's recovery while it is unfinished, the
	// lease aside (evidence arrives while the recovery is held); kept is
	// false when the node has no unfinished recovery. An entry already
	// kept (same InsertID) is kept once. Update never drops kept evidence.
	KeepEvidence(ctx context.Context, node string, e Evidence) (kept bool, err error)
}

// Recorder writes records (Cloud Logging, stdout, or a test's slice).
type Recorder interface {
	Record(ctx context.Context, r Record) error
}
