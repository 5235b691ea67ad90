package remediate

import (
	"context"
	"errors"
	"fmt"

	tpu "google.golang.org/api/tpu/v2"
)

// refuseOversize refuses, before the claim, the recreate of a node whose
// spec the ledger cannot hold: one ERROR record (the first time for this
// node id; later looks are a plain skip, so a sweep every minute does not
// page a person every minute), nothing claimed, nothing deleted, and the
// delivery acknowledged (a permanent failure: a retry cannot help). It
// reports whether it refused.
func (h *Handler) refuseOversize(ctx context.Context, node *tpu.Node, r *Record) (bool, error) {
	if node == nil {
		return false, nil
	}
	size := specSize(node)
	if size <= MaxSpecBytes {
		return false, nil
	}
	tooLarge := &SpecTooLargeError{Node: node.Name, Bytes: size}
	r.Action = ActionSkip
	r.Reason = "spec too large: not recreated, nothing deleted"
	first, err := h.Store.MarkEvent(ctx, fmt.Sprintf("oversize:%s:%d", node.Name, node.Id), r.Time.Add(h.eventTTL()))
	if err != nil {
		return true, &ActError{Step: "ledger", Node: node.Name, Transient: true, Err: fmt.Errorf("mark oversize refusal: %w", err)}
	}
	if !first {
		r.Reason += " (refused before, its ERROR record says why: " + tooLarge.Error() + ")"
		return true, nil
	}
	return true, &ActError{Step: "spec", Node: node.Name, Err: tooLarge}
}

// permanentLedgerError reports whether a ledger write failed in a way no
// retry can mend: the ledger refused the write itself. The ledgers say so
// with the kind they give the error (KindPermanent: Firestore's
// INVALID_ARGUMENT, such as a value over its size limit, and the Memory
// ledger's same refusal), as the TPU adapters do: this package reads kinds,
// never an API's codes.
func permanentLedgerError(err error) bool {
	var tl *SpecTooLargeError
	return errors.As(err, &tl) || KindOf(err) == KindPermanent
}
