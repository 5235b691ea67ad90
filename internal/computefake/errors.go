package computefake

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// apiError is an error the fake answers with, in Compute Engine's shape: an
// HTTP status, a message and one errors[] item whose reason clients branch on
// ("notFound", "conditionNotMet", ...). The generated client turns it into a
// *googleapi.Error with Code, Message and Errors[0].Reason set.
type apiError struct {
	Code    int
	Reason  string
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Code, e.Reason, e.Message) }

func errorf(code int, reason, format string, args ...any) *apiError {
	return &apiError{Code: code, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// notFound is Compute Engine's 404 for a resource name.
func notFound(name string) *apiError {
	return errorf(http.StatusNotFound, "notFound", "The resource '%s' was not found", name)
}

// invalid is Compute Engine's 400 for a bad field value.
func invalid(field, value, why string) *apiError {
	return errorf(http.StatusBadRequest, "invalid", "Invalid value for field '%s': '%s'. %s", field, value, why)
}

// notReady is the 400 Compute Engine answers for a lifecycle call on an
// instance that is in the middle of another one (SkyPilot's failover handler
// names RESOURCE_NOT_READY for a start while the VM is still STOPPING).
func notReady(name string) *apiError {
	return errorf(http.StatusBadRequest, "resourceNotReady", "The resource '%s' is not ready", name)
}

// defaultReason is the errors[].reason an injected error carries when its
// rule names none: the reasons Compute Engine uses for these codes.
var defaultReason = map[int]string{
	400: "badRequest",
	401: "authError",
	403: "forbidden",
	404: "notFound",
	409: "alreadyExists",
	412: "conditionNotMet",
	429: "rateLimitExceeded",
	500: "backendError",
	501: "notImplemented",
	503: "backendError",
	504: "deadlineExceeded",
}

// writeError writes the error body the generated client parses.
func writeError(w http.ResponseWriter, e *apiError) {
	body := map[string]any{"error": map[string]any{
		"code":    e.Code,
		"message": e.Message,
		"errors": []map[string]string{{
			"message": e.Message,
			"domain":  "global",
			"reason":  e.Reason,
		}},
	}}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(e.Code)
	_ = json.NewEncoder(w).Encode(body)
}
