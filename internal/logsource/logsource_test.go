package logsource_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/logging"
	logpb "cloud.google.com/go/logging/apiv2/loggingpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/api/monitoredres"
	"google.golang.org/genproto/googleapis/cloud/audit"
	ltype "google.golang.org/genproto/googleapis/logging/type"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/loggingfake"
	"github.com/tpu-autoheal/autoheal/internal/logsource"
)

const systemEventLog = "projects/acme-ml/logs/cloudaudit.googleapis.com%2Fsystem_event"

var t0 = time.Date(2026, 11, 20, 3, 44, 36, 265703305, time.UTC)

// auditEntry is a TPU system event as Cloud Logging stores it.
func auditEntry(t *testing.T, insertID, method string, at time.Time, reason string) *logpb.LogEntry {
	t.Helper()
	md, err := structpb.NewStruct(map[string]any{"terminateReason": reason})
	if err != nil {
		t.Fatal(err)
	}
	al := &audit.AuditLog{
		ServiceName:        "tpu.googleapis.com",
		MethodName:         method,
		ResourceName:       "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128",
		AuthenticationInfo: &audit.AuthenticationInfo{PrincipalEmail: "system@google.com"},
		Metadata:           md,
	}
	anyPayload, err := anypb.New(al)
	if err != nil {
		t.Fatal(err)
	}
	return &logpb.LogEntry{
		LogName:  systemEventLog,
		InsertId: insertID,
		Resource: &monitoredres.MonitoredResource{
			Type:   "audited_resource",
			Labels: map[string]string{"project_id": "acme-ml", "service": "tpu.googleapis.com", "method": method},
		},
		Timestamp:        timestamppb.New(at),
		ReceiveTimestamp: timestamppb.New(at.Add(time.Second)),
		Severity:         ltype.LogSeverity_NOTICE,
		Payload:          &logpb.LogEntry_ProtoPayload{ProtoPayload: anyPayload},
	}
}

