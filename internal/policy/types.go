package policy

import (
	"errors"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/seal"
)

// Action is what was done about an event or a swept node. The same six words
// appear in records, replay output, metrics and docs.
type Action string

// Actions.
const (
	ActionRecord   Action = "record"   // nothing to do; noted
	ActionRecreate Action = "recreate" // delete and create the node again
	ActionReset    Action = "reset"    // reset the queued resource that owns the node
	ActionDefer    Action = "defer"    // look again after a grace period
	ActionSkip     Action = "skip"     // would act, but a guard says no
	ActionReject   Action = "reject"   // malformed or foreign input
	ActionPrepare  Action = "prepare"  // maintenance notice: ask the workload to checkpoint now
	ActionMaintain Action = "maintain" // start the announced maintenance now, after the checkpoint
	ActionResumed  Action = "resumed"  // the guest reported training resumed (or that it did not within the watch)
)

// Maintenance modes (Config.MaintenanceMode, AUTOHEAL_MAINTENANCE, label
// tpu-autoheal-maintenance).
const (
	MaintenanceOff     = "off"     // notices are recorded only
	MaintenancePrepare = "prepare" // notices become a checkpoint request (default)
	MaintenanceEarly   = "early"   // and, once every worker checkpointed, maintenance starts now
)

// Decision is Decide's answer.
type Decision struct {
	Action Action
	Reason string    // for a person: why this action
	Due    time.Time // for defer, and a guard's skip: when to look again
	// Final marks a skip no later look changes while the node stays as it
	// is (not opted in, terminated by a user, held): a pending deferral of
	// the node is dropped, so sweeps do not revisit it forever.
	Final bool

	// The ledger effects the handler performs, exactly as given (Decide
	// fills them; see plan).
	Hold          *Hold     // record that a user terminated the node
	ClearHold     bool      // the hold no longer applies
	Deferral      *Deferral // set or replace the node's deferral
	ClearDeferral bool      // drop the node's deferral
	Claim         bool      // claim (or take over) the node's recovery with Action, then Step it
	Close         string    // close the node's unfinished recovery (lease expired) with this why
	// SeenReady keeps Seen (evidence.go) in the recovery's ledger: a
	// paused recovery's create seen finished, with no claim.
	SeenReady *Evidence
	// Since, when set, is the deferral's Since instead of the pending
	// one's: a node exempt from its grace (in maintenance) starts its
	// grace only after the exemption.
	Since time.Time
}

