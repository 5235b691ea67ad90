package policy

import (
	"encoding/json"
	"fmt"

	tpu "google.golang.org/api/tpu/v2"
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

// SpecSize is the encoded size of the spec a recovery of node would save.
func SpecSize(node *tpu.Node) int {
	b, err := json.Marshal(CleanSpec(node))
	if err != nil {
		return 0
	}
	return len(b)
}