func newSource(t *testing.T, fake *loggingfake.Server) *logsource.Source {
	t.Helper()
	src, err := logsource.New(context.Background(), fake.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
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

func readAll(t *testing.T, src *logsource.Source, o logsource.Options) []map[string]any {
	t.Helper()
	var got []map[string]any
	err := src.Read(context.Background(), o, func(b []byte) error {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("entry is not JSON: %v: %s", err, b)
		}
		got = append(got, m)
		return nil
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return got
}

func TestReadPrintsEntriesAsGcloudDoes(t *testing.T) {
	fake := startFake(t)
	fake.Seed(auditEntry(t, "1x7kq2ed4a9f", events.MethodTerminate, t0, "Terminated due to a maintenance event"))
	src := newSource(t, fake)

	got := readAll(t, src, logsource.Options{Project: "acme-ml"})

	want := []map[string]any{{
		"logName":  systemEventLog,
		"insertId": "1x7kq2ed4a9f",
		"resource": map[string]any{
			"type":   "audited_resource",
			"labels": map[string]any{"project_id": "acme-ml", "service": "tpu.googleapis.com", "method": "tpu.nodes.terminate"},
		},
		"timestamp":        "2026-11-20T03:44:36.265703305Z",
		"receiveTimestamp": "2026-11-20T03:44:37.265703305Z",
		"severity":         "NOTICE",
		"protoPayload": map[string]any{
			"@type":              "type.googleapis.com/google.cloud.audit.AuditLog",
			"serviceName":        "tpu.googleapis.com",
			"methodName":         "tpu.nodes.terminate",
			"resourceName":       "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128",
			"authenticationInfo": map[string]any{"principalEmail": "system@google.com"},
			"metadata":           map[string]any{"terminateReason": "Terminated due to a maintenance event"},
		},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

func TestReadSendsSinkFilterWithTimeRangeAndNarrows(t *testing.T) {
	fake := startFake(t)
	fake.Seed(
		auditEntry(t, "before", events.MethodTerminate, t0.Add(-time.Hour), "x"),
		auditEntry(t, "inside-1", events.MethodTerminate, t0, "x"),
		auditEntry(t, "inside-2", events.MethodRestart, t0.Add(time.Minute), "x"),
		auditEntry(t, "at-until", events.MethodTerminate, t0.Add(time.Hour), "x"),
		&logpb.LogEntry{ // another log: not selected by the sink filter
			LogName: "projects/acme-ml/logs/syslog", InsertId: "other",
			Resource:  &monitoredres.MonitoredResource{Type: "global"},
			Timestamp: timestamppb.New(t0), Payload: &logpb.LogEntry_TextPayload{TextPayload: "hi"},
		},
	)
	src := newSource(t, fake)
	var progress []int
	o := logsource.Options{Project: "acme-ml", Since: t0, Until: t0.Add(time.Hour), PageSize: 1,
		Progress: func(n int) { progress = append(progress, n) }}

	got := readAll(t, src, o)

	var ids []string
	for _, e := range got {
		ids = append(ids, e["insertId"].(string))
	}
	if diff := cmp.Diff([]string{"inside-1", "inside-2"}, ids); diff != "" {
		t.Errorf("insertIds (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 2}, progress); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	lists := fake.Lists()
	if len(lists) == 0 {
		t.Fatal("no ListLogEntries call")
	}
	wantFilter := events.SinkFilter + ` AND timestamp>="2026-11-20T03:44:36.265703305Z" AND timestamp<"2026-11-20T04:44:36.265703305Z"`
	if got := lists[0].GetFilter(); got != wantFilter {
		t.Errorf("filter = %s\nwant     %s", got, wantFilter)
	}
	if got := lists[0].GetResourceNames(); len(got) != 1 || got[0] != "projects/acme-ml" {
		t.Errorf("resourceNames = %v, want [projects/acme-ml]", got)
	}
	if len(lists) != 2 {
		t.Errorf("got %d list calls with page size 1 for 2 entries, want 2 (paging)", len(lists))
	}
}

func TestQueryDefaultsToSinkFilter(t *testing.T) {
	tests := []struct {
		name         string
		base         string
		since, until time.Time
		want         string
	}{
		{"empty base is the sink filter", "", time.Time{}, time.Time{}, events.SinkFilter},
		{"custom base is kept", `resource.type="tpu_worker"`, time.Time{}, time.Time{}, `resource.type="tpu_worker"`},
		{"since only", "a", t0, time.Time{}, `a AND timestamp>="2026-11-20T03:44:36.265703305Z"`},
		{"until only, converted to UTC", "a", time.Time{}, time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)),
			`a AND timestamp<"2026-01-02T02:04:05Z"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := logsource.Query(tt.base, tt.since, tt.until); got != tt.want {
				t.Errorf("Query = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestReadsBackEntriesTheRealClientWrote(t *testing.T) {
	fake := startFake(t)
	ctx := context.Background()
	client, err := logging.NewClient(ctx, "projects/acme-ml", fake.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	lg := client.Logger("tpu-autoheal", logging.CommonResource(&monitoredres.MonitoredResource{Type: "global"}))
	if err := lg.LogSync(ctx, logging.Entry{Timestamp: t0, Payload: map[string]any{"action": "recreate"}}); err != nil {
		t.Fatal(err)
	}
	src := newSource(t, fake)

	rc := src.JSONLines(ctx, logsource.Options{Project: "acme-ml", Filter: `logName="projects/acme-ml/logs/tpu-autoheal"`})
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want 1: %s", len(lines), b)
	}
	var got struct {
		JSONPayload map[string]any `json:"jsonPayload"`
		Timestamp   string         `json:"timestamp"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	if got.JSONPayload["action"] != "recreate" || got.Timestamp != "2026-11-20T03:44:36.265703305Z" {
		t.Errorf("read back %s", lines[0])
	}
}

func TestUnknownProtoPayloadTypeKeepsTheEntry(t *testing.T) {
	e := auditEntry(t, "odd", events.MethodTerminate, t0, "x")
	e.GetProtoPayload().TypeUrl = "type.googleapis.com/example.Unknown"
	b, err := logsource.EntryJSON(e)
	if err != nil {
		t.Fatalf("EntryJSON: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	if diff := cmp.Diff(map[string]any{"@type": "type.googleapis.com/example.Unknown"}, got["protoPayload"]); diff != "" {
		t.Errorf("protoPayload (-want +got):\n%s", diff)
	}
	if got["insertId"] != "odd" {
		t.Errorf("insertId = %v, want odd", got["insertId"])
	}
}

func TestEntriesReadParseAsEvents(t *testing.T) {
	fake := startFake(t)
	fake.Seed(auditEntry(t, "1x7kq2ed4a9f", events.MethodTerminate, t0, "Terminated due to a maintenance event"))
	src := newSource(t, fake)
	var got []events.Event
	err := src.Read(context.Background(), logsource.Options{Project: "acme-ml"}, func(b []byte) error {
		ev, err := events.Parse(b, events.Options{AllowedProjects: []string{"acme-ml"}})
		if err != nil {
			return err
		}
		got = append(got, ev)
		return nil
	})
	if err != nil {
		t.Fatalf("Read/Parse: %v", err)
	}
	if len(got) != 1 {
		t.Fatalf("got %d events, want 1", len(got))
	}
	ev := got[0]
	if ev.TerminateReason != "Terminated due to a maintenance event" || ev.Cause != events.CauseMaintenance ||
		ev.Node.Name() != "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128" || !ev.Time.Equal(t0) ||
		ev.InsertID != "1x7kq2ed4a9f" || ev.LogName != systemEventLog {
		t.Errorf("event = %+v", ev)
	}
}
