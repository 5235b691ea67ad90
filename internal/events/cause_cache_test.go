package events

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// TestReaderCauseCacheIsKeyedByPrincipalToo: the Reader remembers recent
// classifications, but a user's terminate with the same reason as a
// system's is the user's: it must never inherit the cached system cause
// (replay --apply would then recreate a node a person stopped).
func TestReaderCauseCacheIsKeyedByPrincipalToo(t *testing.T) {
	const reason = "Terminated due to a maintenance event"
	entry := func(id, principal string) string {
		return fmt.Sprintf(`{"protoPayload":{"@type":"type.googleapis.com/google.cloud.audit.AuditLog","authenticationInfo":{"principalEmail":%q},`+
			`"serviceName":"tpu.googleapis.com","methodName":"tpu.nodes.terminate","resourceName":"projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128",`+
			`"metadata":{"terminateReason":%q}},"insertId":%q,"resource":{"type":"audited_resource","labels":{"project_id":"acme-ml"}},`+
			`"timestamp":"2026-11-20T03:44:36.265703305Z","logName":"projects/acme-ml/logs/cloudaudit.googleapis.com%%2Fsystem_event"}`, principal, reason, id)
	}
	in := strings.Join([]string{
		entry("a", "system@google.com"),
		entry("b", "alice@example.com"),
		entry("c", "system@google.com"),
	}, "\n")
	want := []Cause{CauseMaintenance, CauseUser, CauseMaintenance}
	r := NewReader(strings.NewReader(in), Options{})
	for i, w := range want {
		it, err := r.Next()
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if it.Err != nil {
			t.Fatalf("entry %d rejected: %v", i, it.Err)
		}
		if got := it.Event.Cause; got != w {
			t.Errorf("entry %d (%s): cause %s, want %s", i, []string{"system", "alice", "system"}[i], got, w)
		}
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the entries: %v, want EOF", err)
	}
}
