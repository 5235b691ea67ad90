package record_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/logging"
	logpb "cloud.google.com/go/logging/apiv2/loggingpb"
	"github.com/google/go-cmp/cmp"
	tpu "google.golang.org/api/tpu/v2"
	"google.golang.org/genproto/googleapis/api/monitoredres"
	ltype "google.golang.org/genproto/googleapis/logging/type"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tpu-autoheal/autoheal/internal/loggingfake"
	"github.com/tpu-autoheal/autoheal/internal/record"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

const (
	project = "acme-ml"
	node    = "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128"
)

var (
	recTime   = time.Date(2026, 11, 20, 3, 44, 40, 0, time.UTC)
	eventTime = time.Date(2026, 11, 20, 3, 44, 36, 265703305, time.UTC)
	stepStart = time.Date(2026, 11, 20, 3, 44, 38, 0, time.UTC)
)

func recreateRecord() remediate.Record {
	return remediate.Record{
		Time:       recTime,
		InsertID:   "1x7kq2ed4a9f",
		EventTime:  eventTime,
		Node:       node,
		Zone:       "us-central2-b",
		Method:     "tpu.nodes.terminate",
		Cause:      "maintenance",
		Action:     remediate.ActionRecreate,
		Reason:     "node TERMINATED",
		Phase:      remediate.PhaseDone,
		Generation: 2,
		Spec: &tpu.Node{
			AcceleratorType: "v4-128",
			RuntimeVersion:  "tpu-ubuntu2204-base",
			Labels:          map[string]string{"tpu-autoheal": "enabled"},
		},
		Steps: []remediate.Step{
			{Name: "delete", Operation: "op-1", Start: stepStart, Duration: 1500 * time.Millisecond},
			{Name: "create", Operation: "op-2", Start: stepStart.Add(2 * time.Second), Duration: 2 * time.Second},
		},
		Warnings: []string{"no startup script"},
	}
}

