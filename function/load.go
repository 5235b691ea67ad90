package function

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// Where decision records go (AUTOHEAL_RECORD_TO).
const (
	RecordToLogging = "logging"
	RecordToStdout  = "stdout"
)

// LoadConfig reads Config from the process environment with
// envconfig.Process and validates it. Every error names the variable and
// its value: "AUTOHEAL_COOLDOWN=\"30\": want a duration such as 30m or 24h".
func LoadConfig() (Config, error) {
	var c Config
	if err := envconfig.Process(EnvPrefix, &c); err != nil {
		return Config{}, fmt.Errorf("config: %w", explainEnvconfig(err))
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

var missingRE = regexp.MustCompile(`^required key (\S+) missing value$`)

// explainEnvconfig rewrites envconfig's errors ("envconfig.Process:
// assigning AUTOHEAL_COOLDOWN to Cooldown: converting '30' to type
// time.Duration. details: ...") in the words Validate uses.
func explainEnvconfig(err error) error {
	var pe *envconfig.ParseError
	if errors.As(err, &pe) {
		want := "want a " + pe.TypeName
		switch pe.TypeName {
		case "time.Duration":
			want = "want a duration such as 30m or 24h"
		case "bool":
			want = "want true or false"
		case "int", "int64":
			want = "want an integer"
		}
		return fmt.Errorf("%s=%q: %s", pe.KeyName, pe.Value, want)
	}
	if m := missingRE.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("%s is required", m[1])
	}
	return err
}

var (
	// Project ids: 6–30 lowercase letters, digits and hyphens, starting with
	// a letter, not ending with a hyphen; optionally domain-scoped
	// (example.com:my-project).
	projectRE = regexp.MustCompile(`^([a-z0-9][a-z0-9.-]*[a-z0-9]:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
	zoneRE    = regexp.MustCompile(`^[a-z]+-[a-z]+[0-9]+-[a-z]$`)
	// Firestore database ids: (default), or 4–63 of [a-z0-9-] starting with
	// a letter, not ending with a hyphen.
	databaseRE = regexp.MustCompile(`^(\(default\)|[a-z][a-z0-9-]{2,61}[a-z0-9])$`)
	// Pub/Sub topic names: a project id (as above) and a topic id of 3-255
	// of letters, digits and - _ . ~ + %, starting with a letter, not goog.
	topicRE = regexp.MustCompile(`^projects/([a-z0-9][a-z0-9.-]*[a-z0-9]:)?[a-z][a-z0-9-]{4,28}[a-z0-9]/topics/[A-Za-z][A-Za-z0-9._~+%-]{2,254}$`)
	gcsRE   = regexp.MustCompile(`^gs://([a-z0-9][a-z0-9._-]{1,220}[a-z0-9])/(.+)$`)
	// Cloud Logging LOG_IDs: letters, digits and _ - . (a / would have to be
	// URL-encoded in every filter; none is allowed), at most 512.
	logIDRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,512}$`)
	// Label values the module's filters compare with: 1-63 lowercase
	// letters, digits, _ - ., starting with a letter or digit.
	appLabelRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)
	// Service account emails, as Terraform's tpu_service_accounts checks
	// them.
	serviceAccountRE = regexp.MustCompile(`^[^@\s]+@[a-z0-9.-]+\.gserviceaccount\.com$`)
	// A Cloud KMS crypto key version: signing names one.
	macKeyRE = regexp.MustCompile(`^projects/([a-z0-9][a-z0-9.-]*[a-z0-9]:)?[a-z][a-z0-9-]{4,28}[a-z0-9]/locations/[a-z0-9-]+/keyRings/[A-Za-z0-9_-]{1,63}/cryptoKeys/[A-Za-z0-9_-]{1,63}/cryptoKeyVersions/[1-9][0-9]*$`)
)

// Validate checks every value; each error names the variable and the value.
func (c Config) Validate() error {
	var errs []error
	bad := func(name, value, want string) {
		errs = append(errs, fmt.Errorf("%s_%s=%q: %s", EnvPrefix, name, value, want))
	}
	if !projectRE.MatchString(c.Project) {
		bad("PROJECT", c.Project, "want a project id (6-30 of a-z, 0-9, -, starting with a letter)")
	}
	if len(c.Projects) == 0 {
		bad("PROJECTS", strings.Join(c.Projects, ","), "want at least one project id")
	}
	for _, p := range c.Projects {
		if !projectRE.MatchString(p) {
			bad("PROJECTS", strings.Join(c.Projects, ","), fmt.Sprintf("%q is not a project id", p))
		}
	}
	for _, z := range c.Zones {
		if !zoneRE.MatchString(z) {
			bad("ZONES", strings.Join(c.Zones, ","), fmt.Sprintf("%q is not a zone such as us-central2-b", z))
		}
	}
	if _, _, err := remediate.ParseSelector(c.LabelSelector); err != nil {
		bad("LABEL_SELECTOR", c.LabelSelector, "want key=value")
	}
	gcs := strings.HasPrefix(c.StartupScript, "gs://")
	if gcs && !gcsRE.MatchString(c.StartupScript) {
		bad("STARTUP_SCRIPT", c.StartupScript, "want gs://BUCKET/OBJECT or a local path")
	}
	switch gen := c.StartupScriptGeneration; {
	case gen < 0:
		bad("STARTUP_SCRIPT_GENERATION", strconv.FormatInt(gen, 10), "want the object's generation, a positive integer")
	case gcs && gen == 0:
		errs = append(errs, fmt.Errorf("%s_STARTUP_SCRIPT=%q has no %s_STARTUP_SCRIPT_GENERATION: the function reads a gs:// script at exactly the generation Terraform pinned; run terraform apply again, which reads the object's current generation and sets it", EnvPrefix, c.StartupScript, EnvPrefix))
	case !gcs && gen != 0:
		bad("STARTUP_SCRIPT_GENERATION", strconv.FormatInt(gen, 10), "want it only with a gs:// "+EnvPrefix+"_STARTUP_SCRIPT (it is "+strconv.Quote(c.StartupScript)+")")
	}
	if !databaseRE.MatchString(c.FirestoreDatabase) {
		bad("FIRESTORE_DATABASE", c.FirestoreDatabase, "want a Firestore database id")
	}
	if c.KickTopic != "" && (!topicRE.MatchString(c.KickTopic) || strings.HasPrefix(c.KickTopic[strings.LastIndex(c.KickTopic, "/")+1:], "goog")) {
		bad("KICK_TOPIC", c.KickTopic, "want projects/PROJECT/topics/TOPIC or empty")
	}
	if _, err := computevm.EndpointOptions(c.ComputeEndpoint); err != nil {
		bad("COMPUTE_ENDPOINT", c.ComputeEndpoint, "want an http(s) URL or empty")
	}
	if _, err := tpuapi.EndpointOptions(c.TPUEndpoint); err != nil {
		bad("TPU_ENDPOINT", c.TPUEndpoint, "want an http(s) URL or empty")
	}
	if c.RecordTo != RecordToLogging && c.RecordTo != RecordToStdout {
		bad("RECORD_TO", c.RecordTo, "want logging or stdout")
	}
	if !logIDRE.MatchString(c.RecordLog) {
		bad("RECORD_LOG", c.RecordLog, "want a log id: 1-512 of A-Z, a-z, 0-9, _ - .")
	}
	if !appLabelRE.MatchString(c.AppLabel) {
		bad("APP_LABEL", c.AppLabel, "want 1-63 of a-z, 0-9, _ - ., starting with a letter or digit")
	}
	for _, sa := range c.NodeServiceAccounts {
		if !serviceAccountRE.MatchString(sa) {
			bad("NODE_SERVICE_ACCOUNTS", strings.Join(c.NodeServiceAccounts, ","), fmt.Sprintf("%q is not a service account email (NAME@PROJECT.iam.gserviceaccount.com)", sa))
		}
	}
	if c.SweepMinInterval < 0 {
		bad("SWEEP_MIN_INTERVAL", c.SweepMinInterval.String(), "want a duration of 0 (off) or more")
	}
	if c.MACKey != "" && !macKeyRE.MatchString(c.MACKey) {
		bad("MAC_KEY", c.MACKey, "want a Cloud KMS key version, projects/P/locations/L/keyRings/R/cryptoKeys/K/cryptoKeyVersions/N, or empty")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"MAX_EVENT_AGE", c.MaxEventAge}, {"UNHEALTHY_GRACE", c.UnhealthyGrace},
		{"STUCK_GRACE", c.StuckGrace}, {"RESTART_GRACE", c.RestartGrace}, {"COOLDOWN", c.Cooldown}, {"WINDOW", c.Window},
		{"LEASE", c.Lease}, {"EVENT_TTL", c.EventTTL}, {"SWEEP_BUDGET", c.SweepBudget}, {"LOOK_AGAIN", c.LookAgain},
		{"HOLD_TTL", c.HoldTTL}, {"CHECKPOINT_TIMEOUT", c.CheckpointTimeout}, {"RESUME_WATCH", c.ResumeWatch},
		{"MAINTENANCE_MAX", c.MaintenanceMax},
	} {
		if d.v <= 0 {
			bad(d.name, d.v.String(), "want a positive duration")
		}
	}
	if c.SweepFollow < 0 {
		bad("SWEEP_FOLLOW", c.SweepFollow.String(), "want a duration of 0 or more")
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"MAX_RECREATES", c.MaxRecreates}, {"MAX_IN_FLIGHT", c.MaxInFlight}, {"MAX_ATTEMPTS", c.MaxAttempts}, {"STOCKOUT_ZONE_AFTER", c.StockoutZoneAfter}} {
		if n.v <= 0 {
			bad(n.name, strconv.Itoa(n.v), "want a positive integer")
		}
	}
	if c.MaxRequeues < 0 {
		bad("MAX_REQUEUES", strconv.Itoa(c.MaxRequeues), "want an integer of 0 or more")
	}
	if _, _, err := remediate.ParseBreaker(c.Breaker); err != nil {
		bad("BREAKER", c.Breaker, "want LIMIT/WINDOW such as 48/1h")
	}
	if _, err := vmpolicy.ParseFaultyHosts(c.ReportFaultyHosts); err != nil {
		bad("REPORT_FAULTY_HOSTS", c.ReportFaultyHosts, "want COUNT/WINDOW such as 3/7d, true or false")
	}
	switch c.Maintenance {
	case remediate.MaintenanceOff, remediate.MaintenancePrepare, remediate.MaintenanceEarly:
	default:
		bad("MAINTENANCE", c.Maintenance, "want off, prepare or early")
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// RemediateConfig is the policy this config sets. The startup script is not
// read here (it may live in Cloud Storage): New sets it. c must be valid.
func (c Config) RemediateConfig() remediate.Config {
	key, value, _ := remediate.ParseSelector(c.LabelSelector)
	limit, window, _ := remediate.ParseBreaker(c.Breaker)
	return remediate.Config{
		LabelKey:       key,
		LabelValue:     value,
		DryRun:         c.DryRun,
		UnhealthyGrace: c.UnhealthyGrace,
		StuckGrace:     c.StuckGrace,
		Cooldown:       c.Cooldown,
		Window:         c.Window,
		MaxRecreates:   c.MaxRecreates,
		MaxInFlight:    c.MaxInFlight,
		MaxAttempts:    c.MaxAttempts,
		Lease:          c.Lease,
		EventTTL:       c.EventTTL,
		LookAgain:      c.LookAgain,

		BreakerLimit:      limit,
		BreakerWindow:     window,
		HoldTTL:           c.HoldTTL,
		MaintenanceMode:   c.Maintenance,
		CheckpointTimeout: c.CheckpointTimeout,
		ResumeWatch:       c.ResumeWatch,
		MaintenanceMax:    c.MaintenanceMax,
		Actor:             c.Actor,
		EvidenceWait:      c.EvidenceWait,
		Zones:             c.Zones,
		StockoutZoneAfter: c.StockoutZoneAfter,
		MaxRequeues:       c.MaxRequeues,
	}
}

// Variable is one environment variable Config reads.
type Variable struct {
	Name     string // AUTOHEAL_MAX_EVENT_AGE
	Default  string // the default tag ("" when none)
	Required bool
}

// Variables lists the variables Config reads, named by envconfig itself
// (its usage table), so Terraform's tests compare the module's environment
// with exactly what LoadConfig reads.
func Variables() ([]Variable, error) {
	var b strings.Builder
	const format = "{{range .}}{{usage_key .}}\t{{usage_default .}}\t{{usage_required .}}\n{{end}}"
	if err := envconfig.Usagef(EnvPrefix, &Config{}, &b, format); err != nil {
		return nil, err
	}
	var out []Variable
	for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			return nil, fmt.Errorf("envconfig usage line %q: want 3 columns", line)
		}
		out = append(out, Variable{Name: f[0], Default: f[1], Required: f[2] == "true"})
	}
	return out, nil
}
