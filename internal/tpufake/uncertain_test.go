package tpufake_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/googleapi"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// startAt is start on a virtual clock the test moves.
func startAt(t *testing.T, opts ...tpufake.Option) (*tpufake.Server, *tpu.Service, *vclock) {
	t.Helper()
	c := &vclock{t: clock}
	s, svc := start(t, fleetFile, append([]tpufake.Option{tpufake.WithClock(c.now)}, opts...)...)
	return s, svc, c
}

// stateOf is the node's state, or "NOT_FOUND".
func stateOf(t *testing.T, svc *tpu.Service, name string) string {
	t.Helper()
	n, err := svc.Projects.Locations.Nodes.Get(name).Do()
	var herr *googleapi.Error
	if errors.As(err, &herr) && herr.Code == 404 {
		return "NOT_FOUND"
	}
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return n.State
}

func TestRuleAppliesFromTheNthCall(t *testing.T) {
	s, svc := start(t, fleetFile)
	s.Fail(tpufake.FailRule{RPC: "nodes.get", Name: llm, Nth: 2, Times: 1, Code: 503})
	var got []bool
	for range 3 {
		_, err := svc.Projects.Locations.Nodes.Get(llm).Do()
		got = append(got, err != nil)
	}
	if want := []bool{false, true, false}; !slices.Equal(got, want) {
		t.Errorf("failed calls = %v, want %v (only the 2nd)", got, want)
	}
}

func TestRequestFailsAndTakesEffectLater(t *testing.T) {
	s, svc, c := startAt(t, tpufake.WithOperationDelay("delete", time.Minute))
	s.Fail(tpufake.FailRule{RPC: "nodes.delete", Name: llm, Times: 1, Code: 500, Effect: tpufake.EffectLater, EffectDelay: 2 * time.Second})
	_, err := svc.Projects.Locations.Nodes.Delete(llm).Do()
	apiErr(t, err, 500, "INTERNAL")
	if got := stateOf(t, svc, llm); got != "TERMINATED" {
		t.Fatalf("right after the failed delete: %s, want TERMINATED (not landed yet)", got)
	}
	c.add(2 * time.Second)
	if got := stateOf(t, svc, llm); got != "DELETING" {
		t.Fatalf("2s later: %s, want DELETING (the delete landed)", got)
	}
	c.add(time.Minute)
	if got := stateOf(t, svc, llm); got != "NOT_FOUND" {
		t.Fatalf("after the operation's minute: %s, want NOT_FOUND", got)
	}
	if n := s.Count("nodes.delete", llm); n != 1 {
		t.Errorf("nodes.delete requests = %d, want 1 (the late effect is not a request)", n)
	}
}

func TestHungRequestTakesEffectAfterTheCallersDeadline(t *testing.T) {
	s, svc, _ := startAt(t)
	s.Fail(tpufake.FailRule{RPC: "nodes.delete", Name: llm, Times: 1, Hang: true, Effect: tpufake.EffectAfterDeadline})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := svc.Projects.Locations.Nodes.Delete(llm).Context(ctx).Do(); err == nil {
		t.Fatal("hung delete answered, want the caller's deadline")
	}
	s.WaitIdle()
	if got := stateOf(t, svc, llm); got != "DELETING" {
		t.Errorf("after the caller gave up: %s, want DELETING (it landed then)", got)
	}
}

func TestDroppedAnswerAfterTheEffect(t *testing.T) {
	s, svc, _ := startAt(t)
	s.Fail(tpufake.FailRule{RPC: "nodes.delete", Name: llm, Times: 1, Drop: true, Effect: tpufake.EffectNow})
	_, err := svc.Projects.Locations.Nodes.Delete(llm).Do()
	var herr *googleapi.Error
	if err == nil || errors.As(err, &herr) {
		t.Fatalf("delete error = %v, want a transport error (no answer at all)", err)
	}
	s.WaitIdle()
	if got := stateOf(t, svc, llm); got != "DELETING" {
		t.Errorf("after the dropped answer: %s, want DELETING", got)
	}
}

