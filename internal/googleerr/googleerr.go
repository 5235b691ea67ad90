// Package googleerr maps Google API errors to the domain's failure kinds:
// REST errors (*googleapi.Error) and gRPC statuses (read through gax-go's
// apierror) of the TPU v2/v2alpha1 and v1 APIs, finished operations'
// google.rpc codes, and Compute Engine's error reasons and operation codes.
// Only the adapters (tpuapi, tpulegacy, computevm) call it: every error
// they return carries a *failure.Error, so nothing past them reads an API's
// error.
//
// One table serves every API, so a stockout or a quota means the same
// whichever backend refused the create (issue 23: capacity wording is a
// stockout, a quota keeps its zone or region wording, a request rate is
// transient).
package googleerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"

	"github.com/tpu-autoheal/autoheal/internal/failure"
)

// FromAPI classifies a Google API client's error (REST or gRPC) into a
// *failure.Error, read through gax-go's apierror; the adapters call it on
// every failed call. nil stays nil; an error already classified is kept;
// an error that is no API error (a deadline, a broken connection, a
// malformed answer) is transient.
func FromAPI(err error) error {
	if err == nil {
		return nil
	}
	var e *failure.Error
	if errors.As(err, &e) {
		return err
	}
	kind := failure.Transient
	reason := ""
	ae, isAPI := apierror.FromError(err)
	if isAPI {
		reason = " " + ae.Reason()
	}
	var ge *googleapi.Error
	switch {
	case errors.As(err, &ge):
		// A REST error by its own status, body and reasons: apierror reads
		// a bodyless 409 as ABORTED, which the API never means by it.
		kind = kindOfHTTP(ge.Code, restStatus(ge), restText(ge)+reason)
	case isAPI && ae.GRPCStatus() != nil:
		st := ae.GRPCStatus()
		kind = kindOfCode(st.Code(), st.Message()+reason)
	}
	return &failure.Error{Kind: kind, Err: err}
}

// Operation is the error of an operation that finished with the
// google.rpc code and message given, classified by its code.
func Operation(operation string, code int32, message string) error {
	c := codes.Code(code)
	return &failure.Error{Kind: kindOfCode(c, message), Err: fmt.Errorf("operation %s failed: %s: %s", operation, c, message)}
}

// kindOfCode classifies a google.rpc code with its message: the one table
// the adapters and finished operations use. RESOURCE_EXHAUSTED is a
// stockout when its wording is about capacity ("There is no more capacity
// in the zone"), a quota when it names one, else request rate (Transient,
// like any 429 on a poll); FAILED_PRECONDITION "Insufficient reserved
// capacity" is a stockout of a reservation. Compute Engine's
// ZONE_RESOURCE_POOL_EXHAUSTED(_WITH_DETAILS) and insufficientCapacity are
// stockouts whatever code carries them.
func kindOfCode(c codes.Code, message string) failure.Kind {
	if computeStockout(message) {
		return failure.Stockout
	}
	switch c {
	case codes.OK:
		return failure.None
	case codes.NotFound:
		return failure.NotFound
	case codes.AlreadyExists:
		return failure.AlreadyExists
	case codes.ResourceExhausted:
		switch {
		case capacityWording(message):
			return failure.Stockout
		case quotaWording(message):
			return failure.Quota
		}
		return failure.Transient
	case codes.FailedPrecondition:
		if capacityWording(message) {
			return failure.Stockout
		}
		return failure.Permanent
	case codes.Internal, codes.Unavailable, codes.Unknown, codes.DeadlineExceeded, codes.Aborted, codes.DataLoss, codes.Canceled:
		return failure.Transient
	}
	return failure.Permanent // InvalidArgument, PermissionDenied, OutOfRange, Unimplemented, Unauthenticated
}

// codeOfHTTP is the google.rpc code of an HTTP status, for a REST error that
// carries no status name.
func codeOfHTTP(status int) codes.Code {
	switch status {
	case http.StatusBadRequest:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusConflict:
		return codes.AlreadyExists
	case http.StatusMethodNotAllowed:
		return codes.Unimplemented // never allowed when retried
	case http.StatusGone:
		return codes.FailedPrecondition // gone for good: retrying does not bring it back
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusNotImplemented:
		return codes.Unimplemented
	case http.StatusServiceUnavailable:
		return codes.Unavailable
	case http.StatusGatewayTimeout:
		return codes.DeadlineExceeded
	case 499:
		return codes.Canceled
	}
	if status >= 500 {
		return codes.Internal
	}
	return codes.Unknown
}

// codeOfName is the google.rpc code named s ("RESOURCE_EXHAUSTED"), and
// whether s is one.
func codeOfName(s string) (codes.Code, bool) {
	var c codes.Code
	if err := c.UnmarshalJSON([]byte(`"` + s + `"`)); err != nil {
		return codes.Unknown, false
	}
	return c, true
}

// kindOfHTTP classifies a REST error: its HTTP status, the google.rpc
// status name the body gives (ABORTED on a 409 is not ALREADY_EXISTS) and
// its message. A 429 is a stockout or quota only when it says so; else a
// rate limit.
func kindOfHTTP(status int, rpcStatus, message string) failure.Kind {
	c := codeOfHTTP(status)
	if n, ok := codeOfName(rpcStatus); ok && rpcStatus != "" {
		c = n
	}
	return kindOfCode(c, message)
}

// restStatus is the google.rpc status name of a REST error's body.
func restStatus(ge *googleapi.Error) string {
	var body struct {
		Error struct {
			Status string `json:"status"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(ge.Body), &body) == nil && body.Error.Status != "" {
		return body.Error.Status
	}
	for _, name := range []string{"ABORTED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "PERMISSION_DENIED", "INVALID_ARGUMENT", "ALREADY_EXISTS"} {
		if strings.Contains(ge.Message, name) {
			return name
		}
	}
	return ""
}

// restText is the error's message and reasons, for matching words.
func restText(ge *googleapi.Error) string {
	var b strings.Builder
	b.WriteString(ge.Message)
	b.WriteString(" ")
	b.WriteString(ge.Body)
	for _, e := range ge.Errors {
		b.WriteString(" " + e.Reason + " " + e.Message)
	}
	return b.String()
}

// capacityWording reports whether a refusal's message is about capacity
// (the zone, or a reservation, has none to give) rather than a quota or
// request rate: the TPU API's "There is no more capacity in the zone" (code
// 8) and "Insufficient reserved capacity" (code 9), Compute Engine's
// "does not have enough resources available".
func capacityWording(msg string) bool {
	s := strings.ToLower(msg)
	for _, w := range []string{"no more capacity", "insufficient reserved capacity", "insufficient capacity",
		"stockout", "not have enough resources available", "resource pool exhausted"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return computeStockout(msg)
}

// computeStockout reports whether msg carries one of Compute Engine's
// stockout codes or reasons.
func computeStockout(msg string) bool {
	s := strings.ToLower(msg)
	return strings.Contains(s, "zone_resource_pool_exhausted") || strings.Contains(s, "insufficientcapacity")
}

// quotaWording reports whether a RESOURCE_EXHAUSTED message is about a
// resource quota rather than request rate.
func quotaWording(msg string) bool {
	s := strings.ToLower(msg)
	return strings.Contains(s, "quota") && !strings.Contains(s, "per minute") && !strings.Contains(s, "rate") && !strings.Contains(s, "requests per")
}
