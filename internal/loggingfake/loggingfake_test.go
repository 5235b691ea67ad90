package loggingfake_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/logging"
	logpb "cloud.google.com/go/logging/apiv2/loggingpb"
	"cloud.google.com/go/logging/logadmin"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/iterator"
	"google.golang.org/genproto/googleapis/api/monitoredres"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tpu-autoheal/autoheal/internal/loggingfake"
)

var t0 = time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC)

func entry(log, id string, at time.Time) *logpb.LogEntry {
	return &logpb.LogEntry{
		LogName: log, InsertId: id, Timestamp: timestamppb.New(at),
		Resource: &monitoredres.MonitoredResource{Type: "global"},
		Payload:  &logpb.LogEntry_TextPayload{TextPayload: id},
	}
}

func TestListFiltersAsLogadminReads(t *testing.T) {
	fake, err := loggingfake.New()
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	fake.Seed(
		entry("projects/p/logs/a", "a-early", t0.Add(-time.Hour)),
		entry("projects/p/logs/a", "a-1", t0),
		entry("projects/p/logs/a", "a-2", t0.Add(time.Minute)),
		entry("projects/p/logs/b", "b-1", t0),
		entry("projects/other/logs/a", "other", t0),
	)
	ctx := context.Background()
	admin, err := logadmin.NewClient(ctx, "p", fake.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	tests := []struct {
		name   string
		filter string
		opts   []logadmin.EntriesOption
		want   []string
	}{
		{"logName and time range", `logName="projects/p/logs/a" AND timestamp>="2026-11-20T03:00:00Z"`, nil, []string{"a-1", "a-2"}},
		{"upper bound is exclusive", `timestamp>="2026-11-20T02:00:00Z" AND timestamp<"2026-11-20T03:01:00Z" AND logName:"logs/a"`, nil, []string{"a-early", "a-1"}},
		{"unsupported clauses pass through", `textPayload:"x" AND (severity>=ERROR OR logName="projects/p/logs/b") AND timestamp>="2026-11-20T03:00:00Z"`, nil, []string{"a-1", "b-1", "a-2"}},
		{"log_id names a log exactly", `log_id("a") AND timestamp>="2026-11-20T03:00:00Z"`, nil, []string{"a-1", "a-2"}},
		{"an OR of log_ids and a group", `(log_id("a") AND timestamp>="2026-11-20T03:00:00Z") OR (log_id("b") AND textPayload:"x")`, nil, []string{"a-1", "b-1", "a-2"}},
		{"quoted AND is not a separator", `logName:"a AND b" AND timestamp>="2000-01-01T00:00:00Z"`, nil, nil},
		{"newest first", `logName="projects/p/logs/a" AND timestamp>="2000-01-01T00:00:00Z"`, []logadmin.EntriesOption{logadmin.NewestFirst()}, []string{"a-2", "a-1", "a-early"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it := admin.Entries(ctx, append([]logadmin.EntriesOption{logadmin.Filter(tt.filter)}, tt.opts...)...)
			var got []string
			for {
				e, err := it.Next()
				if errors.Is(err, iterator.Done) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, e.InsertID)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("insertIds (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteInheritsRequestFieldsAndFailsOnDemand(t *testing.T) {
	fake, err := loggingfake.New()
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	ctx := context.Background()
	client, err := logging.NewClient(ctx, "projects/p", fake.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	lg := client.Logger("app", logging.CommonResource(&monitoredres.MonitoredResource{Type: "global"}),
		logging.CommonLabels(map[string]string{"env": "test"}))

	fake.FailWrites(codes.PermissionDenied, 1)
	err = lg.LogSync(ctx, logging.Entry{Payload: "first", Labels: map[string]string{"k": "v"}})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("first write: %v, want PermissionDenied", err)
	}
	if err := lg.LogSync(ctx, logging.Entry{Payload: "second", Labels: map[string]string{"k": "v"}}); err != nil {
		t.Fatalf("second write: %v", err)
	}
	got := fake.EntriesOf("projects/p/logs/app")
	if len(got) != 1 {
		t.Fatalf("stored %d entries, want 1 (the failed write stores nothing)", len(got))
	}
	e := got[0]
	if e.GetTextPayload() != "second" || e.GetResource().GetType() != "global" ||
		!cmp.Equal(e.GetLabels(), map[string]string{"env": "test", "k": "v"}) || e.GetInsertId() == "" || e.GetReceiveTimestamp() == nil {
		t.Errorf("stored entry = %v", e)
	}
}