func TestOperationErrorOutcomes(t *testing.T) {
	tests := []struct {
		name      string
		rpc       string
		effect    tpufake.Effect
		delay     time.Duration
		wantNow   string // state when the failed operation ends
		wantLater string // an hour later
	}{
		{"a clean failure leaves the node as it was", "delete", tpufake.EffectNone, 0, "TERMINATED", "TERMINATED"},
		{"a failure after the effect: the node is gone", "delete", tpufake.EffectNow, 0, "NOT_FOUND", "NOT_FOUND"},
		{"a failure half-way that lands later", "delete", tpufake.EffectLater, 5 * time.Minute, "DELETING", "NOT_FOUND"},
		{"a failure stuck half-way", "delete", tpufake.EffectStuck, 0, "DELETING", "DELETING"},
		{"a failed create that made the node anyway", "create", tpufake.EffectNow, 0, "READY", "READY"},
		{"a failed create half-way that lands later", "create", tpufake.EffectLater, 5 * time.Minute, "CREATING", "READY"},
		{"a cleanly failed create removes the node", "create", tpufake.EffectNone, 0, "NOT_FOUND", "NOT_FOUND"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, svc, c := startAt(t)
			name := llm
			s.Fail(tpufake.FailRule{RPC: "operation:nodes." + tt.rpc, Name: name, Times: 1, Status: "INTERNAL", Effect: tt.effect, EffectDelay: tt.delay})
			var op *tpu.Operation
			var err error
			if tt.rpc == "delete" {
				op, err = svc.Projects.Locations.Nodes.Delete(name).Do()
			} else {
				name = zone + "/nodes/fresh"
				s.Fail(tpufake.FailRule{RPC: "operation:nodes.create", Name: name, Times: 1, Status: "INTERNAL", Effect: tt.effect, EffectDelay: tt.delay})
				op, err = svc.Projects.Locations.Nodes.Create(zone, &tpu.Node{AcceleratorType: "v4-8", RuntimeVersion: "tpu-ubuntu2204-base"}).NodeId("fresh").Do()
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := getOp(t, svc, op.Name); !got.Done || got.Error == nil || got.Error.Code != 13 {
				t.Fatalf("operation = %+v, want done with INTERNAL", got)
			}
			if got := stateOf(t, svc, name); got != tt.wantNow {
				t.Errorf("when the operation failed: %s, want %s", got, tt.wantNow)
			}
			c.add(time.Hour)
			if got := stateOf(t, svc, name); got != tt.wantLater {
				t.Errorf("an hour later: %s, want %s", got, tt.wantLater)
			}
			if n := s.Succeeded("nodes." + tt.rpc); n != 0 {
				t.Errorf("Succeeded = %d, want 0: the operation failed, whatever it did", n)
			}
		})
	}
}

func TestStaleReadAnswersTheOldState(t *testing.T) {
	s, svc, c := startAt(t, tpufake.WithOperationDelay("delete", time.Minute))
	s.Fail(tpufake.FailRule{RPC: "nodes.get", Name: llm, Nth: 2, Times: 1, Stale: 30 * time.Second})
	if got := stateOf(t, svc, llm); got != "TERMINATED" {
		t.Fatalf("before: %s", got)
	}
	if _, err := svc.Projects.Locations.Nodes.Delete(llm).Do(); err != nil {
		t.Fatal(err)
	}
	c.add(10 * time.Second)
	if got := stateOf(t, svc, llm); got != "TERMINATED" {
		t.Errorf("stale read 10s after the delete: %s, want TERMINATED (the state 30s ago)", got)
	}
	if got := stateOf(t, svc, llm); got != "DELETING" {
		t.Errorf("next read: %s, want DELETING (the rule was used once)", got)
	}
}

