package remediate

import "github.com/tpu-autoheal/autoheal/internal/failure"

// The adapters (tpuapi for the v2 REST API, tpulegacy for the v1 gRPC API)
// classify the API's errors into failure kinds (package googleerr); this
// package only reads the kinds they set. Kind, Error and the Kind*
// constants are policy's (policy_alias.go), which are failure's.

// KindOf is the kind an adapter gave err; an unclassified error is
// transient.
func KindOf(err error) Kind { return failure.KindOf(err) }

// IsNotFound reports whether err is the TPU API's NOT_FOUND.
func IsNotFound(err error) bool { return failure.IsNotFound(err) }

// IsAlreadyExists reports whether err is the TPU API's ALREADY_EXISTS.
func IsAlreadyExists(err error) bool { return failure.IsAlreadyExists(err) }

// IsTransient reports whether err may go away by itself soon.
func IsTransient(err error) bool { return failure.IsTransient(err) }

// isExhausted reports whether err is a stockout or quota.
func isExhausted(err error) bool { return failure.IsExhausted(err) }
