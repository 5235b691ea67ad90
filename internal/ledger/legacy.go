package ledger

import "github.com/tpu-autoheal/autoheal/internal/remediate"

// upgradeRecovery converts a recovery saved in an older shape into today's,
// as the ledger reads it, so that what the state machine is handed is in
// the phases it writes. Each conversion is exactly the step the state
// machine itself takes first on such a recovery, with nothing observed, so
// converting early changes no outcome (remediate's
// TestRecoveriesSavedInTodaysShapeAreFinished, and the ledger's tests over
// old-shape documents):
//
//   - DeleteSent never written (a recreate saved before the field
//     existed): an operation of its own says the delete was sent (as
//     the state machine's deleteSent reads it);
//   - a recreate saved as "saved" whose delete was sent is deleting;
//   - a reset saved before Step as "creating" (its operation, once in
//     CreateOp, is ResetOp as Firestore reads it)
//     is resetting, and one saved as "saved", "deleting", "deleted" or
//     "failed" with its queued resource known is resetting too.
//
// Left as read, because converting them needs what only the state machine
// has: "saved" without a delete sent (a live phase: a recreate whose every
// delete was refused goes back to it), "failed" of a recreate (where it
// resumes is read from the node), a reset without its queued resource (the
// state machine closes it), and "done" (terminal; the Compute Engine path
// still writes it).
func upgradeRecovery(r remediate.Recovery) remediate.Recovery {
	if r.Action == remediate.ActionReset {
		switch r.Phase {
		case remediate.PhaseCreating:
			r.Phase = remediate.PhaseResetting
		case remediate.PhaseSaved, remediate.PhaseDeleting, remediate.PhaseDeleted, remediate.PhaseFailed:
			if r.QueuedResource != "" {
				r.Phase = remediate.PhaseResetting
			}
		}
		return r
	}
	if !r.DeleteSent && (r.DeleteOp != "" || r.CreateOp != "" || r.ResetOp != "") {
		r.DeleteSent = true
	}
	if r.Phase == remediate.PhaseSaved && r.DeleteSent {
		r.Phase = remediate.PhaseDeleting
	}
	return r
}
