package record

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	tpu "google.golang.org/api/tpu/v2"
)

// RedactSpec returns a copy of n whose metadata values are replaced by
// their length and a short SHA-256 prefix ("redacted: 1234 bytes,
// sha256:0123456789ab"). Metadata holds ssh-keys, startup scripts and
// whatever else users put there; anyone with log-viewer access reads
// records, so no value reaches one. The keys stay (a person can see that
// startup-script changed, and the hash says whether two specs carry the same
// value); the full spec is kept in the ledger only (`autoheal status --node N
// --spec`). n itself is not changed.
func RedactSpec(n *tpu.Node) *tpu.Node {
	if n == nil || len(n.Metadata) == 0 {
		return n
	}
	c := *n
	c.Metadata = make(map[string]string, len(n.Metadata))
	for k, v := range n.Metadata {
		c.Metadata[k] = RedactValue(v)
	}
	return &c
}

// RedactValue is what a record shows instead of a metadata value.
func RedactValue(v string) string {
	sum := sha256.Sum256([]byte(v))
	return fmt.Sprintf("redacted: %d bytes, sha256:%s", len(v), hex.EncodeToString(sum[:6]))
}
