// This file keeps the names other packages use from remediate: the pure
// decision code and its types live in internal/policy (docs/architecture.md,
// "Policy"); these aliases, constants and forwarding functions are the same
// types and values, so callers compile unchanged.

package remediate

import (
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/policy"
)

// Types of the policy.
type (
	SpecTooLargeError   = policy.SpecTooLargeError
	BreakerOpenError    = policy.BreakerOpenError
	Fallback            = policy.Fallback
	GuestAttribute      = policy.GuestAttribute
	Kind                = policy.Kind
	Error               = policy.Error
	MaintenanceNotice   = policy.MaintenanceNotice
	CheckpointReport    = policy.CheckpointReport
	NoticeKey           = policy.NoticeKey
	MaintenanceObserved = policy.MaintenanceObserved
	MaintenanceDecision = policy.MaintenanceDecision
	OurMaintenance      = policy.OurMaintenance
	PauseScope          = policy.PauseScope
	Pause               = policy.Pause
	PausedError         = policy.PausedError
	EffectKind          = policy.EffectKind
	Effect              = policy.Effect
	Observation         = policy.Observation
	StepResult          = policy.StepResult
	Refusal             = policy.Refusal
	Action              = policy.Action
	Decision            = policy.Decision
	Config              = policy.Config
	Observed            = policy.Observed
	Phase               = policy.Phase
	Recovery            = policy.Recovery
	Evidence            = policy.Evidence
	Deferral            = policy.Deferral
	Hold                = policy.Hold
	History             = policy.History
	ClaimRequest        = policy.ClaimRequest
	Step                = policy.Step
	Record              = policy.Record
	Outcome             = policy.Outcome
)

// Constants of the policy.
const (
	MaxSpecBytes             = policy.MaxSpecBytes
	GenerationLabel          = policy.GenerationLabel
	StockoutMetadataKey      = policy.StockoutMetadataKey
	FallbackWait             = policy.FallbackWait
	FallbackZones            = policy.FallbackZones
	FallbackQueue            = policy.FallbackQueue
	DefaultStockoutZoneAfter = policy.DefaultStockoutZoneAfter
	DefaultQueueValidFor     = policy.DefaultQueueValidFor
	KindNone                 = policy.KindNone
	KindNotFound             = policy.KindNotFound
	KindAlreadyExists        = policy.KindAlreadyExists
	KindStockout             = policy.KindStockout
	KindTransient            = policy.KindTransient
	KindPermanent            = policy.KindPermanent
	KindQuota                = policy.KindQuota
	NoticeMetadataKey        = policy.NoticeMetadataKey
	MaintenanceLabel         = policy.MaintenanceLabel
	CheckpointNamespace      = policy.CheckpointNamespace
	CheckpointKey            = policy.CheckpointKey
	CheckpointQueryPath      = policy.CheckpointQueryPath
	NoticeStepPrepare        = policy.NoticeStepPrepare
	NoticeStepMaintain       = policy.NoticeStepMaintain
	NoticeStepOngoing        = policy.NoticeStepOngoing
	NoticeStepOff            = policy.NoticeStepOff
	NoticeStepTimeout        = policy.NoticeStepTimeout
	NoticeStepNoReschedule   = policy.NoticeStepNoReschedule
	NoticeStepInvalid        = policy.NoticeStepInvalid
	NoticeStepDryPrepare     = policy.NoticeStepDryPrepare
	NoticeStepDryMaintain    = policy.NoticeStepDryMaintain
	DefaultMaintenanceMax    = policy.DefaultMaintenanceMax
	PauseProject             = policy.PauseProject
	PauseZone                = policy.PauseZone
	PauseNode                = policy.PauseNode
	EffectNone               = policy.EffectNone
	EffectGet                = policy.EffectGet
	EffectGetQR              = policy.EffectGetQR
	EffectDelete             = policy.EffectDelete
	EffectCreate             = policy.EffectCreate
	EffectPoll               = policy.EffectPoll
	EffectReset              = policy.EffectReset
	EffectMarkReset          = policy.EffectMarkReset
	EffectDefer              = policy.EffectDefer
	LookAgain                = policy.LookAgain
	StartupScriptKey         = policy.StartupScriptKey
	ResumeOptInKey           = policy.ResumeOptInKey
	StockoutBase             = policy.StockoutBase
	ActionRecord             = policy.ActionRecord
	ActionRecreate           = policy.ActionRecreate
	ActionReset              = policy.ActionReset
	ActionDefer              = policy.ActionDefer
	ActionSkip               = policy.ActionSkip
	ActionReject             = policy.ActionReject
	ActionPrepare            = policy.ActionPrepare
	ActionMaintain           = policy.ActionMaintain
	ActionResumed            = policy.ActionResumed
	MaintenanceOff           = policy.MaintenanceOff
	MaintenancePrepare       = policy.MaintenancePrepare
	MaintenanceEarly         = policy.MaintenanceEarly
	DefaultBreakerLimit      = policy.DefaultBreakerLimit
	DefaultBreakerWindow     = policy.DefaultBreakerWindow
	DefaultHoldTTL           = policy.DefaultHoldTTL
	DefaultCheckpointTimeout = policy.DefaultCheckpointTimeout
	DefaultResumeWatch       = policy.DefaultResumeWatch
	DefaultEvidenceWait      = policy.DefaultEvidenceWait
	PhaseClaimed             = policy.PhaseClaimed
	PhaseDeleting            = policy.PhaseDeleting
	PhaseDeleted             = policy.PhaseDeleted
	PhaseCreating            = policy.PhaseCreating
	PhaseCreated             = policy.PhaseCreated
	PhaseResetting           = policy.PhaseResetting
	PhaseReset               = policy.PhaseReset
	PhaseRecovered           = policy.PhaseRecovered
	PhaseClosed              = policy.PhaseClosed
	PhaseAbandoned           = policy.PhaseAbandoned
	PhaseSaved               = policy.PhaseSaved
	PhaseDone                = policy.PhaseDone
	PhaseFailed              = policy.PhaseFailed
	DefaultMaxAttempts       = policy.DefaultMaxAttempts
	MaxRecoveryAge           = policy.MaxRecoveryAge
	SeverityWarning          = policy.SeverityWarning
	OutcomeRecovered         = policy.OutcomeRecovered
	OutcomeClosed            = policy.OutcomeClosed
	OutcomeAbandoned         = policy.OutcomeAbandoned
	OutcomeFailed            = policy.OutcomeFailed
	OutcomePrepared          = policy.OutcomePrepared
	OutcomeMaintained        = policy.OutcomeMaintained
	OutcomeResumed           = policy.OutcomeResumed
)

