package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

// BenchmarkOrderedIndex indexes a newest-first export of b.N entries and
// reads every entry back oldest first. It reports the heap the index keeps
// per entry (index-B/entry): the entries themselves are read back from the
// file, never kept.
func BenchmarkOrderedIndex(b *testing.B) {
	path := filepath.Join(b.TempDir(), "desc.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC)
	for i := b.N - 1; i >= 0; i-- {
		fmt.Fprintf(f, `{"insertId":"bench-%d","timestamp":"%s","logName":"projects/acme-ml/logs/cloudaudit.googleapis.com%%2Fsystem_event","protoPayload":{"serviceName":"tpu.googleapis.com","methodName":"tpu.nodes.terminate","resourceName":"projects/acme-ml/locations/us-central2-b/nodes/bench-%d","authenticationInfo":{"principalEmail":"system@google.com"},"metadata":{"terminateReason":"Terminated due to a maintenance event"}},"resource":{"type":"audited_resource","labels":{"project_id":"acme-ml"}}}`+"\n",
			i, t0.Add(time.Duration(i)*time.Millisecond).Format(time.RFC3339Nano), i%100)
	}
	f.Close()
	in, err := openInputs([]string{path}, nil, events.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	src, err := newOrderedSource(in, false)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	var last time.Time
	for {
		it, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || it.Err != nil {
			b.Fatal(err, it.Err)
		}
		if it.Event.Time.Before(last) {
			b.Fatalf("entry %s out of order", it.Event.InsertID)
		}
		last = it.Event.Time
	}
	b.StopTimer()
	if b.N >= 1000 {
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "index-B/entry")
	}
}
