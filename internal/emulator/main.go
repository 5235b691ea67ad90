package emulator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
)

var (
	mainMu      sync.Mutex
	mainStarted = map[Kind]*Emulator{}
	mainSkip    = map[Kind]error{}
)

// Main starts the emulators of the given kinds, runs the tests and stops the
// emulators: one emulator per test binary, shared by all its tests. Use it
// as
//
//	func TestMain(m *testing.M) { os.Exit(emulator.Main(m, emulator.Firestore)) }
//
// and call Require in each test. When gcloud is not installed the tests
// still run and Require skips them; any other start-up failure fails the
// binary. SIGINT and SIGTERM stop the emulators before exiting.
func Main(m *testing.M, kinds ...Kind) int {
	ctx := context.Background()
	var started []*Emulator
	stopAll := func() {
		for _, e := range started {
			if err := e.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "emulator: stop %s: %v\n", e.Kind, err)
			}
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		s, ok := <-sig
		if !ok {
			return
		}
		mainMu.Lock()
		stopAll()
		fmt.Fprintf(os.Stderr, "emulator: %v: emulators stopped\n", s)
		os.Exit(2)
	}()

	// Start them side by side: each takes seconds, mostly JVM start-up.
	type result struct {
		e   *Emulator
		err error
	}
	results := make([]result, len(kinds))
	var wg sync.WaitGroup
	for i, k := range kinds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := Start(ctx, k)
			results[i] = result{e, err}
		}()
	}
	wg.Wait()
	mainMu.Lock()
	var failed []error
	for i, k := range kinds {
		e, err := results[i].e, results[i].err
		switch {
		case errors.Is(err, ErrNoGcloud) && os.Getenv("CI") == "true":
			// CI must run every suite: a skip there hides a missing install.
			failed = append(failed, fmt.Errorf("CI=true: %w", err))
		case errors.Is(err, ErrNoGcloud):
			fmt.Fprintf(os.Stderr, "emulator: SKIPPING the %s suites of this package: %v\n", kindName(k), err)
			mainSkip[k] = err
		case err != nil:
			failed = append(failed, err)
		default:
			started = append(started, e)
			mainStarted[k] = e
		}
	}
	if len(failed) > 0 {
		stopAll()
		mainMu.Unlock()
		fmt.Fprintf(os.Stderr, "emulator: %v\n", errors.Join(failed...))
		return 1
	}
	mainMu.Unlock()
	code := m.Run()
	mainMu.Lock()
	defer mainMu.Unlock()
	stopAll()
	return code
}

// Require returns the host of the emulator Main started (or reused) for k.
// It skips the test when gcloud is not installed and fails it when Main was
// not asked for k.
func Require(t testing.TB, k Kind) string {
	t.Helper()
	mainMu.Lock()
	defer mainMu.Unlock()
	if err, ok := mainSkip[k]; ok {
		t.Skipf("skipping: %v", err)
	}
	if e, ok := mainStarted[k]; ok {
		return e.Host
	}
	t.Fatalf("the %s emulator is not running: call emulator.Main(m, emulator.%s) from TestMain", k, kindName(k))
	return ""
}

func kindName(k Kind) string {
	switch k {
	case Firestore:
		return "Firestore"
	case PubSub:
		return "PubSub"
	}
	return string(k)
}

// FreePort is a loopback port nobody listens on right now, for a test
// server started in another process; it fails t when there is none.
func FreePort(t testing.TB) string {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	return port
}
