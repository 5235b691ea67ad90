// Package emulator starts the Firestore and Pub/Sub emulators that ship with
// the gcloud CLI for tests built with the emulator tag, and stops them
// without leaving anything behind.
//
// Each emulator runs in its own process group under a small shell guard that
// kills the whole group (gcloud's Python wrapper, the launcher script and the
// Java server) when Stop is called or when the test binary dies, so an
// interrupted or timed-out test run leaks no Java process. An emulator whose
// *_EMULATOR_HOST variable is already set is reused and never stopped.
//
// It is for tests only: it must never be imported by the function or the CLI.
package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kind names an emulator.
type Kind string

// Emulators.
const (
	Firestore Kind = "firestore"
	PubSub    Kind = "pubsub"
)

// Project is the project id the Pub/Sub emulator is started with; the
// emulators accept any project id in requests.
const Project = "autoheal-emulator"

// ErrNoGcloud is returned when the gcloud CLI is not installed, the only case
// in which emulator tests skip instead of failing.
var ErrNoGcloud = errors.New("gcloud CLI not installed (emulator tests need `gcloud emulators firestore` and `gcloud beta emulators pubsub`)")

// EnvVar is the variable the client libraries read to find the emulator.
func (k Kind) EnvVar() string {
	switch k {
	case Firestore:
		return "FIRESTORE_EMULATOR_HOST"
	case PubSub:
		return "PUBSUB_EMULATOR_HOST"
	}
	return ""
}

func (k Kind) args(hostPort string) ([]string, error) {
	switch k {
	case Firestore:
		return []string{"emulators", "firestore", "start", "--host-port=" + hostPort, "--quiet"}, nil
	case PubSub:
		return []string{"beta", "emulators", "pubsub", "start", "--host-port=" + hostPort, "--project=" + Project, "--quiet"}, nil
	}
	return nil, fmt.Errorf("unknown emulator kind %q", k)
}

// servingLine is what the emulator of kind k prints once it serves on host.
func (k Kind) servingLine(host string) string {
	if k == PubSub {
		_, port, _ := net.SplitHostPort(host)
		return "Server started, listening on " + port
	}
	return "API endpoint: http://" + host
}

// ready reports whether resp, the answer to readyURL, shows the emulator
// serving its API (the root answers "Ok" earlier than that).
func (k Kind) ready(resp *http.Response) bool {
	switch k {
	case Firestore:
		// A missing document is a proper API answer.
		return resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusOK
	case PubSub:
		return resp.StatusCode == http.StatusOK
	}
	return false
}

func (k Kind) readyURL(host string) string {
	switch k {
	case Firestore:
		return "http://" + host + "/v1/projects/" + Project + "/databases/(default)/documents/emulator-probe/probe"
	default:
		return "http://" + host + "/v1/projects/" + Project + "/topics"
	}
}

// Emulator is one emulator the process uses.
type Emulator struct {
	Kind Kind
	Host string // host:port, also exported in Kind.EnvVar()

	proc *process // nil when reused from the environment
}

// Owned reports whether this package started the emulator (and Stop will
// stop it).
func (e *Emulator) Owned() bool { return e.proc != nil }

// ProcessGroups are the process groups of a started emulator (none when
// reused): its guard's and gcloud's, which holds the Java server.
func (e *Emulator) ProcessGroups() []int {
	if e.proc == nil {
		return nil
	}
	return []int{e.proc.pgid, e.proc.child}
}

// StartupTimeout bounds how long Start waits for an emulator to serve.
var StartupTimeout = 90 * time.Second

// Start starts an emulator of kind k on a free loopback port, waits until it
// serves its API and sets its environment variable. When the variable is
// already set, the emulator there is reused.
func Start(ctx context.Context, k Kind) (*Emulator, error) {
	if _, err := k.args(""); err != nil {
		return nil, err
	}
	if host := os.Getenv(k.EnvVar()); host != "" {
		return &Emulator{Kind: k, Host: host}, nil
	}
	gcloud, err := exec.LookPath("gcloud")
	if err != nil {
		return nil, ErrNoGcloud
	}
	// The port is chosen before the emulator binds it, so something else
	// can take it in between (another package's emulator, a server of a
	// test). An emulator that cannot bind says so and exits: that, and only
	// that, is tried again on another port.
	var (
		host string
		p    *process
	)
	for attempt := 1; ; attempt++ {
		host, err = pickAddr()
		if err != nil {
			return nil, fmt.Errorf("start %s emulator: %w", k, err)
		}
		args, _ := k.args(host)
		p, err = startGroup(gcloud, args)
		if err != nil {
			return nil, fmt.Errorf("start %s emulator: %w", k, err)
		}
		err = waitReady(ctx, k, host, p)
		if err == nil {
			break
		}
		out := p.output()
		taken := p.printed("Address already in use") || p.printed("BindException")
		stopErr := p.stop()
		if attempt < bindAttempts && taken && ctx.Err() == nil {
			continue
		}
		return nil, errors.Join(fmt.Errorf("start %s emulator on %s (attempt %d): %w\n%s", k, host, attempt, err, out), stopErr)
	}
	e := &Emulator{Kind: k, Host: host, proc: p}
	if err := os.Setenv(k.EnvVar(), host); err != nil {
		return nil, errors.Join(err, p.stop())
	}
	return e, nil
}

