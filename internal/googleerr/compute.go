package googleerr

import (
	"errors"
	"strings"

	"google.golang.org/api/googleapi"

	"github.com/tpu-autoheal/autoheal/internal/failure"
)

// computeCode classifies a Compute Engine error code (errors[].code of an
// operation, "ZONE_RESOURCE_POOL_EXHAUSTED") or REST reason (errors[].reason,
// "resourceNotReady"), whatever its case, and reports whether it knows it.
func computeCode(code string) (failure.Kind, bool) {
	switch strings.ToUpper(code) {
	case "ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "RESOURCEPOOLEXHAUSTED", "INSUFFICIENTCAPACITY":
		return failure.Stockout, true
	case "QUOTA_EXCEEDED", "QUOTAEXCEEDED":
		return failure.Quota, true
	case "RESOURCE_NOT_READY", "RESOURCENOTREADY", "INTERNAL_ERROR", "BACKENDERROR", "RATELIMITEXCEEDED", "CONDITIONNOTMET":
		// conditionNotMet (412): the fingerprint moved; read again and retry.
		return failure.Transient, true
	case "RESOURCE_NOT_FOUND", "NOTFOUND":
		return failure.NotFound, true
	case "RESOURCE_ALREADY_EXISTS", "ALREADYEXISTS":
		return failure.AlreadyExists, true
	}
	return failure.None, false
}

// FromCompute classifies a Compute Engine client's error: by the first
// reason Compute Engine's table knows (a 400 resourceNotReady is
// transient, a 403 quotaExceeded a quota), else as FromAPI does. nil stays
// nil.
func FromCompute(err error) error {
	if err == nil {
		return nil
	}
	var e *failure.Error
	if errors.As(err, &e) {
		return err
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		for _, it := range ge.Errors {
			if k, ok := computeCode(it.Reason); ok {
				return &failure.Error{Kind: k, Err: err}
			}
		}
	}
	return FromAPI(err)
}

// OperationItem is one of the errors a Compute Engine operation ended with
// (compute.OperationErrorErrors' Code and Message).
type OperationItem struct {
	Code, Message string
}

// ComputeOperation is the error a Compute Engine operation ended with: the
// kind of the first code the table knows; else a stockout when a message
// is about capacity; else the kind of the operation's HTTP status (none:
// permanent). Its text is every "code: message", joined by "; ".
func ComputeOperation(httpStatus int, items []OperationItem) error {
	var msgs []string
	kind := failure.None
	for _, it := range items {
		msgs = append(msgs, it.Code+": "+it.Message)
		if k, ok := computeCode(it.Code); ok && kind == failure.None {
			kind = k
		}
	}
	text := strings.Join(msgs, "; ")
	switch {
	case kind != failure.None:
	case capacityWording(text):
		kind = failure.Stockout
	case httpStatus == 0:
		kind = failure.Permanent
	default:
		kind = kindOfHTTP(httpStatus, "", text)
	}
	return &failure.Error{Kind: kind, Err: errors.New(text)}
}
