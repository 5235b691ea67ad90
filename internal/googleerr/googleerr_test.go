package googleerr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tpu-autoheal/autoheal/internal/failure"
)

// TestErrorClassification: REST errors and the network's, as an adapter
// classifies them (moved here from remediate with the mapping).
func TestErrorClassification(t *testing.T) {
	api := func(code int, msg string) error {
		return fmt.Errorf("delete n: %w", &googleapi.Error{Code: code, Message: msg})
	}
	tests := []struct {
		name                                string
		err                                 error
		transient, notFound, exists, exhaus bool
	}{
		{name: "503 unavailable is transient", err: api(503, "UNAVAILABLE"), transient: true},
		{name: "500 internal is transient", err: api(500, ""), transient: true},
		{name: "502 and 504 are transient", err: errors.Join(api(502, "")), transient: true},
		{name: "504 is transient", err: api(504, ""), transient: true},
		{name: "429 rate limit is transient", err: api(429, "Quota exceeded for requests per minute"), transient: true},
		{name: "429 stockout is not transient", err: api(429, "There is no more capacity in the zone"), exhaus: true},
		{name: "403 permission denied is permanent", err: api(403, "PERMISSION_DENIED")},
		{name: "400 invalid argument is permanent", err: api(400, "INVALID_ARGUMENT")},
		{name: "404 is not found", err: api(404, ""), notFound: true},
		{name: "409 is already exists", err: api(409, "ALREADY_EXISTS"), exists: true},
		{name: "deadline is transient", err: fmt.Errorf("get: %w", context.DeadlineExceeded), transient: true},
		{name: "connection refused is transient", err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, transient: true},
		{name: "cancelled (the caller gave up) is transient", err: context.Canceled, transient: true},
		{name: "nil is nothing", err: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := FromAPI(tt.err)
			if got := failure.IsTransient(err); got != tt.transient {
				t.Errorf("IsTransient(%v) = %v, want %v", err, got, tt.transient)
			}
			if got := failure.IsNotFound(err); got != tt.notFound {
				t.Errorf("IsNotFound(%v) = %v, want %v", err, got, tt.notFound)
			}
			if got := failure.IsAlreadyExists(err); got != tt.exists {
				t.Errorf("IsAlreadyExists(%v) = %v, want %v", err, got, tt.exists)
			}
			if got := failure.IsExhausted(err); got != tt.exhaus {
				t.Errorf("IsExhausted(%v) = %v, want %v", err, got, tt.exhaus)
			}
		})
	}
}

