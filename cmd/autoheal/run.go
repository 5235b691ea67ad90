package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
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
  go run ./cmd/autoheal demo
`

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
		return runVersion(rest, stdout)
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
			return usagef("%s: %v (see autoheal %s -h)", fs.Name(), err, fs.Name())
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
	return f.d.String()
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
