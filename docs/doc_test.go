// Package docs_test runs the documentation: every command block of
// README.md and docs/*.md marked as runnable is run with bash, with autoheal
// built from this tree first on the PATH, and its exit code and (where a
// sample output follows it) its output are checked. So a sample can never
// drift from the program, and a recipe that stopped working fails here.
//
// A block is marked by an HTML comment on the line before its fence, which
// a reader of the rendered page does not see:
//
//	<!-- doctest -->              run it; it must exit 0
//	<!-- doctest exit=3 -->       run it; it must exit 3
//	<!-- doctest emulator -->     run it only under -tags emulator (Firestore emulator running)
//	<!-- doctest output -->       the expected standard output of the runnable block above it;
//	                              a line "..." stands for any number of lines
//	<!-- doctest skip: WHY -->    a block that calls autoheal but cannot run here, and why
//
// Every sh block that calls autoheal must carry one of these, so that a new
// recipe is either run or says why it is not.
//
// The blocks of one page run in order in one scratch directory that holds
// the repository's top-level files (as links), so a block may use testdata/
// and leave files for the next block without touching the tree. This test
// must never need credentials or the network: blocks that do are skipped or
// run against the emulators.
package docs_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// repoRoot is where README.md is, seen from this package's directory.
const repoRoot = ".."

// blockTimeout bounds one block: the slowest, Try it locally, starts two
// emulators (about a minute on a loaded machine) and waits at most 60 s per step.
const blockTimeout = 6 * time.Minute

// marker is what a doctest comment says about the block after it.
type marker struct {
	run      bool   // doctest, doctest exit=N, doctest emulator
	emulator bool   // run only with -tags emulator
	exit     int    // the exit code the block must end with
	output   bool   // this block is the sample output of the runnable block before it
	skip     string // why a block calling autoheal is not run
}

// block is one fenced code block of a page.
type block struct {
	file   string // relative to the repository root
	line   int    // of the opening fence, 1-based
	info   string // the fence's info string: sh, text, ...
	text   string // the content, indentation of the fence removed
	mark   *marker
	sample *block // the sample output that follows a runnable block
}

func (b *block) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

var (
	markerRE = regexp.MustCompile(`^\s*<!--\s*doctest(?:\s+(.*?))?\s*-->\s*$`)
	fenceRE  = regexp.MustCompile("^(\\s*)```\\s*([\\w-]*)\\s*$")
	// callsAutoheal finds a command line that runs autoheal (autoheal ...,
	// "$dir/autoheal" ..., go run ./cmd/autoheal ...), not the word in a
	// label or a resource name (tpu-autoheal=enabled, tpu-autoheal-sweep).
	callsAutoheal = regexp.MustCompile(`(?m)(^|[\s|;&(])("?[^\s"]*/)?autoheal"?\s+[a-z-]`)
)

func parseMarker(s string) (*marker, error) {
	m := &marker{}
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		m.run = true
	case s == "emulator":
		m.run, m.emulator = true, true
	case s == "output":
		m.output = true
	case strings.HasPrefix(s, "exit="):
		n, err := strconv.Atoi(strings.TrimPrefix(s, "exit="))
		if err != nil || n < 0 || n > 255 {
			return nil, fmt.Errorf("doctest %q: want exit=N with N from 0 to 255", s)
		}
		m.run, m.exit = true, n
	case strings.HasPrefix(s, "skip:") && strings.TrimSpace(strings.TrimPrefix(s, "skip:")) != "":
		m.skip = strings.TrimSpace(strings.TrimPrefix(s, "skip:"))
	default:
		return nil, fmt.Errorf("doctest %q: want nothing, exit=N, emulator, output or skip: WHY", s)
	}
	return m, nil
}

// parsePage returns the fenced blocks of a Markdown page with their markers,
// each sample attached to the runnable block before it.
func parsePage(name string, data []byte) ([]*block, error) {
	var blocks []*block
	var pending *marker
	pendingLine := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	lineNo := 0
	var cur *block
	var indent string
	var body []string
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if cur != nil {
			if strings.TrimSpace(line) == "```" {
				cur.text = strings.Join(body, "\n")
				blocks = append(blocks, cur)
				cur, body = nil, nil
				continue
			}
			body = append(body, strings.TrimPrefix(line, indent))
			continue
		}
		if m := markerRE.FindStringSubmatch(line); m != nil {
			if pending != nil {
				return nil, fmt.Errorf("%s:%d: doctest comment not followed by a code block", name, pendingLine)
			}
			mk, err := parseMarker(m[1])
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", name, lineNo, err)
			}
			pending, pendingLine = mk, lineNo
			continue
		}
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			cur = &block{file: name, line: lineNo, info: m[2], mark: pending}
			indent = m[1]
			pending = nil
			continue
		}
		if pending != nil && strings.TrimSpace(line) != "" {
			return nil, fmt.Errorf("%s:%d: doctest comment not followed by a code block", name, pendingLine)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: code block never closed", name, cur.line)
	}
	if pending != nil {
		return nil, fmt.Errorf("%s:%d: doctest comment not followed by a code block", name, pendingLine)
	}
	for i, b := range blocks {
		if b.mark == nil || !b.mark.output {
			continue
		}
		if i == 0 || blocks[i-1].mark == nil || !blocks[i-1].mark.run {
			return nil, fmt.Errorf("%s: a doctest output block must follow a runnable block", b)
		}
		blocks[i-1].sample = b
	}
	return blocks, nil
}

