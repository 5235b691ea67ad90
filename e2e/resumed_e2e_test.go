//go:build emulator

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// resumedRecord is the part of a resumed record the test checks.
type resumedRecord struct {
	Action          string    `json:"action"`
	Outcome         string    `json:"outcome"`
	Reason          string    `json:"reason"`
	Node            string    `json:"node"`
	InsertID        string    `json:"insertId"`
	EventTime       time.Time `json:"eventTime"`
	AcceleratorType string    `json:"acceleratorType"`
	Chips           int       `json:"chips"`
	Steps           []struct {
		Name            string    `json:"name"`
		Start           time.Time `json:"start"`
		DurationSeconds float64   `json:"durationSeconds"`
	} `json:"steps"`
}

func resumedRecords(out []string) []resumedRecord {
	var rs []resumedRecord
	for _, l := range out {
		var r resumedRecord
		if json.Unmarshal([]byte(l), &r) == nil && r.Action == string(remediate.ActionResumed) {
			rs = append(rs, r)
		}
	}
	return rs
}

// checkResumed closes the pod's incident (#11): once the pod is recovered,
// the guests of its 64 workers report autoheal/resumed through the
// simulated guest attributes; the served function's sweep reads them
// (nodes.getGuestAttributes) and, with the incident kept in the Firestore
// emulator, writes exactly one resumed record with the incident's figures.
// first is the terminate entries' timestamp.
func checkResumed(ctx context.Context, t *testing.T, tpuSrv *tpufake.Server, out *lines, first time.Time) {
	t.Helper()
	if got := resumedRecords(out.all()); len(got) != 0 {
		t.Fatalf("resumed records before any guest reported: %+v", got)
	}
	// Every worker started training at resumedAt, the last one 2s later,
	// from the checkpoint written 10m before the event.
	resumedAt := time.Now().UTC().Truncate(time.Second)
	ckpt := first.Add(-10 * time.Minute)
	for w := range podWorkers {
		at := resumedAt
		if w == podWorkers-1 {
			at = resumedAt.Add(2 * time.Second)
		}
		tpuSrv.SetGuestAttribute(podNode, tpufake.GuestAttribute{Worker: fmt.Sprint(w), Namespace: "autoheal", Key: "resumed",
			Value: fmt.Sprintf(`{"time":%q,"checkpoint":"gs://acme-e2e/ckpt/step-100","checkpointTime":%q,"attempt":1,"worker":%d}`,
				at.Format(time.RFC3339), ckpt.UTC().Format(time.RFC3339), w)})
	}
	start := time.Now()
	for len(resumedRecords(out.all())) == 0 {
		if ctx.Err() != nil || time.Since(start) > 2*time.Minute {
			t.Fatalf("no resumed record %v after the guests reported", time.Since(start).Round(time.Second))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("resumed record after %v", time.Since(start).Round(time.Millisecond))
	// Two more sweeps (every 5s): the incident is closed, no second record.
	time.Sleep(12 * time.Second)
	got := resumedRecords(out.all())
	if len(got) != 1 {
		t.Fatalf("%d resumed records, want exactly 1: %+v", len(got), got)
	}
	r := got[0]
	toResume := resumedAt.Add(2 * time.Second).Sub(first)
	wantReason := fmt.Sprintf("training resumed on %d of %d workers %s after the first event, from gs://acme-e2e/ckpt/step-100 (progress lost 10m0s)", podWorkers, podWorkers, toResume)
	if r.Node != podNode || r.Outcome != string(remediate.OutcomeResumed) || r.Reason != wantReason ||
		!r.EventTime.Equal(first) || !strings.HasPrefix(r.InsertID, "e2e-pod-w") || r.AcceleratorType != "v4-512" || r.Chips != 256 {
		t.Errorf("resumed record = %+v\nwant node %s, outcome resumed, reason %q, eventTime %s, an e2e-pod-w insertId, v4-512 with 256 chips",
			r, podNode, wantReason, first)
	}
	steps := map[string]string{}
	for _, s := range r.Steps {
		steps[s.Name] = fmt.Sprintf("%s +%gs", s.Start.UTC().Format(time.RFC3339), s.DurationSeconds)
	}
	for name, want := range map[string]string{
		"resumed":       fmt.Sprintf("%s +%gs", first.UTC().Format(time.RFC3339), toResume.Seconds()),
		"lost-progress": fmt.Sprintf("%s +600s", ckpt.UTC().Format(time.RFC3339)),
	} {
		if steps[name] != want {
			t.Errorf("step %s = %q, want %q", name, steps[name], want)
		}
	}
}