func TestReadLagHidesANewNode(t *testing.T) {
	s, svc, c := startAt(t, tpufake.WithReadLag(20*time.Second), tpufake.WithOperationPolls(0))
	if _, err := svc.Projects.Locations.Nodes.Create(zone, &tpu.Node{AcceleratorType: "v4-8", RuntimeVersion: "tpu-ubuntu2204-base"}).NodeId("fresh").Do(); err != nil {
		t.Fatal(err)
	}
	fresh := zone + "/nodes/fresh"
	if got := stateOf(t, svc, fresh); got != "NOT_FOUND" {
		t.Errorf("read right after the create: %s, want NOT_FOUND (lagging)", got)
	}
	names, _ := listAll(t, svc, zone, 0)
	if slices.Contains(names, fresh) {
		t.Errorf("listing right after the create has %s, want it hidden", fresh)
	}
	c.add(20 * time.Second)
	if got := stateOf(t, svc, fresh); got != "READY" {
		t.Errorf("read 20s later: %s, want READY", got)
	}
	if got := s.Fleet(); !slices.ContainsFunc(got.Nodes, func(n *tpu.Node) bool { return n.Name == fresh }) {
		t.Error("Fleet (the truth, not a read) lacks the node")
	}
}

// page lists one page of zone.
func page(t *testing.T, svc *tpu.Service, token string) ([]string, string) {
	t.Helper()
	resp, err := svc.Projects.Locations.Nodes.List(zone).PageSize(2).PageToken(token).Do()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range resp.Nodes {
		names = append(names, n.Name[strings.LastIndexByte(n.Name, '/')+1:])
	}
	return names, resp.NextPageToken
}

