package function

import "time"

// EnvPrefix is the prefix of every variable Config reads.
const EnvPrefix = "AUTOHEAL"

// Config is the function's configuration, read once at start-up from
// AUTOHEAL_* environment variables (github.com/kelseyhightower/envconfig).
// Terraform sets exactly these variables (checked by terraform's tests).
//
// Names come from split_words (MaxEventAge is AUTOHEAL_MAX_EVENT_AGE), never
// from envconfig:"NAME" tags: with such a tag envconfig also reads the
// unprefixed NAME, so a stray PROJECT or LEASE in the environment would
// configure the function.
type Config struct {
	// Project hosts the function, its Firestore database and its records.
	Project string `split_words:"true" required:"true"`
	// Projects is the allow-list of projects whose TPU nodes may be handled;
	// entries for any other project are rejected. The sweep lists these.
	Projects []string `split_words:"true" required:"true"`
	// Zones the sweep lists nodes in. Empty: the sweep only finishes
	// unfinished recoveries and due deferrals.
	Zones []string `split_words:"true"`
	// DryRun decides and records everything and mutates nothing.
	DryRun bool `split_words:"true" default:"false"`
	// LabelSelector is the opt-in label, key=value.
	LabelSelector string `split_words:"true" default:"tpu-autoheal=enabled"`
	// StartupScript is a local path or gs:// URI of the script set as the
	// recreated node's startup-script; empty means the embedded default.
	StartupScript string `split_words:"true"`
	// StartupScriptGeneration is the generation of a gs:// StartupScript
	// the function reads, and the only one: Terraform reads the object's
	// generation at apply time and sets it, so an object overwritten later
	// (by whoever can write the bucket) is never what a recreated node
	// boots with. Required with a gs:// script (a start-up error names the
	// remedy: apply again); 0 otherwise (Terraform sets "0": envconfig
	// refuses an empty number).
	StartupScriptGeneration int64 `split_words:"true" default:"0"`
	// FirestoreDatabase is the named Firestore database holding the ledger.
	FirestoreDatabase string `split_words:"true" default:"tpu-autoheal"`
	// TPUEndpoint overrides the TPU API endpoint (private endpoints, tests).
	TPUEndpoint string `split_words:"true"`
	// ComputeInstances turns the instance path on: Compute Engine TPU VMs
	// (TPU7x and later) opted in by the label are watched and recovered
	// beside the TPU API's nodes. Off by default: it needs the Compute
	// Engine permissions Terraform grants with compute_instances = true.
	ComputeInstances bool `split_words:"true" default:"false"`
	// ComputeEndpoint overrides the Compute Engine endpoint of the
	// instance path (TPU VMs through Compute Engine): requests go to
	// URL/compute/v1/projects/…, as on the real host.
	ComputeEndpoint string `split_words:"true"`
	// ReportFaultyHosts reports the host of a RUNNING reservation-bound
	// Compute Engine TPU VM faulty (instances.reportHostAsFaulty) after
	// COUNT host errors within WINDOW ("3/7d"; "true": 3/7d; "": off).
	ReportFaultyHosts string `split_words:"true"`
	// RecordTo is where decision records go: logging or stdout.
	RecordTo string `split_words:"true" default:"logging"`
	// RecordLog is the Cloud Logging log (its LOG_ID) records are written
	// to, and AppLabel the labels.app value of every record and diagnostic
	// line. Terraform sets both to the instance's name, so two instances in
	// one project keep their records, metrics and alerts apart; the
	// defaults are record.LogName and record.AppLabelValue.
	RecordLog string `split_words:"true" default:"tpu-autoheal"`
	AppLabel  string `split_words:"true" default:"tpu-autoheal"`
	// MaxEventAge drops entries older than this, with a record.
	MaxEventAge time.Duration `split_words:"true" default:"24h"`

	UnhealthyGrace time.Duration `split_words:"true" default:"10m"`
	StuckGrace     time.Duration `split_words:"true" default:"30m"`
	// RestartGrace: on the instance path, how long after a host error a
	// TERMINATED Compute Engine TPU VM with automaticRestart is left to
	// Compute Engine (which may restart it itself) before it is started.
	RestartGrace time.Duration `split_words:"true" default:"5m"`
	Cooldown     time.Duration `split_words:"true" default:"30m"`
	Window       time.Duration `split_words:"true" default:"24h"`
	MaxRecreates int           `split_words:"true" default:"3"`
	// MaxInFlight is a safety rail, not the storm guard (the breaker is):
	// 64, above the breaker's 48 per zone, so that a wave of 32 pods
	// breaking at once is recreated at once (4 made it eight rounds).
	MaxInFlight int `split_words:"true" default:"64"`
	// MaxAttempts abandons a recovery (phase abandoned, an ERROR record with
	// the saved spec) after this many attempts failing with an error other
	// than a stockout or quota.
	MaxAttempts int           `split_words:"true" default:"5"`
	Lease       time.Duration `split_words:"true" default:"15m"`
	EventTTL    time.Duration `split_words:"true" default:"168h"`
	// SweepBudget bounds one sweep's running time; the next sweep resumes.
	SweepBudget time.Duration `split_words:"true" default:"4m"`
	// SweepFollow: after its listing, a sweep stays this long after its
	// start while recoveries are unfinished, taking each one's next step
	// when it is due (under the one-minute schedule, so the next sweep
	// takes over); 0 = return after the listing.
	SweepFollow time.Duration `split_words:"true" default:"50s"`
	// LookAgain is how soon an operation in progress is looked at again.
	LookAgain time.Duration `split_words:"true" default:"5s"`
	// KickTopic is the events topic (projects/P/topics/T) the function
	// publishes a follow kick to when a delivery leaves a recovery waiting
	// for its next look and no follower is at work, so that the recovery
	// is followed at once rather than from the next sweep (kick.go); a
	// follower whose window ends with looks still due kicks once more.
	// Terraform sets it to the module's events topic. Empty: no kicks.
	KickTopic string `split_words:"true"`

	// Breaker is the storm breaker, LIMIT/WINDOW: at most LIMIT recreates
	// and resets start in one zone within WINDOW.
	Breaker string `split_words:"true" default:"48/1h"`
	// HoldTTL is how long a user hold lasts.
	HoldTTL time.Duration `split_words:"true" default:"168h"`
	// Maintenance is what an upcoming-maintenance notice does: off, prepare
	// or early (the node label tpu-autoheal-maintenance overrides it).
	Maintenance string `split_words:"true" default:"prepare"`
	// CheckpointTimeout: with early maintenance, how long after the notice
	// the checkpoint may take before maintenance is left to the platform.
	CheckpointTimeout time.Duration `split_words:"true" default:"30m"`
	// MaintenanceMax bounds the maintenance exemption: a node in
	// maintenance (ONGOING, or started by tpu-autoheal) is not recreated
	// for being unhealthy until this long after the maintenance started.
	MaintenanceMax time.Duration `split_words:"true" default:"4h"`
	// ResumeWatch is how long the guest's training-resumed report is
	// waited for after an incident.
	ResumeWatch time.Duration `split_words:"true" default:"2h"`
	// StockoutZoneAfter: a node whose metadata autoheal-stockout is
	// zones:Z1,Z2 is created in the next zone after this many stockouts.
	StockoutZoneAfter int `split_words:"true" default:"3"`
	// MaxRequeues: a node whose metadata autoheal-stockout is queue is
	// queued again this many times after its queued resource FAILED or
	// was SUSPENDED, then abandoned (0 = never queued again).
	MaxRequeues int `split_words:"true" default:"2"`

	// Actor is the identity the function acts as (Terraform sets the
	// function's service account): an admin-activity entry by it is the
	// function's own, any other principal's a person's (the evidence rule,
	// docs/recovery.md). Empty: only entries whose operation a recovery
	// saved are known to be its own.
	Actor string `split_words:"true"`
	// EvidenceWait is how long a recovery waits for a person's audit entry
	// after a delete whose outcome it could not see, before it creates.
	EvidenceWait time.Duration `split_words:"true" default:"90s"`

	// NodeServiceAccounts are the service accounts a recreated node may run
	// as: Terraform's tpu_service_accounts, on each of which the function's
	// account has iam.serviceAccounts.actAs. A saved spec naming any other
	// account is never created (the recovery checks it before the delete).
	NodeServiceAccounts []string `split_words:"true"`
	// MACKey is the Cloud KMS key version (purpose MAC) that seals every
	// saved spec: projects/P/locations/L/keyRings/R/cryptoKeys/K/
	// cryptoKeyVersions/N, created by Terraform, on whose key the function
	// may only sign and verify. Signing names a version and every MAC
	// carries the version that made it, so the configured one is the
	// version new seals use. Empty: no KMS key (tests and local runs seal
	// with a local key).
	MACKey string `split_words:"true"`
	// SweepMinInterval: a sweep message started less than this after the
	// start of the last completed sweep (or of a sweep still running) is
	// acknowledged and counted, never acted on, unless it is a redelivery
	// of a sweep message that never completed (control.go); 0 = every
	// sweep message is acted on.
	SweepMinInterval time.Duration `split_words:"true" default:"30s"`
	// TrustUnsealedSpecs accepts a saved spec with no seal at all (one a
	// version before seals saved) at its next check, and seals it then.
	// Off (the default), such a recovery is abandoned like a tampered one,
	// with an ERROR record: set it only for the upgrade, when `autoheal
	// status` shows unfinished recoveries saved before it, and unset it
	// after (docs/security.md).
	TrustUnsealedSpecs bool `split_words:"true" default:"false"`
}
