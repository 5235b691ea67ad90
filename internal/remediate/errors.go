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
	KindExhausted                 // RESOURCE_EXHAUSTED about capacity or quota (a stockout): retried later, never counted permanent
	KindTransient                 // may go away by itself: 429 rate limits, 5xx, INTERNAL, UNAVAILABLE, deadlines, broken connections, malformed answers
	KindPermanent                 // retrying the same call cannot help: INVALID_ARGUMENT, PERMISSION_DENIED, FAILED_PRECONDITION, …
)

func (k Kind) String() string {
	switch k {
	case KindNone:
		return "none"
	case KindNotFound:
		return "not found"
	case KindAlreadyExists:
		return "already exists"
	case KindExhausted:
		return "exhausted"
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

// kindOfCode classifies a google.rpc code with its message: the one table
// both adapters and finished operations use. RESOURCE_EXHAUSTED is a
// stockout or quota (KindExhausted) unless the message says it is about
// request rate (then KindTransient, like any 429 on a poll).
func kindOfCode(c codes.Code, message string) Kind {
	switch c {
	case codes.OK:
		return KindNone
	case codes.NotFound:
		return KindNotFound
	case codes.AlreadyExists:
		return KindAlreadyExists
	case codes.ResourceExhausted:
		if stockout(message) {
			return KindExhausted
		}
		return KindTransient
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
	if status == http.StatusTooManyRequests && c == codes.ResourceExhausted {
		// A 429 is a stockout only when it says so; else a rate limit.
		return kindOfCode(c, message)
	}
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

// stockout reports whether a RESOURCE_EXHAUSTED message is about capacity
// or a resource quota rather than request rate.
func stockout(msg string) bool {
	s := strings.ToLower(msg)
	for _, w := range []string{"stockout", "capacity", "insufficient"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return strings.Contains(s, "quota") && !strings.Contains(s, "per minute") && !strings.Contains(s, "rate")
}

// IsNotFound reports whether err is the TPU API's NOT_FOUND.
func IsNotFound(err error) bool { return KindOf(err) == KindNotFound }

// IsAlreadyExists reports whether err is the TPU API's ALREADY_EXISTS.
func IsAlreadyExists(err error) bool { return KindOf(err) == KindAlreadyExists }

// IsTransient reports whether err may go away by itself soon.
func IsTransient(err error) bool { return KindOf(err) == KindTransient }

// isExhausted reports whether err is a stockout or quota.
func isExhausted(err error) bool { return KindOf(err) == KindExhausted }

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
			kind = kindOfCode(st.Code(), st.Message()+" "+ae.Reason())
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
