package record

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	tpu "google.golang.org/api/tpu/v2"
)

// RedactSpec returns a copy of n whose metadata values are replaced by
// RedactValue's text (but those of PublicMetadataKeys). Metadata holds ssh-keys, startup scripts and whatever
// else users put there; anyone with log-viewer access reads records, so no
// value reaches one. The keys stay (a person can see that startup-script is
// there); the full spec is kept in the ledger only (`autoheal status --node
// N --spec`). n itself is not changed.
func RedactSpec(n *tpu.Node) *tpu.Node {
	if n == nil || len(n.Metadata) == 0 {
		return n
	}
	c := *n
	c.Metadata = make(map[string]string, len(n.Metadata))
	for k, v := range n.Metadata {
		if PublicMetadataKeys[k] {
			c.Metadata[k] = v
			continue
		}
		c.Metadata[k] = RedactValue(v)
	}
	return &c
}

// PublicMetadataKeys are the metadata keys whose values a record shows:
// names and choices the user sets for tpu-autoheal to read back from its
// records (the job a node belongs to, its stockout fallback), never
// secrets. Every other value is redacted.
var PublicMetadataKeys = map[string]bool{"autoheal-job": true, "autoheal-stockout": true}

// redactionKey keys RedactValue's digest. It is drawn at random when the
// process starts and kept in memory only: it is in no record, no file and
// no source, so a digest in a record cannot be used to confirm a guessed
// value (an unkeyed hash of a short secret or a known script can be
// brute-forced or looked up). The price: two digests compare only when
// the same process wrote both (one function instance, one CLI run).
var redactionKey = func() []byte {
	k := make([]byte, 32)
	rand.Read(k) // never fails: crypto/rand aborts the process rather than return short
	return k
}()

// RedactValue is what a record shows instead of a metadata value: its
// length and the first 48 bits of an HMAC-SHA256 keyed by redactionKey
// ("redacted: 1234 bytes, hmac:0123456789ab"). Equal values written by one
// process show the same digest; across processes digests mean nothing.
func RedactValue(v string) string {
	m := hmac.New(sha256.New, redactionKey)
	m.Write([]byte(v))
	return fmt.Sprintf("redacted: %d bytes, hmac:%s", len(v), hex.EncodeToString(m.Sum(nil)[:6]))
}
