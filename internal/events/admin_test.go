package events

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAdminActivityEntriesAreEvidence(t *testing.T) {
	const llm = "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128"
	tests := []struct {
		file      string
		wantNode  string
		principal string
		time      time.Time
		want      AdminActivity
	}{
		{"admin-delete-node.json", llm, "alice@acme.example", time.Date(2026, 11, 20, 5, 10, 11, 381049000, time.UTC),
			AdminActivity{Change: ChangeDeleteNode, OperationID: "projects/acme-ml/locations/us-central2-b/operations/operation-1795669811402-5f3c1a7e9b2d4-8c1e5a3f-6b2d9e41", First: true}},
		{"admin-create-node-last.json", llm, "tpu-autoheal@acme-ml.iam.gserviceaccount.com", time.Date(2026, 11, 20, 5, 21, 40, 9120000, time.UTC),
			AdminActivity{Change: ChangeCreateNode, OperationID: "projects/acme-ml/locations/us-central2-b/operations/operation-1795670131207-5f3c1bb0c2e11-0d4a7c92-1f8e3b57", Last: true}},
		{"admin-create-node-by-location.json", llm, "bob@acme.example", time.Date(2026, 11, 20, 5, 36, 40, 0, time.UTC),
			AdminActivity{Change: ChangeCreateNode, OperationID: "projects/acme-ml/locations/us-central2-b/operations/operation-1795671000000-5f3c1cc0aa001-11aa22bb-33cc44dd", First: true}},
		{"admin-delete-node-legacy-failed.json", "projects/acme-research/locations/europe-west4-a/nodes/v3-8-legacy", "carol@acme.example", time.Date(2026, 11, 20, 6, 0, 0, 0, time.UTC),
			AdminActivity{Change: ChangeDeleteNode, Code: 7}},
		{"admin-delete-queued-resource.json", "", "alice@acme.example", time.Date(2026, 11, 20, 5, 12, 0, 0, time.UTC),
			AdminActivity{Change: ChangeDeleteQueuedResource, OperationID: "projects/acme-ml/locations/us-west4-a/operations/operation-1795669920000-5f3c1a99aa001-aa11bb22-cc33dd44", First: true,
				QueuedResource: "projects/acme-ml/locations/us-west4-a/queuedResources/qr-spot-v5e-16"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			ev, err := Parse(readFixture(t, tt.file), fixtureOpts)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Kind != KindAdminActivity || ev.Admin == nil {
				t.Fatalf("Kind %q Admin %v, want admin activity", ev.Kind, ev.Admin)
			}
			if diff := cmp.Diff(tt.want, *ev.Admin); diff != "" {
				t.Errorf("Admin (-want +got):\n%s", diff)
			}
			if ev.Node.Name() != tt.wantNode || ev.Principal != tt.principal || !ev.Time.Equal(tt.time) {
				t.Errorf("node %q principal %q time %v, want %q %q %v", ev.Node.Name(), ev.Principal, ev.Time, tt.wantNode, tt.principal, tt.time)
			}
		})
	}
}

func TestTheTwoEntriesOfOneOperationAreTwoEvents(t *testing.T) {
	first := strings.Replace(string(readFixture(t, "admin-delete-queued-resource.json")), `"insertId": "-5r4e3w2q1a0",`, "", 1)
	last := strings.Replace(first, `"first": true`, `"last": true`, 1)
	a, err := Parse([]byte(first), fixtureOpts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse([]byte(last), fixtureOpts)
	if err != nil {
		t.Fatal(err)
	}
	if a.InsertID == b.InsertID || !strings.HasPrefix(a.InsertID, SyntheticInsertIDPrefix) {
		t.Errorf("synthesized ids %q and %q, want two", a.InsertID, b.InsertID)
	}
}

func TestReplayIsLenientOnlyAboutAMissingLogName(t *testing.T) {
	strict := fixtureOpts
	replay := fixtureOpts
	replay.AcceptMissingLogName = true
	tests := []struct {
		file                   string
		wantStrict, wantReplay string // reject codes, "" = accepted
	}{
		{"terminate-maintenance.json", "", ""},
		{"admin-delete-node.json", "", ""},
		{"missing-log-name.json", CodeMissingLogName, ""},
		{"foreign-log.json", CodeForeignLog, CodeForeignLog},
		{"log-of-another-project.json", CodeForeignLog, CodeForeignLog},
		{"terminate-in-activity-log.json", CodeForeignLog, CodeForeignLog},
		{"admin-in-system-event-log.json", CodeForeignLog, CodeForeignLog},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			for _, c := range []struct {
				name string
				opts Options
				want string
			}{{"strict", strict, tt.wantStrict}, {"replay", replay, tt.wantReplay}} {
				_, err := Parse(readFixture(t, tt.file), c.opts)
				var re *RejectError
				switch {
				case c.want == "" && err != nil:
					t.Errorf("%s: %v, want accepted", c.name, err)
				case c.want != "" && (!errors.As(err, &re) || re.Code != c.want || re.Field != "logName"):
					t.Errorf("%s: %v, want %s on logName", c.name, err, c.want)
				}
			}
		})
	}
}

func TestSinkFilterNamesTheLogsExactly(t *testing.T) {
	if strings.Contains(SinkFilter, "logName:") {
		t.Errorf("SinkFilter matches logName as a substring: %s", SinkFilter)
	}
	for _, want := range append([]string{
		`log_id("cloudaudit.googleapis.com/system_event")`, `log_id("cloudaudit.googleapis.com/activity")`,
	}, quoteMethods(AdminMethods)...) {
		if !strings.Contains(SinkFilter, want) {
			t.Errorf("SinkFilter lacks %s", want)
		}
	}
	// The admin-activity methods are routed from the activity log only, the
	// system events from the system-event log only.
	sys, act, ok := strings.Cut(SinkFilter, `log_id("cloudaudit.googleapis.com/activity")`)
	if !ok || strings.Contains(sys, "Tpu.DeleteNode") || strings.Contains(act, MethodTerminate) {
		t.Errorf("SinkFilter mixes the logs' methods: %s", SinkFilter)
	}
	for _, m := range []string{"google.cloud.tpu.v2.Tpu.DeleteNode", "google.cloud.tpu.v2alpha1.Tpu.CreateNode",
		"google.cloud.tpu.v1.Tpu.DeleteNode", "google.cloud.tpu.v1alpha1.Tpu.CreateNode", "google.cloud.tpu.v2.Tpu.DeleteQueuedResource"} {
		if !slices.Contains(AdminMethods, m) {
			t.Errorf("AdminMethods lacks %s", m)
		}
	}
}

func TestFastPathLeavesAdminEntriesToTheReference(t *testing.T) {
	data := readFixture(t, "admin-delete-node.json")
	if _, _, ok := parseFast(data, fixtureOpts); ok {
		t.Error("the fast path answered an admin-activity entry; its operation is not read there")
	}
	// Through the Reader (whose fast path reads elements in place) too.
	got := readAll(t, append(append([]byte(nil), data...), data...), fixtureOpts)
	if len(got) != 2 || got[0].Event == nil || got[0].Event.Admin == nil || got[1].Event == nil || got[1].Event.Admin == nil {
		t.Fatalf("Reader items = %+v, want two admin-activity events", got)
	}
}
