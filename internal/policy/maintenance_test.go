package policy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	tpu "google.golang.org/api/tpu/v2"
)

var maintNow = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

const maintWindow = "2026-12-08T02:00:00Z"

func maintNode(status, typ string, canReschedule bool, label string, workers int) *tpu.Node {
	n := &tpu.Node{
		Name:  "projects/p/locations/us-central2-b/nodes/llm",
		State: "READY", Health: "HEALTHY",
		Labels: map[string]string{"tpu-autoheal": "enabled"},
		UpcomingMaintenance: &tpu.UpcomingMaintenance{
			MaintenanceStatus: status, Type: typ, CanReschedule: canReschedule,
			WindowStartTime: maintWindow, WindowEndTime: "2026-12-08T06:00:00Z",
		},
	}
	if label != "" {
		n.Labels[MaintenanceLabel] = label
	}
	for w := range workers {
		n.NetworkEndpoints = append(n.NetworkEndpoints, &tpu.NetworkEndpoint{IpAddress: fmt.Sprintf("10.0.0.%d", w+2)})
	}
	return n
}

func checkpoint(worker, notice string) GuestAttribute {
	v, _ := json.Marshal(CheckpointReport{Notice: notice, Checkpoint: "gs://b/ckpt/step-100", Time: "2026-12-01T09:50:00Z"})
	return GuestAttribute{Worker: worker, Namespace: CheckpointNamespace, Key: CheckpointKey, Value: string(v)}
}

// stage is how far the notice got before this decision.
type maintStage string

const (
	stageFresh    maintStage = "fresh"     // nothing sent yet
	stageReported maintStage = "reported"  // sent 10m ago; every worker reported
	stageWaiting  maintStage = "waiting"   // sent 10m ago; no report yet
	stageTimedOut maintStage = "timed out" // sent 31m ago; no report
)

type maintRow struct {
	status, typ   string
	canReschedule bool
	mode, label   string
	stage         maintStage
}

func (r maintRow) String() string {
	label := r.label
	if label == "" {
		label = "none"
	}
	return fmt.Sprintf("%s/%s/canReschedule=%t/mode=%s/label=%s/%s", r.status, r.typ, r.canReschedule, r.mode, label, r.stage)
}

// effective is the mode the spec says applies: a valid label wins.
func (r maintRow) effective() string {
	switch r.label {
	case "off", "prepare", "early":
		return r.label
	}
	return r.mode
}

// maintRules are the rules, in order; the first that matches a row
// gives its expected action and the notice step claimed for it.
var maintRules = []struct {
	rule   string
	match  func(r maintRow) bool
	action Action
	step   string
}{
	{"ONGOING maintenance is recorded once", func(r maintRow) bool { return r.status == "ONGOING" }, ActionRecord, "ongoing"},
	{"mode off only records the notice once", func(r maintRow) bool { return r.effective() == "off" }, ActionRecord, "off"},
	{"a PENDING notice not yet sent is prepared", func(r maintRow) bool { return r.stage == stageFresh }, ActionPrepare, "prepare"},
	{"mode prepare stops after the notice", func(r maintRow) bool { return r.effective() == "prepare" }, ActionRecord, ""},
	{"early but not reschedulable is recorded once", func(r maintRow) bool { return !r.canReschedule }, ActionRecord, "no-reschedule"},
	{"early, every worker checkpointed: maintain", func(r maintRow) bool { return r.stage == stageReported }, ActionMaintain, "maintain"},
	{"early, no checkpoint within the timeout: recorded once", func(r maintRow) bool { return r.stage == stageTimedOut }, ActionRecord, "timeout"},
	{"early, still within the timeout: wait quietly", func(r maintRow) bool { return r.stage == stageWaiting }, ActionRecord, ""},
}

