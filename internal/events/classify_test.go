package events

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		reason, principal string
		want              Cause
	}{
		{"Terminated due to a maintenance event", "system@google.com", CauseMaintenance},
		{"MAINTENANCE", "", CauseMaintenance},
		{"HOST_MAINTENANCE", "", CauseMaintenance},
		{"maintenance-event", "", CauseMaintenance},
		{"PREEMPTED", "", CausePreemption},
		{"preempted", "", CausePreemption},
		{"Instance was preempted.", "", CausePreemption},
		{"PREEMPTION", "", CausePreemption},
		{"spot", "", CausePreemption},
		{"Spot VM reclaimed", "", CausePreemption},
		{"HARDWARE_FAILURE", "", CauseHardware},
		{"host error", "", CauseHardware},
		{"HOST_ERROR", "", CauseHardware},
		{"TPU hardware failure", "", CauseHardware},
		{"chip failure detected", "", CauseHardware},
		{"USER_REQUESTED", "", CauseUser},
		{"terminated by user", "", CauseUser},
		{"Instance was stopped by the user", "", CauseUser},
		{"user", "", CauseUser},
		{"", "", CauseUnknown},
		{"TERMINATION_REASON_UNSPECIFIED", "", CauseUnknown},
		{"hotspot detected", "", CauseUnknown}, // "spot" matches whole words only
		{"host rebooted", "", CauseUnknown},
		{"会议", "", CauseUnknown},

		// Several causes in one reason: user wins, then preemption, hardware, maintenance.
		{"preempted by user", "", CauseUser},
		{"spot VM preempted for host maintenance", "", CausePreemption},
		{"host error during maintenance", "", CauseHardware},

		// Principals.
		{"Terminated due to a maintenance event", "alice@example.com", CauseUser},
		{"PREEMPTED", "trainer@acme-ml.iam.gserviceaccount.com", CauseUser},
		{"", "principal://iam.googleapis.com/locations/global/workforcePools/p/subject/bob", CauseUser},
		{"", "ALICE@EXAMPLE.COM", CauseUser},
		{"MAINTENANCE", "system@google.com", CauseMaintenance},
		{"MAINTENANCE", "tpu-robot@prod.google.com", CauseMaintenance},
		{"MAINTENANCE", "service-123@gcp-sa-tpu.iam.gserviceaccount.com", CauseMaintenance},
		{"MAINTENANCE", "service-123@cloud-tpu.iam.gserviceaccount.com", CauseMaintenance},
		{"MAINTENANCE", "123@cloudservices.gserviceaccount.com", CauseMaintenance},
		{"MAINTENANCE", "someone@google.com.evil.example", CauseUser}, // a look-alike domain is not Google
		{"MAINTENANCE", "system", CauseMaintenance},                   // an opaque principal says nothing
		{"", "system@google.com", CauseUnknown},
	}
	for _, tt := range tests {
		if got := Classify(tt.reason, tt.principal); got != tt.want {
			t.Errorf("Classify(%q, %q) = %q, want %q", tt.reason, tt.principal, got, tt.want)
		}
	}
}

func TestSplitWordsIsFieldsFunc(t *testing.T) {
	for _, s := range []string{"", "a", "terminated due to a maintenance event", "host_error", "  x--y  ", "café au lait", "\xff\xfeab", "a1b2 c3", "ＡＢ maint"} {
		want := strings.FieldsFunc(s, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') })
		got := splitWords(s, nil)
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("splitWords(%q) (-FieldsFunc +got):\n%s", s, diff)
		}
	}
}
