package remediate

import (
	"context"
	"time"
)

// NoticeStore is the ledger of maintenance notices: which steps (prepare,
// maintain, and the record-once observations, NoticeStep*) were taken for
// each notice, keyed by node and windowStartTime. ClaimNotice is atomic: of
// many concurrent claims of one step of one notice exactly one gets first,
// so a notice is prepared once and maintenance started once however many
// entries and sweeps report it.
type NoticeStore interface {
	// ClaimNotice claims step of the notice at at; first is false when it
	// was claimed before (by anyone).
	ClaimNotice(ctx context.Context, key NoticeKey, step string, at time.Time) (first bool, err error)
	// ReleaseNotice drops a claim whose action failed, so that a later look
	// takes it again. Releasing an absent claim is not an error.
	ReleaseNotice(ctx context.Context, key NoticeKey, step string) error
	// NoticeSteps returns the steps claimed for the notice, with when
	// (empty, not nil-error, for an unknown notice).
	NoticeSteps(ctx context.Context, key NoticeKey) (map[string]time.Time, error)
}
