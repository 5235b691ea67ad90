// Command autoheal runs tpu-autoheal's code outside the Cloud Function:
// replay log entries against a simulated or real TPU control plane, sweep
// once, serve the function locally, or publish entries to the real topic.
//
// main only wires signals and exit codes; run does the work so that tests can
// call it in-process. Nothing here may decide what to do about a node: that is
// remediate's job, reached through exactly the code the function runs.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes: one table for every command (docs/cli.md, autoheal help).
// When several apply, the first in this order wins: usage (2), no entries
// (3), transient (1), needs a person (5), rejects (4); 0 when none does.
const (
	exitOK          = 0
	exitTransient   = 1 // a transient failure: run it again
	exitUsage       = 2 // bad flags or arguments, unreadable files, missing credentials; nothing was done
	exitNoEntries   = 3 // the input has bytes but not one entry (or record) could be read from it
	exitRejects     = 4 // --strict: some entry was rejected
	exitNeedsPerson = 5 // a breaker tripped, or a recovery the run started is abandoned or unfinished

	// exitError is exitTransient's older name: any other failure to run.
	exitError = exitTransient
)

// exitPrecedence is the order in which exit codes win (exitOK last).
var exitPrecedence = []int{exitUsage, exitNoEntries, exitTransient, exitNeedsPerson, exitRejects}

// exitStatus is an outcome that is not a failure to run but has its own
// exit status (3, 4, 5), or a failure whose code was chosen.
type exitStatus struct {
	code int
	msg  string
}

func (e *exitStatus) Error() string { return e.msg }

// firstExit returns, of the outcomes that apply (code → message), the one
// exitPrecedence ranks first, as an error; nil when none applies.
func firstExit(apply map[int]string) error {
	for _, c := range exitPrecedence {
		if msg, ok := apply[c]; ok {
			if c == exitUsage {
				return &usageError{msg: msg}
			}
			return &exitStatus{code: c, msg: msg}
		}
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode prints err (if any) and maps it to the process exit code.
func exitCode(err error, stderr io.Writer) int {
	if err != nil && !errors.Is(err, errHelp) {
		fmt.Fprintf(stderr, "autoheal: %v\n", err)
	}
	return exitCodeOf(err, nil)
}

// exitCodeOf is the code the process will exit with for a run that ended
// with runErr (a failure to run, checked first) or else exit (an outcome).
func exitCodeOf(runErr, exit error) int {
	for _, err := range []error{runErr, exit} {
		if err == nil || errors.Is(err, errHelp) {
			continue
		}
		var u *usageError
		if errors.As(err, &u) {
			return exitUsage
		}
		var st *exitStatus
		if errors.As(err, &st) {
			return st.code
		}
		return exitTransient
	}
	return exitOK
}
