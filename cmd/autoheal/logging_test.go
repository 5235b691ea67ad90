package main

import (
	"strings"
	"testing"
	"time"

	logpb "cloud.google.com/go/logging/apiv2/loggingpb"
	"google.golang.org/genproto/googleapis/api/monitoredres"
	"google.golang.org/genproto/googleapis/cloud/audit"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tpu-autoheal/autoheal/internal/loggingfake"
)

func TestReplayFromLoggingReadsTheWindow(t *testing.T) {
	srv, err := loggingfake.New()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	loggingClientOptions = srv.ClientOptions()
	defer func() { loggingClientOptions = nil }()

	meta, err := structpb.NewStruct(map[string]any{"terminateReason": "Terminated due to a maintenance event"})
	if err != nil {
		t.Fatal(err)
	}
	payload, err := anypb.New(&audit.AuditLog{
		ServiceName:        "tpu.googleapis.com",
		MethodName:         "tpu.nodes.terminate",
		ResourceName:       podNode,
		AuthenticationInfo: &audit.AuthenticationInfo{PrincipalEmail: "system@google.com"},
		Metadata:           meta,
	})
	if err != nil {
		t.Fatal(err)
	}
	entry := func(id string, age time.Duration) *logpb.LogEntry {
		ts := timestamppb.New(time.Now().Add(-age))
		return &logpb.LogEntry{
			LogName:          "projects/acme-ml/logs/cloudaudit.googleapis.com%2Fsystem_event",
			InsertId:         id,
			Timestamp:        ts,
			ReceiveTimestamp: ts,
			Resource:         &monitoredres.MonitoredResource{Type: "audited_resource", Labels: map[string]string{"project_id": "acme-ml"}},
			Payload:          &logpb.LogEntry_ProtoPayload{ProtoPayload: payload},
		}
	}
	srv.Seed(entry("too-old", 5*time.Hour), entry("in-window", time.Hour))

	r := runCLI(t, nil, "replay", "--from-logging", "--project", "acme-ml", "--since", "2h", "--fleet", fleetFile, "--format", "json")
	if r.err != nil {
		t.Fatalf("replay --from-logging: %v\nstderr: %s", r.err, r.stderr)
	}
	lines := parseLines(t, r.stdout)
	if len(lines) != 1 || lines[0].InsertID != "in-window" || lines[0].Action != "recreate" {
		t.Errorf("lines = %+v, want only in-window, recreated", lines)
	}
	if !strings.Contains(r.stderr, "read 1 entries from Cloud Logging") {
		t.Errorf("no progress line on stderr:\n%s", r.stderr)
	}
	lists := srv.Lists()
	if len(lists) == 0 || !strings.Contains(lists[0].Filter, `protoPayload.methodName="tpu.nodes.terminate"`) {
		t.Errorf("ListLogEntries requests %v, want the sink filter", lists)
	}
}
