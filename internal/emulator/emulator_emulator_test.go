//go:build emulator

package emulator_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/emulator"
)

func TestMain(m *testing.M) {
	if os.Getenv("EMULATOR_HELPER_ABANDON") == "1" {
		abandonEmulator()
		return
	}
	os.Exit(emulator.Main(m, emulator.Firestore, emulator.PubSub))
}

// abandonEmulator starts an emulator, prints its process group and exits
// without stopping it, as a test binary killed by -timeout would.
func abandonEmulator() {
	os.Unsetenv("FIRESTORE_EMULATOR_HOST")
	e, err := emulator.Start(context.Background(), emulator.Firestore)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(e.ProcessGroups())
	os.Exit(0)
}

func TestMainStartsServingEmulators(t *testing.T) {
	for _, tc := range []struct {
		kind   emulator.Kind
		method string
		path   string
	}{
		{emulator.Firestore, http.MethodGet, "/v1/projects/p/databases/ledger/documents/c/missing"},
		{emulator.PubSub, http.MethodPut, "/v1/projects/p/topics/t-" + strconv.FormatInt(time.Now().UnixNano(), 36)},
	} {
		host := emulator.Require(t, tc.kind)
		if got := os.Getenv(tc.kind.EnvVar()); got != host {
			t.Errorf("%s = %q; want %q", tc.kind.EnvVar(), got, host)
		}
		req, _ := http.NewRequest(tc.method, "http://"+host+tc.path, bytes.NewReader(nil))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s emulator request: %v", tc.kind, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s emulator %s %s: status %d; want an API answer (200/404)", tc.kind, tc.method, tc.path, resp.StatusCode)
		}
	}
}

func TestStopLeavesNoProcessBehind(t *testing.T) {
	emulator.Require(t, emulator.Firestore)
	t.Setenv("FIRESTORE_EMULATOR_HOST", "") // force a second, owned emulator
	e, err := emulator.Start(context.Background(), emulator.Firestore)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if !e.Owned() {
		t.Fatal("Start with no FIRESTORE_EMULATOR_HOST returned a reused emulator")
	}
	groups := e.ProcessGroups()
	if got := pgrep(t, groups...); !strings.Contains(got, "java") {
		t.Errorf("process groups %v before Stop:\n%s\nwant the Java emulator in them", groups, got)
	}
	if err := e.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if got := pgrep(t, groups...); got != "" {
		t.Errorf("process groups %v after Stop:\n%s\nwant no process", groups, got)
	}
	if got := os.Getenv("FIRESTORE_EMULATOR_HOST"); got != "" {
		t.Errorf("FIRESTORE_EMULATOR_HOST after Stop = %q; want unset", got)
	}
}

func TestReusedEmulatorIsNotStopped(t *testing.T) {
	host := emulator.Require(t, emulator.Firestore)
	e, err := emulator.Start(context.Background(), emulator.Firestore)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if e.Owned() || e.Host != host {
		t.Fatalf("Start with FIRESTORE_EMULATOR_HOST set: owned %v host %q; want reuse of %q", e.Owned(), e.Host, host)
	}
	if err := e.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	resp, err := http.Get("http://" + host + "/")
	if err != nil {
		t.Fatalf("reused emulator after Stop: %v; want it still serving", err)
	}
	resp.Body.Close()
}

func TestDyingTestBinaryLeavesNoProcessBehind(t *testing.T) {
	emulator.Require(t, emulator.Firestore)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "EMULATOR_HELPER_ABANDON=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var groups []int
	for _, f := range strings.Fields(strings.Trim(strings.TrimSpace(string(out)), "[]")) {
		g, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("helper output %q: want [pgid pgid]", out)
		}
		groups = append(groups, g)
	}
	if len(groups) != 2 {
		t.Fatalf("helper output %q: want two process groups", out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := pgrep(t, groups...)
		if got == "" {
			return
		}
		if time.Now().After(deadline) {
			for _, g := range groups {
				exec.Command("kill", "-KILL", "--", "-"+strconv.Itoa(g)).Run()
			}
			t.Fatalf("process groups %v 20s after their test binary exited:\n%s\nwant no process", groups, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pgrep lists the live processes of the process groups, as pgrep(1) does;
// zombies (which pgrep still lists) are left out.
func pgrep(t *testing.T, groups ...int) string {
	t.Helper()
	var ids []string
	for _, g := range groups {
		ids = append(ids, strconv.Itoa(g))
	}
	out, err := exec.Command("pgrep", "-a", "-g", strings.Join(ids, ",")).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
			return "" // no process matched
		}
		t.Fatalf("pgrep -g %v: %v", groups, err)
	}
	var live []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pid := strings.Fields(line)[0]
		if b, err := os.ReadFile("/proc/" + pid + "/stat"); err == nil {
			if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && f[0] == "Z" {
				continue
			}
		}
		live = append(live, line)
	}
	return strings.Join(live, "\n")
}
