package function_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/record"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// setEnv makes the process environment, for the test's duration, hold
// exactly env among the AUTOHEAL_* variables (t.Setenv restores them after).
func setEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, function.EnvPrefix+"_") {
			t.Setenv(k, "") // registers the restore
			os.Unsetenv(k)
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

func load(t *testing.T, env map[string]string) (function.Config, error) {
	t.Helper()
	setEnv(t, env)
	return function.LoadConfig()
}

func minimalEnv() map[string]string {
	return map[string]string{
		"AUTOHEAL_PROJECT":  "acme-ops",
		"AUTOHEAL_PROJECTS": "acme-ml,acme-research",
	}
}

func TestLoadConfigDefaults(t *testing.T) {
	got, err := load(t, minimalEnv())
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	want := function.Config{
		Project:           "acme-ops",
		Projects:          []string{"acme-ml", "acme-research"},
		LabelSelector:     "tpu-autoheal=enabled",
		FirestoreDatabase: "tpu-autoheal",
		RecordTo:          "logging",
		RecordLog:         record.LogName,
		AppLabel:          record.AppLabelValue,
		MaxEventAge:       24 * time.Hour,
		UnhealthyGrace:    10 * time.Minute,
		StuckGrace:        30 * time.Minute,
		RestartGrace:      5 * time.Minute,
		Cooldown:          30 * time.Minute,
		Window:            24 * time.Hour,
		MaxRecreates:      3,
		MaxInFlight:       64,
		MaxAttempts:       5,
		Lease:             15 * time.Minute,
		EventTTL:          168 * time.Hour,
		SweepBudget:       4 * time.Minute,
		SweepFollow:       50 * time.Second,
		SweepMinInterval:  30 * time.Second,
		LookAgain:         5 * time.Second,
		Breaker:           "48/1h",
		HoldTTL:           168 * time.Hour,
		Maintenance:       "prepare",
		CheckpointTimeout: 30 * time.Minute,
		MaintenanceMax:    4 * time.Hour,
		ResumeWatch:       2 * time.Hour,
		EvidenceWait:      90 * time.Second,
		StockoutZoneAfter: 3,
		MaxRequeues:       2,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
}

func TestRemediateConfigDefaultsMatchRemediateDefaults(t *testing.T) {
	cfg, err := load(t, minimalEnv())
	if err != nil {
		t.Fatal(err)
	}
	want := remediate.DefaultConfig()
	// The function looks at operations every 5 s (its sweeps follow their
	// recoveries); remediate's own default is the LookAgain constant.
	want.LookAgain = 5 * time.Second
	if diff := cmp.Diff(want, cfg.RemediateConfig()); diff != "" {
		t.Errorf("RemediateConfig of the default config (-remediate.DefaultConfig +got):\n%s", diff)
	}
}

func TestLoadConfigReadsEveryVariable(t *testing.T) {
	env := map[string]string{
		"AUTOHEAL_PROJECT": "acme-ops", "AUTOHEAL_PROJECTS": "acme-ml", "AUTOHEAL_ZONES": "us-central2-b,europe-west4-a",
		"AUTOHEAL_DRY_RUN": "true", "AUTOHEAL_LABEL_SELECTOR": "heal=yes",
		"AUTOHEAL_STARTUP_SCRIPT": "gs://b-1/s.sh", "AUTOHEAL_STARTUP_SCRIPT_GENERATION": "1700000000123456",
		"AUTOHEAL_FIRESTORE_DATABASE": "(default)", "AUTOHEAL_TPU_ENDPOINT": "http://127.0.0.1:9/",
		"AUTOHEAL_RECORD_TO": "stdout", "AUTOHEAL_RECORD_LOG": "autoheal-b", "AUTOHEAL_APP_LABEL": "autoheal-b",
		"AUTOHEAL_MAX_EVENT_AGE": "1h", "AUTOHEAL_UNHEALTHY_GRACE": "1m",
		"AUTOHEAL_STUCK_GRACE": "2m", "AUTOHEAL_RESTART_GRACE": "11m", "AUTOHEAL_COOLDOWN": "3m", "AUTOHEAL_WINDOW": "4h", "AUTOHEAL_MAX_RECREATES": "5",
		"AUTOHEAL_MAX_IN_FLIGHT": "6", "AUTOHEAL_MAX_ATTEMPTS": "10", "AUTOHEAL_LEASE": "7m", "AUTOHEAL_EVENT_TTL": "8h", "AUTOHEAL_SWEEP_BUDGET": "9m",
		"AUTOHEAL_SWEEP_FOLLOW": "30s", "AUTOHEAL_LOOK_AGAIN": "2s", "AUTOHEAL_KICK_TOPIC": "projects/acme-ops/topics/tpu-autoheal",
		"AUTOHEAL_BREAKER": "12/30m", "AUTOHEAL_HOLD_TTL": "24h", "AUTOHEAL_MAINTENANCE": "early",
		"AUTOHEAL_CHECKPOINT_TIMEOUT": "20m", "AUTOHEAL_RESUME_WATCH": "1h", "AUTOHEAL_STOCKOUT_ZONE_AFTER": "4", "AUTOHEAL_MAINTENANCE_MAX": "6h", "AUTOHEAL_MAX_REQUEUES": "0",
		"AUTOHEAL_ACTOR": "tpu-autoheal@acme-ops.iam.gserviceaccount.com", "AUTOHEAL_EVIDENCE_WAIT": "2m",
		"AUTOHEAL_NODE_SERVICE_ACCOUNTS": "trainer@acme-ml.iam.gserviceaccount.com,123-compute@developer.gserviceaccount.com",
		"AUTOHEAL_MAC_KEY":               "projects/acme-ops/locations/us-central1/keyRings/autoheal-b/cryptoKeys/autoheal-b-ledger-mac/cryptoKeyVersions/1",
		"AUTOHEAL_SWEEP_MIN_INTERVAL":    "45s", "AUTOHEAL_TRUST_UNSEALED_SPECS": "true",
		"AUTOHEAL_REPORT_FAULTY_HOSTS": "2/36h",
	}
	got, err := load(t, env)
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	want := function.Config{
		Project: "acme-ops", Projects: []string{"acme-ml"}, Zones: []string{"us-central2-b", "europe-west4-a"},
		DryRun: true, LabelSelector: "heal=yes", StartupScript: "gs://b-1/s.sh", StartupScriptGeneration: 1700000000123456,
		FirestoreDatabase: "(default)", TPUEndpoint: "http://127.0.0.1:9/", RecordTo: "stdout",
		RecordLog: "autoheal-b", AppLabel: "autoheal-b", MaxEventAge: time.Hour, UnhealthyGrace: time.Minute,
		StuckGrace: 2 * time.Minute, RestartGrace: 11 * time.Minute, Cooldown: 3 * time.Minute, Window: 4 * time.Hour, MaxRecreates: 5, MaxInFlight: 6,
		MaxAttempts: 10, Lease: 7 * time.Minute, EventTTL: 8 * time.Hour, SweepBudget: 9 * time.Minute,
		SweepFollow: 30 * time.Second, LookAgain: 2 * time.Second, KickTopic: "projects/acme-ops/topics/tpu-autoheal",
		Breaker: "12/30m", HoldTTL: 24 * time.Hour, Maintenance: "early", CheckpointTimeout: 20 * time.Minute, MaintenanceMax: 6 * time.Hour, ResumeWatch: time.Hour, StockoutZoneAfter: 4, MaxRequeues: 0,
		Actor: "tpu-autoheal@acme-ops.iam.gserviceaccount.com", EvidenceWait: 2 * time.Minute,
		NodeServiceAccounts: []string{"trainer@acme-ml.iam.gserviceaccount.com", "123-compute@developer.gserviceaccount.com"},
		MACKey:              "projects/acme-ops/locations/us-central1/keyRings/autoheal-b/cryptoKeys/autoheal-b-ledger-mac/cryptoKeyVersions/1",
		SweepMinInterval:    45 * time.Second, TrustUnsealedSpecs: true, ReportFaultyHosts: "2/36h",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	rc := got.RemediateConfig()
	if rc.LabelKey != "heal" || rc.LabelValue != "yes" || !rc.DryRun || rc.MaxInFlight != 6 ||
		rc.Actor != "tpu-autoheal@acme-ops.iam.gserviceaccount.com" || rc.EvidenceWait != 2*time.Minute {
		t.Errorf("RemediateConfig = %+v, want label heal=yes, dry run, in-flight cap 6, the actor and evidence wait", rc)
	}
}

func TestLoadConfigErrorsNameTheVariableAndValue(t *testing.T) {
	tests := []struct {
		name string
		set  map[string]string
		drop []string
		want string
	}{
		{"missing project", nil, []string{"AUTOHEAL_PROJECT"}, "AUTOHEAL_PROJECT is required"},
		{"missing projects", nil, []string{"AUTOHEAL_PROJECTS"}, "AUTOHEAL_PROJECTS is required"},
		{"empty projects", map[string]string{"AUTOHEAL_PROJECTS": ""}, nil, `AUTOHEAL_PROJECTS="": want at least one project id`},
		{"malformed project", map[string]string{"AUTOHEAL_PROJECT": "Acme_Ops"}, nil, `AUTOHEAL_PROJECT="Acme_Ops": want a project id`},
		{"malformed project in list", map[string]string{"AUTOHEAL_PROJECTS": "acme-ml, acme-x"}, nil, `AUTOHEAL_PROJECTS="acme-ml, acme-x": " acme-x" is not a project id`},
		{"malformed zone", map[string]string{"AUTOHEAL_ZONES": "us-central2"}, nil, `AUTOHEAL_ZONES="us-central2": "us-central2" is not a zone`},
		{"selector without =", map[string]string{"AUTOHEAL_LABEL_SELECTOR": "foo"}, nil, `AUTOHEAL_LABEL_SELECTOR="foo": want key=value`},
		{"unknown record target", map[string]string{"AUTOHEAL_RECORD_TO": "bigquery"}, nil, `AUTOHEAL_RECORD_TO="bigquery": want logging or stdout`},
		{"bad bool", map[string]string{"AUTOHEAL_DRY_RUN": "maybe"}, nil, `AUTOHEAL_DRY_RUN="maybe": want true or false`},
		{"bad int", map[string]string{"AUTOHEAL_MAX_RECREATES": "three"}, nil, `AUTOHEAL_MAX_RECREATES="three": want an integer`},
		{"zero cap", map[string]string{"AUTOHEAL_MAX_IN_FLIGHT": "0"}, nil, `AUTOHEAL_MAX_IN_FLIGHT="0": want a positive integer`},
		{"zero attempts", map[string]string{"AUTOHEAL_MAX_ATTEMPTS": "0"}, nil, `AUTOHEAL_MAX_ATTEMPTS="0": want a positive integer`},
		{"negative requeues", map[string]string{"AUTOHEAL_MAX_REQUEUES": "-1"}, nil, `AUTOHEAL_MAX_REQUEUES="-1": want an integer of 0 or more`},
		{"bad duration", map[string]string{"AUTOHEAL_COOLDOWN": "30"}, nil, `AUTOHEAL_COOLDOWN="30": want a duration`},
		{"negative duration", map[string]string{"AUTOHEAL_LEASE": "-5m"}, nil, `AUTOHEAL_LEASE="-5m0s": want a positive duration`},
		{"bad restart grace", map[string]string{"AUTOHEAL_RESTART_GRACE": "5"}, nil, `AUTOHEAL_RESTART_GRACE="5": want a duration`},
		{"zero restart grace", map[string]string{"AUTOHEAL_RESTART_GRACE": "0s"}, nil, `AUTOHEAL_RESTART_GRACE="0s": want a positive duration`},
		{"zero sweep budget", map[string]string{"AUTOHEAL_SWEEP_BUDGET": "0s"}, nil, `AUTOHEAL_SWEEP_BUDGET="0s": want a positive duration`},
		{"bad gcs uri", map[string]string{"AUTOHEAL_STARTUP_SCRIPT": "gs://bucket", "AUTOHEAL_STARTUP_SCRIPT_GENERATION": "1"}, nil, `AUTOHEAL_STARTUP_SCRIPT="gs://bucket": want gs://BUCKET/OBJECT`},
		{"gs:// script without a generation names the remedy", map[string]string{"AUTOHEAL_STARTUP_SCRIPT": "gs://b-1/s.sh"}, nil,
			`AUTOHEAL_STARTUP_SCRIPT="gs://b-1/s.sh" has no AUTOHEAL_STARTUP_SCRIPT_GENERATION: the function reads a gs:// script at exactly the generation Terraform pinned; run terraform apply again`},
		{"generation without a gs:// script", map[string]string{"AUTOHEAL_STARTUP_SCRIPT": "/etc/resume.sh", "AUTOHEAL_STARTUP_SCRIPT_GENERATION": "4"}, nil,
			`AUTOHEAL_STARTUP_SCRIPT_GENERATION="4": want it only with a gs:// AUTOHEAL_STARTUP_SCRIPT`},
		{"negative generation", map[string]string{"AUTOHEAL_STARTUP_SCRIPT": "gs://b-1/s.sh", "AUTOHEAL_STARTUP_SCRIPT_GENERATION": "-1"}, nil,
			`AUTOHEAL_STARTUP_SCRIPT_GENERATION="-1": want the object's generation`},
		{"generation not a number", map[string]string{"AUTOHEAL_STARTUP_SCRIPT": "gs://b-1/s.sh", "AUTOHEAL_STARTUP_SCRIPT_GENERATION": "latest"}, nil,
			`AUTOHEAL_STARTUP_SCRIPT_GENERATION="latest": want an integer`},
		{"log name with a slash", map[string]string{"AUTOHEAL_RECORD_LOG": "a/b"}, nil, `AUTOHEAL_RECORD_LOG="a/b": want a log id`},
		{"empty log name", map[string]string{"AUTOHEAL_RECORD_LOG": ""}, nil, `AUTOHEAL_RECORD_LOG="": want a log id`},
		{"app label with capitals", map[string]string{"AUTOHEAL_APP_LABEL": "AutoHeal"}, nil, `AUTOHEAL_APP_LABEL="AutoHeal": want 1-63 of a-z`},
		{"node service account not an email", map[string]string{"AUTOHEAL_NODE_SERVICE_ACCOUNTS": "trainer@acme-ml.iam.gserviceaccount.com,trainer"}, nil,
			`AUTOHEAL_NODE_SERVICE_ACCOUNTS="trainer@acme-ml.iam.gserviceaccount.com,trainer": "trainer" is not a service account email`},
		{"node service account of a user", map[string]string{"AUTOHEAL_NODE_SERVICE_ACCOUNTS": "alice@example.com"}, nil,
			`AUTOHEAL_NODE_SERVICE_ACCOUNTS="alice@example.com": "alice@example.com" is not a service account email`},
		{"mac key without a version", map[string]string{"AUTOHEAL_MAC_KEY": "projects/acme-ops/locations/us-central1/keyRings/r/cryptoKeys/k"}, nil,
			`AUTOHEAL_MAC_KEY="projects/acme-ops/locations/us-central1/keyRings/r/cryptoKeys/k": want a Cloud KMS key version`},
		{"mac key version zero", map[string]string{"AUTOHEAL_MAC_KEY": "projects/acme-ops/locations/us-central1/keyRings/r/cryptoKeys/k/cryptoKeyVersions/0"}, nil,
			`AUTOHEAL_MAC_KEY="projects/acme-ops/locations/us-central1/keyRings/r/cryptoKeys/k/cryptoKeyVersions/0": want a Cloud KMS key version`},
		{"bad endpoint", map[string]string{"AUTOHEAL_TPU_ENDPOINT": "localhost:8080"}, nil, `AUTOHEAL_TPU_ENDPOINT="localhost:8080": want an http(s) URL`},
		{"bad faulty-host setting", map[string]string{"AUTOHEAL_REPORT_FAULTY_HOSTS": "3/week"}, nil, `AUTOHEAL_REPORT_FAULTY_HOSTS="3/week": want COUNT/WINDOW such as 3/7d, true or false`},
		{"bad database", map[string]string{"AUTOHEAL_FIRESTORE_DATABASE": "DB"}, nil, `AUTOHEAL_FIRESTORE_DATABASE="DB": want a Firestore database id`},
		{"kick topic without projects/", map[string]string{"AUTOHEAL_KICK_TOPIC": "tpu-autoheal"}, nil, `AUTOHEAL_KICK_TOPIC="tpu-autoheal": want projects/PROJECT/topics/TOPIC`},
		{"kick topic of a subscription", map[string]string{"AUTOHEAL_KICK_TOPIC": "projects/acme-ops/subscriptions/tpu-autoheal"}, nil, `AUTOHEAL_KICK_TOPIC="projects/acme-ops/subscriptions/tpu-autoheal": want projects/PROJECT/topics/TOPIC`},
		{"kick topic named goog", map[string]string{"AUTOHEAL_KICK_TOPIC": "projects/acme-ops/topics/goog-x"}, nil, `AUTOHEAL_KICK_TOPIC="projects/acme-ops/topics/goog-x": want projects/PROJECT/topics/TOPIC`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := minimalEnv()
			for k, v := range tt.set {
				env[k] = v
			}
			for _, k := range tt.drop {
				delete(env, k)
			}
			_, err := load(t, env)
			if err == nil {
				t.Fatalf("LoadConfig succeeded, want error containing %s", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v\nwant it to contain %s", err, tt.want)
			}
		})
	}
}

var handleChild = flag.Bool("handle-child", false, "internal: call ServeHTTP once and print its answer")

func TestMain(m *testing.M) {
	flag.Parse()
	if *handleChild {
		rec := httptest.NewRecorder()
		function.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}")))
		fmt.Printf("%d %s", rec.Code, strings.TrimSpace(rec.Body.String()))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestUnprefixedVariablesAreIgnored: with envconfig:"NAME" tags envconfig
// would also read the bare NAME; Config's split_words tags must not, so a
// stray PROJECT, WINDOW or LEASE in the environment configures nothing.
func TestUnprefixedVariablesAreIgnored(t *testing.T) {
	env := minimalEnv()
	env["PROJECT"] = "evil-corp"
	env["WINDOW"] = "1m"
	env["LEASE"] = "1s"
	env["DRY_RUN"] = "true"
	got, err := load(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if got.Project != "acme-ops" || got.Window != 24*time.Hour || got.Lease != 15*time.Minute || got.DryRun {
		t.Errorf("config = %+v, want AUTOHEAL_PROJECT, default window and lease, no dry run", got)
	}

	delete(env, "AUTOHEAL_PROJECT")
	if _, err := load(t, env); err == nil || !strings.Contains(err.Error(), "AUTOHEAL_PROJECT is required") {
		t.Errorf("with only PROJECT set: error = %v, want AUTOHEAL_PROJECT is required", err)
	}
}

// TestHandleReturnsConfigErrorsForRetry runs the registered entry point in a
// child process with a broken environment: it must neither exit nor panic,
// but return the error (Pub/Sub retries) and log it as a structured ERROR.
func TestHandleReturnsConfigErrorsForRetry(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-handle-child")
	cmd.Env = []string{"AUTOHEAL_PROJECT=acme-ops", "AUTOHEAL_PROJECTS=acme-ml", "AUTOHEAL_RECORD_TO=kafka"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child exited: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(string(out), `AUTOHEAL_RECORD_TO="kafka"`) {
		t.Errorf("Handle returned %q, want the config error naming AUTOHEAL_RECORD_TO", out)
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(stderr.String())), &line); err != nil {
		t.Fatalf("stderr is not one JSON line: %v\n%s", err, stderr.String())
	}
	if line["severity"] != "ERROR" || line["event"] != "startup-error" || !strings.Contains(line["message"].(string), "AUTOHEAL_RECORD_TO") {
		t.Errorf("stderr line = %v, want an ERROR naming the variable", line)
	}
}

// TestVariablesAreTheDocumentedNames pins the names split_words derives,
// acronyms included (TPU, TTL), against the list the README documents.
func TestVariablesAreTheDocumentedNames(t *testing.T) {
	vars, err := function.Variables()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vars {
		got = append(got, v.Name)
	}
	want := []string{
		"AUTOHEAL_PROJECT", "AUTOHEAL_PROJECTS", "AUTOHEAL_ZONES", "AUTOHEAL_DRY_RUN", "AUTOHEAL_LABEL_SELECTOR",
		"AUTOHEAL_STARTUP_SCRIPT", "AUTOHEAL_STARTUP_SCRIPT_GENERATION", "AUTOHEAL_FIRESTORE_DATABASE", "AUTOHEAL_TPU_ENDPOINT",
		"AUTOHEAL_COMPUTE_INSTANCES", "AUTOHEAL_COMPUTE_ENDPOINT", "AUTOHEAL_REPORT_FAULTY_HOSTS",
		"AUTOHEAL_RECORD_TO", "AUTOHEAL_RECORD_LOG", "AUTOHEAL_APP_LABEL", "AUTOHEAL_MAX_EVENT_AGE", "AUTOHEAL_UNHEALTHY_GRACE", "AUTOHEAL_STUCK_GRACE", "AUTOHEAL_RESTART_GRACE", "AUTOHEAL_COOLDOWN",
		"AUTOHEAL_WINDOW", "AUTOHEAL_MAX_RECREATES", "AUTOHEAL_MAX_IN_FLIGHT", "AUTOHEAL_MAX_ATTEMPTS",
		"AUTOHEAL_LEASE", "AUTOHEAL_EVENT_TTL", "AUTOHEAL_SWEEP_BUDGET", "AUTOHEAL_SWEEP_FOLLOW", "AUTOHEAL_LOOK_AGAIN",
		"AUTOHEAL_KICK_TOPIC", "AUTOHEAL_BREAKER", "AUTOHEAL_HOLD_TTL",
		"AUTOHEAL_MAINTENANCE", "AUTOHEAL_CHECKPOINT_TIMEOUT", "AUTOHEAL_MAINTENANCE_MAX", "AUTOHEAL_RESUME_WATCH", "AUTOHEAL_STOCKOUT_ZONE_AFTER", "AUTOHEAL_MAX_REQUEUES",
		"AUTOHEAL_ACTOR", "AUTOHEAL_EVIDENCE_WAIT",
		"AUTOHEAL_NODE_SERVICE_ACCOUNTS", "AUTOHEAL_MAC_KEY", "AUTOHEAL_SWEEP_MIN_INTERVAL", "AUTOHEAL_TRUST_UNSEALED_SPECS",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("variables (-want +got):\n%s", diff)
	}
}

// TestConfigurationPageListsEveryVariable keeps docs/configuration.md, the
// operator's page, in step with the variables the function reads: a new
// variable without a row there, or a row for one that no longer exists, fails.
func TestConfigurationPageListsEveryVariable(t *testing.T) {
	page, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	vars, err := function.Variables()
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	for _, v := range vars {
		read[v.Name] = true
		if !strings.Contains(string(page), "`"+v.Name+"`") {
			t.Errorf("docs/configuration.md has no row for %s", v.Name)
		}
	}
	for _, name := range regexp.MustCompile("`(AUTOHEAL_[A-Z_]+)`").FindAllStringSubmatch(string(page), -1) {
		if !read[name[1]] {
			t.Errorf("docs/configuration.md documents %s, which the function does not read", name[1])
		}
	}
}

// TestMaxRequeuesSetAndUnset: AUTOHEAL_MAX_REQUEUES reaches the policy when
// set (0 too: never queued again), and is 2 when unset.
func TestMaxRequeuesSetAndUnset(t *testing.T) {
	for _, tt := range []struct {
		name  string
		value string
		want  int
	}{{"unset", "", 2}, {"set", "5", 5}, {"set to 0", "0", 0}} {
		t.Run(tt.name, func(t *testing.T) {
			env := minimalEnv()
			if tt.value != "" {
				env["AUTOHEAL_MAX_REQUEUES"] = tt.value
			}
			cfg, err := load(t, env)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.RemediateConfig().MaxRequeues; got != tt.want {
				t.Errorf("MaxRequeues = %d, want %d", got, tt.want)
			}
		})
	}
}