// Config is the policy. The function fills it from AUTOHEAL_* variables, the
// CLI from flags with the same defaults (DefaultConfig).
type Config struct {
	LabelKey   string // opt-in label key, default "tpu-autoheal"
	LabelValue string // opt-in label value, default "enabled"
	DryRun     bool   // decide and record, never mutate

	UnhealthyGrace time.Duration // READY but unhealthy this long → recreate
	StuckGrace     time.Duration // in a transitional state this long → recreate
	Cooldown       time.Duration // minimum time between two recreates of one node
	Window         time.Duration // window for MaxRecreates
	MaxRecreates   int           // recreates of one node within Window
	MaxInFlight    int           // project-wide unfinished recoveries
	MaxAttempts    int           // attempts before a recovery failing permanently is abandoned (0 = DefaultMaxAttempts)
	Lease          time.Duration // how long a claim is held without renewal
	EventTTL       time.Duration // how long processed event ids are remembered
	// LookAgain is how soon an operation in progress is looked at again
	// (AUTOHEAL_LOOK_AGAIN; 0 = the LookAgain constant, 30 s). The function
	// sets 5 s: its sweeps follow their recoveries (SweepOptions.Follow),
	// so a recovery's next step comes within this of its operation's end.
	LookAgain time.Duration

	// StartupScript is the script set explicitly (AUTOHEAL_STARTUP_SCRIPT,
	// --startup-script) as metadata startup-script on every recreated node,
	// replacing the node's own ("" = none configured: see createSpec).
	StartupScript string
	// ResumeScript is the resume-training script the caller hands in (the
	// function and the CLI pass startup.Script): set on a recreated node
	// that opted into it by carrying metadata ResumeOptInKey, when no
	// script is configured. ResumeKeys are the metadata keys it needs to
	// do anything (the caller's list); a node lacking one gets a warning.
	ResumeScript string
	ResumeKeys   []string

	// BreakerLimit and BreakerWindow are the storm breaker
	// (AUTOHEAL_BREAKER, "48/1h"): at most BreakerLimit recreates and
	// resets start in one zone within BreakerWindow. 0 = DefaultBreakerLimit.
	BreakerLimit  int
	BreakerWindow time.Duration
	// HoldTTL is how long a user hold lasts (AUTOHEAL_HOLD_TTL, 168h).
	HoldTTL time.Duration
	// MaintenanceMode is off, prepare or early (AUTOHEAL_MAINTENANCE);
	// the node label tpu-autoheal-maintenance overrides it per node.
	MaintenanceMode string
	// CheckpointTimeout: with early maintenance, how long after the notice
	// was sent the checkpoint may take (AUTOHEAL_CHECKPOINT_TIMEOUT, 30m).
	CheckpointTimeout time.Duration
	// ResumeWatch: how long after a recovery the guest's autoheal/resumed
	// report is waited for (AUTOHEAL_RESUME_WATCH, 2h).
	ResumeWatch time.Duration
	// ZoneHintBudget bounds how long one zone hint looks at its zone's
	// nodes (0 = DefaultZoneHintBudget, 1m), besides its page and node
	// bounds: it answers its delivery well within Pub/Sub's push deadline.
	ZoneHintBudget time.Duration
	// MaintenanceMax bounds the maintenance exemption: a node in
	// maintenance (ONGOING, or ours) is not recreated for being unhealthy
	// until this long after the maintenance started
	// (AUTOHEAL_MAINTENANCE_MAX; 0 = DefaultMaintenanceMax, 4h).
	MaintenanceMax time.Duration

	// Actor is the identity the recovery acts as (AUTOHEAL_ACTOR: the
	// function's service account, set by Terraform; replay: the
	// credentials' account or --actor). An admin-activity entry by Actor
	// is ours; "" = only an entry whose operation we saved is ours.
	Actor string
	// EvidenceWait is how long, after a delete whose outcome was ambiguous
	// (no operation saved) or a node gone after our create finished, the
	// recovery waits for a person's audit entry before it concludes
	// (AUTOHEAL_EVIDENCE_WAIT; 0 = DefaultEvidenceWait).
	EvidenceWait time.Duration
	// StockoutSeed seeds the jitter of stockout back-offs (StockoutDelay):
	// a fixed seed replays the same retry times.
	StockoutSeed uint64
	// Zones are the zones tpu-autoheal watches (AUTOHEAL_ZONES): a node's
	// autoheal-stockout zones: fallback may name only these.
	Zones []string
	// StockoutZoneAfter is how many stockouts in a zone a zones: fallback
	// takes before it creates in the next zone (AUTOHEAL_STOCKOUT_ZONE_AFTER;
	// 0 = DefaultStockoutZoneAfter).
	StockoutZoneAfter int
}

// Defaults of the newer policy knobs.
const (
	DefaultBreakerLimit      = 48
	DefaultBreakerWindow     = time.Hour
	DefaultHoldTTL           = 168 * time.Hour
	DefaultCheckpointTimeout = 30 * time.Minute
	DefaultResumeWatch       = 2 * time.Hour
	// DefaultEvidenceWait: admin-activity audit entries reach the function
	// within about a minute of the call.
	DefaultEvidenceWait = 90 * time.Second
)

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		LabelKey:       "tpu-autoheal",
		LabelValue:     "enabled",
		UnhealthyGrace: 10 * time.Minute,
		StuckGrace:     30 * time.Minute,
		Cooldown:       30 * time.Minute,
		Window:         24 * time.Hour,
		MaxRecreates:   3,
		MaxInFlight:    64, // a safety rail above the breaker's 48 per zone: a 32-pod wave is recreated at once
		MaxAttempts:    DefaultMaxAttempts,
		Lease:          15 * time.Minute,
		EventTTL:       7 * 24 * time.Hour,

		BreakerLimit:      DefaultBreakerLimit,
		BreakerWindow:     DefaultBreakerWindow,
		HoldTTL:           DefaultHoldTTL,
		MaintenanceMode:   MaintenancePrepare,
		CheckpointTimeout: DefaultCheckpointTimeout,
		ResumeWatch:       DefaultResumeWatch,
		MaintenanceMax:    DefaultMaintenanceMax,
		EvidenceWait:      DefaultEvidenceWait,
		StockoutZoneAfter: DefaultStockoutZoneAfter,
	}
}