// Variables of the policy (the same values, not copies).
var (
	ErrPaused      = policy.ErrPaused
	ErrClaimed     = policy.ErrClaimed
	ErrLeaseLost   = policy.ErrLeaseLost
	ErrCooldown    = policy.ErrCooldown
	ErrWindowCap   = policy.ErrWindowCap
	ErrInFlightCap = policy.ErrInFlightCap
	Actions        = policy.Actions
	Phases         = policy.Phases
	Outcomes       = policy.Outcomes
	ReasonPrefixes = policy.ReasonPrefixes
)

// KindNamed is policy.KindNamed.
func KindNamed(name string) Kind { return policy.KindNamed(name) }

// KindInText is policy.KindInText.
func KindInText(lastError string) Kind { return policy.KindInText(lastError) }

// ParseBreaker is policy.ParseBreaker.
func ParseBreaker(s string) (limit int, window time.Duration, err error) {
	return policy.ParseBreaker(s)
}

// ParseSelector is policy.ParseSelector.
func ParseSelector(s string) (key, value string, err error) { return policy.ParseSelector(s) }

// Decide is policy.Decide.
func Decide(ev events.Event, obs Observed, h History, now time.Time, cfg Config) Decision {
	return policy.Decide(ev, obs, h, now, cfg)
}

// Guard is policy.Guard.
func Guard(recreates []time.Time, inFlight int, now time.Time, cfg Config) (why string, due time.Time, err error) {
	return policy.Guard(recreates, inFlight, now, cfg)
}

// EvidenceOf is policy.EvidenceOf.
func EvidenceOf(ev events.Event) Evidence { return policy.EvidenceOf(ev) }

// SentNotice is policy.SentNotice.
func SentNotice(node *tpu.Node) *MaintenanceNotice { return policy.SentNotice(node) }

// Workers is policy.Workers.
func Workers(node *tpu.Node) int { return policy.Workers(node) }

