package computevm_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// The notice's read-modify-write against another writer of the instance's
// metadata (a person, an agent) whose write lands between our read and our
// setMetadata: Compute Engine refuses ours (412 conditionNotMet) and the
// simulated one does too (computefake.FailRule.OtherWriter).

const otherKey, otherValue = "team-note", "written by someone else"

// noticeTest schedules a maintenance notice on reserved-1, a single-host
// VM, and returns the env, the VM and the notice entry.
func noticeTest(t *testing.T) (*env, string, computefake.LogEntry, time.Time) {
	t.Helper()
	e := newEnv(t)
	vm := name("reserved-1")
	window := epoch.Add(7 * 24 * time.Hour)
	entries, err := e.fake.ScheduleMaintenance(vm, computefake.Maintenance{WindowStart: window, WindowEnd: window.Add(4 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return e, vm, entries[0], window
}

// metadata is the instance's metadata as the fake holds it now.
func metadata(t *testing.T, e *env, vm string) map[string]string {
	t.Helper()
	in, ok := e.fake.Instance(vm)
	if !ok {
		t.Fatalf("%s not found", vm)
	}
	return items(in)
}

func items(in *compute.Instance) map[string]string {
	out := map[string]string{}
	for _, it := range in.Metadata.Items {
		if it.Value != nil {
			out[it.Key] = *it.Value
		}
	}
	return out
}

func noticeWindow(t *testing.T, md map[string]string) string {
	t.Helper()
	v, ok := md[remediate.NoticeMetadataKey]
	if !ok {
		return ""
	}
	var n remediate.MaintenanceNotice
	if err := json.Unmarshal([]byte(v), &n); err != nil {
		t.Fatalf("%s = %q: %v", remediate.NoticeMetadataKey, v, err)
	}
	return n.Notice
}

func stepNames(r remediate.Record) []string {
	var out []string
	for _, s := range r.Steps {
		out = append(out, s.Name)
	}
	return out
}

func TestANoticeRacingAnotherWriterIsReadAgainAndLandsOnTopOfTheirWrite(t *testing.T) {
	e, vm, entry, window := noticeTest(t)
	// The first two sends each meet a write of someone else's that landed
	// after our read: both are refused, the third goes through.
	e.fake.Fail(computefake.FailRule{Method: "instances.setMetadata", Resource: vm, Times: 2, OtherWriter: map[string]string{otherKey: otherValue}})
	if got := e.deliver(entry); got != remediate.ActionPrepare {
		t.Fatalf("notice: %s, want prepare", got)
	}
	last := e.out.recs[len(e.out.recs)-1]
	if last.Err != "" || last.Outcome != remediate.OutcomePrepared {
		t.Errorf("record: outcome %q, err %q; want prepared, no error", last.Outcome, last.Err)
	}
	if got, want := strings.Join(stepNames(last), ","), "set-metadata,get,set-metadata,get,set-metadata"; got != want {
		t.Errorf("steps = %s, want %s", got, want)
	}
	if got := e.calls("instances.setMetadata"); got != computevm.MaxNoticeWrites {
		t.Errorf("%d setMetadata calls, want %d", got, computevm.MaxNoticeWrites)
	}
	e.clock.add(computefake.DefaultMetadataTime + time.Second)
	md := metadata(t, e, vm)
	if md[otherKey] != otherValue {
		t.Errorf("the other writer's %s = %q, want %q: their write was lost", otherKey, md[otherKey], otherValue)
	}
	if got := noticeWindow(t, md); got != window.Format(time.RFC3339) {
		t.Errorf("notice window = %q, want %s", got, window.Format(time.RFC3339))
	}
	for _, k := range []string{"startup-script", "enable-guest-attributes"} {
		if _, ok := md[k]; !ok {
			t.Errorf("metadata %s lost", k)
		}
	}
	if got := e.sweep(vm); got != remediate.ActionRecord {
		t.Errorf("sweep after: %s, want record (delivered)", got)
	}
	if got := e.calls("instances.setMetadata"); got != computevm.MaxNoticeWrites {
		t.Errorf("%d setMetadata calls after the sweep, want still %d", got, computevm.MaxNoticeWrites)
	}
}

func TestANoticeRefusedOnEveryWriteIsLeftToTheNextLook(t *testing.T) {
	e, vm, entry, window := noticeTest(t)
	if computevm.MaxNoticeWrites != 3 {
		t.Fatalf("MaxNoticeWrites = %d, want 3", computevm.MaxNoticeWrites)
	}
	// Every send of this look races a write of someone else's; the next
	// look's does not.
	e.fake.Fail(computefake.FailRule{Method: "instances.setMetadata", Resource: vm, Times: 3, OtherWriter: map[string]string{otherKey: otherValue}})
	if got := e.deliver(entry); got != remediate.ActionPrepare {
		t.Fatalf("notice: %s, want prepare", got)
	}
	last := e.out.recs[len(e.out.recs)-1]
	if got := e.calls("instances.setMetadata"); got != 3 {
		t.Errorf("%d setMetadata calls in the look, want 3 (bounded)", got)
	}
	if last.Outcome == remediate.OutcomePrepared || !strings.Contains(last.Err, "changed under each of 3 writes") || !strings.Contains(last.Err, "left to the next look") {
		t.Errorf("record: outcome %q, err %q; want not prepared, the refusals and the next look named", last.Outcome, last.Err)
	}
	if got, want := strings.Join(stepNames(last), ","), "set-metadata,get,set-metadata,get,set-metadata"; got != want {
		t.Errorf("steps = %s, want %s", got, want)
	}
	for i, s := range last.Steps {
		if s.Name == "set-metadata" && !strings.Contains(s.Err, "412") {
			t.Errorf("step %d: err %q, want the 412", i, s.Err)
		}
	}
	md := metadata(t, e, vm)
	if md[otherKey] != otherValue || noticeWindow(t, md) != "" {
		t.Errorf("after the look: %s = %q, notice %q; want theirs kept, ours not written", otherKey, md[otherKey], noticeWindow(t, md))
	}

	e.clock.add(time.Minute)
	if got := e.sweep(vm); got != remediate.ActionPrepare {
		t.Fatalf("next look: %s, want prepare", got)
	}
	if got := e.calls("instances.setMetadata"); got != 4 {
		t.Errorf("%d setMetadata calls after the next look, want 4", got)
	}
	e.clock.add(computefake.DefaultMetadataTime + time.Second)
	md = metadata(t, e, vm)
	if md[otherKey] != otherValue || noticeWindow(t, md) != window.Format(time.RFC3339) {
		t.Errorf("after the next look: %s = %q, notice %q; want both", otherKey, md[otherKey], noticeWindow(t, md))
	}
}

func TestANoticeWrittenMeanwhileIsNotWrittenAgain(t *testing.T) {
	e, vm, entry, window := noticeTest(t)
	// Another look of ours wrote the notice between this look's read and
	// its write (with its send time): read again, the instance holds it;
	// nothing more is sent.
	b, err := json.Marshal(remediate.MaintenanceNotice{Notice: window.Format(time.RFC3339), SentAt: e.clock.now(), Status: "PENDING"})
	if err != nil {
		t.Fatal(err)
	}
	e.fake.Fail(computefake.FailRule{Method: "instances.setMetadata", Resource: vm, Times: 1, OtherWriter: map[string]string{remediate.NoticeMetadataKey: string(b)}})
	e.deliver(entry)
	last := e.out.recs[len(e.out.recs)-1]
	if got := e.calls("instances.setMetadata"); got != 1 {
		t.Errorf("%d setMetadata calls, want 1", got)
	}
	if last.Err != "" || strings.Join(stepNames(last), ",") != "set-metadata,get" {
		t.Errorf("record: err %q, steps %v; want no error, set-metadata then get", last.Err, stepNames(last))
	}
}

func TestANoticeFailingOtherwiseIsNotRetriedInTheLook(t *testing.T) {
	e, vm, entry, _ := noticeTest(t)
	e.fake.Fail(computefake.FailRule{Method: "instances.setMetadata", Resource: vm, Times: 1, Code: 503})
	e.deliver(entry)
	if got := e.calls("instances.setMetadata"); got != 1 {
		t.Errorf("%d setMetadata calls after a 503, want 1 (only a 412 is read again and retried)", got)
	}
	if last := e.out.recs[len(e.out.recs)-1]; last.Err == "" {
		t.Error("record has no error after a 503")
	}
}