// pages are the documents checked: README.md and every page in docs/.
func pages(t *testing.T) []string {
	t.Helper()
	names := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		rel, err := filepath.Rel(repoRoot, d)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, filepath.ToSlash(rel))
	}
	return names
}

func readPage(t *testing.T, name string) []*block {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parsePage(name, data)
	if err != nil {
		t.Fatal(err)
	}
	return blocks
}

// TestEveryAutohealBlockIsMarked: a recipe that calls autoheal is run by
// TestDocsRun, or says why it cannot be.
func TestEveryAutohealBlockIsMarked(t *testing.T) {
	for _, name := range pages(t) {
		for _, b := range readPage(t, name) {
			if b.info != "sh" && b.info != "bash" && b.info != "console" {
				continue
			}
			if b.mark == nil && callsAutoheal.MatchString(b.text) {
				t.Errorf("%s: a command block that calls autoheal has no doctest mark: put <!-- doctest --> (or exit=N, emulator, or skip: WHY) on the line before its fence", b)
			}
		}
	}
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// autohealBin builds ./cmd/autoheal once per test binary into a directory
// that TestDocsRun puts first on the PATH.
func autohealBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "autoheal-doctest-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, "autoheal"), "./cmd/autoheal")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/autoheal: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// scratch returns a directory holding a link to every top-level entry of the
// repository, so that blocks run as at the repository root but write their
// files elsewhere.
func scratch(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == ".git" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// blockEnv is the test's environment without tpu-autoheal's own settings (a
// stray AUTOHEAL_TPU_ENDPOINT would send a replay elsewhere), with the built
// autoheal first on the PATH and a fixed locale (sort, uniq).
func blockEnv(bin string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AUTOHEAL_") || k == "PATH" || k == "LC_ALL" || k == "LANG" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "LC_ALL=C")
}

// harness runs before a block: stop the block's own background jobs (each
// in its own process group under set -m) however it ends, as a reader would
// with kill -- -PID.
const harness = `trap 'for j in $(jobs -p); do kill -- -"$j" 2>/dev/null || kill "$j" 2>/dev/null; done' EXIT
`

// runBlock runs b with bash -eo pipefail (a failing command fails the block,
// as a reader would notice it) and returns its stdout, stderr and exit code.
func runBlock(t *testing.T, b *block, dir, bin string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-eo", "pipefail", "-c", harness+b.text)
	cmd.Dir = dir
	cmd.Env = blockEnv(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // anything left in the block's own group
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		t.Fatalf("%s: still running after %v\nstdout:\n%s\nstderr:\n%s", b, blockTimeout, out.String(), errOut.String())
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("%s: %v", b, err)
	}
	return out.String(), errOut.String(), code
}

// matchSample compares output with a sample, line by line, trailing spaces
// and trailing blank lines ignored; a sample line "..." matches any number
// of lines. It returns "" when they match, else what differs.
func matchSample(sample, output string) string {
	want := splitLines(sample)
	got := splitLines(output)
	if matchLines(want, got) {
		return ""
	}
	// Say where: the first line that differs before any "...".
	for i, w := range want {
		if w == "..." {
			break
		}
		if i >= len(got) {
			return fmt.Sprintf("output ends after %d lines; the sample goes on with line %d:\n  %s", len(got), i+1, w)
		}
		if got[i] != w {
			return fmt.Sprintf("line %d differs:\n  sample: %s\n  output: %s", i+1, w, got[i])
		}
	}
	return fmt.Sprintf("the output does not match the sample's lines after its \"...\" (or it has %d more lines)", max(0, len(got)-len(want)))
}

func splitLines(s string) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func matchLines(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == "..." {
		for i := 0; i <= len(got); i++ {
			if matchLines(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && got[0] == want[0] && matchLines(want[1:], got[1:])
}

// TestDocsRun runs every runnable block of every page (the emulator ones
// only with -tags emulator, which in turn runs only those: the others ran in
// the plain suite).
func TestDocsRun(t *testing.T) {
	for _, name := range pages(t) {
		var runnable []*block
		for _, b := range readPage(t, name) {
			if b.mark != nil && b.mark.run && b.mark.emulator == emulatorBlocks {
				runnable = append(runnable, b)
			}
		}
		if len(runnable) == 0 {
			continue
		}
		t.Run(name, func(t *testing.T) {
			requireEmulators(t)
			bin := autohealBin(t)
			dir := scratch(t)
			for _, b := range runnable {
				t.Run(strconv.Itoa(b.line), func(t *testing.T) {
					stdout, stderr, code := runBlock(t, b, dir, bin)
					if code != b.mark.exit {
						t.Fatalf("%s: exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", b, code, b.mark.exit, stdout, stderr)
					}
					if b.sample == nil {
						return
					}
					if diff := matchSample(b.sample.text, stdout); diff != "" {
						t.Errorf("%s: the output of the block at line %d no longer matches its sample at %s: %s\n(edit the sample to the program's output below, or fix the program)\noutput:\n%s\nstderr:\n%s",
							b.file, b.line, b.sample, diff, stdout, stderr)
					}
				})
			}
		})
	}
}
