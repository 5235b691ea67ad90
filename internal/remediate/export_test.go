package remediate

import "github.com/tpu-autoheal/autoheal/internal/policy"

// OurEntry exposes policy.OurEntry to the package's external tests.
var OurEntry = policy.OurEntry

// The policy's failure weights, under the names the package's tests use.
const (
	transientWeight = policy.TransientWeight
	permanentWeight = policy.PermanentWeight
)

var failureLimit = policy.FailureLimit

// SetStore replaces a test handler's ledger by s, with the capabilities s
// has: tests swap in wrappers of the ledger (faults, counters) that keep or
// hide the follower lease and the batched read by what they embed, as a
// handler built by New from s would be given them.
func SetStore(h *Handler, s Store) {
	h.Store = s
	h.Lease, _ = s.(FollowerLease)
	h.Histories, _ = s.(HistoriesReader)
}

// Filled is a Handler built by a test's literal with the defaults New
// fills (a clock, a holder, a logger, the call timeout, the workers): the
// package's tests build many handlers field by field.
func Filled(h *Handler) *Handler {
	h.setDefaults()
	return h
}

// PermanentLedgerError exposes permanentLedgerError to the tests that feed
// it the errors the real ledgers return.
var PermanentLedgerError = permanentLedgerError
