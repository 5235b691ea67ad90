package record_test

import (
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/record"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// durationSeconds says how long the decision took, ledger time included:
// a 3.6 s recovery whose TPU calls took 21 ms reads 3.6, not 0.021.
func TestDurationIncludesLedgerTime(t *testing.T) {
	steps := []remediate.Step{
		{Name: "delete", Operation: "op-1", Duration: 12 * time.Millisecond},
		{Name: "create", Operation: "op-2", Duration: 9 * time.Millisecond},
	}
	for _, tc := range []struct {
		name    string
		elapsed time.Duration
		want    float64
	}{
		{"the decision's elapsed time", 3600 * time.Millisecond, 3.6},
		{"never less than its TPU calls", 5 * time.Millisecond, 0.021},
		{"unmeasured: the TPU calls", 0, 0.021},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := record.Payload(remediate.Record{Action: remediate.ActionRecreate, Steps: steps, Elapsed: tc.elapsed})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := p["durationSeconds"].(float64)
			if d := got - tc.want; d > 1e-9 || d < -1e-9 {
				t.Errorf("durationSeconds = %v, want %v", got, tc.want)
			}
		})
	}
}
