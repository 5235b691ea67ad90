package events

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseComputeEntriesAreZoneHints(t *testing.T) {
	type hint struct {
		Kind                            Kind
		Project, Zone, Node             string
		Instance, Worker, Method, Cause string
	}
	tests := []struct {
		name string
		file string
		want hint
	}{
		{"preempted VM of a TPU node", "compute-preempted.json",
			hint{KindZoneHint, "acme-ml", "us-central2-b", "", "t1v-n-8d2e1f3a-w-0", "0", MethodPreempted, string(CausePreemption)}},
		{"host error is hardware", "compute-host-error.json",
			hint{KindZoneHint, "acme-ml", "us-central2-b", "", "t1v-n-8d2e1f3a-w-3", "3", MethodHostError, string(CauseHardware)}},
		{"terminate on host maintenance is maintenance", "compute-terminate-on-host-maintenance.json",
			hint{KindZoneHint, "acme-ml", "us-central2-b", "", "t1v-n-8d2e1f3a-w-1", "1", MethodTerminateOnHostMaintenance, string(CauseMaintenance)}},
		{"upcoming maintenance is maintenance", "compute-upcoming-maintenance.json",
			hint{KindZoneHint, "acme-ml", "us-central2-b", "", "t1v-n-5be0c9d4-w-0", "0", MethodUpcomingMaintenance, string(CauseMaintenance)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := Parse(readFixture(t, tt.file), fixtureOpts)
			if err != nil {
				t.Fatal(err)
			}
			got := hint{ev.Kind, ev.Node.Project, ev.Node.Zone, ev.Node.Node, ev.Instance, ev.Worker, ev.Method, string(ev.Cause)}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("zone hint mismatch (-want +got):\n%s", diff)
			}
			if ev.Node.Name() != "" {
				t.Errorf("a zone hint names node %q", ev.Node.Name())
			}
			if ev.Node.Parent() != "projects/acme-ml/locations/us-central2-b" {
				t.Errorf("Parent() = %q", ev.Node.Parent())
			}
		})
	}
}

