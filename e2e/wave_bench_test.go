//go:build emulator

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	tpu "google.golang.org/api/tpu/v2"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// Wave benchmark (issue #14): pods broken at once, recovered through the
// Pub/Sub emulator and `autoheal serve` with the module's defaults, against
// the simulated control plane with realistic operation times, in real time:
//
//	go test -tags emulator -run '^$' -bench Wave -benchtime 1x -timeout 30m ./e2e/
//
// It reports the time from the wave (entries published) until the last pod
// is READY with our generation label, in recreate times (delete + create
// operation durations), and for 128 pods in one zone that the storm breaker
// stops at its default. WAVE_SWEEP_PHASE (default 30s) is how long after
// the wave the first sweep comes; WAVE_PODS (default 1,8,32,128) the wave
// sizes. The served function kicks a follower through the emulator topic
// (AUTOHEAL_KICK_TOPIC, as the module sets it), so the phase should not
// matter. Nothing is asserted on time: the numbers go in the README.
const (
	waveDelete   = 10 * time.Second
	waveCreate   = 20 * time.Second
	waveRecreate = waveDelete + waveCreate
	waveSweep    = time.Minute // Cloud Scheduler's "* * * * *"
	waveWorkers  = 4           // entries per pod (one per worker), each delivered twice
)

func BenchmarkWave(b *testing.B) {
	startEmulators(b)
	bin := buildCLI(b)
	phase := envDuration("WAVE_SWEEP_PHASE", 30*time.Second) // first sweep this long after the wave
	pods := []int{1, 8, 32, 128}
	if v := os.Getenv("WAVE_PODS"); v != "" { // e.g. WAVE_PODS=1,8,32
		pods = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("WAVE_PODS=%q: want pod counts such as 1,8,32", v)
			}
			pods = append(pods, n)
		}
	}
	for _, n := range pods {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			for range b.N {
				wave(b, bin, n, phase)
			}
		})
	}
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

