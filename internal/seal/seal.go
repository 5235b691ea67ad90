// Package seal makes and checks the MAC that ties a saved spec to this
// deployment. The ledger is not a trust root: anyone who can write its
// Firestore database could otherwise rewrite a saved spec (its service
// account, its startup script) and have the function create it. A spec is
// sealed when it is saved and its seal verified before the delete and
// before the create; a spec that does not verify is never created.
//
// A Sealer is either LocalKeys (HMAC-SHA256 keys in memory: replay, the
// simulator, tests) or KMS (a Cloud KMS key of purpose MAC, whose secret
// never leaves KMS). Verify answers in one of three ways, which the caller
// must keep apart: nil (verified), an error matching ErrNotVerified (a
// verdict: the spec was changed or sealed by someone else; abandon the
// recovery), or an error matching ErrTransient (no verdict: KMS could not
// be reached, timed out, refused or garbled the call; retry later, never
// abandon for it).
//
// This package never decides what to do with a spec, never retries
// (retrying is the caller's, which already has Pub/Sub redelivery and
// sweeps), never logs, and never returns or prints key material.
package seal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
)

// Seal is a MAC and the key version that made it, stored beside what it
// covers. The key version says which key verifies it, so keys can be
// rotated while old seals still verify.
type Seal struct {
	KeyVersion string `json:"keyVersion" firestore:"keyVersion"`
	MAC        []byte `json:"mac" firestore:"mac"`
}

// IsZero reports whether s is no seal at all (what a spec saved before
// seals existed carries).
func (s Seal) IsZero() bool { return s.KeyVersion == "" && len(s.MAC) == 0 }

// Equal reports whether s and t are the same seal.
func (s Seal) Equal(t Seal) bool { return s.KeyVersion == t.KeyVersion && bytes.Equal(s.MAC, t.MAC) }

// Sealer makes and checks seals over a message: in practice SpecMessage's.
// Both implementations MAC the message's SHA-256 digest rather than the
// message, so a message of any size fits (Cloud KMS takes at most 64 KiB,
// and a node's startup script alone may be larger).
type Sealer interface {
	// Seal returns a seal over msg made with the current key version. Its
	// only errors are *TransientError: without a seal, save no spec (and
	// so delete nothing) and retry later.
	Seal(ctx context.Context, msg []byte) (Seal, error)
	// Verify returns nil when s is a seal over msg made by one of this
	// Sealer's key versions, a *VerifyError (ErrNotVerified) when it is
	// not, and a *TransientError (ErrTransient) when no answer was had.
	Verify(ctx context.Context, msg []byte, s Seal) error
}

// ErrNotVerified is matched (errors.Is) by every *VerifyError.
var ErrNotVerified = errors.New("does not verify")

// ErrTransient is matched (errors.Is) by every *TransientError.
var ErrTransient = errors.New("no verdict (transient)")

// VerifyError is a verdict: the message and the seal do not verify. Asking
// again gives the same answer; the caller treats what the seal covers as
// tampered with.
type VerifyError struct {
	KeyVersion string // as the seal names it (may be anything a writer chose)
	Reason     string // what did not verify, in a few words
}

func (e *VerifyError) Error() string {
	if e.KeyVersion == "" {
		return "seal does not verify: " + e.Reason
	}
	return fmt.Sprintf("seal of key version %q does not verify: %s", e.KeyVersion, e.Reason)
}

// Is makes errors.Is(err, ErrNotVerified) true.
func (e *VerifyError) Is(target error) bool { return target == ErrNotVerified }

// Reasons a VerifyError gives.
const (
	ReasonNoSeal         = "no seal"
	ReasonMismatch       = "the MAC does not match the message"
	ReasonUnknownVersion = "unknown key version"
	ReasonForeignKey     = "the key version is not one of this deployment's key"
	ReasonMalformedMAC   = "the MAC is not a MAC any key here makes"
)

// TransientError is no verdict: the MAC service failed, timed out, refused
// the call or answered with data that failed its integrity check. The
// caller retries later (a KMS outage delays a recovery) and never treats
// it as tampering. Code is the gRPC status (codes.DataLoss for an answer
// whose checksums did not match); codes.PermissionDenied or
// codes.FailedPrecondition (a disabled or destroyed key version) need a
// person, but they are still no verdict on the spec.
type TransientError struct {
	Op         string // "seal" or "verify"
	KeyVersion string
	Code       codes.Code
	Err        error
}

func (e *TransientError) Error() string {
	return fmt.Sprintf("%s with key version %s: %v (%s; no verdict, retry later)", e.Op, e.KeyVersion, e.Err, e.Code)
}

func (e *TransientError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrTransient) true.
func (e *TransientError) Is(target error) bool { return target == ErrTransient }

// specLabel starts every SpecMessage: a seal made over something else
// never verifies as a spec's.
const specLabel = "tpu-autoheal saved spec v1"

// SpecMessage is the message a saved spec's seal covers: a label, the
// node's full resource name, the recovery's generation and the spec's bytes
// exactly as the ledger stores them, each but the generation prefixed by
// its length. So a seal made for one node's spec does not verify for
// another node, nor for another recovery of the same node (an old spec
// replayed into a newer recovery), and no two different triples give the
// same message.
func SpecMessage(node string, generation int64, spec []byte) []byte {
	b := make([]byte, 0, len(specLabel)+len(node)+len(spec)+3*8)
	for _, field := range [][]byte{[]byte(specLabel), []byte(node)} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(field)))
		b = append(b, field...)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(generation))
	b = binary.BigEndian.AppendUint64(b, uint64(len(spec)))
	return append(b, spec...)
}

// digest is what both Sealers MAC: the message's SHA-256.
func digest(msg []byte) []byte {
	d := sha256.Sum256(msg)
	return d[:]
}
