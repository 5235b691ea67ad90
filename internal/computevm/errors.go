package computevm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"
)

// Kind is what a failed Compute Engine call means for a recovery.
type Kind int

// Kinds.
const (
	KindNone          Kind = iota
	KindNotFound           // 404 notFound, RESOURCE_NOT_FOUND
	KindAlreadyExists      // 409 alreadyExists, RESOURCE_ALREADY_EXISTS
	KindCapacity           // ZONE_RESOURCE_POOL_EXHAUSTED(_WITH_DETAILS): a stockout, retried later, never counted permanent
	KindQuota              // QUOTA_EXCEEDED, 403 quotaExceeded: needs quota (or fewer VMs), retried later
	KindTransient          // 429, 5xx, RESOURCE_NOT_READY, 412 conditionNotMet (read again), broken connections, deadlines, malformed answers
	KindPermanent          // anything else: 400 invalid, 403 forbidden, …
)

func (k Kind) String() string {
	return [...]string{"none", "not found", "already exists", "capacity", "quota", "transient", "permanent"}[k]
}

// Error is a classified Compute Engine failure; Err is the API's own.
type Error struct {
	Kind Kind
	Err  error
}

func (e *Error) Error() string { return e.Kind.String() + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// KindOf is the kind of err (KindNone for nil; an unclassified error is
// classified as classify would).
func KindOf(err error) Kind {
	if err == nil {
		return KindNone
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return classify(err).(*Error).Kind
}

// codeKind classifies a Compute Engine error code (errors[].code of an
// operation, or errors[].reason of an HTTP error).
func codeKind(code string) (Kind, bool) {
	switch code {
	case "ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "resourcePoolExhausted":
		return KindCapacity, true
	case "QUOTA_EXCEEDED", "quotaExceeded":
		return KindQuota, true
	case "RESOURCE_NOT_READY", "resourceNotReady", "INTERNAL_ERROR", "backendError", "rateLimitExceeded", "conditionNotMet":
		return KindTransient, true
	case "RESOURCE_NOT_FOUND", "notFound":
		return KindNotFound, true
	case "RESOURCE_ALREADY_EXISTS", "alreadyExists":
		return KindAlreadyExists, true
	}
	return KindNone, false
}

// statusKind classifies an HTTP status.
func statusKind(status int) Kind {
	switch {
	case status == http.StatusNotFound:
		return KindNotFound
	case status == http.StatusConflict:
		return KindAlreadyExists
	case status == http.StatusTooManyRequests, status == http.StatusPreconditionFailed, status == http.StatusRequestTimeout, status >= 500:
		return KindTransient
	}
	return KindPermanent
}

// classify wraps err in an *Error with its kind.
func classify(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	var g *googleapi.Error
	switch {
	case errors.As(err, &g):
		for _, it := range g.Errors {
			if k, ok := codeKind(it.Reason); ok {
				return &Error{Kind: k, Err: err}
			}
		}
		if g.Code == http.StatusServiceUnavailable && strings.Contains(g.Message, "does not have enough resources") {
			return &Error{Kind: KindCapacity, Err: err}
		}
		return &Error{Kind: statusKind(g.Code), Err: err}
	case errors.Is(err, context.Canceled):
		return &Error{Kind: KindTransient, Err: err}
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) {
		return &Error{Kind: KindTransient, Err: err}
	}
	// Anything else from the client is a broken or malformed answer
	// (EOF, a body that is not JSON): retrying may help.
	return &Error{Kind: KindTransient, Err: err}
}

// classifyOperation is the error an operation ended with.
func classifyOperation(op *compute.Operation) error {
	var msgs []string
	kind := KindNone
	for _, it := range op.Error.Errors {
		msgs = append(msgs, it.Code+": "+it.Message)
		if k, ok := codeKind(it.Code); ok && kind == KindNone {
			kind = k
		}
	}
	if kind == KindNone {
		kind = statusKind(int(op.HttpErrorStatusCode))
		if op.HttpErrorStatusCode == 0 {
			kind = KindPermanent
		}
	}
	return &Error{Kind: kind, Err: fmt.Errorf("%s", strings.Join(msgs, "; "))}
}
