package seal

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"sort"
	"strings"
)

// MinLocalKeyBytes is the shortest key LocalKeys takes: HMAC-SHA256's
// block of security.
const MinLocalKeyBytes = 32

// LocalKeys is a Sealer whose HMAC-SHA256 keys are held in memory, by key
// version name. It seals with the current version and verifies with any.
// It is for replay, the simulator and tests; a deployed function uses KMS,
// whose key never leaves Cloud KMS.
type LocalKeys struct {
	current string
	keys    map[string][]byte
}

var _ Sealer = (*LocalKeys)(nil)

// NewLocalKeys returns LocalKeys sealing with version current. Every key
// must be at least MinLocalKeyBytes long; the map is copied.
func NewLocalKeys(current string, keys map[string][]byte) (*LocalKeys, error) {
	if _, ok := keys[current]; !ok {
		return nil, fmt.Errorf("seal: current key version %q is not among the %d keys given", current, len(keys))
	}
	l := &LocalKeys{current: current, keys: make(map[string][]byte, len(keys))}
	names := make([]string, 0, len(keys))
	for name := range keys {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		k := keys[name]
		if strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("seal: a key version name is empty")
		}
		if len(k) < MinLocalKeyBytes {
			return nil, fmt.Errorf("seal: key version %q has a %d-byte key, want at least %d", name, len(k), MinLocalKeyBytes)
		}
		l.keys[name] = append([]byte(nil), k...)
	}
	return l, nil
}

// RandomLocalKeys returns LocalKeys with one random key, version
// "local/random", drawn now and kept in memory only: seals made in this
// process verify in this process and nowhere else (what a replay run
// needs).
func RandomLocalKeys() *LocalKeys {
	k := make([]byte, MinLocalKeyBytes)
	rand.Read(k) // never fails: crypto/rand aborts the process rather than return short
	return &LocalKeys{current: "local/random", keys: map[string][]byte{"local/random": k}}
}

// Seal MACs msg with the current key version.
func (l *LocalKeys) Seal(_ context.Context, msg []byte) (Seal, error) {
	return Seal{KeyVersion: l.current, MAC: hmacSHA256(l.keys[l.current], digest(msg))}, nil
}

// Verify checks s over msg. It never returns a TransientError.
func (l *LocalKeys) Verify(_ context.Context, msg []byte, s Seal) error {
	if s.IsZero() {
		return &VerifyError{Reason: ReasonNoSeal}
	}
	k, ok := l.keys[s.KeyVersion]
	if !ok {
		return &VerifyError{KeyVersion: s.KeyVersion, Reason: ReasonUnknownVersion}
	}
	if !hmac.Equal(s.MAC, hmacSHA256(k, digest(msg))) {
		return &VerifyError{KeyVersion: s.KeyVersion, Reason: ReasonMismatch}
	}
	return nil
}

func hmacSHA256(key, data []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(data)
	return m.Sum(nil)
}
