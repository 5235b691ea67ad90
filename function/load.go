package function

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
)

// Where decision records go (AUTOHEAL_RECORD_TO).
const (
	RecordToLogging = "logging"
	RecordToStdout  = "stdout"
)

// LoadConfig reads Config from lookup (os.LookupEnv in production, a map in
// tests) and validates it. It honours the struct's envconfig, default and
// required tags exactly as envconfig.Process does — including envconfig's
// fallback to the unprefixed name (PROJECT when AUTOHEAL_PROJECT is unset) —
// which TestLoadConfigAgreesWithEnvconfig checks against the real envconfig
// in a child process. It exists because envconfig v1.4 can only read the
// process environment, and tests must not touch that.
func LoadConfig(lookup func(string) (string, bool)) (Config, error) {
	var c Config
	v := reflect.ValueOf(&c).Elem()
	t := v.Type()
	var errs []error
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		alt := strings.ToUpper(f.Tag.Get("envconfig"))
		if alt == "" {
			alt = strings.ToUpper(f.Name)
		}
		key := EnvPrefix + "_" + alt
		value, ok := lookup(key)
		if !ok {
			value, ok = lookup(alt)
		}
		def := f.Tag.Get("default")
		if !ok && def != "" {
			value = def
		}
		if !ok && def == "" {
			if req, _ := strconv.ParseBool(f.Tag.Get("required")); req {
				errs = append(errs, fmt.Errorf("%s is required", key))
			}
			continue
		}
		if err := setField(v.Field(i), value); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", key, value, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// LoadConfigFromEnv reads Config from the process environment with
// envconfig.Process and validates it. The deployed function uses it.
func LoadConfigFromEnv() (Config, error) {
	var c Config
	if err := envconfig.Process(EnvPrefix, &c); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

var durationType = reflect.TypeOf(time.Duration(0))

// setField parses value into field as envconfig does for Config's types.
func setField(field reflect.Value, value string) error {
	switch {
	case field.Type() == durationType:
		d, err := time.ParseDuration(value)
		if err != nil {
			return errors.New("want a duration such as 30m or 24h")
		}
		field.SetInt(int64(d))
	case field.Kind() == reflect.String:
		field.SetString(value)
	case field.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return errors.New("want true or false")
		}
		field.SetBool(b)
	case field.Kind() == reflect.Int:
		n, err := strconv.ParseInt(value, 0, field.Type().Bits())
		if err != nil {
			return errors.New("want an integer")
		}
		field.SetInt(n)
	case field.Kind() == reflect.Slice && field.Type().Elem().Kind() == reflect.String:
		s := []string{}
		if strings.TrimSpace(value) != "" {
			s = strings.Split(value, ",")
		}
		field.Set(reflect.ValueOf(s))
	default:
		return fmt.Errorf("unsupported config field type %s", field.Type())
	}
	return nil
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
	gcsRE      = regexp.MustCompile(`^gs://([a-z0-9][a-z0-9._-]{1,220}[a-z0-9])/(.+)$`)
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
	if strings.HasPrefix(c.StartupScript, "gs://") && !gcsRE.MatchString(c.StartupScript) {
		bad("STARTUP_SCRIPT", c.StartupScript, "want gs://BUCKET/OBJECT or a local path")
	}
	if !databaseRE.MatchString(c.FirestoreDatabase) {
		bad("FIRESTORE_DATABASE", c.FirestoreDatabase, "want a Firestore database id")
	}
	if _, err := tpuapi.EndpointOptions(c.TPUEndpoint); err != nil {
		bad("TPU_ENDPOINT", c.TPUEndpoint, "want an http(s) URL or empty")
	}
	if c.RecordTo != RecordToLogging && c.RecordTo != RecordToStdout {
		bad("RECORD_TO", c.RecordTo, "want logging or stdout")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"MAX_EVENT_AGE", c.MaxEventAge}, {"UNHEALTHY_GRACE", c.UnhealthyGrace},
		{"STUCK_GRACE", c.StuckGrace}, {"COOLDOWN", c.Cooldown}, {"WINDOW", c.Window},
		{"LEASE", c.Lease}, {"EVENT_TTL", c.EventTTL}, {"SWEEP_BUDGET", c.SweepBudget},
		{"HOLD_TTL", c.HoldTTL}, {"CHECKPOINT_TIMEOUT", c.CheckpointTimeout}, {"RESUME_WATCH", c.ResumeWatch},
	} {
		if d.v <= 0 {
			bad(d.name, d.v.String(), "want a positive duration")
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"MAX_RECREATES", c.MaxRecreates}, {"MAX_IN_FLIGHT", c.MaxInFlight}, {"MAX_ATTEMPTS", c.MaxAttempts}} {
		if n.v <= 0 {
			bad(n.name, strconv.Itoa(n.v), "want a positive integer")
		}
	}
	if _, _, err := remediate.ParseBreaker(c.Breaker); err != nil {
		bad("BREAKER", c.Breaker, "want LIMIT/WINDOW such as 48/1h")
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

		BreakerLimit:      limit,
		BreakerWindow:     window,
		HoldTTL:           c.HoldTTL,
		MaintenanceMode:   c.Maintenance,
		CheckpointTimeout: c.CheckpointTimeout,
		ResumeWatch:       c.ResumeWatch,
	}
}
