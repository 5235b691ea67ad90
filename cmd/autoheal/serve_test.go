package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestServeRejectsBadConfigByName(t *testing.T) {
	t.Setenv("AUTOHEAL_PROJECT", "acme-ml")
	t.Setenv("AUTOHEAL_PROJECTS", "acme-ml")
	t.Setenv("AUTOHEAL_RECORD_TO", "carrier-pigeon")
	r := runCLI(t, nil, "serve", "--port", "0")
	var u *usageError
	if !errors.As(r.err, &u) || !strings.Contains(r.err.Error(), "RECORD_TO") {
		t.Errorf("serve with a bad AUTOHEAL_RECORD_TO = %v, want a usage error naming it", r.err)
	}
}

// startServe runs `autoheal serve` on a free port with a simulated TPU API
// and a Firestore host nothing listens on (the tests' entries never reach
// the ledger), and returns its URL and a stop function that cancels it and
// returns run's error.
func startServe(t *testing.T) (url string, stop func() error) {
	t.Helper()
	t.Setenv("AUTOHEAL_PROJECT", "acme-ml")
	t.Setenv("AUTOHEAL_PROJECTS", "acme-ml")
	t.Setenv("AUTOHEAL_RECORD_TO", "stdout")
	t.Setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:1")
	tpuSrv := tpufake.New(tpufake.Fleet{})
	t.Cleanup(tpuSrv.Close)
	t.Setenv("AUTOHEAL_TPU_ENDPOINT", tpuSrv.URL())
	t.Setenv("FUNCTION_TARGET", "")

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve", "--port", "0"}, strings.NewReader(""), io.Discard, &stderr) }()

	listening := regexp.MustCompile(`listening on (http://\S+)`)
	for deadline := time.Now().Add(10 * time.Second); url == ""; {
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve returned before listening: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not listening after 10s:\n%s", stderr.String())
		}
	}
	return url, func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(40 * time.Second):
			return errors.New("serve did not return after its context was cancelled")
		}
	}
}

// TestServeAnswersPushAndStopsGracefully serves the registered function, sends
// it a Pub/Sub push body it must reject (so no Google API is called), and
// cancels: run must return nil after draining.
func TestServeAnswersPushAndStopsGracefully(t *testing.T) {
	url, stop := startServe(t)

	// "not json" in base64, as a push subscription would deliver it.
	body := `{"message":{"data":"bm90IGpzb24=","messageId":"1","publishTime":"2026-11-20T03:44:38Z"},"subscription":"projects/acme-ml/subscriptions/s"}`
	resp, err := http.Post(url+"/projects/acme-ml/topics/tpu-events", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Errorf("push of a malformed entry answered %d, want 2xx (acknowledged, never retried)", resp.StatusCode)
	}
	if err := stop(); err != nil {
		t.Errorf("serve after cancel = %v, want nil (graceful shutdown)", err)
	}
}
