package policy

// The words records, metrics, replay output and docs use, enumerated once.
// Terraform's log-based metrics and alerts filter on them; the module's
// tests read them from terraform/go-contract.json, which is generated from
// these lists, and fail when a filter names a word not here. Add a word
// here when you add its constant.

// Actions is every Action.
var Actions = []Action{
	ActionRecord, ActionRecreate, ActionReset, ActionDefer, ActionSkip, ActionReject,
	ActionPrepare, ActionMaintain, ActionResumed,
}

// Phases is every Phase a record or the ledger can carry: the state
// machine's, then those an older ledger may hold (saved, done, failed),
// which are read and finished.
var Phases = []Phase{
	PhaseClaimed, PhaseDeleting, PhaseDeleted, PhaseCreating, PhaseCreated,
	PhaseResetting, PhaseReset, PhaseRecovered, PhaseClosed, PhaseAbandoned,
	PhaseSaved, PhaseDone, PhaseFailed,
}

// Outcomes is every Outcome.
var Outcomes = []Outcome{
	OutcomeRecovered, OutcomeClosed, OutcomeAbandoned, OutcomeFailed,
	OutcomePrepared, OutcomeMaintained, OutcomeResumed,
}

// ReasonPrefixes are the words a skip's reason starts with for the guards
// an alert or a person filters on.
var ReasonPrefixes = []string{"breaker open", "paused by", "dry run", "not opted in", "recovery in flight", "guard:"}
