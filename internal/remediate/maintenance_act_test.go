package remediate

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/googleapi"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/googleerr"
)

// fakeMaintTPU is a plain MaintenanceTPU: one node, the calls it received.
type fakeMaintTPU struct {
	node      *tpu.Node
	attrs     []GuestAttribute
	patchErr  []error // returned by the next patches, in order
	patches   []map[string]string
	maintains []string // node, or "qr:<name>:<nodes>"
	gets      int
}

var _ MaintenanceTPU = (*fakeMaintTPU)(nil)

func (f *fakeMaintTPU) GetNode(ctx context.Context, name string) (*tpu.Node, error) {
	f.gets++
	if f.node == nil || f.node.Name != name {
		return nil, googleerr.FromAPI(&googleapi.Error{Code: 404})
	}
	data, _ := json.Marshal(f.node)
	var n tpu.Node
	_ = json.Unmarshal(data, &n)
	return &n, nil
}

func (f *fakeMaintTPU) PatchNodeMetadata(ctx context.Context, name string, md map[string]string) (string, error) {
	if len(f.patchErr) > 0 {
		err := f.patchErr[0]
		f.patchErr = f.patchErr[1:]
		if err != nil {
			return "", err
		}
	}
	f.patches = append(f.patches, maps.Clone(md))
	f.node.Metadata = maps.Clone(md)
	return "projects/p/locations/us-central2-b/operations/patch-1", nil
}

func (f *fakeMaintTPU) GetGuestAttributes(ctx context.Context, node, queryPath string) ([]GuestAttribute, error) {
	if queryPath != CheckpointQueryPath {
		return nil, googleerr.FromAPI(&googleapi.Error{Code: 400, Message: "unexpected query path " + queryPath})
	}
	return f.attrs, nil
}

func (f *fakeMaintTPU) PerformMaintenance(ctx context.Context, node string) (string, error) {
	f.maintains = append(f.maintains, node)
	return "projects/p/locations/us-central2-b/operations/maint-1", nil
}

func (f *fakeMaintTPU) PerformMaintenanceQueuedResource(ctx context.Context, qr string, nodes []string) (string, error) {
	f.maintains = append(f.maintains, "qr:"+qr+":"+strings.Join(nodes, ","))
	return "projects/p/locations/us-central2-b/operations/maint-qr-1", nil
}

// memNotices is a NoticeStore for these tests (ledger.MemoryNotices is the
// real one; remediate cannot import ledger).
type memNotices map[NoticeKey]map[string]time.Time

func (m memNotices) ClaimNotice(_ context.Context, k NoticeKey, step string, at time.Time) (bool, error) {
	if m[k] == nil {
		m[k] = map[string]time.Time{}
	}
	if _, ok := m[k][step]; ok {
		return false, nil
	}
	m[k][step] = at
	return true, nil
}
func (m memNotices) ReleaseNotice(_ context.Context, k NoticeKey, step string) error {
	delete(m[k], step)
	return nil
}
func (m memNotices) NoticeSteps(_ context.Context, k NoticeKey) (map[string]time.Time, error) {
	return maps.Clone(m[k]), nil
}

func newMaintainer(f *fakeMaintTPU, mode string, now *time.Time) *Maintainer {
	cfg := DefaultConfig()
	cfg.MaintenanceMode = mode
	return &Maintainer{TPU: f, Notices: memNotices{}, Config: cfg, Now: func() time.Time { return *now }}
}

func observe(t *testing.T, m *Maintainer, f *fakeMaintTPU) (Record, bool) {
	t.Helper()
	n, _ := f.GetNode(context.Background(), f.node.Name)
	r, ok, err := m.Observe(context.Background(), events.Event{}, n, "")
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	return r, ok
}

