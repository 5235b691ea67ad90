// Package failure is what a failed call to a backend means for a recovery,
// in the domain's words: not found, already exists, stockout, quota,
// transient, permanent. The adapters (tpuapi, tpulegacy, computevm) map
// their API's errors into these kinds (package googleerr holds the Google
// mapping); the policy and the interpreter only read kinds (KindOf).
//
// It must never import an API client, a transport or the network: a kind
// is decided where the API's error is known, not guessed from it later.
package failure

import (
	"errors"
	"fmt"
	"strings"
)

// Kind is what a failed call means for a recovery.
type Kind int

// Kinds. The numbers are those remediate's kinds had; nothing persists
// them (records carry String).
const (
	None          Kind = iota // no error
	NotFound                  // NOT_FOUND (404)
	AlreadyExists             // ALREADY_EXISTS (409 other than ABORTED)
	Stockout                  // the zone has no capacity for it (a stockout): retried with jittered back-off, never counted
	Transient                 // may go away by itself: 429 rate limits, 5xx, INTERNAL, UNAVAILABLE, deadlines, broken connections, malformed answers
	Permanent                 // retrying the same call cannot help: INVALID_ARGUMENT, PERMISSION_DENIED, FAILED_PRECONDITION, …
	Quota                     // a resource quota is used up (zone or region, QuotaScope): retried every lease, never counted, never a zone fallback
)

func (k Kind) String() string {
	switch k {
	case None:
		return "none"
	case NotFound:
		return "not found"
	case AlreadyExists:
		return "already exists"
	case Stockout:
		return "stockout"
	case Quota:
		return "quota"
	case Transient:
		return "transient"
	case Permanent:
		return "permanent"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Error is a call's failure as an adapter classified it. Err keeps the
// API's own error (errors.As still finds it).
type Error struct {
	Kind Kind
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// KindOf is the kind an adapter gave err (the first *Error in its chain).
// An error no adapter classified (a deadline, a broken connection, a
// malformed answer, a fake's bare error) is Transient: the recovery bounds
// how often it retries. nil is None.
func KindOf(err error) Kind {
	if err == nil {
		return None
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Transient
}

// Exhausted reports whether k is a refusal for capacity or quota: retried
// without counting.
func (k Kind) Exhausted() bool { return k == Stockout || k == Quota }

// IsNotFound reports whether err is a NOT_FOUND.
func IsNotFound(err error) bool { return KindOf(err) == NotFound }

// IsAlreadyExists reports whether err is an ALREADY_EXISTS.
func IsAlreadyExists(err error) bool { return KindOf(err) == AlreadyExists }

// IsTransient reports whether err may go away by itself soon.
func IsTransient(err error) bool { return KindOf(err) == Transient }

// IsExhausted reports whether err is a stockout or a quota.
func IsExhausted(err error) bool { return KindOf(err).Exhausted() }

// QuotaScope is the blast radius a quota (or stockout) refusal's wording
// gives: "region" when it says "in region" (every zone of the region is
// refused alike: a zone fallback cannot help), "zone" when it says "in
// zone" or is a stockout, "" when it says neither.
func QuotaScope(kind Kind, msg string) string {
	s := strings.ToLower(msg)
	switch {
	case strings.Contains(s, "in region") || strings.Contains(s, "regional") || strings.Contains(s, "region quota"):
		return "region"
	case strings.Contains(s, "in zone") || strings.Contains(s, "in the zone") || strings.Contains(s, "zonal") || kind == Stockout:
		return "zone"
	}
	return ""
}
