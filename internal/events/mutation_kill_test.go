package events

// Tests written for the survivors of the mutation check (docs/testing.md,
// "Mutation check"; bench/mutate): each fails with its mutation applied and
// passes without it.

import (
	"errors"
	"strings"
	"testing"
)

// Only the admin-activity methods the sink routes are evidence: any other
// method of the TPU API (a stop, a start, an update, a queued resource's
// create or reset) is a foreign method, not a node's create or delete with
// an empty change (mutation E04: IsAdminMethod accepting every
// google.cloud.tpu.* method).
func TestOtherTPUMethodsAreNotAdminEvidence(t *testing.T) {
	fixture := string(readFixture(t, "admin-delete-node.json"))
	const routed = `"methodName": "google.cloud.tpu.v2.Tpu.DeleteNode"`
	if !strings.Contains(fixture, routed) {
		t.Fatalf("fixture admin-delete-node.json no longer has %s", routed)
	}
	for _, m := range []string{
		"google.cloud.tpu.v2.Tpu.StopNode", "google.cloud.tpu.v2.Tpu.StartNode", "google.cloud.tpu.v2.Tpu.UpdateNode",
		"google.cloud.tpu.v2alpha1.Tpu.ResetQueuedResource", "google.cloud.tpu.v2.Tpu.CreateQueuedResource",
		"google.cloud.tpu.v1.Tpu.ReimageNode", "google.cloud.tpu.v2.Tpu.DeleteNodes",
	} {
		if IsAdminMethod(m) {
			t.Errorf("IsAdminMethod(%q) = true, want false", m)
		}
		entry := strings.Replace(fixture, routed, `"methodName": "`+m+`"`, 1)
		ev, err := Parse([]byte(entry), fixtureOpts)
		var re *RejectError
		if !errors.As(err, &re) || re.Code != CodeForeignMethod {
			t.Errorf("Parse(%s entry) = kind %q admin %+v, %v; want a %s reject", m, ev.Kind, ev.Admin, err, CodeForeignMethod)
		}
	}
}