func TestPrepareWritesTheNoticeOnceAndLeavesOtherMetadata(t *testing.T) {
	now := maintNow
	node := maintNode("PENDING", "SCHEDULED", true, "", 1)
	node.Metadata = map[string]string{"startup-script": "#!/bin/bash\n...", ResumeOptInKey: "python train.py", "ssh-keys": "u:ssh-ed25519 AAAA"}
	f := &fakeMaintTPU{node: node}
	m := newMaintainer(f, MaintenancePrepare, &now)

	r, ok := observe(t, m, f)
	if !ok || r.Action != ActionPrepare || r.Outcome != OutcomePrepared {
		t.Fatalf("got %v %s/%s (%s), want a prepared record", ok, r.Action, r.Outcome, r.Reason)
	}
	if len(r.Warnings) != 0 {
		t.Errorf("warnings %q for a node running our script", r.Warnings)
	}
	if len(f.patches) != 1 {
		t.Fatalf("%d patches, want 1", len(f.patches))
	}
	got := f.patches[0]
	var notice MaintenanceNotice
	if err := json.Unmarshal([]byte(got[NoticeMetadataKey]), &notice); err != nil {
		t.Fatalf("notice %q: %v", got[NoticeMetadataKey], err)
	}
	want := MaintenanceNotice{Notice: maintWindow, SentAt: maintNow, Status: "PENDING", Type: "SCHEDULED",
		WindowStart: maintWindow, WindowEnd: "2026-12-08T06:00:00Z", CanReschedule: true}
	if diff := cmp.Diff(want, notice); diff != "" {
		t.Errorf("notice (-want +got):\n%s", diff)
	}
	delete(got, NoticeMetadataKey)
	if diff := cmp.Diff(map[string]string{"startup-script": "#!/bin/bash\n...", ResumeOptInKey: "python train.py", "ssh-keys": "u:ssh-ed25519 AAAA"}, got); diff != "" {
		t.Errorf("other metadata changed (-want +got):\n%s", diff)
	}

	now = now.Add(5 * time.Minute)
	if r, ok := observe(t, m, f); ok || len(f.patches) != 1 {
		t.Errorf("second look: recorded %v (%s %s), %d patches; want nothing new, 1 patch", ok, r.Action, r.Reason, len(f.patches))
	}
}

func TestPrepareRereadsTheNodeBeforePatching(t *testing.T) {
	now := maintNow
	f := &fakeMaintTPU{node: maintNode("PENDING", "SCHEDULED", true, "", 1)}
	m := newMaintainer(f, MaintenancePrepare, &now)
	listed, _ := f.GetNode(context.Background(), f.node.Name)
	f.node.Metadata = map[string]string{"added-after-listing": "kept"} // someone edited metadata since the listing
	if _, _, err := m.Observe(context.Background(), events.Event{}, listed, ""); err != nil {
		t.Fatal(err)
	}
	if len(f.patches) != 1 || f.patches[0]["added-after-listing"] != "kept" {
		t.Errorf("patches %v: want the key written after the listing kept", f.patches)
	}
}

func TestPrepareForAForeignStartupScriptWarns(t *testing.T) {
	now := maintNow
	node := maintNode("PENDING", "SCHEDULED", true, "", 1)
	node.Metadata = map[string]string{"startup-script": "#!/bin/bash\npython mine.py"}
	f := &fakeMaintTPU{node: node}
	r, _ := observe(t, newMaintainer(f, MaintenancePrepare, &now), f)
	if r.Action != ActionPrepare || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "nothing may be watching") {
		t.Errorf("got %s, warnings %q; want prepare warning that nothing may be watching", r.Action, r.Warnings)
	}
}

func TestFailedPatchIsRetriedByTheNextLook(t *testing.T) {
	now := maintNow
	f := &fakeMaintTPU{node: maintNode("PENDING", "SCHEDULED", true, "", 1), patchErr: []error{googleerr.FromAPI(&googleapi.Error{Code: 503})}}
	m := newMaintainer(f, MaintenancePrepare, &now)
	n, _ := f.GetNode(context.Background(), f.node.Name)
	r, ok, err := m.Observe(context.Background(), events.Event{}, n, "")
	var ae *ActError
	if !ok || err == nil || !errors.As(err, &ae) || !ae.Transient || r.Err == "" {
		t.Fatalf("got ok %v err %v (record err %q), want a transient error in the record", ok, err, r.Err)
	}
	if r, _ := observe(t, m, f); r.Action != ActionPrepare || len(f.patches) != 1 {
		t.Errorf("retry: %s, %d patches; want prepare, 1 patch", r.Action, len(f.patches))
	}
}

func TestEarlyMaintenanceStartsOnceEveryWorkerCheckpointed(t *testing.T) {
	now := maintNow
	f := &fakeMaintTPU{node: maintNode("PENDING", "SCHEDULED", true, "", 2)}
	m := newMaintainer(f, MaintenanceEarly, &now)
	if r, _ := observe(t, m, f); r.Action != ActionPrepare {
		t.Fatalf("first look: %s (%s), want prepare", r.Action, r.Reason)
	}
	now = now.Add(5 * time.Minute)
	f.attrs = []GuestAttribute{checkpoint("0", maintWindow)}
	if r, ok := observe(t, m, f); ok || len(f.maintains) != 0 {
		t.Fatalf("one worker of two: recorded %v (%s), %d maintains; want a quiet wait", ok, r.Reason, len(f.maintains))
	}
	f.attrs = append(f.attrs, checkpoint("1", maintWindow))
	r, ok := observe(t, m, f)
	if !ok || r.Action != ActionMaintain || r.Outcome != OutcomeMaintained {
		t.Fatalf("both workers: %v %s/%s (%s), want maintained", ok, r.Action, r.Outcome, r.Reason)
	}
	if diff := cmp.Diff([]string{f.node.Name}, f.maintains); diff != "" {
		t.Errorf("maintains (-want +got):\n%s", diff)
	}
	if len(r.Steps) == 0 || r.Steps[len(r.Steps)-1].Operation == "" {
		t.Errorf("steps %+v: want the operation recorded", r.Steps)
	}
	if _, ok := observe(t, m, f); ok || len(f.maintains) != 1 {
		t.Errorf("again: recorded %v, %d maintains; want nothing new, 1", ok, len(f.maintains))
	}
}

