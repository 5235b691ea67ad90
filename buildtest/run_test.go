package buildtest

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tpu-autoheal/autoheal/function"
	"github.com/tpu-autoheal/autoheal/internal/emulator"
)

// lockedBuffer collects the function's output while it runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// built is the binary the buildpack would build from the deployed source,
// running as Cloud Run runs it: PORT, FUNCTION_TARGET and the given
// AUTOHEAL_* (and emulator) variables, nothing else from the environment.
type built struct {
	URL            string // http://127.0.0.1:PORT/
	Cmd            *exec.Cmd
	Stdout, Stderr *lockedBuffer
}

// startBuilt builds and starts the function; it is stopped when the test
// ends. It may not be listening yet when startBuilt returns.
func startBuilt(t testing.TB, env ...string) *built {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "function")
	goCmd(t, layout(t), "build", "-o", bin, ".")
	port := emulator.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append([]string{"PORT=" + port, "FUNCTION_TARGET=" + function.EntryPoint}, env...)
	b := &built{URL: "http://127.0.0.1:" + port + "/", Cmd: cmd, Stdout: &lockedBuffer{}, Stderr: &lockedBuffer{}}
	cmd.Stdout, cmd.Stderr = b.Stdout, b.Stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	return b
}
