package report_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tpu-autoheal/autoheal/internal/report"
)

// Times at the ends of the range (a fuzzer found these) are reported, not
// looped over: a hang here fails by the test binary's timeout.
func TestReportOfExtremeTimesEnds(t *testing.T) {
	for _, in := range []string{
		`{"action":"recreate","node":"n","timestamp":"2026-11-20T03:00:00Z","steps":[{"name":"create","start":"0001-01-01T00:00:00Z","durationSeconds":1e300}]}`,
		`{"action":"defer","node":"n","timestamp":"0001-01-01T00:00:01Z","eventTime":"0001-01-01T00:00:01Z","insertId":"a"}` + "\n" + `{"action":"defer","node":"n","timestamp":"9999-12-31T23:59:59Z"}`,
	} {
		recs, err := report.ReadAll([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		incs := report.Group(recs)
		var b bytes.Buffer
		if err := report.WriteHTML(&b, incs, report.Summarize(incs), "x"); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(b.String(), `class="axis"`); n > 12 {
			t.Errorf("%d ticks, want at most 12", n)
		}
	}
}
