package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

const usageText = `autoheal: tpu-autoheal outside the Cloud Function

Usage:
  autoheal demo                            replay a bundled incident against a simulated fleet
  autoheal replay [flags] FILE... | -     feed log entries through the function's code
  autoheal replay --from-logging --project P [--filter F] [--since T] [--until T]
  autoheal sweep  [flags] --projects P --zones Z   run one sweep and print its records
  autoheal report [flags] FILE... | --from-logging --project P   what did the incidents cost
  autoheal serve  [--port N]                serve the function locally (AUTOHEAL_* config)
  autoheal simulate --fleet FILE [--addr A] serve a simulated TPU API for serve to talk to
  autoheal publish --topic projects/P/topics/T FILE... | -   send entries to Pub/Sub
  autoheal publish --topic projects/P/topics/T --sweep       ask the function for a sweep
  autoheal version                          print the module version and VCS revision
  autoheal pause  [--project P] [--zone Z] [--node N] --reason TEXT --ledger-project H   stop healing now
  autoheal resume [--project P] [--zone Z] [--node N] --ledger-project H                 lift a pause
  autoheal status --ledger-project H [--node N [--spec]]   pauses, holds, open breakers, unfinished recoveries
  autoheal breaker reset --zone Z --ledger-project H       close a zone's storm breaker
  autoheal preflight --project H --topic T --service-account E --database D   who else can steer it

Run "autoheal COMMAND -h" for a command's flags.
Try it with no credentials at all:
  autoheal demo

` + exitCodesHelp

// errHelp is returned when -h was asked for; the usage was printed and the
// exit status is 0.
var errHelp = flag.ErrHelp

// usageError is a bad command line: unknown flag, bad value, missing or
// unreadable file. It is reported before any input is read.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// setupf is a setup error found before any work (a client that cannot be
// built, missing credentials): exit 2, like a usage error.
func setupf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// run is the whole program: args without the program name.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return usagef("missing command")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "demo":
		return runDemo(ctx, rest, stdout, stderr)
	case "replay":
		return runReplay(ctx, rest, stdin, stdout, stderr)
	case "sweep":
		return runSweep(ctx, rest, stdout, stderr)
	case "report":
		return runReport(ctx, rest, stdin, stdout, stderr)
	case "serve":
		return runServe(ctx, rest, stderr)
	case "simulate":
		return runSimulate(ctx, rest, stdout, stderr)
	case "publish":
		return runPublish(ctx, rest, stdin, stdout, stderr)
	case "version", "--version", "-version":
		return runVersion(rest, stdout, stderr)
	case "pause":
		return runPause(ctx, rest, stdout, stderr)
	case "resume":
		return runResume(ctx, rest, stdout, stderr)
	case "status":
		return runStatus(ctx, rest, stdout, stderr)
	case "breaker":
		return runBreaker(ctx, rest, stdout, stderr)
	case "preflight":
		return runPreflight(ctx, rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usageText)
		return nil
	default:
		fmt.Fprint(stderr, usageText)
		return usagef("unknown command %q", cmd)
	}
}

// newFlagSet returns a flag set for a command whose -h prints help and the
// flags to w, and whose errors are usageErrors pointing at -h.
func newFlagSet(name, help string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parseFlags reports errors itself
	fs.Usage = func() {
		fs.SetOutput(w)
		fmt.Fprint(w, help)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// parseFlags parses args with fs, turning flag package errors into
// usageErrors that name the command. Flags may come after the arguments
// (autoheal replay FILE --format json), as users type them; "--" ends the
// flags, so a file whose name starts with "-" can be given after it.
// fs.Args() is then every argument, in order.
func parseFlags(fs *flag.FlagSet, args []string) error {
	usage := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = usage }()
	var positional []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return errHelp
		}
		if err != nil {
			return usagef("%s: %v%s (see autoheal %s -h)", fs.Name(), err, suggestFlag(fs, err), fs.Name())
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	// Leave the arguments where fs.Args() finds them.
	return fs.Parse(append([]string{"--"}, positional...))
}

// durationFlag is a time.Duration flag whose error says what is wanted: the
// flag package's own says only "parse error".
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return shortDuration(*f.d)
}

func (f durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return fmt.Errorf("want a duration such as 30m: a number needs a unit (s, m or h)")
		}
		return fmt.Errorf("want a duration such as 30m, 90s or 1h30m")
	}
	*f.d = d
	return nil
}

// durationVar defines a duration flag with durationFlag's errors.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationFlag{p}, name, usage)
}

// listFlag is a comma-separated, repeatable list flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// flagGiven reports whether the flag was set on the command line (not left
// at its default).
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// exitCodesHelp is the exit-code table every command's help ends with.
const exitCodesHelp = `Exit codes, the same for every command (when several apply, the first of
2 3 1 5 4 wins):
  0  done
  2  usage or setup: bad flags or arguments, unreadable files, missing
     credentials; found before any work, nothing was done
  3  the input has bytes but not one entry (or record) could be read from it
  1  a transient failure: run it again
  5  needs a person: a breaker tripped, a recovery the run started is
     abandoned or unfinished, or (preflight) an unexpected principal
  4  --strict: some entry was rejected
`

// zoneID is the shape of a Compute Engine zone id: us-central2-b,
// europe-west4-a, northamerica-northeast1-c.
var zoneID = regexp.MustCompile(`^[a-z]+(-[a-z]+)+[0-9]+-[a-z]$`)

// checkZone refuses what cannot be a zone id (a typo such as
// us-central2-bb, a path, a region), offline, before any work.
func checkZone(what, zone string) error {
	if !zoneID.MatchString(zone) {
		return usagef("%s %q: not a zone id (such as us-central2-b)", what, zone)
	}
	return nil
}

// suggestFlag is ", did you mean --NAME?" for an unknown flag with a defined
// one close to it (edit distance at most 2, or one a prefix of the other),
// else "".
func suggestFlag(fs *flag.FlagSet, err error) string {
	const prefix = "flag provided but not defined: -"
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) {
		return ""
	}
	typed := strings.TrimLeft(strings.TrimPrefix(msg, prefix), "-")
	best, bestDist := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(typed, f.Name); d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	if best == "" && len(typed) >= 3 {
		fs.VisitAll(func(f *flag.Flag) {
			if best == "" && (strings.HasPrefix(f.Name, typed) || strings.HasPrefix(typed, f.Name)) {
				best = f.Name
			}
		})
	}
	if best == "" {
		return ""
	}
	return ", did you mean --" + best + "?"
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
