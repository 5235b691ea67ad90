package tpufake

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// rpcCodes maps google.rpc.Code names to their numbers.
var rpcCodes = map[string]int{
	"OK":                  0,
	"CANCELLED":           1,
	"UNKNOWN":             2,
	"INVALID_ARGUMENT":    3,
	"DEADLINE_EXCEEDED":   4,
	"NOT_FOUND":           5,
	"ALREADY_EXISTS":      6,
	"PERMISSION_DENIED":   7,
	"RESOURCE_EXHAUSTED":  8,
	"FAILED_PRECONDITION": 9,
	"ABORTED":             10,
	"OUT_OF_RANGE":        11,
	"UNIMPLEMENTED":       12,
	"INTERNAL":            13,
	"UNAVAILABLE":         14,
	"DATA_LOSS":           15,
	"UNAUTHENTICATED":     16,
}

// httpForStatus is the HTTP status Google's REST front end uses for each
// google.rpc.Code (google/rpc/code.proto).
var httpForStatus = map[string]int{
	"OK":                  200,
	"CANCELLED":           499,
	"UNKNOWN":             500,
	"INVALID_ARGUMENT":    400,
	"DEADLINE_EXCEEDED":   504,
	"NOT_FOUND":           404,
	"ALREADY_EXISTS":      409,
	"PERMISSION_DENIED":   403,
	"RESOURCE_EXHAUSTED":  429,
	"FAILED_PRECONDITION": 400,
	"ABORTED":             409,
	"OUT_OF_RANGE":        400,
	"UNIMPLEMENTED":       501,
	"INTERNAL":            500,
	"UNAVAILABLE":         503,
	"DATA_LOSS":           500,
	"UNAUTHENTICATED":     401,
}

// statusForHTTP is the usual google.rpc.Code for an HTTP status, used when a
// FailRule gives only Code.
var statusForHTTP = map[int]string{
	400: "INVALID_ARGUMENT",
	401: "UNAUTHENTICATED",
	403: "PERMISSION_DENIED",
	404: "NOT_FOUND",
	409: "ALREADY_EXISTS",
	429: "RESOURCE_EXHAUSTED",
	499: "CANCELLED",
	500: "INTERNAL",
	501: "UNIMPLEMENTED",
	503: "UNAVAILABLE",
	504: "DEADLINE_EXCEEDED",
}

// apiError is an error the fake answers with: an HTTP status, a google.rpc
// status name and a message.
type apiError struct {
	Code    int
	Status  string
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Code, e.Status, e.Message) }

func errorf(status, format string, args ...any) *apiError {
	return &apiError{Code: httpForStatus[status], Status: status, Message: fmt.Sprintf(format, args...)}
}

func notFound(name string) *apiError {
	return errorf("NOT_FOUND", "Resource '%s' was not found", name)
}

// normalize fills in whichever of Code and Status is missing.
func normalize(code int, status string) (int, string) {
	switch {
	case code == 0 && status == "":
		return 500, "INTERNAL"
	case code == 0:
		if c, ok := httpForStatus[status]; ok {
			return c, status
		}
		return 500, status
	case status == "":
		if s, ok := statusForHTTP[code]; ok {
			return code, s
		}
		if code >= 500 {
			return code, "INTERNAL"
		}
		return code, "UNKNOWN"
	}
	return code, status
}

// writeError writes a Google JSON error body, which the generated client
// turns into a *googleapi.Error.
func writeError(w http.ResponseWriter, e *apiError) {
	body := map[string]any{"error": map[string]any{
		"code":    e.Code,
		"message": e.Message,
		"status":  e.Status,
	}}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(e.Code)
	_ = json.NewEncoder(w).Encode(body)
}