// Observed is what the TPU API says about the node now.
type Observed struct {
	Node           *tpu.Node           // nil when the node was NOT FOUND
	QueuedResource *tpu.QueuedResource // the queued resource owning the node, if any
	// Maintenance is the maintenance tpu-autoheal started on the node
	// (performMaintenance), nil when none: within it the grace does not
	// run (maintenance_exempt.go).
	Maintenance *OurMaintenance
}

// Phase is how far a recovery got. Each phase is saved before the TPU call
// it names is made, so a crash between two steps is finished by the next
// delivery or sweep from the saved phase (see Step).
type Phase string

// Phases of a recreate: claimed → deleting → deleted → creating → created →
// recovered. Of a reset: claimed → resetting → reset → recovered. Terminal:
// recovered, closed, abandoned (and done, of recoveries saved before these
// phases existed).
const (
	PhaseClaimed   Phase = "claimed"   // claim taken, nothing done yet
	PhaseDeleting  Phase = "deleting"  // spec saved; delete requested (DeleteOp once its answer came)
	PhaseDeleted   Phase = "deleted"   // node gone, spec saved; create not requested (also after a failed create)
	PhaseCreating  Phase = "creating"  // create requested (CreateOp once its answer came)
	PhaseCreated   Phase = "created"   // our create's operation succeeded; waiting for the node READY
	PhaseResetting Phase = "resetting" // reset of the queued resource requested (ResetOp once its answer came)
	PhaseReset     Phase = "reset"     // the reset's operation succeeded (or the reset shows in progress); waiting for the node READY
	PhaseRecovered Phase = "recovered" // terminal: node READY with our generation label (or, for a reset, READY after our reset)
	PhaseClosed    Phase = "closed"    // terminal: ended without finishing; LastError says why (not ours, opted out, held, recovered by itself)
	// PhaseAbandoned: terminal. The recovery could not make progress (too
	// many failures, or too old); it needs a person. The saved Spec is kept
	// in the ledger and in the ERROR record.
	PhaseAbandoned Phase = "abandoned"

	// Phases of recoveries saved before Step: read and finished, never written.
	PhaseSaved  Phase = "saved"  // spec saved; delete requested only when DeleteSent
	PhaseDone   Phase = "done"   // terminal: recreated, or closed without acting
	PhaseFailed Phase = "failed" // last attempt failed; where to resume is read from the node
)

// Terminal reports whether p ends a recovery.
func (p Phase) Terminal() bool {
	switch p {
	case PhaseRecovered, PhaseClosed, PhaseAbandoned, PhaseDone:
		return true
	}
	return false
}

// CountsAsRecreate reports whether a recovery in phase p has destroyed, or
// may have destroyed, the node (from the delete or reset request on): it
// then counts for the cooldown and the window cap, so crashing
// mid-recovery cannot bypass them. The ledger calls it.
func CountsAsRecreate(p Phase) bool {
	switch p {
	case PhaseDeleting, PhaseDeleted, PhaseCreating, PhaseCreated, PhaseResetting, PhaseReset, PhaseRecovered:
		return true
	}
	return false
}

// DefaultMaxAttempts is Config.MaxAttempts's default: how many permanent
// failures (INVALID_ARGUMENT, PERMISSION_DENIED, …) a recovery takes before
// it is abandoned. A transient failure weighs a quarter of a permanent one
// (so 4×MaxAttempts transient failures abandon it too); a stockout is
// retried after a jittered back-off (StockoutDelay) and a quota every
// Lease, neither counted, bounded by MaxRecoveryAge.
const DefaultMaxAttempts = 5

// MaxRecoveryAge bounds every recovery: one still unfinished this long
// after it started is abandoned (a stockout that lasts a day needs a person).
const MaxRecoveryAge = 24 * time.Hour

