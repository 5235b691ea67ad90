package remediate

import "github.com/tpu-autoheal/autoheal/internal/failure"

// Kind is what a failed TPU call means for a recovery: the domain's
// failure.Kind. The adapters (tpuapi for the v2 REST API, tpulegacy for the
// v1 gRPC API) classify the API's errors (package googleerr); this package
// only reads the kinds they set.
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

// Error is a TPU call's failure as an adapter classified it.
type Error = failure.Error

// KindOf is the kind an adapter gave err; an unclassified error is
// transient.
func KindOf(err error) Kind { return failure.KindOf(err) }

// QuotaScope is the blast radius a quota or stockout's wording gives
// ("zone", "region" or "").
func QuotaScope(kind Kind, msg string) string { return failure.QuotaScope(kind, msg) }

// IsNotFound reports whether err is the TPU API's NOT_FOUND.
func IsNotFound(err error) bool { return failure.IsNotFound(err) }

// IsAlreadyExists reports whether err is the TPU API's ALREADY_EXISTS.
func IsAlreadyExists(err error) bool { return failure.IsAlreadyExists(err) }

// IsTransient reports whether err may go away by itself soon.
func IsTransient(err error) bool { return failure.IsTransient(err) }

// isExhausted reports whether err is a stockout or quota.
func isExhausted(err error) bool { return failure.IsExhausted(err) }