func TestPagingAnomalies(t *testing.T) {
	// The fixture's zone holds 4 nodes: two full pages of 2.
	s0, svc0 := start(t, fleetFile)
	_ = s0
	first, tok1 := page(t, svc0, "")
	second, tok2 := page(t, svc0, tok1)
	if len(first) != 2 || len(second) != 2 || tok2 != "" {
		t.Fatalf("fixture zone: pages %v %v (next %q), want two full pages", first, second, tok2)
	}
	tests := []struct {
		fault tpufake.PageFault
		// walk follows tokens from the first page for at most 4 pages.
		want []string
	}{
		{tpufake.PageLoopToFirst, append(append(append(slices.Clone(first), second...), first...), second...)},
		{tpufake.PageRepeat, append(append(append(slices.Clone(first), first...), first...), first...)},
		{tpufake.PageSkip, slices.Clone(first)}, // the second page is passed over: the listing ends
		{tpufake.PageEmpty, nil},                // empty pages naming themselves
	}
	for _, tt := range tests {
		t.Run(tt.fault.String(), func(t *testing.T) {
			s, svc := start(t, fleetFile)
			s.Fail(tpufake.FailRule{RPC: "nodes.list", Name: zone, Page: tt.fault})
			var got []string
			token := ""
			for i := 0; i < 4; i++ {
				names, next := page(t, svc, token)
				got = append(got, names...)
				if next == "" {
					break
				}
				token = next
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("nodes listed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoopToFirstAppliesOnlyToTheLastPage(t *testing.T) {
	s, svc := start(t, fleetFile)
	s.Fail(tpufake.FailRule{RPC: "nodes.list", Name: zone, Times: 1, Page: tpufake.PageLoopToFirst})
	_, tok := page(t, svc, "")
	_, last := page(t, svc, tok)
	if last == "" {
		t.Fatal("last page ended the listing: the once-only rule was spent on the first page")
	}
	_, tok = page(t, svc, last)
	_, last = page(t, svc, tok)
	if last != "" {
		t.Errorf("second round's last page has next %q, want none (the rule applied once)", last)
	}
}

// entry is what the tests read of an audit LogEntry.
type entry struct {
	LogName      string `json:"logName"`
	ProtoPayload struct {
		ServiceName        string `json:"serviceName"`
		MethodName         string `json:"methodName"`
		ResourceName       string `json:"resourceName"`
		AuthenticationInfo struct {
			PrincipalEmail string `json:"principalEmail"`
		} `json:"authenticationInfo"`
		Status struct {
			Code int `json:"code"`
		} `json:"status"`
	} `json:"protoPayload"`
	Operation struct {
		ID       string `json:"id"`
		Producer string `json:"producer"`
		First    bool   `json:"first"`
		Last     bool   `json:"last"`
	} `json:"operation"`
	Resource struct {
		Type   string            `json:"type"`
		Labels map[string]string `json:"labels"`
	} `json:"resource"`
}

func decodeEntry(t *testing.T, e tpufake.AuditEntry) entry {
	t.Helper()
	var got entry
	if err := json.Unmarshal(e.JSON, &got); err != nil {
		t.Fatalf("audit entry is not JSON: %v\n%s", err, e.JSON)
	}
	if got.ProtoPayload.MethodName != e.Method || got.ProtoPayload.ResourceName != e.Resource ||
		got.ProtoPayload.AuthenticationInfo.PrincipalEmail != e.Principal || got.Operation.ID != e.Operation {
		t.Errorf("entry's JSON %s disagrees with its fields %+v", e.JSON, e)
	}
	return got
}

func TestOurCallsAreAuditedLikeTheRealAPI(t *testing.T) {
	s, svc, c := startAt(t, tpufake.WithOperationDelay("delete", time.Minute))
	op, err := svc.Projects.Locations.Nodes.Delete(llm).Do()
	if err != nil {
		t.Fatal(err)
	}
	c.add(time.Minute)
	log := s.AuditLog()
	if len(log) != 2 {
		t.Fatalf("audit entries = %d, want 2 (operation first and last)", len(log))
	}
	for i, e := range log {
		got := decodeEntry(t, e)
		if got.LogName != "projects/acme-ml/logs/cloudaudit.googleapis.com%2Factivity" {
			t.Errorf("logName = %q", got.LogName)
		}
		if got.ProtoPayload.MethodName != "google.cloud.tpu.v2.Tpu.DeleteNode" || got.ProtoPayload.ServiceName != "tpu.googleapis.com" {
			t.Errorf("service/method = %s %s", got.ProtoPayload.ServiceName, got.ProtoPayload.MethodName)
		}
		if got.ProtoPayload.ResourceName != llm || got.Operation.ID != op.Name || got.Operation.Producer != "tpu.googleapis.com" {
			t.Errorf("resource %q operation %+v, want %s and %s", got.ProtoPayload.ResourceName, got.Operation, llm, op.Name)
		}
		if got.ProtoPayload.AuthenticationInfo.PrincipalEmail != tpufake.DefaultCaller("acme-ml") {
			t.Errorf("principal = %q", got.ProtoPayload.AuthenticationInfo.PrincipalEmail)
		}
		if got.Resource.Type != "audited_resource" || got.Resource.Labels["project_id"] != "acme-ml" {
			t.Errorf("resource = %+v", got.Resource)
		}
		if got.Operation.First != (i == 0) || got.Operation.Last != (i == 1) {
			t.Errorf("entry %d: first %v last %v", i, got.Operation.First, got.Operation.Last)
		}
	}
	if !log[1].Time.Equal(log[0].Time.Add(time.Minute)) {
		t.Errorf("last entry at %v, want a minute after the first (%v)", log[1].Time, log[0].Time)
	}
}

func TestPeopleAct(t *testing.T) {
	t.Run("delete, audited under the person", func(t *testing.T) {
		s, svc, c := startAt(t)
		got, err := s.Act(tpufake.Act{Kind: tpufake.ActDelete, Target: llm, Principal: "bob@example.com", After: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Method != "google.cloud.tpu.v2.Tpu.DeleteNode" || got[0].Principal != "bob@example.com" || !got[0].First {
			t.Fatalf("entries = %+v, want the DeleteNode start by bob", got)
		}
		decodeEntry(t, got[0])
		if st := stateOf(t, svc, llm); st != "DELETING" {
			t.Errorf("during the person's delete: %s", st)
		}
		c.add(time.Minute)
		if st := stateOf(t, svc, llm); st != "NOT_FOUND" {
			t.Errorf("after it: %s", st)
		}
		if n := len(s.AuditLog()); n != 2 {
			t.Errorf("audit log = %d entries, want 2", n)
		}
		if n := s.Succeeded("nodes.delete"); n != 0 {
			t.Errorf("Succeeded(nodes.delete) = %d, want 0: a person's operation is not the caller's", n)
		}
	})
	t.Run("recreate: a new id under the same name, without its labels", func(t *testing.T) {
		s, svc, _ := startAt(t)
		before := getNode(t, svc, llm)
		got, err := s.Act(tpufake.Act{Kind: tpufake.ActRecreate, Target: llm, Labels: map[string]string{"team": "other"}})
		if err != nil {
			t.Fatal(err)
		}
		var methods []string
		for _, e := range got {
			methods = append(methods, e.Method)
		}
		if want := []string{"google.cloud.tpu.v2.Tpu.DeleteNode", "google.cloud.tpu.v2.Tpu.DeleteNode", "google.cloud.tpu.v2.Tpu.CreateNode", "google.cloud.tpu.v2.Tpu.CreateNode"}; !slices.Equal(methods, want) {
			t.Errorf("entries %v, want %v", methods, want)
		}
		after := getNode(t, svc, llm)
		if after.Id == before.Id || after.State != "READY" || !cmp.Equal(after.Labels, map[string]string{"team": "other"}) {
			t.Errorf("recreated node id %d (was %d) state %s labels %v", after.Id, before.Id, after.State, after.Labels)
		}
	})
	t.Run("without its audit entry", func(t *testing.T) {
		s, svc, _ := startAt(t)
		got, err := s.Act(tpufake.Act{Kind: tpufake.ActStop, Target: llm, NoAudit: true})
		if err != nil || len(got) != 0 || len(s.AuditLog()) != 0 {
			t.Fatalf("Act = %v, %v; audit log %d entries; want no entries at all", got, err, len(s.AuditLog()))
		}
		if st := stateOf(t, svc, llm); st != "STOPPED" {
			t.Errorf("state = %s, want STOPPED", st)
		}
	})
	t.Run("starts a maintenance", func(t *testing.T) {
		s, svc, c := startAt(t)
		if _, err := s.Act(tpufake.Act{Kind: tpufake.ActStartMaintenance, Target: llm, After: 20 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		n := getNode(t, svc, llm)
		if n.UpcomingMaintenance == nil || n.UpcomingMaintenance.MaintenanceStatus != "ONGOING" {
			t.Fatalf("during: %+v, want ONGOING maintenance", n.UpcomingMaintenance)
		}
		c.add(20 * time.Minute)
		if n := getNode(t, svc, llm); n.State != "READY" || n.UpcomingMaintenance != nil {
			t.Errorf("after: %s %+v, want READY and no notice", n.State, n.UpcomingMaintenance)
		}
	})
	t.Run("deletes a queued resource", func(t *testing.T) {
		s, svc := start(t, "../../testdata/fleet-queued.json")
		if _, err := s.Act(tpufake.Act{Kind: tpufake.ActDeleteQueuedResource, Target: spotQR}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Projects.Locations.QueuedResources.Get(spotQR).Do(); err == nil {
			t.Error("queued resource still there")
		}
		if st := stateOf(t, svc, spotQRN); st != "NOT_FOUND" {
			t.Errorf("its node: %s", st)
		}
	})
	t.Run("on a node that is not there", func(t *testing.T) {
		s, _ := start(t, fleetFile)
		if _, err := s.Act(tpufake.Act{Kind: tpufake.ActDelete, Target: zone + "/nodes/absent"}); err == nil {
			t.Error("no error")
		}
	})
}

func TestPersonActsBetweenTwoCalls(t *testing.T) {
	s, svc, _ := startAt(t, tpufake.WithOperationPolls(0))
	fresh := zone + "/nodes/fresh"
	s.Fail(tpufake.FailRule{RPC: "nodes.create", Name: fresh, Times: 1, Person: &tpufake.Act{Kind: tpufake.ActDelete}})
	op, err := svc.Projects.Locations.Nodes.Create(zone, &tpu.Node{AcceleratorType: "v4-8", RuntimeVersion: "tpu-ubuntu2204-base"}).NodeId("fresh").Do()
	if err != nil || !op.Done || op.Error != nil {
		t.Fatalf("create = %+v, %v; want it done and successful", op, err)
	}
	if st := stateOf(t, svc, fresh); st != "NOT_FOUND" {
		t.Errorf("right after our create: %s, want NOT_FOUND (the person deleted it)", st)
	}
	if n := s.Succeeded("nodes.create"); n != 1 {
		t.Errorf("Succeeded(nodes.create) = %d, want 1", n)
	}
	var people []string
	for _, e := range s.AuditLog() {
		if e.Principal == tpufake.DefaultPerson {
			people = append(people, e.Method)
		}
	}
	if len(people) != 2 || people[0] != "google.cloud.tpu.v2.Tpu.DeleteNode" {
		t.Errorf("the person's entries = %v, want the DeleteNode first and last", people)
	}
}

func TestActAtRunsOnTheServersClock(t *testing.T) {
	s, svc, c := startAt(t)
	s.ActAt(clock.Add(10*time.Minute), tpufake.Act{Kind: tpufake.ActDelete, Target: llm})
	c.add(9 * time.Minute)
	if st := stateOf(t, svc, llm); st != "TERMINATED" {
		t.Errorf("before its time: %s", st)
	}
	c.add(time.Minute)
	if st := stateOf(t, svc, llm); st != "NOT_FOUND" {
		t.Errorf("at its time: %s, want NOT_FOUND", st)
	}
}

func TestDrawReplaysASeedExactly(t *testing.T) {
	mix := tpufake.Mix{
		Nodes:           []string{llm, stopped},
		QueuedResources: []string{spotQR},
		Locations:       []string{zone},
		Faults:          12,
	}
	a, b := tpufake.Draw(42, mix), tpufake.Draw(42, mix)
	if a.String() != b.String() {
		t.Fatalf("seed 42 drew two schedules:\n%s\n%s", a, b)
	}
	if len(a.Rules) != 12 {
		t.Errorf("drew %d rules, want 12", len(a.Rules))
	}
	if c := tpufake.Draw(43, mix); c.String() == a.String() {
		t.Error("seeds 42 and 43 drew the same schedule")
	}
	for _, r := range a.Rules {
		if r.RPC == "" || r.Nth < 1 || r.Name == "" && r.RPC != "operations.get" {
			t.Errorf("rule %q lacks its method, resource or nth call", r)
		}
	}
	if !strings.HasPrefix(a.String(), "seed 42: 12 rules\n  1. ") {
		t.Errorf("schedule prints as %q", a.String())
	}
	// Every drawn schedule runs against a server without breaking it.
	for seed := range uint64(50) {
		s, svc := start(t, fleetFile)
		s.Apply(tpufake.Draw(seed, mix))
		for _, n := range []string{llm, stopped} {
			_, _ = svc.Projects.Locations.Nodes.Get(n).Do()
		}
		_, _ = svc.Projects.Locations.Nodes.List(zone).Do()
	}
}

// TestAuditEntriesReadAsAdminActivity: what the fake writes is what
// internal/events accepts from the log sink, principal and operation and all.
func TestAuditEntriesReadAsAdminActivity(t *testing.T) {
	s, svc, _ := startAt(t)
	if _, err := s.Act(tpufake.Act{Kind: tpufake.ActRecreate, Target: llm, Principal: "bob@example.com"}); err != nil {
		t.Fatal(err)
	}
	op, err := svc.Projects.Locations.Nodes.Delete(llm).Do()
	if err != nil {
		t.Fatal(err)
	}
	getOp(t, svc, op.Name)
	if _, err := s.Act(tpufake.Act{Kind: tpufake.ActDeleteQueuedResource, Target: spotQR}); err == nil {
		t.Fatal("fixture fleet has no queued resources; ActDeleteQueuedResource should fail")
	}
	log := s.AuditLog()
	if len(log) != 6 {
		t.Fatalf("%d entries, want 6 (the person's delete and create, our delete, two each)", len(log))
	}
	for _, e := range log {
		ev, err := events.Parse(e.JSON, events.Options{AllowedProjects: []string{"acme-ml"}})
		if err != nil {
			t.Fatalf("events.Parse(%s): %v", e.JSON, err)
		}
		if ev.Kind != events.KindAdminActivity || ev.Admin == nil || ev.Node.Name() != llm || ev.Principal != e.Principal ||
			ev.Admin.OperationID != e.Operation || ev.Admin.First != e.First || ev.Admin.Last != e.Last || !ev.Time.Equal(e.Time) {
			t.Errorf("entry %+v read as %+v (admin %+v)", e, ev, ev.Admin)
		}
	}
	if log[4].Operation != op.Name || log[4].Principal != tpufake.DefaultCaller("acme-ml") || log[0].Principal != "bob@example.com" {
		t.Errorf("entries' operation/principals: %+v", log)
	}
}

// TestDeleteSparesTheNodeCreatedSince: a delete's operation deletes the
// node it was started on, not one put under the same name since.
func TestDeleteSparesTheNodeCreatedSince(t *testing.T) {
	s, svc, c := startAt(t, tpufake.WithOperationDelay("delete", 20*time.Second))
	if _, err := svc.Projects.Locations.Nodes.Delete(llm).Do(); err != nil {
		t.Fatal(err)
	}
	c.add(10 * time.Second)
	n := readFleet(t, fleetFile).Nodes[0]
	n.Id, n.State = 99, "READY"
	s.SetNode(n)
	c.add(time.Minute)
	if got := getNode(t, svc, llm); got.Id != 99 || got.State != "READY" {
		t.Errorf("node %d %s, want the one put there since (99, READY)", got.Id, got.State)
	}
}

// TestLateEffectLandsAfterTheOperationsBeforeIt: a late delete that lands
// after the caller's second delete finished finds no node, whatever order
// the server looks at them in.
func TestLateEffectLandsAfterTheOperationsBeforeIt(t *testing.T) {
	for range 20 { // map order varies from run to run
		s, svc, c := startAt(t, tpufake.WithOperationDelay("delete", 20*time.Second))
		s.Fail(tpufake.FailRule{RPC: "nodes.delete", Name: llm, Times: 1, Code: 503, Effect: tpufake.EffectLater, EffectDelay: 40 * time.Second})
		if _, err := svc.Projects.Locations.Nodes.Delete(llm).Do(); err == nil {
			t.Fatal("first delete answered, want its 503")
		}
		if _, err := svc.Projects.Locations.Nodes.Delete(llm).Do(); err != nil { // the caller tries again
			t.Fatal(err)
		}
		c.add(time.Minute)
		if st := stateOf(t, svc, llm); st != "NOT_FOUND" {
			t.Fatalf("a minute later: %s, want NOT_FOUND", st)
		}
		// The second delete ended at 20 s; the first landed at 40 s on no
		// node, so it started no operation of its own.
		starts := 0
		for _, e := range s.AuditLog() {
			if e.First && e.Method == "google.cloud.tpu.v2.Tpu.DeleteNode" {
				starts++
			}
		}
		if starts != 1 {
			t.Fatalf("%d delete operations started, want 1: the late delete landed before the operation that ended before it", starts)
		}
	}
}