func wave(b *testing.B, bin string, n int, phase time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var f tpufake.Fleet
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s/nodes/wave-%03d", parent, i)
		f.Nodes = append(f.Nodes, &tpu.Node{
			Name: names[i], AcceleratorType: "v4-512", RuntimeVersion: "tpu-ubuntu2204-base",
			State: "TERMINATED", Health: "UNHEALTHY_MAINTENANCE",
			Labels:   map[string]string{"tpu-autoheal": "enabled"},
			Metadata: map[string]string{"autoheal-train-cmd": "python3 train.py"},
		})
	}
	srv := tpufake.New(f, tpufake.WithOperationDelay("delete", waveDelete), tpufake.WithOperationDelay("create", waveCreate))
	defer srv.Close()
	script := filepath.Join(b.TempDir(), "resume.sh")
	if err := os.WriteFile(script, []byte(startupScript), 0o644); err != nil {
		b.Fatal(err)
	}
	suffix := fmt.Sprint(time.Now().UnixNano() % 1e9)
	tp := topic + "-" + suffix
	// The module's defaults: only what points the function at the
	// emulators and the fake is set, and the kick topic, which the module
	// sets to its events topic.
	addr, out := serve(b, bin, []string{
		"AUTOHEAL_PROJECT=" + project, "AUTOHEAL_PROJECTS=" + project, "AUTOHEAL_ZONES=" + zone,
		"AUTOHEAL_TPU_ENDPOINT=" + srv.URL(), "AUTOHEAL_RECORD_TO=stdout", "AUTOHEAL_STARTUP_SCRIPT=" + script,
		"AUTOHEAL_SWEEP_MIN_INTERVAL=0s", // sweeps every few seconds here, not every minute
		fmt.Sprintf("AUTOHEAL_FIRESTORE_DATABASE=wave-%d", time.Now().UnixNano()%1e9),
		"AUTOHEAL_KICK_TOPIC=" + tp,
	})
	// Pushes go through a counter of follow kicks and their answers.
	kicks := &kickCounter{target: "http://" + addr}
	proxy := httptest.NewServer(kicks)
	defer proxy.Close()
	client, err := pubsub.NewClient(ctx, project)
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: tp}); err != nil {
		b.Fatal(err)
	}
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/" + project + "/subscriptions/wave-" + suffix, Topic: tp,
		PushConfig:         &pubsubpb.PushConfig{PushEndpoint: proxy.URL + "/" + tp},
		AckDeadlineSeconds: 60,
		RetryPolicy:        &pubsubpb.RetryPolicy{MinimumBackoff: durationpb.New(10 * time.Second), MaximumBackoff: durationpb.New(600 * time.Second)},
	}); err != nil {
		b.Fatal(err)
	}

	now := time.Now()
	var in []string
	for i, name := range names {
		for w := range waveWorkers {
			in = append(in, entry(fmt.Sprintf("wave-%s-%d-w%d", suffix, i, w), name, fmt.Sprint(w), "tpu.nodes.terminate", now))
		}
	}
	file := filepath.Join(b.TempDir(), "wave.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(in, "\n")+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	for range 2 {
		publishTo(b, bin, tp, file)
	}
	// Cloud Scheduler: a sweep every minute, the first phase after the wave.
	go func() {
		body, _ := json.Marshal(map[string]any{"message": map[string]any{
			"data": base64.StdEncoding.EncodeToString([]byte(events.SweepMessage)), "messageId": "sweep",
		}, "subscription": "projects/" + project + "/subscriptions/scheduler"})
		next := t0.Add(phase)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(next)):
			}
			go func() {
				resp, err := http.Post("http://"+addr+"/"+tp, "application/json", bytes.NewReader(body))
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
			next = next.Add(waveSweep)
		}
	}()

	want := n
	if n > remediate.DefaultBreakerLimit {
		want = remediate.DefaultBreakerLimit
	}
	var last, firstDelete time.Duration
	for {
		ready := 0
		for _, node := range srv.Fleet().Nodes {
			if node.State == "READY" && node.Labels[remediate.GenerationLabel] != "" {
				ready++
			}
		}
		if firstDelete == 0 && srv.Count("nodes.delete", "") >= want {
			firstDelete = time.Since(t0)
		}
		if ready >= want {
			last = time.Since(t0)
			break
		}
		if ctx.Err() != nil {
			all := out.all()
			b.Fatalf("%d pods: %d READY after %v; deletes %d, creates %d; last lines of serve:\n%s", n, ready, time.Since(t0),
				srv.Count("nodes.delete", ""), srv.Count("nodes.create", ""), strings.Join(all[max(0, len(all)-15):], "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	rt := float64(last) / float64(waveRecreate)
	b.ReportMetric(rt, "recreate-times")
	b.ReportMetric(last.Seconds(), "s-to-last-READY")
	// A follower answers once nothing is left to follow (at most
	// AUTOHEAL_SWEEP_FOLLOW, 50 s): wait for those answers.
	k, kNot2xx, kPending := kicks.counts(55 * time.Second)
	line := fmt.Sprintf("wave: %d pods, all %d deletes issued after %v, last READY after %v = %.2f recreate times (delete %v + create %v; first sweep %v after the wave, then every %v); %d follow kicks delivered, %d answered non-2xx, %d unanswered",
		n, want, firstDelete.Round(time.Millisecond), last.Round(time.Millisecond), rt, waveDelete, waveCreate, phase, waveSweep, k, kNot2xx, kPending)
	if n > remediate.DefaultBreakerLimit {
		// The breaker: the rest are not recreated, and it says so once.
		time.Sleep(waveSweep + 5*time.Second)
		errors, deletes := 0, srv.Count("nodes.delete", "")
		for _, l := range out.all() {
			if strings.Contains(l, `"ERROR"`) && strings.Contains(strings.ToLower(l), "breaker") {
				errors++
			}
		}
		line += fmt.Sprintf("; breaker: %d deleted of %d, %d ERROR records naming the breaker", deletes, n, errors)
	}
	b.Log(line)
	fmt.Println(line)
	if dir := os.Getenv("WAVE_LOG_DIR"); dir != "" { // the records, to see where the time went
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("wave-%d.jsonl", n)), []byte(strings.Join(out.all(), "\n")+"\n"), 0o644); err != nil {
			b.Error(err)
		}
	}
}

// kickCounter forwards push requests to the served function unchanged and
// counts those carrying the follow kick, and the ones not answered 2xx
// (which Pub/Sub would redeliver, and in the end dead-letter).
type kickCounter struct {
	target                string
	mu                    sync.Mutex
	kicks, not2x, pending int
}

func (k *kickCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	payload, _, _ := events.Unwrap(body)
	kick := events.IsFollow(payload)
	if kick {
		k.mu.Lock()
		k.kicks++
		k.pending++
		k.mu.Unlock()
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, k.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req.Header = r.Header.Clone()
	status := http.StatusBadGateway
	if resp, err := http.DefaultClient.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		status = resp.StatusCode
	}
	if kick {
		k.mu.Lock()
		k.pending--
		if status/100 != 2 {
			k.not2x++
		}
		k.mu.Unlock()
	}
	w.WriteHeader(status)
}

// counts waits up to wait for the kicks still being followed to be
// answered, then says how many arrived and how many were not answered 2xx.
func (k *kickCounter) counts(wait time.Duration) (kicks, not2xx, pending int) {
	deadline := time.Now().Add(wait)
	for {
		k.mu.Lock()
		kicks, not2xx, pending = k.kicks, k.not2x, k.pending
		k.mu.Unlock()
		if pending == 0 || time.Now().After(deadline) {
			return kicks, not2xx, pending
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func publishTo(b *testing.B, bin, topic, file string) {
	b.Helper()
	cmd := exec.Command(bin, "publish", "--topic", topic, file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if _, err := cmd.Output(); err != nil {
		b.Fatalf("autoheal publish: %v\n%s", err, stderr.String())
	}
}