// TestCapacityRefusalsAreStockoutsAndQuotasAreNot: the wordings Google
// refuses a create with, as the TPU API (REST and finished operations) and
// Compute Engine give them, each with the kind and the scope it means.
func TestCapacityRefusalsAreStockoutsAndQuotasAreNot(t *testing.T) {
	for _, tt := range []struct {
		name  string
		err   error
		kind  failure.Kind
		scope string
	}{
		{"code 8 no more capacity is a stockout",
			Operation("op", 8, `There is no more capacity in the zone "us-central2-b"; you can try in another zone where Cloud TPU Nodes are offered`), failure.Stockout, "zone"},
		{"code 9 insufficient reserved capacity is a stockout",
			Operation("op", 9, "Insufficient reserved capacity. Contact customer support to increase your reservation."), failure.Stockout, "zone"},
		{"code 9 other precondition stays permanent", Operation("op", 9, "node is not in a state to be deleted"), failure.Permanent, ""},
		{"REST 429 capacity is a stockout", &googleapi.Error{Code: 429, Message: "There is no more capacity in the zone"}, failure.Stockout, "zone"},
		{"code 8 quota in region is a region quota",
			Operation("op", 8, "Quota 'TPUV4_CHIPS' exceeded. Limit: 64.0 in region us-central2."), failure.Quota, "region"},
		{"code 8 quota in zone is a zone quota",
			Operation("op", 8, "Quota 'TPUV4_PODSLICE_LITE' exceeded. Limit: 16.0 in zone us-west4-a."), failure.Quota, "zone"},
		{"rate quota stays transient", &googleapi.Error{Code: 429, Message: "Quota exceeded for quota metric 'Requests' and limit 'Requests per minute'"}, failure.Transient, ""},
		{"compute ZONE_RESOURCE_POOL_EXHAUSTED is a stockout",
			&googleapi.Error{Code: 503, Message: "The zone 'projects/p/zones/us-central1-a' does not have enough resources available to fulfill the request.",
				Errors: []googleapi.ErrorItem{{Reason: "ZONE_RESOURCE_POOL_EXHAUSTED"}}}, failure.Stockout, "zone"},
		{"compute ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS is a stockout",
			Operation("op", 14, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: The zone does not have enough resources available to fulfill the request. '(resource type:compute)'."), failure.Stockout, "zone"},
		{"compute insufficientCapacity is a stockout", &googleapi.Error{Code: 503, Message: "insufficientCapacity"}, failure.Stockout, "zone"},
		{"unavailable without capacity wording stays transient", &googleapi.Error{Code: 503, Message: "backend unavailable"}, failure.Transient, ""},
		{"gRPC RESOURCE_EXHAUSTED capacity is a stockout", status.Error(codes.ResourceExhausted, "There is no more capacity in the zone"), failure.Stockout, "zone"},
		{"gRPC NOT_FOUND is not found", status.Error(codes.NotFound, "node n not found"), failure.NotFound, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := failure.KindOf(FromAPI(tt.err))
			if got != tt.kind {
				t.Fatalf("KindOf(%v) = %s, want %s", tt.err, got, tt.kind)
			}
			if got == failure.Stockout || got == failure.Quota {
				if s := failure.QuotaScope(got, tt.err.Error()); s != tt.scope {
					t.Errorf("QuotaScope = %q, want %q", s, tt.scope)
				}
			}
		})
	}
}

// TestComputeEngineCodes: Compute Engine's operation codes and REST reasons
// name their kind whatever the HTTP status; an operation with an unknown
// code falls back to its status, and with none is permanent.
func TestComputeEngineCodes(t *testing.T) {
	for code, want := range map[string]failure.Kind{
		"ZONE_RESOURCE_POOL_EXHAUSTED": failure.Stockout, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS": failure.Stockout,
		"QUOTA_EXCEEDED": failure.Quota, "RESOURCE_NOT_FOUND": failure.NotFound, "INTERNAL_ERROR": failure.Transient,
		"RESOURCE_ALREADY_EXISTS": failure.AlreadyExists, "RESOURCE_NOT_READY": failure.Transient,
	} {
		if got := failure.KindOf(ComputeOperation(400, []OperationItem{{Code: code}})); got != want {
			t.Errorf("ComputeOperation(%s) = %s, want %s", code, got, want)
		}
	}
	for _, tt := range []struct {
		name string
		err  error
		want failure.Kind
	}{
		{"400 resourceNotReady is transient", &googleapi.Error{Code: 400, Errors: []googleapi.ErrorItem{{Reason: "resourceNotReady"}}}, failure.Transient},
		{"403 quotaExceeded is a quota", &googleapi.Error{Code: 403, Errors: []googleapi.ErrorItem{{Reason: "quotaExceeded"}}}, failure.Quota},
		{"412 conditionNotMet is transient", &googleapi.Error{Code: 412, Errors: []googleapi.ErrorItem{{Reason: "conditionNotMet"}}}, failure.Transient},
		{"403 forbidden is permanent", &googleapi.Error{Code: 403, Errors: []googleapi.ErrorItem{{Reason: "forbidden"}}}, failure.Permanent},
		{"404 notFound is not found", &googleapi.Error{Code: 404, Errors: []googleapi.ErrorItem{{Reason: "notFound"}}}, failure.NotFound},
		{"a broken answer is transient", errors.New("unexpected EOF"), failure.Transient},
	} {
		if got := failure.KindOf(FromCompute(tt.err)); got != tt.want {
			t.Errorf("%s: FromCompute = %s, want %s", tt.name, got, tt.want)
		}
	}
	if got := failure.KindOf(ComputeOperation(503, []OperationItem{{Code: "X", Message: "The zone does not have enough resources available"}})); got != failure.Stockout {
		t.Errorf("capacity wording under an unknown code = %s, want stockout", got)
	}
	if got := failure.KindOf(ComputeOperation(500, []OperationItem{{Code: "X"}})); got != failure.Transient {
		t.Errorf("unknown code, 500 = %s, want transient", got)
	}
	// A method the API does not allow (405), a resource gone for good (410)
	// or a call not implemented (501) never succeeds when retried.
	for _, status := range []int{405, 410, 501} {
		if got := failure.KindOf(FromCompute(&googleapi.Error{Code: status})); got != failure.Permanent {
			t.Errorf("FromCompute(HTTP %d) = %s, want permanent", status, got)
		}
		if got := failure.KindOf(FromAPI(&googleapi.Error{Code: status})); got != failure.Permanent {
			t.Errorf("FromAPI(HTTP %d) = %s, want permanent", status, got)
		}
		if got := failure.KindOf(ComputeOperation(status, []OperationItem{{Code: "X"}})); got != failure.Permanent {
			t.Errorf("ComputeOperation(HTTP %d, unknown code) = %s, want permanent", status, got)
		}
	}
	if got := failure.KindOf(ComputeOperation(0, []OperationItem{{Code: "X"}})); got != failure.Permanent {
		t.Errorf("unknown code, no status = %s, want permanent", got)
	}
	if got, want := ComputeOperation(0, []OperationItem{{"A", "a"}, {"B", "b"}}).Error(), "A: a; B: b"; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
}

// TestFromAPIKeepsAClassifiedError: an error an adapter already classified
// is not classified again (an adapter's own Permanent stays so).
func TestFromAPIKeepsAClassifiedError(t *testing.T) {
	own := &failure.Error{Kind: failure.Permanent, Err: errors.New("no queued resources")}
	for _, f := range []func(error) error{FromAPI, FromCompute} {
		if got := f(fmt.Errorf("get: %w", own)); failure.KindOf(got) != failure.Permanent {
			t.Errorf("reclassified: %s", failure.KindOf(got))
		}
		if f(nil) != nil {
			t.Error("nil became an error")
		}
	}
}
