package function

import (
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/record"
)

// Events of the function's own diagnostic lines (jsonPayload.event), which
// the Terraform module's alerts match: a start-up failure, and the summary
// each sweep writes (an absence of sweep lines means the sweeps stopped).
const (
	StartupErrorEvent = "startup-error"
	SweepEvent        = "sweep"
)

// diag writes the function's diagnostics (not decision records) as JSON
// lines in the shape Cloud Logging reads from a Cloud Run container:
// severity, message, timestamp and the app label, then stable keys. It is
// the start-up error's writer (before the config, and with it the
// instance's app label, is read); a Function writes with its own
// (AUTOHEAL_APP_LABEL, which the sweeps metric filters on).
var diag = newDiag(os.Stderr, record.AppLabelValue)

func newDiag(w io.Writer, app string) *slog.Logger {
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.LevelKey:
				a.Key = "severity"
				switch lvl := a.Value.Any().(slog.Level); {
				case lvl >= slog.LevelError:
					a.Value = slog.StringValue("ERROR")
				case lvl >= slog.LevelWarn:
					a.Value = slog.StringValue("WARNING")
				default:
					a.Value = slog.StringValue("INFO")
				}
			case slog.MessageKey:
				a.Key = "message"
			case slog.TimeKey:
				a.Key = "timestamp"
				a.Value = slog.StringValue(a.Value.Time().UTC().Format(time.RFC3339Nano))
			}
			return a
		},
	})
	return slog.New(h).With(slog.Any("logging.googleapis.com/labels", map[string]string{record.LabelApp: app}))
}
