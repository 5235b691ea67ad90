package function_test

import (
	"context"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/events"
)

// TestReportFaultyHostsSetAndUnset: AUTOHEAL_REPORT_FAULTY_HOSTS=3/7d
// makes the function report the host of a reservation-bound VM faulty
// after its third host error; unset, it never does.
func TestReportFaultyHostsSetAndUnset(t *testing.T) {
	for _, set := range []bool{true, false} {
		t.Run(map[bool]string{true: "set", false: "unset"}[set], func(t *testing.T) {
			clk := time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)
			env := map[string]string{}
			if set {
				env["AUTOHEAL_REPORT_FAULTY_HOSTS"] = "3/7d"
			}
			fake, fn := instanceFunction(t, env, &clk)
			vm := computefake.InstanceName("acme-ml", "us-central1-c", "reserved-1")
			for range 3 {
				entry, err := fake.HostError(vm)
				if err != nil {
					t.Fatal(err)
				}
				clk = clk.Add(time.Second)
				if err := fn.HandleMessage(context.Background(), pushBody(entry.JSON())); err != nil {
					t.Fatal(err)
				}
				clk = clk.Add(time.Hour)
				if err := fn.HandleMessage(context.Background(), []byte(events.SweepMessage)); err != nil {
					t.Fatal(err)
				}
			}
			want := 0
			if set {
				want = 1
			}
			if got := fake.Count("instances.reportHostAsFaulty", ""); got != want {
				t.Errorf("%d reports, want %d", got, want)
			}
			if got := fake.Count("instances.start", ""); got != 3 {
				t.Errorf("%d starts, want 3", got)
			}
		})
	}
}
