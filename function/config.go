package function

import "time"

// EnvPrefix is the prefix of every variable Config reads.
const EnvPrefix = "AUTOHEAL"

// Config is the function's configuration, read once at start-up from
// AUTOHEAL_* environment variables (github.com/kelseyhightower/envconfig).
// Terraform sets exactly these variables (checked by terraform's tests).
type Config struct {
	// Project hosts the function, its Firestore database and its records.
	Project string `envconfig:"PROJECT" required:"true"`
	// Projects is the allow-list of projects whose TPU nodes may be handled;
	// entries for any other project are rejected. The sweep lists these.
	Projects []string `envconfig:"PROJECTS" required:"true"`
	// Zones the sweep lists nodes in. Empty: the sweep only finishes
	// unfinished recoveries and due deferrals.
	Zones []string `envconfig:"ZONES"`
	// DryRun decides and records everything and mutates nothing.
	DryRun bool `envconfig:"DRY_RUN" default:"false"`
	// LabelSelector is the opt-in label, key=value.
	LabelSelector string `envconfig:"LABEL_SELECTOR" default:"tpu-autoheal=enabled"`
	// StartupScript is a local path or gs:// URI of the script set as the
	// recreated node's startup-script; empty means the embedded default.
	StartupScript string `envconfig:"STARTUP_SCRIPT"`
	// FirestoreDatabase is the named Firestore database holding the ledger.
	FirestoreDatabase string `envconfig:"FIRESTORE_DATABASE" default:"tpu-autoheal"`
	// TPUEndpoint overrides the TPU API endpoint (private endpoints, tests).
	TPUEndpoint string `envconfig:"TPU_ENDPOINT"`
	// RecordTo is where decision records go: logging or stdout.
	RecordTo string `envconfig:"RECORD_TO" default:"logging"`
	// MaxEventAge drops entries older than this, with a record.
	MaxEventAge time.Duration `envconfig:"MAX_EVENT_AGE" default:"24h"`

	UnhealthyGrace time.Duration `envconfig:"UNHEALTHY_GRACE" default:"10m"`
	StuckGrace     time.Duration `envconfig:"STUCK_GRACE" default:"30m"`
	Cooldown       time.Duration `envconfig:"COOLDOWN" default:"30m"`
	Window         time.Duration `envconfig:"WINDOW" default:"24h"`
	MaxRecreates   int           `envconfig:"MAX_RECREATES" default:"3"`
	MaxInFlight    int           `envconfig:"MAX_IN_FLIGHT" default:"4"`
	// MaxAttempts abandons a recovery (phase abandoned, an ERROR record with
	// the saved spec) after this many attempts failing with an error other
	// than a stockout or quota.
	MaxAttempts int           `envconfig:"MAX_ATTEMPTS" default:"5"`
	Lease       time.Duration `envconfig:"LEASE" default:"15m"`
	EventTTL    time.Duration `envconfig:"EVENT_TTL" default:"168h"`
	// SweepBudget bounds one sweep's running time; the next sweep resumes.
	SweepBudget time.Duration `envconfig:"SWEEP_BUDGET" default:"4m"`

	// Breaker is the storm breaker, LIMIT/WINDOW: at most LIMIT recreates
	// and resets start in one zone within WINDOW.
	Breaker string `envconfig:"BREAKER" default:"48/1h"`
	// HoldTTL is how long a user hold lasts.
	HoldTTL time.Duration `envconfig:"HOLD_TTL" default:"168h"`
	// Maintenance is what an upcoming-maintenance notice does: off, prepare
	// or early (the node label tpu-autoheal-maintenance overrides it).
	Maintenance string `envconfig:"MAINTENANCE" default:"prepare"`
	// CheckpointTimeout: with early maintenance, how long after the notice
	// the checkpoint may take before maintenance is left to the platform.
	CheckpointTimeout time.Duration `envconfig:"CHECKPOINT_TIMEOUT" default:"30m"`
	// ResumeWatch is how long the guest's training-resumed report is
	// waited for after an incident.
	ResumeWatch time.Duration `envconfig:"RESUME_WATCH" default:"2h"`
}