// Recovery is the ledger's record of one recovery of one node.
type Recovery struct {
	Node    string // full resource name
	Project string
	Action  Action // recreate or reset
	Phase   Phase
	Spec    *tpu.Node // saved before delete; output-only fields cleared
	// SpecSeal is the MAC over the saved spec (seal.SpecMessage of the
	// node, generation and spec), made when the spec was saved and
	// verified before the delete and before the create (specseal.go).
	// Zero: no seal (unsealed: saved before seals, or with no Sealer).
	SpecSeal seal.Seal
	// NodeID is the TPU node id of the node whose spec was saved (0 =
	// unknown: a legacy TPU Node, or a recovery saved before the field
	// existed). Only that node is ever deleted: a node of the same name
	// with another id was created by someone else.
	NodeID int64
	// DeleteSent: this recovery requested the node's delete (saved before
	// the request, cleared when the API refused it). A node NOT FOUND
	// while it is false was deleted by someone else and is not recreated.
	DeleteSent     bool
	QueuedResource string    // for reset
	Generation     int       // recovery generation, also set as a label on the new node
	Holder         string    // who holds the claim
	LeaseUntil     time.Time // the claim is live until then
	DeleteOp       string    // the delete's operation, until it was seen done
	CreateOp       string    // the create's operation, until it was seen done
	// ResetOp is the reset's operation (of the queued resource), until it
	// was seen done. A reset saved before the field kept it in CreateOp:
	// the ledger moves it here when it reads such a document.
	ResetOp   string
	Attempts  int
	EventID   string // the event that started it ("" for a sweep)
	Cause     events.Cause
	StartedAt time.Time
	UpdatedAt time.Time
	LastError string // the last failure; for a closed recovery, why
	// LastKind is the kind of the failed call LastError describes (KindNone
	// when it describes no failed call: a wait, a close). A recovery saved
	// before the field has it read from LastError's words (KindInText).
	LastKind Kind
	// NextLookAt is when the recovery is advanced next (by a delivery, a
	// sweep or Handler.Continue): after an operation was started, or after
	// a failure (back-off). The lease is released until then.
	NextLookAt time.Time
	// Failures weighs the failures of this incident (permanent 4, transient
	// 1, stockouts 0); at 4×MaxAttempts the recovery is abandoned.
	Failures int
	// Paused is how long the recovery was held back by pauses (`autoheal
	// pause` … `resume`): it does not count toward MaxRecoveryAge
	// (RecoveryAge). The store adds to it when a pause covering the node is
	// lifted; an Update never changes it.
	Paused time.Duration

	// The evidence rule (recovery.go: "Evidence"). SentOps are the
	// operations this recovery's deletes and creates started, as their
	// answers named them: an audit entry of one of them is ours.
	// DeleteAnswered: a delete of this recovery returned its operation
	// (false after DeleteSent: the delete's outcome is ambiguous).
	// DeleteUnanswered: a delete of this recovery failed in a way that
	// may still have taken effect (a transient failure, a deadline, NOT
	// FOUND). CreateSentAt is when the last create was requested. GoneAt is when the node was first seen
	// NOT FOUND where only evidence can say whose doing that was (zero
	// otherwise): the recovery waits EvidenceWait from it.
	SentOps []string
	// Actors are the identities (Config.Actor) of every process that sent
	// one of this recovery's calls: replay --apply over the function's
	// ledger and the function act as different accounts, and an entry by
	// either is the recovery's own, never a person's.
	Actors           []string
	DeleteAnswered   bool
	DeleteUnanswered bool
	CreateSentAt     time.Time
	GoneAt           time.Time
	// Evidence are the admin-activity entries about the node (or its
	// queued resource) kept while the recovery is unfinished (Store.
	// KeepEvidence): the store's, never overwritten by Update.
	Evidence []Evidence
	// Stockouts counts this incident's creates refused for capacity: the
	// nth waits StockoutDelay(n).
	Stockouts int
}

// Evidence is what an admin-activity audit entry says about a node with an
// unfinished recovery: who created or deleted it (or its queued resource),
// when, through which operation.
type Evidence struct {
	InsertID    string
	Change      events.Change
	Principal   string
	Time        time.Time
	OperationID string
	Last        bool // the operation's last entry (Code: how it ended)
	Code        int
	// QueuedResource: a delete-queued-resource entry's queued resource.
	QueuedResource string
}

// Unfinished reports whether the recovery still has steps to run.
func (r Recovery) Unfinished() bool { return !r.Phase.Terminal() }

// Deferral is a node to look at again at Due.
type Deferral struct {
	Node    string
	Project string
	Since   time.Time // first seen unhealthy or in progress
	Due     time.Time
	Reason  string
}

// Hold marks a node a user terminated. A user-initiated termination is never
// undone: while the node is the one that was held (same TPU node id) and not
// READY and HEALTHY again, neither an event nor a sweep recovers it. A node
// the user recreates (new id) or brings back to health is no longer held.
type Hold struct {
	Node    string
	Project string
	NodeID  int64     // the node's id when it was held; 0 = any node of that name
	Since   time.Time // when the user's termination was seen
	EventID string    // the event that showed it
	Reason  string
}