// Stop stops a started emulator's whole process group, waits until none of
// its processes is left, and unsets its variable. It does nothing for a
// reused emulator.
func (e *Emulator) Stop() error {
	if e.proc == nil {
		return nil
	}
	if os.Getenv(e.Kind.EnvVar()) == e.Host {
		os.Unsetenv(e.Kind.EnvVar())
	}
	return e.proc.stop()
}

// StartFirestore starts (or reuses) the Firestore emulator; stop is never nil.
func StartFirestore(ctx context.Context) (host string, stop func(), err error) {
	return startFunc(ctx, Firestore)
}

// StartPubSub starts (or reuses) the Pub/Sub emulator; stop is never nil.
func StartPubSub(ctx context.Context) (host string, stop func(), err error) {
	return startFunc(ctx, PubSub)
}

func startFunc(ctx context.Context, k Kind) (string, func(), error) {
	e, err := Start(ctx, k)
	if err != nil {
		return "", func() {}, err
	}
	return e.Host, func() {
		if err := e.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop %s emulator: %v\n", k, err)
		}
	}, nil
}

// bindAttempts bounds how many ports Start tries.
const bindAttempts = 4

// pickAddr chooses the port Start tries; tests replace it.
var pickAddr = freeAddr

// freeAddr is a loopback host:port nobody listens on right now, chosen
// below the kernel's ephemeral range when it can be: a port from that
// range (what port 0 gives) can be taken, before the emulator binds it,
// as the source port of any outgoing connection or by a server another
// process binds to port 0.
func freeAddr() (string, error) {
	lo := ephemeralLow()
	const base = 20000
	if lo > base+1000 {
		span := lo - base
		start := base + int(time.Now().UnixNano()%int64(span))
		for i := 0; i < 64; i++ {
			port := base + (start-base+i*7919)%span
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err == nil {
				addr := l.Addr().String()
				l.Close()
				return addr, nil
			}
		}
	}
	return anyFreeAddr()
}

// ephemeralLow is the lowest port of the kernel's ephemeral range, or 0
// when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	lo, _ := strconv.Atoi(f[0])
	return lo
}

// anyFreeAddr is a loopback host:port the kernel chose as free.
func anyFreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func waitReady(ctx context.Context, k Kind, host string, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, StartupTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	url := k.readyURL(host)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			// An answer from the port is not enough: another process may
			// hold it (ours then fails to bind). Our emulator's own
			// output must say it serves there.
			if k.ready(resp) && p.printed(k.servingLine(host)) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not serving after %s: %w", StartupTimeout, ctx.Err())
		case <-p.exited:
			return fmt.Errorf("emulator exited before serving: %v", p.waitErr)
		default:
		}
		// The guard outlives the emulator (it waits on its stdin), so an
		// emulator that exited is seen by gcloud, which runs it, being gone.
		if p.child > 0 && !pidAlive(p.child) {
			return errors.New("emulator exited before serving")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not serving after %s: %w", StartupTimeout, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tail keeps the last bytes an emulator printed, for error messages, and
// its first bytes, where it says it serves (or cannot bind): the emulators
// log a stack trace for every NOT_FOUND, the readiness probe's included,
// so under load those lines leave the tail before they are looked for.
// Keeping it all would only cost memory.
type tail struct {
	mu   sync.Mutex
	head []byte
	buf  []byte
}

const (
	tailBytes = 8 << 10
	headBytes = 64 << 10
)

// contains reports whether s was printed within the first headBytes or
// is in the tail.
func (t *tail) contains(s string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Contains(string(t.head), s) || strings.Contains(string(t.buf), s)
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := headBytes - len(t.head); room > 0 {
		t.head = append(t.head, b[:min(room, len(b))]...)
	}
	t.buf = append(t.buf, b...)
	if len(t.buf) > tailBytes {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