func recreatePayload(t *testing.T) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(map[string]any{
		"message":    "recreate " + node + ": node TERMINATED",
		"action":     "recreate",
		"reason":     "node TERMINATED",
		"node":       node,
		"zone":       "us-central2-b",
		"method":     "tpu.nodes.terminate",
		"cause":      "maintenance",
		"insertId":   "1x7kq2ed4a9f",
		"eventTime":  "2026-11-20T03:44:36.265703305Z",
		"phase":      "done",
		"generation": 2,
		"spec": map[string]any{
			"acceleratorType": "v4-128",
			"runtimeVersion":  "tpu-ubuntu2204-base",
			"labels":          map[string]any{"tpu-autoheal": "enabled"},
		},
		"steps": []any{
			map[string]any{"name": "delete", "operation": "op-1", "start": "2026-11-20T03:44:38Z", "durationSeconds": 1.5},
			map[string]any{"name": "create", "operation": "op-2", "start": "2026-11-20T03:44:40Z", "durationSeconds": 2.0},
		},
		"durationSeconds": 3.5,
		"warnings":        []any{"no startup script"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var testResource = &monitoredres.MonitoredResource{
	Type:   "cloud_run_revision",
	Labels: map[string]string{"project_id": project, "service_name": "tpu-autoheal"},
}

func newLogging(t *testing.T, fake *loggingfake.Server, fallback *bytes.Buffer, opts ...record.Option) *record.Logging {
	t.Helper()
	ctx := context.Background()
	client, err := logging.NewClient(ctx, "projects/"+project, fake.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	client.OnError = func(error) {}
	t.Cleanup(func() { client.Close() })
	return record.NewLogging(ctx, client, append([]record.Option{
		record.WithFallback(fallback),
		record.WithLoggerOptions(logging.CommonResource(testResource)),
	}, opts...)...)
}

func startFake(t *testing.T) *loggingfake.Server {
	t.Helper()
	fake, err := loggingfake.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	return fake
}

func TestLoggingWritesOneStructuredEntryPerRecord(t *testing.T) {
	fake := startFake(t)
	var fallback bytes.Buffer
	rec := newLogging(t, fake, &fallback)
	ctx := record.WithTrace(context.Background(), "projects/acme-ml/traces/abc123")

	if err := rec.Record(ctx, recreateRecord()); err != nil {
		t.Fatalf("Record: %v", err)
	}

	got := fake.EntriesOf("projects/acme-ml/logs/" + record.LogName)
	want := []*logpb.LogEntry{{
		LogName:   "projects/acme-ml/logs/tpu-autoheal",
		Resource:  testResource,
		Timestamp: timestamppb.New(recTime),
		Severity:  ltype.LogSeverity_NOTICE,
		Labels: map[string]string{
			"app": "tpu-autoheal", "node": node, "zone": "us-central2-b",
			"action": "recreate", "cause": "maintenance",
		},
		Trace:   "projects/acme-ml/traces/abc123",
		Payload: &logpb.LogEntry_JsonPayload{JsonPayload: recreatePayload(t)},
	}}
	if diff := cmp.Diff(want, got, protocmp.Transform(),
		protocmp.IgnoreFields(&logpb.LogEntry{}, "insert_id", "receive_timestamp")); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if fallback.Len() != 0 {
		t.Errorf("fallback written although Cloud Logging accepted the record: %s", fallback.String())
	}
}

func TestSeverityFollowsActionAndError(t *testing.T) {
	tests := []struct {
		name   string
		action remediate.Action
		err    string
		want   string
	}{
		{"recreate is a notice", remediate.ActionRecreate, "", "NOTICE"},
		{"reset is a notice", remediate.ActionReset, "", "NOTICE"},
		{"reject is a warning", remediate.ActionReject, "", "WARNING"},
		{"record is info", remediate.ActionRecord, "", "INFO"},
		{"defer is info", remediate.ActionDefer, "", "INFO"},
		{"skip is info", remediate.ActionSkip, "", "INFO"},
		{"a failed recreate is an error", remediate.ActionRecreate, "create: quota", "ERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := record.Severity(remediate.Record{Action: tt.action, Err: tt.err})
			if got != tt.want {
				t.Errorf("Severity = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLoggingFailureFallsBackToStdout(t *testing.T) {
	fake := startFake(t)
	fake.FailWrites(codes.PermissionDenied, 0)
	var fallback bytes.Buffer
	rec := newLogging(t, fake, &fallback)

	r := remediate.Record{
		Time: recTime, Action: remediate.ActionReject, Reason: "malformed-json: unexpected end of JSON input",
		InsertID: "abc",
	}
	if err := rec.Record(context.Background(), r); err != nil {
		t.Fatalf("Record: %v (want nil: the fallback took it)", err)
	}
	if n := len(fake.EntriesOf("projects/acme-ml/logs/" + record.LogName)); n != 0 {
		t.Fatalf("fake stored %d entries despite failing writes", n)
	}
	lines := strings.Split(strings.TrimSuffix(fallback.String(), "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("fallback has %d lines, want 1: %q", len(lines), fallback.String())
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatalf("fallback line is not JSON: %v", err)
	}
	recErr, _ := got["recordError"].(string)
	if !strings.Contains(recErr, "PermissionDenied") {
		t.Errorf("recordError = %q, want the Cloud Logging error", recErr)
	}
	delete(got, "recordError")
	want := map[string]any{
		"severity":                      "WARNING",
		"timestamp":                     "2026-11-20T03:44:40Z",
		"logging.googleapis.com/labels": map[string]any{"app": "tpu-autoheal", "action": "reject"},
		"message":                       "reject (unknown node): malformed-json: unexpected end of JSON input",
		"action":                        "reject",
		"reason":                        "malformed-json: unexpected end of JSON input",
		"insertId":                      "abc",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fallback line (-want +got):\n%s", diff)
	}
}

func TestStdoutLineHasCloudLoggingShape(t *testing.T) {
	var buf bytes.Buffer
	ctx := record.WithTrace(context.Background(), "projects/acme-ml/traces/t1")
	r := recreateRecord()
	r.Err = "create: RESOURCE_EXHAUSTED"
	if err := record.NewStdout(&buf).Record(ctx, r); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(buf.Bytes(), []byte("\n")) || bytes.Count(buf.Bytes(), []byte("\n")) != 1 {
		t.Fatalf("want exactly one line, got %q", buf.String())
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := recreatePayload(t).AsMap()
	want["message"] = want["message"].(string) + ": error: create: RESOURCE_EXHAUSTED"
	want["error"] = "create: RESOURCE_EXHAUSTED"
	want["severity"] = "ERROR"
	want["timestamp"] = "2026-11-20T03:44:40Z"
	want["logging.googleapis.com/trace"] = "projects/acme-ml/traces/t1"
	want["logging.googleapis.com/labels"] = map[string]any{
		"app": "tpu-autoheal", "node": node, "zone": "us-central2-b", "action": "recreate", "cause": "maintenance",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("line (-want +got):\n%s", diff)
	}
}

func TestStdoutConcurrentRecordsStayWholeLines(t *testing.T) {
	var buf bytes.Buffer
	s := record.NewStdout(&buf)
	done := make(chan struct{})
	for i := 0; i < 8; i++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for j := 0; j < 20; j++ {
				_ = s.Record(context.Background(), recreateRecord())
			}
		}()
	}
	for i := 0; i < 8; i++ {
		<-done
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 160 {
		t.Fatalf("got %d lines, want 160", len(lines))
	}
	for i, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("line %d is not valid JSON: %q", i, l)
		}
	}
}

// TestInstanceNamesKeepTwoInstancesApart: a deployed instance writes its
// records to its own log and labels them (and their stdout fallback) with
// its own app label, so two instances in one project never share a record,
// a metric or an alert.
func TestInstanceNamesKeepTwoInstancesApart(t *testing.T) {
	fake := startFake(t)
	ctx := context.Background()
	var fallback bytes.Buffer
	second := newLogging(t, fake, &fallback, record.WithLogName("autoheal-b"), record.WithApp("autoheal-b"))

	if err := second.Record(ctx, recreateRecord()); err != nil {
		t.Fatal(err)
	}
	if n := len(fake.EntriesOf("projects/acme-ml/logs/" + record.LogName)); n != 0 {
		t.Errorf("the default log got %d entries from the instance named autoheal-b", n)
	}
	got := fake.EntriesOf("projects/acme-ml/logs/autoheal-b")
	if len(got) != 1 || got[0].GetLabels()["app"] != "autoheal-b" {
		t.Fatalf("entries of projects/acme-ml/logs/autoheal-b = %v, want one labelled app=autoheal-b", got)
	}

	fake.FailWrites(codes.PermissionDenied, 0)
	if err := second.Record(ctx, recreateRecord()); err != nil {
		t.Fatal(err)
	}
	var line struct {
		Labels map[string]string `json:"logging.googleapis.com/labels"`
	}
	if err := json.Unmarshal(fallback.Bytes(), &line); err != nil {
		t.Fatalf("fallback line %q: %v", fallback.String(), err)
	}
	if line.Labels["app"] != "autoheal-b" {
		t.Errorf("fallback line labels = %v, want app=autoheal-b", line.Labels)
	}

	var out bytes.Buffer
	if err := record.NewStdout(&out, record.WithApp("autoheal-b")).Record(ctx, recreateRecord()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"app":"autoheal-b"`) || strings.Contains(out.String(), `"app":"tpu-autoheal"`) {
		t.Errorf("stdout record = %s, want app=autoheal-b only", out.String())
	}
}

// TestRefusalIsInThePayload: a create refused for capacity is recorded with
// its kind, scope, zone and the API's wording, so a stockout and a quota
// can be told apart (and counted per zone) from the logs alone.
func TestRefusalIsInThePayload(t *testing.T) {
	retry := time.Date(2026, 11, 20, 4, 1, 30, 0, time.UTC)
	p, err := record.Payload(remediate.Record{Action: remediate.ActionRecreate, Outcome: remediate.OutcomeFailed,
		Refusal: &remediate.Refusal{Kind: "stockout", Scope: "zone", Zone: "us-central2-b", Message: "There is no more capacity in the zone", Stockouts: 2, RetryAt: retry}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := p["refusal"].(map[string]any)
	want := map[string]any{"kind": "stockout", "scope": "zone", "zone": "us-central2-b", "message": "There is no more capacity in the zone", "stockouts": 2.0, "retryAt": "2026-11-20T04:01:30Z"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refusal (-want +got):\n%s", diff)
	}
	if p, _ := record.Payload(remediate.Record{Action: remediate.ActionRecreate}); p["refusal"] != nil {
		t.Errorf("refusal on a record without one: %v", p["refusal"])
	}
}