func TestDecideMaintenanceEveryCombination(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CheckpointTimeout = 30 * time.Minute
	rows := 0
	for _, status := range []string{"PENDING", "ONGOING"} {
		for _, typ := range []string{"SCHEDULED", "UNSCHEDULED"} {
			for _, canReschedule := range []bool{true, false} {
				for _, mode := range []string{"off", "prepare", "early"} {
					for _, label := range []string{"", "off", "prepare", "early", "sometimes"} {
						for _, stage := range []maintStage{stageFresh, stageReported, stageWaiting, stageTimedOut} {
							row := maintRow{status, typ, canReschedule, mode, label, stage}
							rows++
							t.Run(row.String(), func(t *testing.T) {
								wantAction, wantStep, rule := Action(""), "", ""
								for _, r := range maintRules {
									if r.match(row) {
										wantAction, wantStep, rule = r.action, r.step, r.rule
										break
									}
								}
								node := maintNode(status, typ, canReschedule, label, 2)
								obs := MaintenanceObserved{Node: node}
								sentAt := maintNow.Add(-10 * time.Minute)
								if stage == stageTimedOut {
									sentAt = maintNow.Add(-31 * time.Minute)
								}
								if stage != stageFresh {
									obs.Steps = map[string]time.Time{"prepare": sentAt}
									obs.CheckpointsRead = true
								}
								if stage == stageReported {
									obs.Checkpoints = []GuestAttribute{checkpoint("0", maintWindow), checkpoint("1", maintWindow)}
								}
								c := cfg
								c.MaintenanceMode = mode
								got := DecideMaintenance(obs, maintNow, c)
								if got.Action != wantAction || got.Step != wantStep {
									t.Errorf("got %s (step %q: %s), want %s (step %q) by rule %q", got.Action, got.Step, got.Reason, wantAction, wantStep, rule)
								}
								if wantWarn := label == "sometimes"; (len(got.Warnings) > 0) != wantWarn {
									t.Errorf("warnings %q, want a warning: %t", got.Warnings, wantWarn)
								}
								if got.Key != (NoticeKey{Node: node.Name, NodeID: node.Id, WindowStart: maintWindow}) {
									t.Errorf("key %+v", got.Key)
								}
								if wantAction == ActionPrepare {
									want := &MaintenanceNotice{Notice: maintWindow, SentAt: maintNow, Status: status, Type: typ,
										WindowStart: maintWindow, WindowEnd: "2026-12-08T06:00:00Z", CanReschedule: canReschedule}
									if diff := cmp.Diff(want, got.Notice); diff != "" {
										t.Errorf("notice (-want +got):\n%s", diff)
									}
								}
							})
						}
					}
				}
			}
		}
	}
	if rows != 2*2*2*3*5*4 {
		t.Fatalf("%d rows", rows)
	}
}

