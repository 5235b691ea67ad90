package report_test

import (
	"os"
	"testing"

	"github.com/tpu-autoheal/autoheal/internal/report"
)

// FuzzReader: no input makes reading, grouping or printing panic.
func FuzzReader(f *testing.F) {
	for _, name := range []string{"testdata/night.jsonl", "testdata/night-gcloud.json"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`[{"timestamp":"2026-11-20T03:00:00Z","jsonPayload":{"action":"resumed","node":"n","steps":[{"name":"resumed","start":"2026-11-20T03:00:00Z","durationSeconds":-5}]}}]`))
	f.Add([]byte(`{"action":"recreate","node":"n","timestamp":"2026-11-20T03:00:00Z","steps":[{"name":"create","start":"0001-01-01T00:00:00Z","durationSeconds":1e300}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := report.ReadAll(data)
		if err != nil {
			return
		}
		incs := report.Group(recs)
		sum := report.Summarize(incs)
		var sink discard
		_ = report.WriteText(&sink, incs, sum)
		_ = report.WriteJSON(&sink, incs)
		_ = report.WriteCSV(&sink, incs)
		_ = report.WriteHTML(&sink, incs, sum, "fuzz")
	})
}

type discard struct{}

func (*discard) Write(p []byte) (int, error) { return len(p), nil }