func TestEarlyMaintenanceOfAQueuedResourceNodeGoesThroughTheQueuedResource(t *testing.T) {
	now := maintNow
	node := maintNode("PENDING", "SCHEDULED", true, "early", 1)
	node.QueuedResource = "projects/p/locations/us-central2-b/queuedResources/qr"
	f := &fakeMaintTPU{node: node}
	m := newMaintainer(f, MaintenancePrepare, &now)
	observe(t, m, f)
	f.attrs = []GuestAttribute{checkpoint("0", maintWindow)}
	if r, _ := observe(t, m, f); r.Action != ActionMaintain {
		t.Fatalf("got %s (%s), want maintain", r.Action, r.Reason)
	}
	want := []string{"qr:projects/p/locations/us-central2-b/queuedResources/qr:" + node.Name}
	if diff := cmp.Diff(want, f.maintains); diff != "" {
		t.Errorf("maintains (-want +got):\n%s", diff)
	}
}

func TestCheckpointTimeoutIsRecordedOnceAndMaintenanceNotStarted(t *testing.T) {
	now := maintNow
	f := &fakeMaintTPU{node: maintNode("PENDING", "UNSCHEDULED", true, "", 1)}
	m := newMaintainer(f, MaintenanceEarly, &now)
	observe(t, m, f)
	now = now.Add(31 * time.Minute)
	r, ok := observe(t, m, f)
	if !ok || r.Action != ActionRecord || !strings.Contains(r.Reason, "not started early") {
		t.Fatalf("got %v %s (%s), want a record of why not", ok, r.Action, r.Reason)
	}
	now = now.Add(time.Minute)
	f.attrs = []GuestAttribute{checkpoint("0", maintWindow)} // too late
	if _, ok := observe(t, m, f); ok || len(f.maintains) != 0 {
		t.Errorf("after the timeout: recorded %v, %d maintains; want nothing", ok, len(f.maintains))
	}
}

func TestDryRunMutatesNothing(t *testing.T) {
	now := maintNow
	f := &fakeMaintTPU{node: maintNode("PENDING", "SCHEDULED", true, "", 1)}
	m := newMaintainer(f, MaintenanceEarly, &now)
	m.Config.DryRun = true
	r, ok := observe(t, m, f)
	if !ok || r.Action != ActionSkip || !strings.Contains(r.Reason, "would prepare") || len(f.patches) != 0 {
		t.Errorf("got %v %s (%s), %d patches; want a would-prepare skip and no patch", ok, r.Action, r.Reason, len(f.patches))
	}
}

func TestRecreateNeverCarriesTheNoticeOver(t *testing.T) {
	saved := maintNode("PENDING", "SCHEDULED", true, "", 1)
	saved.Metadata = map[string]string{NoticeMetadataKey: `{"notice":"x"}`, ResumeOptInKey: "python3 train.py"}
	spec, _ := createSpec(CleanSpec(saved), 2, Config{StartupScript: "#!/bin/bash\n"})
	if _, ok := spec.Metadata[NoticeMetadataKey]; ok || spec.Metadata[ResumeOptInKey] != "python3 train.py" {
		t.Errorf("recreated metadata %v: want the notice dropped, the rest kept", spec.Metadata)
	}
	if saved.Metadata[NoticeMetadataKey] == "" {
		t.Error("the saved spec was changed")
	}
}

func TestRefusedPatchIsRecordedAndNotRetriedEverySweep(t *testing.T) {
	now := maintNow
	f := &fakeMaintTPU{node: maintNode("PENDING", "SCHEDULED", true, "", 1), patchErr: []error{googleerr.FromAPI(&googleapi.Error{Code: 403, Message: "iam.serviceAccounts.actAs denied"})}}
	m := newMaintainer(f, MaintenancePrepare, &now)
	n, _ := f.GetNode(context.Background(), f.node.Name)
	r, ok, err := m.Observe(context.Background(), events.Event{}, n, "")
	var ae *ActError
	if !ok || !errors.As(err, &ae) || ae.Transient || !strings.Contains(r.Err, "actAs") {
		t.Fatalf("got ok %v err %v (record err %q), want a permanent error in the record", ok, err, r.Err)
	}
	if _, ok := observe(t, m, f); ok || len(f.patches) != 0 {
		t.Errorf("next look: recorded %v, %d patches; want nothing (the claim stays)", ok, len(f.patches))
	}
}

