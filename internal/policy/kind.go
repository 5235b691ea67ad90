package policy

import (
	"strings"

	"github.com/tpu-autoheal/autoheal/internal/failure"
)

// Kind is what a failed call means for a recovery: the domain's
// failure.Kind. The adapters classify the API's errors (package
// googleerr); the policy reads only the kinds they set.
type Kind = failure.Kind

// Kinds, as failure names them.
const (
	KindNone          = failure.None
	KindNotFound      = failure.NotFound
	KindAlreadyExists = failure.AlreadyExists
	KindStockout      = failure.Stockout
	KindTransient     = failure.Transient
	KindPermanent     = failure.Permanent
	KindQuota         = failure.Quota
)

// Error is a call's failure as an adapter classified it.
type Error = failure.Error

// QuotaScope is the blast radius a quota or stockout's wording gives
// ("zone", "region" or "").
func QuotaScope(kind Kind, msg string) string { return failure.QuotaScope(kind, msg) }

// KindOf is the kind an adapter gave err (an *Error in its chain): KindNone
// for nil, KindTransient for an error no adapter classified. The policy
// never looks inside an API's own errors.
func KindOf(err error) Kind { return failure.KindOf(err) }

// IsNotFound reports whether err is the API's NOT_FOUND.
func IsNotFound(err error) bool { return failure.IsNotFound(err) }

// IsAlreadyExists reports whether err is the API's ALREADY_EXISTS.
func IsAlreadyExists(err error) bool { return failure.IsAlreadyExists(err) }

// isExhausted reports whether err is a stockout or quota.
func isExhausted(err error) bool { return failure.IsExhausted(err) }

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