func TestParseUpcomingMaintenanceNotice(t *testing.T) {
	day := func(d, h int) time.Time { return time.Date(2026, 11, d, h, 0, 0, 0, time.UTC) }
	flat, err := Parse(readFixture(t, "compute-upcoming-maintenance.json"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := &Maintenance{Status: "PENDING", Type: "SCHEDULED", WindowStart: day(27, 2), WindowEnd: day(27, 6), LatestWindowStart: day(27, 2), CanReschedule: true}
	if diff := cmp.Diff(want, flat.Maintenance); diff != "" {
		t.Errorf("flat metadata (-want +got):\n%s", diff)
	}

	const base = `{"insertId":"u1","timestamp":"2026-11-20T03:00:00Z","protoPayload":{"serviceName":"compute.googleapis.com","methodName":"compute.instances.upcomingMaintenance","resourceName":"projects/acme-ml/zones/us-central2-b/instances/t1v-n-5be0c9d4-w-2","metadata":%s}}`
	tests := []struct {
		name     string
		metadata string
		want     *Maintenance
		wantCode string
	}{
		{"nested under upcomingMaintenance", `{"upcomingMaintenance":{"maintenanceStatus":"ONGOING","type":"UNSCHEDULED","windowStartTime":"2026-11-27T02:00:00Z","canReschedule":false}}`,
			&Maintenance{Status: "ONGOING", Type: "UNSCHEDULED", WindowStart: day(27, 2)}, ""},
		{"flat fields win over nested ones", `{"maintenanceStatus":"PENDING","upcomingMaintenance":{"maintenanceStatus":"ONGOING"}}`,
			&Maintenance{Status: "PENDING"}, ""},
		{"no notice fields", `{}`, nil, ""},
		{"fields of unexpected types are ignored", `{"maintenanceStatus":7,"canReschedule":"yes","type":"SCHEDULED"}`,
			&Maintenance{Type: "SCHEDULED"}, ""},
		{"a window that is not RFC 3339 is rejected", `{"windowStartTime":"next tuesday"}`, nil, CodeBadTimestamp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := Parse([]byte(strings.Replace(base, "%s", tt.metadata, 1)), Options{AcceptMissingLogName: true}) // hand-written: no logName
			if tt.wantCode != "" {
				var re *RejectError
				if !errors.As(err, &re) || re.Code != tt.wantCode || re.Field != "protoPayload.metadata.windowStartTime" {
					t.Fatalf("Parse error = %v, want %s on protoPayload.metadata.windowStartTime", err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, ev.Maintenance); diff != "" {
				t.Errorf("Maintenance (-want +got):\n%s", diff)
			}
			if ev.Worker != "2" {
				t.Errorf("Worker = %q, want 2", ev.Worker)
			}
		})
	}
}

func TestParseRejectsComputeEntriesThatAreNotOurs(t *testing.T) {
	const base = `{"insertId":"c","protoPayload":{"serviceName":"compute.googleapis.com","methodName":%q,"resourceName":%q,"authenticationInfo":{"principalEmail":%q}},"resource":{"type":"gce_instance","labels":%s}}`
	const good = "projects/acme-ml/zones/us-central2-b/instances/t1v-n-8d2e1f3a-w-0"
	tests := []struct {
		name, method, resourceName, principal, labels string
		wantCode, wantField                           string
		wantCause                                     Cause
	}{
		{"an instance not named t1v-n-* is an instance event, not foreign", MethodPreempted, "projects/acme-ml/zones/us-central2-b/instances/web-1", "system@google.com", `{}`, "", "", CausePreemption},
		{"automaticRestart of a TPU node's VM is not routed", MethodAutomaticRestart, good, "system@google.com", `{}`, CodeForeignMethod, "protoPayload.methodName", ""},
		{"t1v-n- without a worker", MethodPreempted, "projects/acme-ml/zones/us-central2-b/instances/t1v-n-8d2e1f3a", "system@google.com", `{}`, CodeForeignInstance, fieldResourceName, ""},
		{"t1v-n- with a non-numeric worker", MethodPreempted, "projects/acme-ml/zones/us-central2-b/instances/t1v-n-8d2e1f3a-w-x", "system@google.com", `{}`, CodeForeignInstance, fieldResourceName, ""},
		{"another compute method", "compute.instances.stop", good, "system@google.com", `{}`, CodeForeignService, "protoPayload.serviceName", ""},
		{"no resourceName", MethodHostError, "", "system@google.com", `{"project_id":"acme-ml","zone":"us-central2-b"}`, CodeMissingNode, fieldResourceName, ""},
		{"a region, not a zone", MethodHostError, "projects/acme-ml/regions/us-central2/instances/t1v-n-8d2e1f3a-w-0", "system@google.com", `{}`, CodeInvalidNode, fieldResourceName, ""},
		{"a traversal in the zone", MethodHostError, "projects/acme-ml/zones/../instances/t1v-n-8d2e1f3a-w-0", "system@google.com", `{}`, CodeInvalidNode, fieldResourceName, ""},
		{"labels name another project", MethodHostError, good, "system@google.com", `{"project_id":"other"}`, CodeNodeMismatch, fieldResourceName, ""},
		{"a project outside the allow-list", MethodHostError, "projects/someone/zones/us-central2-b/instances/t1v-n-8d2e1f3a-w-0", "system@google.com", `{}`, CodeProjectNotAllowed, fieldResourceName, ""},
		{"a customer principal is user", MethodPreempted, good, "alice@example.com", `{}`, "", "", CauseUser},
		{"the compute.googleapis.com prefix is accepted", MethodPreempted, "//compute.googleapis.com/" + good, "system@google.com", `{}`, "", "", CausePreemption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(strings.Replace(strings.Replace(strings.Replace(strings.Replace(base, "%q", `"`+tt.method+`"`, 1), "%q", `"`+tt.resourceName+`"`, 1), "%q", `"`+tt.principal+`"`, 1), "%s", tt.labels, 1))
			ev, err := Parse(data, Options{AllowedProjects: []string{"acme-ml"}, AcceptMissingLogName: true}) // hand-written: no logName
			if tt.wantCode != "" {
				var re *RejectError
				if !errors.As(err, &re) || re.Code != tt.wantCode || re.Field != tt.wantField {
					t.Fatalf("Parse error = %v, want %s on %s", err, tt.wantCode, tt.wantField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ev.Cause != tt.wantCause {
				t.Errorf("Cause = %s, want %s", ev.Cause, tt.wantCause)
			}
		})
	}
}

func TestParseRejectsFutureTimestamps(t *testing.T) {
	entry := readFixture(t, "terminate-maintenance.json") // 2026-11-20T03:44:36.265703305Z
	at := time.Date(2026, 11, 20, 3, 44, 36, 265703305, time.UTC)
	tests := []struct {
		name    string
		now     time.Time
		wantErr bool
	}{
		{"no now: no check, as pure tests and old exports need", time.Time{}, false},
		{"an entry from the past", at.Add(time.Hour), false},
		{"a minute ahead of now is clock skew", at.Add(-time.Minute), false},
		{"exactly ten minutes ahead is accepted", at.Add(-MaxFutureSkew), false},
		{"more than ten minutes ahead is rejected", at.Add(-MaxFutureSkew - time.Nanosecond), true},
		{"a day ahead is rejected", at.Add(-24 * time.Hour), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, data := range [][]byte{entry, pushBody(entry)} {
				_, err := Parse(data, Options{Now: tt.now})
				if !tt.wantErr {
					if err != nil {
						t.Fatalf("Parse: %v", err)
					}
					continue
				}
				var re *RejectError
				if !errors.As(err, &re) || re.Code != CodeFutureTimestamp || re.Field != "timestamp" {
					t.Fatalf("Parse error = %v, want %s on timestamp", err, CodeFutureTimestamp)
				}
				if !strings.Contains(re.Reason, "2026-11-20T03:44:36.265703305Z") {
					t.Errorf("reason %q does not name the timestamp", re.Reason)
				}
			}
		})
	}
	// A forged far-future entry, read through the Reader, is rejected too.
	forged := strings.Replace(compact(t, entry), "2026-11-20T03:44:36.265703305Z", "9999-12-31T23:59:59Z", 1)
	got := summarize(t, NewReader(strings.NewReader(forged+"\n"+compact(t, entry)), Options{Now: at}))
	if diff := cmp.Diff([]string{"reject:" + CodeFutureTimestamp, llmNode}, got); diff != "" {
		t.Errorf("items mismatch (-want +got):\n%s", diff)
	}
}

func TestParseStructuredCloudEvents(t *testing.T) {
	want, err := Parse(readFixture(t, "terminate-maintenance.json"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	entry := compact(t, readFixture(t, "terminate-maintenance.json"))
	push := compact(t, readFixture(t, "pubsub-push.json"))
	inline := `{"specversion":"1.0","type":"google.cloud.audit.log.v1.written","source":"//cloudaudit.googleapis.com/projects/acme-ml/logs/system_event","id":"x","data":` + entry + `}`
	tests := []struct{ name, in string }{
		{"messagePublished with the push body as data", string(readFixture(t, "cloudevent-structured.json"))},
		{"messagePublished with data_base64", string(readFixture(t, "cloudevent-structured-base64.json"))},
		{"an audit log CloudEvent carrying the entry as data", inline},
		{"the entry as data_base64", `{"specversion":"1.0","type":"t","source":"s","id":"1","data_base64":"` + base64.StdEncoding.EncodeToString([]byte(entry)) + `"}`},
		{"the push body as a JSON string", `{"specversion":"1.0","type":"t","source":"s","id":"1","data":` + string(mustQuote(push)) + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in), Options{})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("mismatch (-entry +CloudEvent):\n%s", diff)
			}
			payload, _, err := Unwrap([]byte(tt.in))
			if err != nil {
				t.Fatalf("Unwrap: %v", err)
			}
			if fromPayload, err := Parse(payload, Options{}); err != nil || fromPayload.InsertID != want.InsertID {
				t.Errorf("Parse(Unwrap(CloudEvent)) = %v, %v", fromPayload.InsertID, err)
			}
		})
	}
	rejects := []struct{ name, in, code, field string }{
		{"no data", string(readFixture(t, "cloudevent-no-data.json")), CodeEmptyMessage, "data"},
		{"data a number", `{"specversion":"1.0","data":7}`, CodeBadEnvelope, "data"},
		{"bad data_base64", `{"specversion":"1.0","data_base64":"***"}`, CodeBadBase64, "data_base64"},
		{"a push body without data", `{"specversion":"1.0","data":{"message":{"attributes":{}}}}`, CodeEmptyMessage, "data.message.data"},
		{"a CloudEvent inside a CloudEvent", `{"specversion":"1.0","data":{"specversion":"1.0","data":` + entry + `}}`, CodeBadEnvelope, "data"},
	}
	for _, tt := range rejects {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in), Options{})
			var re *RejectError
			if !errors.As(err, &re) || re.Code != tt.code || re.Field != tt.field {
				t.Fatalf("Parse error = %#v, want %s on %s", err, tt.code, tt.field)
			}
		})
	}
	// A specversion that is not a string does not make a CloudEvent.
	if _, err := Parse([]byte(strings.Replace(entry, `{`, `{"specversion":1,`, 1)), Options{}); err != nil {
		t.Errorf("an entry with a numeric specversion member: %v", err)
	}
}

