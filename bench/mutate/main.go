// Command mutate runs the hand-written mutation check (issue 21): each
// mutation of mutations.txt is applied, alone, to a scratch copy of the
// tree, and the tests of the packages it names are run; a mutation that no
// test fails on survived. The working tree is never written (a Ctrl-C
// leaves nothing behind but, at worst, the scratch directory, which is
// removed on the way out).
//
//	go run ./bench/mutate                   # every mutation; prints the table
//	go run ./bench/mutate -only E01,L02     # some of them
//	go run ./bench/mutate -resolve          # only check that every search text occurs once
//	go run ./bench/mutate -doc docs/testing.md   # also rewrite the results table there
//
// It is slow (a build and the owning packages' tests per mutation) and is
// not part of go test ./...; the list's resolution is (mutate_test.go).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

// Result is what one mutation's test run showed.
type Result struct {
	Mutation
	File     string
	Status   string // killed, survived, invalid (does not compile)
	KilledBy string // the first failing test, or "timeout"
	Took     time.Duration
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("mutate", flag.ContinueOnError)
	fl.SetOutput(stderr)
	list := fl.String("list", "bench/mutate/mutations.txt", "the mutation list, relative to the module root")
	only := fl.String("only", "", "comma-separated ids to run (default: all)")
	resolve := fl.Bool("resolve", false, "only check that every search text occurs exactly once")
	timeout := fl.Duration("timeout", 6*time.Minute, "go test -timeout for one mutation")
	doc := fl.String("doc", "", "a Markdown file whose results table (between mutate markers) is rewritten")
	if err := fl.Parse(args); err != nil {
		return err
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	ms, err := loadList(filepath.Join(root, *list))
	if err != nil {
		return err
	}
	src, err := sources(root)
	if err != nil {
		return err
	}
	where, err := locate(ms, src)
	if err != nil {
		return err
	}
	if *resolve {
		fmt.Fprintf(stdout, "%d mutations, each search text found exactly once\n", len(ms))
		return nil
	}
	if *only != "" {
		want := map[string]bool{}
		for _, id := range strings.Split(*only, ",") {
			want[strings.TrimSpace(id)] = true
		}
		var sel []Mutation
		for _, m := range ms {
			if want[m.ID] {
				sel = append(sel, m)
				delete(want, m.ID)
			}
		}
		if len(want) > 0 {
			return fmt.Errorf("-only names unknown ids: %v", keys(want))
		}
		ms = sel
	}

	scratch, err := os.MkdirTemp("", "autoheal-mutate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	if err := copyTree(root, scratch); err != nil {
		return fmt.Errorf("copy the tree: %w", err)
	}

	var results []Result
	for i, m := range ms {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r, err := try(ctx, scratch, where[m.ID], m, *timeout)
		if err != nil {
			return fmt.Errorf("%s: %w", m.ID, err)
		}
		fmt.Fprintf(stderr, "[%d/%d] %s %s %s %s (%s)\n", i+1, len(ms), m.ID, r.Status, r.KilledBy, r.File, r.Took.Round(time.Second))
		results = append(results, r)
	}
	table := resultTable(results)
	fmt.Fprint(stdout, table)
	if *doc != "" {
		return rewriteDoc(filepath.Join(root, *doc), table)
	}
	return nil
}

// try applies m to file in the scratch tree, runs the owning packages'
// tests and puts the file back whatever happens.
func try(ctx context.Context, scratch, file string, m Mutation, timeout time.Duration) (Result, error) {
	r := Result{Mutation: m, File: file}
	path := filepath.Join(scratch, file)
	orig, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if strings.Count(string(orig), m.Find) != 1 {
		return r, fmt.Errorf("search text not found once in %s", file)
	}
	mutated := strings.Replace(string(orig), m.Find, m.Repl, 1)
	if err := os.WriteFile(path, []byte(mutated), 0o644); err != nil {
		return r, err
	}
	defer os.WriteFile(path, orig, 0o644)

	args := append([]string{"test", "-count=1", "-short", "-failfast", "-vet=off", "-timeout", timeout.String()}, packages(file, m.Pkgs)...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = scratch
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	r.Took = time.Since(start)
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		r.Status = "survived"
	case !errors.As(err, &exit):
		return r, err
	case strings.Contains(out.String(), "[build failed]") || strings.Contains(out.String(), "[setup failed]"):
		r.Status = "invalid"
		r.KilledBy = firstLine(out.String())
	default:
		r.Status = "killed"
		r.KilledBy = killer(out.String())
	}
	return r, nil
}

// packages is the package of file, where the mutation was found, then the
// packages the list names: code moved to another package is still tested
// by its own package's tests, and by those the list says own it.
func packages(file string, listed []string) []string {
	out := []string{"./" + filepath.ToSlash(filepath.Dir(file))}
	for _, p := range listed {
		if p != out[0] && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

var failRE = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// killer names the first test that failed, "timeout", or "exit".
func killer(out string) string {
	if strings.Contains(out, "panic: test timed out") {
		return "timeout"
	}
	if m := failRE.FindStringSubmatch(out); m != nil {
		return m[1]
	}
	if strings.Contains(out, "panic:") {
		return "panic"
	}
	return "exit"
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// resultTable is the Markdown table of the results, with the counts.
func resultTable(rs []Result) string {
	var b strings.Builder
	killed := 0
	b.WriteString("| id | where | mutation | why it matters | result |\n| --- | --- | --- | --- | --- |\n")
	for _, r := range rs {
		res := r.Status
		if r.Status == "killed" {
			killed++
			res = "killed by `" + r.KilledBy + "`"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s |\n", r.ID, filepath.Dir(r.File), cell(r.What), cell(r.Why), cell(res))
	}
	fmt.Fprintf(&b, "\n%d of %d killed.\n", killed, len(rs))
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

const (
	beginMark = "<!-- mutate:results -->"
	endMark   = "<!-- /mutate:results -->"
)

// rewriteDoc replaces what lies between the markers in path with table.
func rewriteDoc(path, table string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, beginMark), strings.Index(s, endMark)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %s ... %s", path, beginMark, endMark)
	}
	s = s[:i+len(beginMark)] + "\n" + table + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}

// moduleRoot is the nearest directory at or above the working directory
// that holds go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// copyTree copies the working tree under src (everything but .git) to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir() && d.Name() == ".git":
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case !d.Type().IsRegular():
			return nil
		case d.Name() == ".git": // a worktree's .git file
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
