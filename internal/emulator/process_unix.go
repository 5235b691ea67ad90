//go:build unix

package emulator

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// guardScript runs the emulator in the background, reports its pid on fd 3
// and waits for its stdin to close: Stop closes it, and so does the kernel
// when the test binary dies (a panic, a -timeout, a signal). The guard then
// kills the emulator's process group (SIGTERM, then SIGKILL after 2 s: an
// orphaned Java server can hang in its shutdown hooks) and its own. Two groups, because gcloud
// makes itself a process-group leader: the guard's group holds only the
// guard, gcloud's group holds gcloud, the launcher script and the Java server.
const guardScript = `"$@" </dev/null 3>&- &
child=$!
echo "$child" >&3
exec 3>&-
read -r _
kill -TERM -- "-$child" "$child" 2>/dev/null
i=0
while [ "$i" -lt 2 ] && kill -0 -- "-$child" 2>/dev/null; do sleep 1; i=$((i+1)); done
kill -KILL -- "-$child" "$child" 2>/dev/null
kill -KILL -- "-$$"`

// process is a started emulator: the guard's process group and the
// emulator's.
type process struct {
	cmd     *exec.Cmd
	pgid    int      // the guard's group
	child   int      // gcloud's pid, which is also its group id
	stdin   *os.File // write end of the guard's stdin
	out     *tail
	exited  chan struct{}
	waitErr error
}

func startGroup(name string, args []string) (*process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("guard pipe: %w", err)
	}
	pidR, pidW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("guard pipe: %w", err)
	}
	// bash, not sh: dash's kill cannot signal a process group. gcloud's
	// emulator launchers are bash scripts, so bash is there.
	bash, err := exec.LookPath("bash")
	if err != nil {
		inR.Close()
		inW.Close()
		pidR.Close()
		pidW.Close()
		return nil, fmt.Errorf("emulator guard needs bash: %w", err)
	}
	out := &tail{}
	cmd := exec.Command(bash, append([]string{"-c", guardScript, "emulator-guard", name}, args...)...)
	cmd.Stdin = inR
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.ExtraFiles = []*os.File{pidW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The emulator inherits the output pipe; don't let Wait hang on it once
	// the groups are gone.
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Start()
	inR.Close()
	pidW.Close()
	if err != nil {
		inW.Close()
		pidR.Close()
		return nil, fmt.Errorf("run %s: %w", name, err)
	}
	p := &process{cmd: cmd, pgid: cmd.Process.Pid, stdin: inW, out: out, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	b, err := io.ReadAll(io.LimitReader(pidR, 64))
	pidR.Close()
	if p.child, _ = strconv.Atoi(strings.TrimSpace(string(b))); err != nil || p.child <= 0 {
		return nil, errors.Join(fmt.Errorf("run %s: guard reported pid %q: %v", name, b, err), p.stop())
	}
	return p, nil
}

func (p *process) output() string { return p.out.String() }

// printed reports whether the emulator printed s (see tail.contains).
func (p *process) printed(s string) bool { return p.out.contains(s) }

// stop closes the guard's stdin, sends SIGTERM to both groups, and SIGKILL
// if anything is left after a grace period; it returns once no live process
// of either group remains.
func (p *process) stop() error {
	p.stdin.Close()
	groups := []int{p.pgid}
	if p.child > 0 {
		groups = append(groups, p.child)
	}
	signalGroups(groups, syscall.SIGTERM)
	// The emulators keep their data in memory; there is nothing to flush,
	// and the Java servers can take long to honour SIGTERM.
	deadline := time.Now().Add(2 * time.Second)
	killed := false
	for anyAlive(groups) {
		if time.Now().After(deadline) {
			if killed {
				return fmt.Errorf("process groups %v still alive after SIGKILL", groups)
			}
			signalGroups(groups, syscall.SIGKILL)
			killed = true
			deadline = time.Now().Add(5 * time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
	<-p.exited
	return nil
}

func signalGroups(groups []int, sig syscall.Signal) {
	for _, g := range groups {
		syscall.Kill(-g, sig)
	}
}

func anyAlive(groups []int) bool {
	for _, g := range groups {
		if groupAlive(g) {
			return true
		}
	}
	return false
}

// groupAlive reports whether any live (non-zombie) process of group pgid
// exists. Zombies are skipped: in a container whose init does not reap
// orphans, a killed Java server can stay a zombie forever, and it holds
// nothing. Where /proc is missing, kill(2) answers, zombies included.
func groupAlive(pgid int) bool {
	if pids, err := groupMembers(pgid); err == nil {
		return len(pids) > 0
	}
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// groupMembers lists the live processes of group pgid from /proc.
func groupMembers(pgid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces and parens.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// pidAlive reports whether process pid exists and is not a zombie. Where
// /proc is missing, kill(2) answers, zombies included.
func pidAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if _, statErr := os.Stat("/proc/self/stat"); statErr != nil {
			err := syscall.Kill(pid, 0)
			return err == nil || errors.Is(err, syscall.EPERM)
		}
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return true
	}
	f := strings.Fields(s[i+1:])
	return len(f) == 0 || (f[0] != "Z" && f[0] != "X")
}
