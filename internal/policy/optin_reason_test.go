package policy

import (
	"testing"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

// TestNotOptedInSaysWhatTheNodeHas: a node labelled tpu-autoheal=true is
// told what it has, not only what is missing.
func TestNotOptedInSaysWhatTheNodeHas(t *testing.T) {
	tests := []struct {
		name  string
		value string // "" = no such label
		want  string
	}{
		{"label with another value names it", "true", "not opted in: label tpu-autoheal=enabled missing (has tpu-autoheal=true)"},
		{"label with an empty value names it", "-", "not opted in: label tpu-autoheal=enabled missing (has tpu-autoheal=)"},
		{"no label at all says only what is missing", "", "not opted in: label tpu-autoheal=enabled missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := unlabelled("TERMINATED", "")
			switch tt.value {
			case "":
			case "-":
				n.Labels["tpu-autoheal"] = ""
			default:
				n.Labels["tpu-autoheal"] = tt.value
			}
			d := Decide(terminateEvent(events.CauseMaintenance), Observed{Node: n}, History{}, t0, DefaultConfig())
			if d.Action != ActionSkip || d.Reason != tt.want {
				t.Errorf("Decide = %s %q, want skip %q", d.Action, d.Reason, tt.want)
			}
		})
	}
}
