package remediate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	tpu "google.golang.org/api/tpu/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// MaxSpecBytes is the largest encoded spec (the node's JSON, as the ledger
// saves it) a recovery takes on. Firestore refuses a document over 1 MiB
// (a string field over 1,048,487 bytes); the recovery's document holds the
// spec and a few hundred bytes besides. A spec over it could never be
// saved before the delete, so the node is refused before anything is
// claimed or deleted: once deleted, its spec would exist nowhere.
const MaxSpecBytes = 1<<20 - 16<<10

// SpecTooLargeError says a node's spec is over MaxSpecBytes.
type SpecTooLargeError struct {
	Node  string
	Bytes int
}

func (e *SpecTooLargeError) Error() string {
	return fmt.Sprintf("spec of %s is %d bytes encoded, over the ledger's limit of %d (Firestore's 1 MiB document): it cannot be saved before a delete, so the node is not deleted; shrink its metadata or recreate it by hand", e.Node, e.Bytes, MaxSpecBytes)
}

// specSize is the encoded size of the spec a recovery of node would save.
func specSize(node *tpu.Node) int {
	b, err := json.Marshal(CleanSpec(node))
	if err != nil {
		return 0
	}
	return len(b)
}

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
// retry can mend: the ledger refused the write itself (INVALID_ARGUMENT,
// such as a document over its size limit).
func permanentLedgerError(err error) bool {
	var tl *SpecTooLargeError
	if errors.As(err, &tl) {
		return true
	}
	return status.Code(err) == codes.InvalidArgument
}
