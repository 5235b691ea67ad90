package events

import (
	"strings"
	"unsafe"
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
	var lower [128]byte
	var user, preempt, hardware, maint bool
	prev := ""
	// The words of the reason: runs of [a-z0-9] in the lowered text (see
	// wordsOf, which this loop must match; it is inline so that nothing
	// here allocates).
	text := lowerASCII(reason, lower[:0])
	for i, start := 0, -1; i <= len(text); i++ {
		if i < len(text) && (text[i] >= 'a' && text[i] <= 'z' || text[i] >= '0' && text[i] <= '9') {
			if start < 0 {
				start = i
			}
			continue
		}
		if start < 0 {
			continue
		}
		w := text[start:i]
		start = -1
		switch {
		case w == "user" || w == "users" || w == "customer" || w == "userrequested":
			user = true
		case strings.HasPrefix(w, "preempt") || w == "spot":
			preempt = true
		case w == "hardware" || w == "hosterror" || w == "faulty" || w == "defective":
			hardware = true
		case strings.HasPrefix(w, "maint"):
			maint = true
		}
		switch prev {
		case "host":
			hardware = hardware || w == "error" || w == "errors" || w == "failure" || w == "failed" || w == "fault"
		case "chip":
			hardware = hardware || w == "failure" || w == "failed" || w == "error"
		}
		prev = w
	}
	switch {
	case user:
		return CauseUser
	case preempt:
		return CausePreemption
	case hardware:
		return CauseHardware
	case maint:
		return CauseMaintenance
	}
	return CauseUnknown
}

// lowerASCII is strings.ToLower(s), written into buf when s is short ASCII
// (the usual reason) so that classifying allocates nothing.
func lowerASCII(s string, buf []byte) string {
	if len(s) > cap(buf) {
		return strings.ToLower(s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return strings.ToLower(s)
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf = append(buf, c)
	}
	if len(buf) == 0 {
		return ""
	}
	return unsafe.String(&buf[0], len(buf))
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
