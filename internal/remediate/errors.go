package remediate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
)

// kindOfCode classifies a google.rpc code with its message: the one table
// both adapters and finished operations use. RESOURCE_EXHAUSTED is a
// stockout when its wording is about capacity ("There is no more capacity
// in the zone"), a quota when it names one, else request rate
// (KindTransient, like any 429 on a poll); FAILED_PRECONDITION
// "Insufficient reserved capacity" is a stockout of a reservation. Compute
// Engine's ZONE_RESOURCE_POOL_EXHAUSTED(_WITH_DETAILS) and
// insufficientCapacity are stockouts whatever code carries them.
func kindOfCode(c codes.Code, message string) Kind {
	if computeStockout(message) {
		return KindStockout
	}
	switch c {
	case codes.OK:
		return KindNone
	case codes.NotFound:
		return KindNotFound
	case codes.AlreadyExists:
		return KindAlreadyExists
	case codes.ResourceExhausted:
		switch {
		case capacityWording(message):
			return KindStockout
		case quotaWording(message):
			return KindQuota
		}
		return KindTransient
	case codes.FailedPrecondition:
		if capacityWording(message) {
			return KindStockout
		}
		return KindPermanent
	case codes.Internal, codes.Unavailable, codes.Unknown, codes.DeadlineExceeded, codes.Aborted, codes.DataLoss, codes.Canceled:
		return KindTransient
	}
	return KindPermanent // InvalidArgument, PermissionDenied, FailedPrecondition, OutOfRange, Unimplemented, Unauthenticated
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
// its message.
func kindOfHTTP(status int, rpcStatus, message string) Kind {
	c := codeOfHTTP(status)
	if n, ok := codeOfName(rpcStatus); ok && rpcStatus != "" {
		c = n
	}
	// A 429 is a stockout or quota only when it says so; else a rate limit.
	return kindOfCode(c, message)
}

// KindOf classifies err: the adapter's Kind when it set one, else from a
// *googleapi.Error in the chain, else from the network or the context. An
// error nothing recognises (a malformed answer, say) is transient: the
// recovery bounds how often it retries.
func KindOf(err error) Kind {
	if err == nil {
		return KindNone
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return kindOfHTTP(ge.Code, restStatus(ge), restText(ge))
	}
	if errors.Is(err, context.Canceled) {
		return KindTransient
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) {
		return KindTransient
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return KindTransient
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	if errors.As(err, &se) || errors.As(err, &te) {
		return KindTransient
	}
	return KindTransient
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

// KindOfCompute classifies a Compute Engine operation error by its code
// ("ZONE_RESOURCE_POOL_EXHAUSTED", "QUOTA_EXCEEDED", …) and message, for
// the Compute Engine backend: stockouts and quotas as the TPU API's, other
// codes by their wording (transient unless they say otherwise).
func KindOfCompute(code, message string) Kind {
	switch strings.ToUpper(code) {
	case "ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "INSUFFICIENTCAPACITY":
		return KindStockout
	case "QUOTA_EXCEEDED", "QUOTAEXCEEDED":
		return KindQuota
	case "RESOURCE_NOT_FOUND", "NOTFOUND":
		return KindNotFound
	case "RESOURCE_ALREADY_EXISTS", "ALREADYEXISTS":
		return KindAlreadyExists
	}
	if capacityWording(message) {
		return KindStockout
	}
	return KindTransient
}

// IsNotFound reports whether err is the TPU API's NOT_FOUND.
func IsNotFound(err error) bool { return KindOf(err) == KindNotFound }

// IsAlreadyExists reports whether err is the TPU API's ALREADY_EXISTS.
func IsAlreadyExists(err error) bool { return KindOf(err) == KindAlreadyExists }

// IsTransient reports whether err may go away by itself soon.
func IsTransient(err error) bool { return KindOf(err) == KindTransient }

// isExhausted reports whether err is a stockout or quota.
func isExhausted(err error) bool { k := KindOf(err); return k == KindStockout || k == KindQuota }

// IsStockout reports whether err is a capacity refusal (KindStockout).
func IsStockout(err error) bool { return KindOf(err) == KindStockout }

// FromAPI classifies a Google API client's error (REST or gRPC) into an
// *Error, read through gax-go's apierror; the adapters call it on every
// failed call. nil stays nil; an error that is no API error (a deadline, a
// broken connection, a malformed answer) is classified by KindOf.
func FromAPI(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	kind := KindOf(err)
	if ae, ok := apierror.FromError(err); ok {
		if st := ae.GRPCStatus(); st != nil {
			text := st.Message() + " " + ae.Reason()
			if ge := (*googleapi.Error)(nil); errors.As(err, &ge) {
				text += " " + restText(ge) // a REST error's reasons (ZONE_RESOURCE_POOL_EXHAUSTED)
			}
			kind = kindOfCode(st.Code(), text)
		} else if code := ae.HTTPCode(); code > 0 {
			var ge *googleapi.Error
			status, text := "", ae.Message()+" "+ae.Reason()
			if errors.As(err, &ge) {
				status, text = restStatus(ge), restText(ge)+" "+ae.Reason()
			}
			kind = kindOfHTTP(code, status, text)
		}
	}
	return &Error{Kind: kind, Err: err}
}

// OperationError is the error of an operation that finished with the
// google.rpc code and message given, classified by its code.
func OperationError(operation string, code int32, message string) error {
	c := codes.Code(code)
	return &Error{Kind: kindOfCode(c, message), Err: fmt.Errorf("operation %s failed: %s: %s", operation, c, message)}
}
