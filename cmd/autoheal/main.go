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

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed
	exitUsage = 2 // bad flags or arguments; nothing was read or done

	exitNoEntries = 3 // replay: the input has bytes, but not one entry could be read
	exitRejects   = 4 // replay --strict: some entry was rejected
)

// exitStatus is an outcome that is not a failure to run but has its own
// exit status (replay's 3 and 4).
type exitStatus struct {
	code int
	msg  string
}

func (e *exitStatus) Error() string { return e.msg }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode prints err (if any) and maps it to the process exit code.
func exitCode(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, errHelp) {
		return exitOK
	}
	fmt.Fprintf(stderr, "autoheal: %v\n", err)
	var u *usageError
	if errors.As(err, &u) {
		return exitUsage
	}
	var st *exitStatus
	if errors.As(err, &st) {
		return st.code
	}
	return exitError
}
