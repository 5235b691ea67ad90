package report_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/report"
)

// BenchmarkReport1M reads, groups and prints the report of 1,000,002
// records (166,667 incidents on 2,000 nodes: per incident a recreate with
// its spec and six steps, three more workers' entries, a sweep's look and
// the resumed record), streamed from a file as `autoheal report FILE`
// does. It reports records/s, the peak heap while it runs (garbage
// included) and the live heap after it (the incidents kept). Run with
//
//	go test -run '^$' -bench Report1M -benchtime 1x ./internal/report/
func BenchmarkReport1M(b *testing.B) {
	records := benchRecords() // 1,000,002: 166,667 incidents of 6
	path := filepath.Join(b.TempDir(), "records.jsonl")
	size := writeBenchRecords(b, path, records)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		var peak atomic.Uint64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // sample the heap
			defer wg.Done()
			var m runtime.MemStats
			for {
				runtime.ReadMemStats(&m)
				if m.HeapInuse > peak.Load() {
					peak.Store(m.HeapInuse)
				}
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
		start := time.Now()
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		r := report.NewReader(f, path)
		g := report.NewGrouper()
		n := 0
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			g.Add(rec)
			n++
		}
		f.Close()
		incs := g.Incidents()
		sum := report.Summarize(incs)
		if err := report.WriteText(io.Discard, incs, sum); err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		close(stop)
		wg.Wait()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(incs)
		if n != records || len(incs) != records/6 {
			b.Fatalf("read %d records into %d incidents, want %d and %d", n, len(incs), records, records/6)
		}
		b.ReportMetric(float64(n)/elapsed.Seconds(), "records/s")
		b.ReportMetric(float64(size)/elapsed.Seconds()/1e6, "MB/s")
		b.ReportMetric(float64(peak.Load()-min(peak.Load(), base.HeapInuse))/1e6, "peak-heap-MB")
		b.ReportMetric(float64(after.HeapAlloc-min(after.HeapAlloc, base.HeapAlloc))/1e6, "live-MB")
		b.ReportMetric(float64(size)/1e6, "input-MB")
	}
}

// writeBenchRecords writes n records (n divisible by 6) and returns the
// file's size.
func writeBenchRecords(b *testing.B, path string, n int) int64 {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	spec := `{"acceleratorType":"v4-32","runtimeVersion":"tpu-ubuntu2204-base","networkConfig":{"network":"projects/acme-ml/global/networks/default","subnetwork":"projects/acme-ml/regions/us-central2/subnetworks/default"},"schedulingConfig":{"reserved":true},"labels":{"team":"llm","tpu-autoheal":"enabled","tpu-autoheal-generation":"1"},"metadata":{"autoheal-train-cmd":"(42 bytes, sha256 1f2e3d4c)","startup-script":"(15840 bytes, sha256 9a8b7c6d)"},"serviceAccount":{"email":"trainer@acme-ml.iam.gserviceaccount.com","scope":["https://www.googleapis.com/auth/cloud-platform"]}}`
	for j := 0; j < n/6; j++ {
		node := fmt.Sprintf("projects/acme-ml/locations/us-central2-b/nodes/train-%04d", j%2000)
		t0 := base.Add(time.Duration(j) * 10 * time.Second)
		id := fmt.Sprintf("ev-%d", j)
		common := fmt.Sprintf(`"node":%q,"zone":"us-central2-b","cause":"maintenance","method":"tpu.nodes.terminate","acceleratorType":"v4-32","chips":16,"logging.googleapis.com/labels":{"app":"tpu-autoheal","node":%q,"zone":"us-central2-b"}`, node, node)
		d := t0.Add(5 * time.Second)
		fmt.Fprintf(w, `{"timestamp":%q,"severity":"NOTICE","action":"recreate","reason":"TERMINATED (maintenance): recreate","message":"recreate %s: TERMINATED (maintenance): recreate","insertId":%q,"eventTime":%q,"worker":"0","phase":"done","generation":1,"outcome":"recovered","spec":%s,%s,"steps":[{"name":"get","start":%q,"durationSeconds":0.4},{"name":"save-spec","start":%q,"durationSeconds":0},{"name":"delete","start":%q,"durationSeconds":2,"operation":"op-%d-1"},{"name":"wait-delete","start":%q,"durationSeconds":118,"operation":"op-%d-1"},{"name":"create","start":%q,"durationSeconds":4,"operation":"op-%d-2"},{"name":"wait-create","start":%q,"durationSeconds":470,"operation":"op-%d-2"}],"durationSeconds":594.4}`+"\n",
			ts(d), node, id, ts(t0), spec, common, ts(d), ts(d.Add(time.Second)), ts(d.Add(time.Second)), j, ts(d.Add(3*time.Second)), j, ts(d.Add(121*time.Second)), j, ts(d.Add(125*time.Second)), j)
		for wk := 1; wk <= 3; wk++ {
			action, reason := "record", "node is READY and HEALTHY: recovered by tpu-autoheal (recovery gen 1, recreate)"
			if wk == 1 {
				action, reason = "skip", "recovery in flight: claimed by autoheal-7f3"
			}
			at := t0.Add(time.Duration(wk) * 20 * time.Second)
			fmt.Fprintf(w, `{"timestamp":%q,"severity":"INFO","action":%q,"reason":%q,"message":"%s %s: %s","insertId":"%s-w%d","eventTime":%q,"worker":"%d","generation":1,%s,"steps":[{"name":"get","start":%q,"durationSeconds":0.3}],"durationSeconds":0.3}`+"\n",
				ts(at.Add(time.Second)), action, reason, action, node, reason, id, wk, ts(at), wk, common, ts(at.Add(time.Second)))
		}
		sw := t0.Add(12 * time.Minute)
		fmt.Fprintf(w, `{"timestamp":%q,"severity":"INFO","action":"record","reason":"node is READY and HEALTHY","message":"record %s: node is READY and HEALTHY","generation":1,%s,"steps":[{"name":"get","start":%q,"durationSeconds":0.2}],"durationSeconds":0.2}`+"\n",
			ts(sw), node, common, ts(sw))
		rs := t0.Add(20 * time.Minute)
		fmt.Fprintf(w, `{"timestamp":%q,"severity":"INFO","action":"resumed","reason":"training resumed on 4 of 4 workers 18m0s after the first event","message":"resumed %s","insertId":%q,"eventTime":%q,"generation":1,"outcome":"resumed",%s,"steps":[{"name":"get-guest-attributes","start":%q,"durationSeconds":0.2},{"name":"resumed","start":%q,"durationSeconds":1080},{"name":"lost-progress","start":%q,"durationSeconds":480}],"durationSeconds":1560.2}`+"\n",
			ts(rs), node, id, ts(t0), common, ts(rs), ts(t0), ts(t0.Add(-8*time.Minute)))
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	f.Close()
	return fi.Size()
}

// benchRecords is 1,000,002, or REPORT_BENCH_RECORDS (a multiple of 6) for
// a quicker look.
func benchRecords() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("REPORT_BENCH_RECORDS"), &n); err == nil && n > 0 {
		return n
	}
	return 1_000_002
}
