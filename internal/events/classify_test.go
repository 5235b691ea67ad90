package events

import (
	"strings"
	"testing"
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

// classifyWords is the word rules of Classify as first written, over
// strings.FieldsFunc: the specification Classify's allocation-free loop must
// match.
func classifyWords(reason string) Cause {
	words := strings.FieldsFunc(strings.ToLower(reason), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
	has := func(match func(w string) bool) bool {
		for _, w := range words {
			if match(w) {
				return true
			}
		}
		return false
	}
	pair := func(a string, bs ...string) bool {
		for i := 0; i+1 < len(words); i++ {
			if words[i] == a {
				for _, b := range bs {
					if words[i+1] == b {
						return true
					}
				}
			}
		}
		return false
	}
	switch {
	case has(func(w string) bool { return w == "user" || w == "users" || w == "customer" || w == "userrequested" }):
		return CauseUser
	case has(func(w string) bool { return strings.HasPrefix(w, "preempt") || w == "spot" }):
		return CausePreemption
	case has(func(w string) bool { return w == "hardware" || w == "hosterror" || w == "faulty" || w == "defective" }),
		pair("host", "error", "errors", "failure", "failed", "fault"),
		pair("chip", "failure", "failed", "error"):
		return CauseHardware
	case has(func(w string) bool { return strings.HasPrefix(w, "maint") }):
		return CauseMaintenance
	}
	return CauseUnknown
}

func TestClassifyMatchesTheWordRules(t *testing.T) {
	for _, s := range []string{"maintenance", "  x--maintenance  ", "café maintenance", "\xff\xfemaintenance", "ＡＢ maint",
		"hostéerror", "host\xfferror", "host  error", "host-failed", "chip error", "chip", "host", "PREEMPTÉ", "ſpot", "K user",
		"Terminated due to a maintenance event", "spot VM preempted for host maintenance", "host error during maintenance",
		strings.Repeat("word ", 40) + "maintenance", strings.Repeat("x", 200) + " hardware", "İstanbul maintenance", ""} {
		if got, want := Classify(s, ""), classifyWords(s); got != want {
			t.Errorf("Classify(%q) = %s, the word rules say %s", s, got, want)
		}
	}
}
