package buildtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/loadtest"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// BenchmarkBuiltFunctionPeakRSS measures the peak resident memory (VmHWM)
// of the binary the buildpack would build while it is sent 10 MB Pub/Sub
// messages (Pub/Sub's maximum), 8 at a time: a body over MaxBodyBytes is
// never read further, so memory stays flat. Reported as peak-RSS-MiB.
//
//	go test -run '^$' -bench BuiltFunctionPeakRSS -benchtime 64x ./buildtest
func BenchmarkBuiltFunctionPeakRSS(b *testing.B) {
	tpu := tpufake.New(tpufake.Fleet{})
	defer tpu.Close()
	fn := startBuilt(b,
		"FIRESTORE_EMULATOR_HOST=127.0.0.1:1", // never reached: every body is oversized
		"AUTOHEAL_PROJECT=acme-ops", "AUTOHEAL_PROJECTS=acme-ml", "AUTOHEAL_RECORD_TO=stdout",
		"AUTOHEAL_TPU_ENDPOINT="+tpu.URL(),
	)
	cmd := fn.Cmd
	ctx := context.Background()

	data := bytes.Repeat([]byte("A"), 10<<20*3/4) // 10 MB once base64-encoded
	body, _ := json.Marshal(map[string]any{
		"message":      map[string]any{"data": base64.StdEncoding.EncodeToString(data), "messageId": "1"},
		"subscription": "projects/acme-ops/subscriptions/tpu-autoheal",
	})
	url := fn.URL
	for deadline := time.Now().Add(30 * time.Second); loadtest.Sequential(ctx, url, []byte("{}"), 1, time.Second) != nil; {
		if time.Now().After(deadline) {
			b.Fatal("function not answering after 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	before := peakRSS(b, cmd.Process.Pid)
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	res := loadtest.Run(ctx, loadtest.Burst{URL: url, Bodies: [][]byte{body}, Posts: b.N, Parallel: 8, Patience: time.Minute})
	b.StopTimer()
	if len(res.Unanswered) > 0 || res.Statuses[204] != b.N {
		b.Fatalf("answers %v, unanswered %d; want every post answered 204", res.Statuses, len(res.Unanswered))
	}
	b.ReportMetric(float64(peakRSS(b, cmd.Process.Pid))/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(before)/(1<<20), "idle-RSS-MiB")
}

// peakRSS is the process's VmHWM in bytes (Linux).
func peakRSS(b *testing.B, pid int) int64 {
	b.Helper()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmHWM in /proc/PID/status")
	return 0
}
