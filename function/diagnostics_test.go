package function_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// lostRecorder refuses every record, as a Cloud Logging that cannot be
// written to (and no stdout fallback) would.
type lostRecorder struct{}

func (lostRecorder) Record(context.Context, remediate.Record) error {
	return errors.New("logging: quota exceeded")
}

// One logger: a diagnostic of the engine itself (here "record lost", which
// the engine writes when its Recorder fails) goes where WithDiagnostics
// says, in the function's shape (severity, app label), not to the engine's
// own stderr logger.
func TestEngineDiagnosticsReachTheFunctionsDiagnostics(t *testing.T) {
	_, tc := newFleetTPU(t)
	cfg, err := load(t, fleetEnv())
	if err != nil {
		t.Fatal(err)
	}
	diag := &syncBuffer{}
	fn, err := function.New(context.Background(), cfg,
		function.WithDiagnostics(diag), function.WithTPU(tc), function.WithStore(ledger.NewMemory()),
		function.WithRecorder(lostRecorder{}),
		function.WithClock(func() time.Time { return eventTime.Add(time.Minute) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fn.Close() })
	_ = fn.HandleMessage(context.Background(), pushBody(readTestdata(t, "terminate-maintenance.json")))
	var found bool
	for _, l := range strings.Split(strings.TrimSpace(diag.String()), "\n") {
		var line struct {
			Severity string            `json:"severity"`
			Message  string            `json:"message"`
			Node     string            `json:"node"`
			Error    string            `json:"error"`
			Labels   map[string]string `json:"logging.googleapis.com/labels"`
		}
		if json.Unmarshal([]byte(l), &line) != nil || line.Message != "record lost" {
			continue
		}
		found = true
		if line.Severity != "WARNING" || line.Node != node || !strings.Contains(line.Error, "quota exceeded") || line.Labels["app"] != "tpu-autoheal" {
			t.Errorf("record-lost line = %+v, want WARNING about %s, the recorder's error, app=tpu-autoheal", line, node)
		}
	}
	if !found {
		t.Errorf("the engine's record-lost diagnostic is not in the function's diagnostics:\n%s", diag.String())
	}
}
