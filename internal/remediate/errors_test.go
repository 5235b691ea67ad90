package remediate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"google.golang.org/api/googleapi"
)

func TestErrorClassification(t *testing.T) {
	api := func(code int, msg string) error {
		return fmt.Errorf("delete %s: %w", nodeName, &googleapi.Error{Code: code, Message: msg})
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
			if got := IsTransient(tt.err); got != tt.transient {
				t.Errorf("IsTransient(%v) = %v, want %v", tt.err, got, tt.transient)
			}
			if got := IsNotFound(tt.err); got != tt.notFound {
				t.Errorf("IsNotFound(%v) = %v, want %v", tt.err, got, tt.notFound)
			}
			if got := IsAlreadyExists(tt.err); got != tt.exists {
				t.Errorf("IsAlreadyExists(%v) = %v, want %v", tt.err, got, tt.exists)
			}
			if got := isExhausted(tt.err); got != tt.exhaus {
				t.Errorf("isExhausted(%v) = %v, want %v", tt.err, got, tt.exhaus)
			}
		})
	}
}

func TestCleanSpecKeepsWhatAPersonChose(t *testing.T) {
	n := optedIn("TERMINATED", "UNHEALTHY_MAINTENANCE")
	n.NetworkConfigs = nil
	n.HealthDescription, n.CreateTime, n.Id, n.ApiVersion, n.QueuedResource = "x", "t", 9, "V2", "qr"
	n.MultisliceNode, n.ProtectionTier = true, "STANDARD"
	n.NetworkEndpoints = nil
	n.Description, n.CidrBlock, n.Tags = "d", "10.0.0.0/29", []string{"a"}
	c := CleanSpec(n)
	if c.State != "" || c.Health != "" || c.HealthDescription != "" || c.CreateTime != "" || c.Id != 0 ||
		c.ApiVersion != "V2" || c.QueuedResource != "" || c.MultisliceNode || c.ProtectionTier != "" {
		t.Errorf("CleanSpec left output-only fields: %+v", c)
	}
	if c.Name != nodeName || c.Description != "d" || c.CidrBlock != "10.0.0.0/29" || len(c.Tags) != 1 || c.Labels["tpu-autoheal"] != "enabled" {
		t.Errorf("CleanSpec dropped input fields: %+v", c)
	}
	c.Labels["x"] = "y"
	if n.Labels["x"] != "" {
		t.Error("CleanSpec shares the labels map with its input")
	}
}
