package policy

import (
	"errors"
	"fmt"
	"strings"
)

// Kind is what a failed TPU call means for a recovery. The adapters
// (tpuapi for the v2 REST API, tpulegacy for the v1 gRPC API) map the API's
// errors into these kinds (Error); KindOf classifies any error, so an
// unwrapped *googleapi.Error or a network error is classified the same way.
type Kind int

// Kinds.
const (
	KindNone          Kind = iota // no error
	KindNotFound                  // NOT_FOUND (404)
	KindAlreadyExists             // ALREADY_EXISTS (409 other than ABORTED)
	KindStockout                  // the zone has no capacity for it (a stockout): retried with jittered back-off, never counted
	KindTransient                 // may go away by itself: 429 rate limits, 5xx, INTERNAL, UNAVAILABLE, deadlines, broken connections, malformed answers
	KindPermanent                 // retrying the same call cannot help: INVALID_ARGUMENT, PERMISSION_DENIED, FAILED_PRECONDITION, …
	KindQuota                     // a resource quota is used up (zone or region, QuotaScope): retried every lease, never counted, never a zone fallback
)

func (k Kind) String() string {
	switch k {
	case KindNone:
		return "none"
	case KindNotFound:
		return "not found"
	case KindAlreadyExists:
		return "already exists"
	case KindStockout:
		return "stockout"
	case KindQuota:
		return "quota"
	case KindTransient:
		return "transient"
	case KindPermanent:
		return "permanent"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Error is a TPU call's failure as an adapter classified it. Err keeps the
// API's own error.
type Error struct {
	Kind Kind
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// QuotaScope is the blast radius a quota (or stockout) refusal's wording
// gives: "region" when it says "in region" (every zone of the region is
// refused alike: a zone fallback cannot help), "zone" when it says "in
// zone" or is a stockout, "" when it says neither.
func QuotaScope(kind Kind, msg string) string {
	s := strings.ToLower(msg)
	switch {
	case strings.Contains(s, "in region") || strings.Contains(s, "regional") || strings.Contains(s, "region quota"):
		return "region"
	case strings.Contains(s, "in zone") || strings.Contains(s, "in the zone") || strings.Contains(s, "zonal") || kind == KindStockout:
		return "zone"
	}
	return ""
}

// KindOf is the kind an adapter gave err (an *Error in its chain): KindNone
// for nil, KindTransient for an error no adapter classified. The policy
// never looks inside an API's own errors: the interpreter classifies them
// (remediate.KindOf) before a StepResult reaches Advance.
func KindOf(err error) Kind {
	if err == nil {
		return KindNone
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindTransient
}

// IsNotFound reports whether err is the API's NOT_FOUND.
func IsNotFound(err error) bool { return KindOf(err) == KindNotFound }

// IsAlreadyExists reports whether err is the API's ALREADY_EXISTS.
func IsAlreadyExists(err error) bool { return KindOf(err) == KindAlreadyExists }

// isExhausted reports whether err is a stockout or quota.
func isExhausted(err error) bool { k := KindOf(err); return k == KindStockout || k == KindQuota }

// Exhausted reports whether k is a refusal for capacity or quota: retried
// without counting.
func (k Kind) Exhausted() bool { return k == KindStockout || k == KindQuota }

// kinds are the kinds a failure can have, in String's words.
var kinds = []Kind{KindNone, KindNotFound, KindAlreadyExists, KindStockout, KindTransient, KindPermanent, KindQuota}

// KindNamed is the kind String calls name (KindNone for any other word):
// the ledger keeps a kind by its word, not its number.
func KindNamed(name string) Kind {
	for _, k := range kinds {
		if k.String() == name {
			return k
		}
	}
	return KindNone
}

// KindInText is the kind a LastError written before LastKind existed names:
// fail wrote "STEP (KIND): ERROR", and older recoveries "(exhausted)" for a
// stockout or quota (told apart later; read as a stockout). KindNone when
// it names none.
func KindInText(lastError string) Kind {
	if strings.Contains(lastError, "(exhausted)") {
		return KindStockout
	}
	for _, k := range kinds[1:] {
		if strings.Contains(lastError, "("+k.String()+")") {
			return k
		}
	}
	return KindNone
}