// actAsAnswers answers CanActAs from a map, or fails with err.
type actAsAnswers struct {
	can map[string]bool
	err error
}

func (a *actAsAnswers) CanActAs(_ context.Context, email string) (bool, error) {
	return a.can[email], a.err
}

// The notice's metadata patch acts as the node's service account, as a
// create does: the recreate's service-account guard holds it back too. A
// refusal is one WARNING skip per notice (the claim kept); a guard that
// could not answer is transient, and the next look sends the notice.
func TestNoticePatchIsGuardedByTheNodesServiceAccount(t *testing.T) {
	const sa = "trainer@p.iam.gserviceaccount.com"
	for _, tc := range []struct {
		name    string
		allowed []string
		actAs   *actAsAnswers
		refusal string // "" = patched
	}{
		{"listed and actAs held", []string{sa}, &actAsAnswers{can: map[string]bool{sa: true}}, ""},
		{"not listed", []string{"other@p.iam.gserviceaccount.com"}, &actAsAnswers{can: map[string]bool{sa: true}}, sa + " is not in AUTOHEAL_NODE_SERVICE_ACCOUNTS"},
		{"listed but actAs missing", []string{sa}, &actAsAnswers{}, "cannot act as " + sa},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := maintNow
			node := maintNode("PENDING", "SCHEDULED", true, "", 1)
			node.ServiceAccount = &tpu.ServiceAccount{Email: sa}
			f := &fakeMaintTPU{node: node}
			m := newMaintainer(f, MaintenancePrepare, &now)
			m.Accounts = &AccountGuard{Allowed: tc.allowed, ActAs: tc.actAs}
			r, ok := observe(t, m, f)
			if tc.refusal == "" {
				if !ok || r.Outcome != OutcomePrepared || len(f.patches) != 1 {
					t.Fatalf("got %v %s/%s (%s), %d patches; want prepared, 1 patch", ok, r.Action, r.Outcome, r.Reason, len(f.patches))
				}
				return
			}
			if !ok || r.Action != ActionSkip || r.Severity != SeverityWarning || !strings.Contains(r.Reason, "guard "+GuardServiceAccounts) ||
				!strings.Contains(r.Reason, tc.refusal) || !strings.Contains(r.Reason, "notice not sent") {
				t.Errorf("record %v %s %q (severity %q); want a WARNING skip naming the guard and %q", ok, r.Action, r.Reason, r.Severity, tc.refusal)
			}
			if len(f.patches) != 0 {
				t.Errorf("%d patches, want none", len(f.patches))
			}
			if r, ok := observe(t, m, f); ok || len(f.patches) != 0 {
				t.Errorf("next look: recorded %v (%s), %d patches; want nothing (once per notice)", ok, r.Reason, len(f.patches))
			}
		})
	}
	t.Run("the guard could not answer", func(t *testing.T) {
		now := maintNow
		node := maintNode("PENDING", "SCHEDULED", true, "", 1)
		node.ServiceAccount = &tpu.ServiceAccount{Email: sa}
		f := &fakeMaintTPU{node: node}
		m := newMaintainer(f, MaintenancePrepare, &now)
		actAs := &actAsAnswers{can: map[string]bool{sa: true}, err: errors.New("iam: 503")}
		m.Accounts = &AccountGuard{Allowed: []string{sa}, ActAs: actAs}
		n, _ := f.GetNode(context.Background(), f.node.Name)
		_, _, err := m.Observe(context.Background(), events.Event{}, n, "")
		var ae *ActError
		if !errors.As(err, &ae) || !ae.Transient || len(f.patches) != 0 {
			t.Fatalf("got %v, %d patches; want a transient error and no patch", err, len(f.patches))
		}
		actAs.err = nil
		if r, ok := observe(t, m, f); !ok || r.Outcome != OutcomePrepared || len(f.patches) != 1 {
			t.Errorf("next look: %v %s (%s), %d patches; want prepared, 1 patch", ok, r.Outcome, r.Reason, len(f.patches))
		}
	})
}

// New gives the Maintainer the engine's service-account guard.
func TestNewGuardsTheNoticePatch(t *testing.T) {
	g := &AccountGuard{Allowed: []string{"trainer@p.iam.gserviceaccount.com"}}
	h, err := New(Deps{TPU: struct{ TPU }{}, Store: struct{ Store }{}, Recorder: discardRecords{},
		Maintenance: &fakeMaintTPU{}, Notices: memNotices{}, Accounts: g}, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if h.Maintenance == nil || h.Maintenance.Accounts != g {
		t.Errorf("Maintainer's Accounts = %+v, want the engine's guard %p", h.Maintenance, g)
	}
}

type discardRecords struct{}

func (discardRecords) Record(context.Context, Record) error { return nil }