func TestDecideMaintenanceRows(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaintenanceMode = MaintenanceEarly
	sent := func(n *tpu.Node, notice string, at time.Time) *tpu.Node {
		v, _ := json.Marshal(MaintenanceNotice{Notice: notice, SentAt: at})
		n.Metadata = map[string]string{NoticeMetadataKey: string(v)}
		return n
	}
	tests := []struct {
		name       string
		obs        MaintenanceObserved
		dryRun     bool
		wantAction Action
		wantStep   string
		wantRead   bool
		wantReason string
	}{
		{name: "a node without upcoming maintenance is not about maintenance",
			obs: MaintenanceObserved{Node: func() *tpu.Node {
				n := maintNode("PENDING", "SCHEDULED", true, "", 1)
				n.UpcomingMaintenance = nil
				return n
			}()}},
		{name: "a node not opted in is not touched",
			obs: MaintenanceObserved{Node: func() *tpu.Node {
				n := maintNode("PENDING", "SCHEDULED", true, "", 1)
				delete(n.Labels, "tpu-autoheal")
				return n
			}()}},
		{name: "a node that is not READY is left to the node decision",
			obs: MaintenanceObserved{Node: func() *tpu.Node {
				n := maintNode("PENDING", "SCHEDULED", true, "", 1)
				n.State = "TERMINATED"
				return n
			}()}},
		{name: "dry run would prepare, once",
			obs: MaintenanceObserved{Node: maintNode("PENDING", "SCHEDULED", true, "", 1)}, dryRun: true,
			wantAction: ActionSkip, wantStep: "dry-run-prepare", wantReason: "dry run: would prepare"},
		{name: "dry run would maintain, once",
			obs: MaintenanceObserved{Node: maintNode("PENDING", "SCHEDULED", true, "", 1), Steps: map[string]time.Time{"prepare": maintNow.Add(-time.Minute)},
				CheckpointsRead: true, Checkpoints: []GuestAttribute{checkpoint("0", maintWindow)}}, dryRun: true,
			wantAction: ActionSkip, wantStep: "dry-run-maintain", wantReason: "dry run: would maintain"},
		{name: "a notice already in metadata is not sent again though the ledger lost it",
			obs:        MaintenanceObserved{Node: sent(maintNode("PENDING", "SCHEDULED", true, "prepare", 1), maintWindow, maintNow.Add(-time.Hour))},
			wantAction: ActionRecord, wantStep: ""},
		{name: "a notice of an earlier window in metadata does not count: the new one is prepared",
			obs:        MaintenanceObserved{Node: sent(maintNode("PENDING", "SCHEDULED", true, "", 1), "2026-11-01T00:00:00Z", maintNow.Add(-time.Hour))},
			wantAction: ActionPrepare, wantStep: "prepare"},
		{name: "early mode asks for the checkpoint reports before deciding",
			obs:        MaintenanceObserved{Node: maintNode("PENDING", "SCHEDULED", true, "", 1), Steps: map[string]time.Time{"prepare": maintNow}},
			wantAction: ActionRecord, wantRead: true},
		{name: "one worker of two reported: wait",
			obs: MaintenanceObserved{Node: maintNode("PENDING", "SCHEDULED", true, "", 2), Steps: map[string]time.Time{"prepare": maintNow.Add(-time.Minute)},
				CheckpointsRead: true, Checkpoints: []GuestAttribute{checkpoint("1", maintWindow)}},
			wantAction: ActionRecord, wantReason: "waiting for the checkpoint of worker 0"},
		{name: "a checkpoint reported for an earlier notice does not count",
			obs: MaintenanceObserved{Node: maintNode("PENDING", "SCHEDULED", true, "", 1), Steps: map[string]time.Time{"prepare": maintNow.Add(-time.Hour)},
				CheckpointsRead: true, Checkpoints: []GuestAttribute{checkpoint("0", "2026-11-01T00:00:00Z")}},
			wantAction: ActionRecord, wantStep: "timeout", wantReason: "not reported by worker 0 within 30m"},
		{name: "the timeout counts from sentAt in the metadata notice",
			obs: MaintenanceObserved{Node: sent(maintNode("PENDING", "SCHEDULED", true, "", 1), maintWindow, maintNow.Add(-29*time.Minute)),
				Steps: map[string]time.Time{"prepare": maintNow.Add(-2 * time.Hour)}, CheckpointsRead: true},
			wantAction: ActionRecord, wantStep: ""},
		{name: "maintenance is started at most once per notice",
			obs: MaintenanceObserved{Node: maintNode("PENDING", "SCHEDULED", true, "", 1), Steps: map[string]time.Time{"prepare": maintNow, "maintain": maintNow},
				CheckpointsRead: true, Checkpoints: []GuestAttribute{checkpoint("0", maintWindow)}},
			wantAction: ActionRecord, wantReason: "started early"},
		{name: "a recorded timeout is not recorded again",
			obs: MaintenanceObserved{Node: maintNode("PENDING", "SCHEDULED", true, "", 1), Steps: map[string]time.Time{"prepare": maintNow.Add(-time.Hour), "timeout": maintNow},
				CheckpointsRead: true},
			wantAction: ActionRecord, wantStep: ""},
		{name: "ONGOING recorded before is not recorded again",
			obs:        MaintenanceObserved{Node: maintNode("ONGOING", "SCHEDULED", true, "", 1), Steps: map[string]time.Time{"ongoing": maintNow}},
			wantAction: ActionRecord, wantStep: ""},
		{name: "a notice without a window start is recorded, not acted on",
			obs: MaintenanceObserved{Node: func() *tpu.Node {
				n := maintNode("PENDING", "SCHEDULED", true, "", 1)
				n.UpcomingMaintenance.WindowStartTime = ""
				return n
			}()},
			wantAction: ActionRecord, wantStep: "invalid", wantReason: "no windowStartTime"},
		{name: "an unknown maintenance status is recorded, not acted on",
			obs:        MaintenanceObserved{Node: maintNode("SOMEDAY", "SCHEDULED", true, "", 1)},
			wantAction: ActionRecord, wantStep: "invalid", wantReason: `unrecognised maintenanceStatus "SOMEDAY"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			c.DryRun = tt.dryRun
			got := DecideMaintenance(tt.obs, maintNow, c)
			if got.Action != tt.wantAction || got.Step != tt.wantStep || got.ReadCheckpoints != tt.wantRead {
				t.Errorf("got %q step %q read %t (%s), want %q step %q read %t", got.Action, got.Step, got.ReadCheckpoints, got.Reason, tt.wantAction, tt.wantStep, tt.wantRead)
			}
			if !strings.Contains(got.Reason, tt.wantReason) {
				t.Errorf("reason %q, want it to contain %q", got.Reason, tt.wantReason)
			}
		})
	}
}

func TestSameNoticeComparesWindowStartsAsTimes(t *testing.T) {
	for _, tt := range []struct {
		reported, notice string
		want             bool
	}{
		{"2026-11-27T02:00:00Z", "2026-11-27T02:00:00Z", true},
		{"2026-11-27T02:00:00.000Z", "2026-11-27T02:00:00Z", true},
		{"2026-11-27T03:00:00+01:00", "2026-11-27T02:00:00Z", true},
		{"2026-11-27T02:00:01Z", "2026-11-27T02:00:00Z", false},
		{"not a time", "2026-11-27T02:00:00Z", false},
		{"", "2026-11-27T02:00:00Z", false},
	} {
		if got := sameNotice(tt.reported, tt.notice); got != tt.want {
			t.Errorf("sameNotice(%q, %q) = %v, want %v", tt.reported, tt.notice, got, tt.want)
		}
	}
}