// DecideMaintenance is policy.DecideMaintenance.
func DecideMaintenance(obs MaintenanceObserved, now time.Time, cfg Config) MaintenanceDecision {
	return policy.DecideMaintenance(obs, now, cfg)
}

// NodeProjectZone is policy.NodeProjectZone.
func NodeProjectZone(node string) (project, zone string) { return policy.NodeProjectZone(node) }

// RecoveryAge is policy.RecoveryAge.
func RecoveryAge(rec Recovery, now time.Time) time.Duration { return policy.RecoveryAge(rec, now) }

// ClearedPauseTime is policy.ClearedPauseTime.
func ClearedPauseTime(p Pause, standing []Pause, rec Recovery, now time.Time) time.Duration {
	return policy.ClearedPauseTime(p, standing, rec, now)
}

// PausedTime is policy.PausedTime.
func PausedTime(p Pause, rec Recovery, now time.Time) time.Duration {
	return policy.PausedTime(p, rec, now)
}

// DeletedWhilePaused is policy.DeletedWhilePaused.
func DeletedWhilePaused(rec *Recovery) bool { return policy.DeletedWhilePaused(rec) }

// Advance is policy.Advance. An error no adapter classified (a fake's bare
// error, a broken connection) needs no wrapping first: policy reads it as
// transient (KindOf; TestAdvanceReadsAnUnclassifiedErrorAsTransient).
func Advance(rec Recovery, obs Observation, res StepResult, now time.Time, cfg Config) (Recovery, Effect) {
	return policy.Advance(rec, obs, res, now, cfg)
}

// CleanSpec is policy.CleanSpec.
func CleanSpec(n *tpu.Node) *tpu.Node { return policy.CleanSpec(n) }

// CloneNode is policy.CloneNode.
func CloneNode(n *tpu.Node) *tpu.Node { return policy.CloneNode(n) }

// StockoutWindow is policy.StockoutWindow.
func StockoutWindow(cfg Config, n int) (lo, hi time.Duration) { return policy.StockoutWindow(cfg, n) }

// StockoutDelay is policy.StockoutDelay.
func StockoutDelay(cfg Config, node string, n int) time.Duration {
	return policy.StockoutDelay(cfg, node, n)
}

// DefaultConfig is policy.DefaultConfig.
func DefaultConfig() Config { return policy.DefaultConfig() }

// CountsAsRecreate is policy.CountsAsRecreate.
func CountsAsRecreate(p Phase) bool { return policy.CountsAsRecreate(p) }

// The policy's helpers the interpreter calls, under the names its files
// use (kept so that handler.go, run.go and sweep.go need no edit while
// they are changed elsewhere; a later change may call policy directly).
func specSize(node *tpu.Node) int { return policy.SpecSize(node) }
func claimRefused(d Decision, err error, ev events.Event, h History, now time.Time, cfg Config) (Decision, bool) {
	return policy.ClaimRefused(d, err, ev, h, now, cfg)
}
func healthy(n *tpu.Node) bool         { return policy.Healthy(n) }
func describe(n *tpu.Node) string      { return policy.Describe(n) }
func onPurpose(state string) bool      { return policy.OnPurpose(state) }
func causeOf(n *tpu.Node) events.Cause { return policy.CauseOf(n) }
func orUnspecified(s string) string    { return policy.OrUnspecified(s) }
func pausedDeletedReason(rec Recovery, p Pause, now time.Time) string {
	return policy.PausedDeletedReason(rec, p, now)
}
func appendOp(ops []string, op string) []string  { return policy.AppendOp(ops, op) }
func resetMarkTTL(cfg Config) time.Duration      { return policy.ResetMarkTTL(cfg) }
func lookAgain(cfg Config) time.Duration         { return policy.LookAgainFor(cfg) }
func abandon(rec Recovery, why string) Recovery  { return policy.Abandon(rec, why) }
func closeRec(rec Recovery, why string) Recovery { return policy.CloseRecovery(rec, why) }
func createSpec(saved *tpu.Node, generation int, cfg Config) (*tpu.Node, []string) {
	return policy.CreateSpec(saved, generation, cfg)
}
func parseNodeName(name string) (parent, project, zone, nodeID string, err error) {
	return policy.ParseNodeName(name)
}
func refusalOf(rec Recovery, cfg Config) *Refusal { return policy.RefusalOf(rec, cfg) }
