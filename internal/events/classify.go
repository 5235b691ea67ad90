package events

import (
	"strings"
)

// Classify tells why a node went down from the entry's terminate reason and
// the principal that made the call. It never fails: a reason it has not seen
// is CauseUnknown, which remediate treats like any involuntary termination.
//
// The reason is matched case-insensitively on words, so free text ("Terminated
// due to a maintenance event", "TPU hardware failure", "host error") and enum
// values ("HOST_MAINTENANCE", "HARDWARE_FAILURE", "USER_REQUESTED",
// "PREEMPTED") classify alike. When words of several causes occur, the first of
// user, preemption, hardware, maintenance wins: user first because a
// user-initiated termination is never undone, which is the safe reading of an
// ambiguous entry.
//
// The principal rule: terminations by the platform are made by Google
// identities (system@google.com, *.google.com, Google-managed service
// agents). A principal naming any other identity — a person's email, the
// customer's own service account, a federated principal:// — means someone
// in the project chose to stop the node, so the cause is CauseUser whatever
// the reason text says: tpu-autoheal must not undo a deliberate action, and
// if the guess is wrong the node merely stays down and the record says why.
// An empty or opaque principal (no '@', not principal://) says nothing.
func Classify(reason, principal string) Cause {
	if isCustomerPrincipal(principal) {
		return CauseUser
	}
	var buf [32]string
	words := splitWords(strings.ToLower(reason), buf[:0])
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

// splitWords appends the runs of [a-z0-9] in s to words, which is what
// strings.FieldsFunc(s, not [a-z0-9]) returns (every byte of a multi-byte
// rune is outside [a-z0-9], as the rune is), without allocating for the
// usual handful of words.
func splitWords(s string, words []string) []string {
	start := -1
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			words = append(words, s[start:i])
			start = -1
		}
	}
	if start >= 0 {
		words = append(words, s[start:])
	}
	return words
}

// isCustomerPrincipal reports whether principal names an identity that is
// not Google's own (see Classify).
func isCustomerPrincipal(principal string) bool {
	p := strings.ToLower(strings.TrimSpace(principal))
	if strings.HasPrefix(p, "principal://") || strings.HasPrefix(p, "principalset://") {
		return true
	}
	at := strings.LastIndexByte(p, '@')
	if at < 0 {
		return false
	}
	domain := p[at+1:]
	switch {
	case domain == "google.com", strings.HasSuffix(domain, ".google.com"),
		domain == "system.gserviceaccount.com",
		domain == "cloudservices.gserviceaccount.com",
		domain == "cloud-tpu.iam.gserviceaccount.com",
		domain == "compute-system.iam.gserviceaccount.com",
		strings.HasPrefix(domain, "gcp-sa-") && strings.HasSuffix(domain, ".iam.gserviceaccount.com"):
		return false
	}
	return true
}