// History is what the ledger knows about a node, as Decide needs it.
type History struct {
	EventSeen bool        // this event id was already handled
	Recovery  *Recovery   // the node's latest recovery, nil if none
	Recreates []time.Time // start times of the node's recreates within the window
	InFlight  int         // the project's unfinished recoveries of other nodes
	Deferral  *Deferral   // pending deferral of this node, nil if none
	Hold      *Hold       // the node was terminated by a user, nil if not
	Pause     *Pause      // the narrowest pause covering the node, nil if none
}

// Errors a Store returns from Claim and Update.
var (
	ErrClaimed     = errors.New("recovery in flight")     // another holder's lease is live
	ErrLeaseLost   = errors.New("claim lease lost")       // Update by a holder that no longer holds the claim
	ErrCooldown    = errors.New("cooldown not elapsed")   // last recreate too recent
	ErrWindowCap   = errors.New("recreate cap in window") // too many recreates in the window
	ErrInFlightCap = errors.New("project in-flight cap")  // too many unfinished recoveries in the project
)

// ClaimRequest asks the store to start, or take over, a recovery.
type ClaimRequest struct {
	Node, Project string
	Zone          string // the storm breaker counts starts per zone
	Holder        string
	Now           time.Time
	Action        Action
	EventID       string
	Cause         events.Cause
	Config        Config // Lease, Cooldown, Window, MaxRecreates, MaxInFlight
}

// Step is one timed step of carrying out a decision.
type Step struct {
	Name      string // get, save-spec, delete, wait-delete, create, wait-create, reset
	Operation string
	Start     time.Time
	Duration  time.Duration
	Err       string
}

// Record is the audit record of one decision: one per event or swept node.
type Record struct {
	Time       time.Time
	InsertID   string
	EventTime  time.Time
	Node       string // full resource name, "" when unknown
	Zone       string
	Worker     string
	Method     string
	Cause      events.Cause
	Action     Action
	Reason     string
	DryRun     bool
	Phase      Phase
	Generation int
	Spec       *tpu.Node // on recreate: the spec the node was created with
	Steps      []Step
	Warnings   []string
	Err        string // a failure carrying it out
	// Severity overrides the severity the action gives a record (an Err
	// still makes it ERROR): SeverityWarning on a record that needs a
	// person's eyes though nothing failed (a listing whose page token
	// looped, a paused node left deleted). "" = by action.
	Severity string
	// Elapsed is how long the decision took on the handler's clock, from
	// Time to the record written: ledger reads and writes included, not only
	// the Steps' TPU calls.
	Elapsed time.Duration

	// AcceleratorType and Chips describe the node (every record that
	// observed one), so a report can count chip-hours of self-recoveries too.
	AcceleratorType string
	Chips           int
	// Refusal is set on the record of an attempt whose create was refused
	// for capacity (a stockout) or quota: the zone, the scope and the API's
	// wording.
	Refusal *Refusal
	// Outcome is set on the record of a decision that ended a recovery, an
	// attempt of one, or a maintenance step (see the Outcome constants); the
	// log-based metrics and `autoheal report` count these words.
	Outcome Outcome
	// TimeToRecover is, on the record of a recovery that ended recovered,
	// the time from the recovery's start (the first event acted on) to the
	// node READY again: the dashboard's time-to-recover distribution.
	TimeToRecover time.Duration
}

// SeverityWarning is Record.Severity for a record that asks to be looked at.
const SeverityWarning = "WARNING"

// Outcome is how a recovery (or an attempt of it) ended, as records say it.
type Outcome string

// Outcomes. Terraform's metrics and `autoheal report` depend on these words.
const (
	OutcomeRecovered  Outcome = "recovered"  // node READY again with our generation label
	OutcomeClosed     Outcome = "closed"     // ended without acting: not ours, opted out, held
	OutcomeAbandoned  Outcome = "abandoned"  // gave up; needs a person (ERROR record with the redacted spec)
	OutcomeFailed     Outcome = "failed"     // this attempt failed; a later one will retry
	OutcomePrepared   Outcome = "prepared"   // a maintenance notice was delivered to the guest
	OutcomeMaintained Outcome = "maintained" // maintenance was started early, on our terms
	OutcomeResumed    Outcome = "resumed"    // the guest reported training resumed
)