func mustQuote(s string) []byte {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return []byte(b.String())
}

func TestReaderReadsCloudEventsAndConcatenatedObjects(t *testing.T) {
	ce := string(readFixture(t, "cloudevent-structured.json")) // pretty-printed
	entry := compact(t, readFixture(t, "terminate-maintenance.json"))
	r := NewReader(strings.NewReader(ce+ce+entry+compact(t, readFixture(t, "compute-preempted.json"))), Options{})
	var got []string
	for {
		it, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if it.Err != nil {
			got = append(got, "reject:"+it.Err.Error())
			continue
		}
		got = append(got, string(it.Event.Kind)+":"+it.Event.Node.Parent()+"/"+it.Event.Node.Node)
	}
	want := []string{
		":projects/acme-ml/locations/us-central2-b/llm-v4-128",
		":projects/acme-ml/locations/us-central2-b/llm-v4-128",
		":projects/acme-ml/locations/us-central2-b/llm-v4-128",
		"zone-hint:projects/acme-ml/locations/us-central2-b/",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
}

func TestEventKeyIsCloudLoggingsIdentity(t *testing.T) {
	ev := Event{InsertID: "1x7kq2ed4a9f", Time: time.Date(2026, 11, 20, 4, 44, 36, 265703305, time.FixedZone("CET", 3600)), LogName: "projects/acme-ml/logs/cloudaudit.googleapis.com%2Fsystem_event"}
	if got, want := ev.Key(), "1x7kq2ed4a9f|2026-11-20T03:44:36.265703305Z|projects/acme-ml/logs/cloudaudit.googleapis.com%2Fsystem_event"; got != want {
		t.Errorf("Key() = %q, want %q", got, want)
	}
	other := ev
	other.LogName = "projects/acme-ml/logs/cloudaudit.googleapis.com%2Factivity"
	later := ev
	later.Time = ev.Time.Add(time.Nanosecond)
	for _, e := range []Event{other, later} {
		if e.Key() == ev.Key() {
			t.Errorf("entries differing in log or time share the key %q", e.Key())
		}
	}
	// The same entry bare and wrapped has the same key.
	a, _ := Parse(readFixture(t, "terminate-maintenance.json"), Options{})
	b, _ := Parse(readFixture(t, "cloudevent-structured.json"), Options{})
	if a.Key() == "" || a.Key() != b.Key() {
		t.Errorf("keys %q and %q of one entry differ", a.Key(), b.Key())
	}
}

func TestSinkFilterRoutesZoneHints(t *testing.T) {
	for _, want := range append([]string{`log_id("cloudaudit.googleapis.com/system_event")`,
		`protoPayload.serviceName="tpu.googleapis.com"`, `protoPayload.methodName="tpu.nodes.terminate"`, `protoPayload.methodName="tpu.nodes.restart"`,
		`protoPayload.serviceName="compute.googleapis.com"`, `protoPayload.resourceName:"/instances/t1v-n-"`}, quoteMethods(ComputeMethods)...) {
		if !strings.Contains(SinkFilter, want) {
			t.Errorf("SinkFilter lacks %s", want)
		}
	}
	if strings.Count(SinkFilter, "(") != strings.Count(SinkFilter, ")") {
		t.Errorf("SinkFilter has unbalanced parentheses: %s", SinkFilter)
	}
}

func quoteMethods(ms []string) []string {
	var out []string
	for _, m := range ms {
		out = append(out, `protoPayload.methodName="`+m+`"`)
	}
	return out
}

func TestPeekReadsARejectedZoneHint(t *testing.T) {
	_, err := Parse(readFixture(t, "compute-preempted.json"), Options{AllowedProjects: []string{"someone-else"}})
	var re *RejectError
	if !errors.As(err, &re) || re.Code != CodeProjectNotAllowed {
		t.Fatalf("Parse error = %v, want %s", err, CodeProjectNotAllowed)
	}
	got := Peek(readFixture(t, "compute-preempted.json"))
	want := struct {
		Kind             Kind
		Node             NodeRef
		Instance, Worker string
		InsertID, Method string
	}{KindZoneHint, NodeRef{Project: "acme-ml", Zone: "us-central2-b"}, "t1v-n-8d2e1f3a-w-0", "0", "-ckq3v7e2b1f0", MethodPreempted}
	gotS := struct {
		Kind             Kind
		Node             NodeRef
		Instance, Worker string
		InsertID, Method string
	}{got.Kind, got.Node, got.Instance, got.Worker, got.InsertID, got.Method}
	if diff := cmp.Diff(want, gotS); diff != "" {
		t.Errorf("Peek (-want +got):\n%s", diff)
	}
}

func TestInstanceEventsOfComputeEngineTPUVMs(t *testing.T) {
	const sysBase = `{"insertId":"i1","logName":"projects/acme-ml/logs/cloudaudit.googleapis.com%%2Fsystem_event","timestamp":"2026-11-20T04:00:00Z","protoPayload":{"serviceName":"compute.googleapis.com","methodName":%q,"resourceName":%q,"authenticationInfo":{"principalEmail":"system@google.com"}},"resource":{"type":"gce_instance","labels":{"project_id":"acme-ml","zone":"us-central1-c"}}}`
	const actBase = `{"insertId":"a1","logName":"projects/acme-ml/logs/cloudaudit.googleapis.com%%2Factivity","timestamp":"2026-11-20T04:00:00Z","operation":{"id":"operation-1","first":true},"protoPayload":{"serviceName":"compute.googleapis.com","methodName":%q,"resourceName":%q,"authenticationInfo":{"principalEmail":%q}},"resource":{"type":"gce_instance","labels":{"project_id":"acme-ml","zone":"us-central1-c"}}}`
	const vm = "projects/acme-ml/zones/us-central1-c/instances/trainer-a"
	const worker = "projects/acme-ml/zones/us-central1-c/instances/t1v-n-8d2e1f3a-w-0"
	tests := []struct {
		name, data string
		wantKind   Kind
		wantChange Change
		wantCause  Cause
		wantCode   string
	}{
		{"host error of a TPU7x VM", fmt.Sprintf(sysBase, MethodHostError, vm), KindInstance, "", CauseHardware, ""},
		{"automatic restart of a TPU7x VM", fmt.Sprintf(sysBase, MethodAutomaticRestart, vm), KindInstance, "", CauseMaintenance, ""},
		{"infrastructure maintenance notice", fmt.Sprintf(sysBase, MethodUpcomingInfraMaintenance, vm), KindInstance, "", CauseMaintenance, ""},
		{"host error of a TPU node's VM stays a zone hint", fmt.Sprintf(sysBase, MethodHostError, worker), KindZoneHint, "", CauseHardware, ""},
		{"a person's stop", fmt.Sprintf(actBase, "v1.compute.instances.stop", vm, "alice@acme.example"), KindInstance, ChangeStopInstance, CauseUser, ""},
		{"a person's beta suspend", fmt.Sprintf(actBase, "beta.compute.instances.suspend", vm, "alice@acme.example"), KindInstance, ChangeSuspendInstance, CauseUser, ""},
		{"a person's delete", fmt.Sprintf(actBase, "v1.compute.instances.delete", vm, "alice@acme.example"), KindInstance, ChangeDeleteInstance, CauseUser, ""},
		{"an insert", fmt.Sprintf(actBase, "v1.compute.instances.bulkInsert", vm, "autoheal@acme-ml.iam.gserviceaccount.com"), KindInstance, ChangeInsertInstance, CauseUser, ""},
		{"a person's stop of a TPU node's VM is not routed", fmt.Sprintf(actBase, "v1.compute.instances.stop", worker, "alice@acme.example"), "", "", "", CodeForeignInstance},
		{"a stop in the system-event log is not a person's", strings.Replace(fmt.Sprintf(actBase, "v1.compute.instances.stop", vm, "alice@acme.example"), "%2Factivity", "%2Fsystem_event", 1), "", "", "", CodeForeignLog},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := Parse([]byte(tt.data), Options{})
			if tt.wantCode != "" {
				var re *RejectError
				if !errors.As(err, &re) || re.Code != tt.wantCode {
					t.Fatalf("Parse error = %v, want %s", err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ev.Kind != tt.wantKind || ev.Cause != tt.wantCause || ev.Node.Project != "acme-ml" || ev.Node.Zone != "us-central1-c" || ev.Node.Node != "" {
				t.Errorf("event = kind %q cause %q node %+v", ev.Kind, ev.Cause, ev.Node)
			}
			if (ev.Admin == nil) != (tt.wantChange == "") || ev.Admin != nil && (ev.Admin.Change != tt.wantChange || ev.Admin.OperationID != "operation-1") {
				t.Errorf("admin = %+v, want change %q", ev.Admin, tt.wantChange)
			}
		})
	}
	for _, want := range append(quoteMethods(InstanceMethods), quoteMethods(InstanceAdminMethods)...) {
		if !strings.Contains(InstanceSinkFilter, want) {
			t.Errorf("InstanceSinkFilter lacks %s", want)
		}
		if strings.Contains(SinkFilter, want) && !slices.Contains(quoteMethods(ComputeMethods), want) {
			t.Errorf("SinkFilter, the default, routes the instance path's %s", want)
		}
	}
	if !strings.Contains(InstanceSinkFilter, `NOT protoPayload.resourceName:"/instances/t1v-n-"`) {
		t.Errorf("InstanceSinkFilter routes TPU workers' entries to the instance path: %s", InstanceSinkFilter)
	}
	if !strings.HasPrefix(InstanceSinkFilter, "((") || strings.Count(InstanceSinkFilter, "(") != strings.Count(InstanceSinkFilter, ")") {
		t.Errorf("InstanceSinkFilter is not wrapped whole, or unbalanced: %s", InstanceSinkFilter)
	}
}
