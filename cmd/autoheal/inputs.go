package main

import (
	"fmt"
	"io"
	"os"
)

// namedInput is one input argument opened: a file, or a stream: stdin
// ("-"), a pipe, a process substitution (<(gcloud ...), /dev/fd/N).
type namedInput struct {
	name   string
	r      io.Reader
	file   *os.File  // a regular file, which can be read again; nil for a stream
	closer io.Closer // a stream opened here (not stdin), closed after the run
}

// openArgs opens every FILE argument (- is stdin, at most once) up front,
// so that an unreadable file or a directory is a usage error before
// anything is read. A FILE that is not a regular file (a named pipe, a
// process substitution) is read as a stream, like stdin: it cannot be read
// twice or seeked. On error, what was opened is closed again.
func openArgs(args []string, stdin io.Reader) ([]namedInput, error) {
	if len(args) == 0 {
		return nil, usagef("no input: give FILE... or - for stdin (or --from-logging)")
	}
	var out []namedInput
	fail := func(err error) ([]namedInput, error) {
		for _, in := range out {
			if in.file != nil {
				in.file.Close()
			}
			if in.closer != nil {
				in.closer.Close()
			}
		}
		return nil, err
	}
	sawStdin := false
	for _, a := range args {
		if a == "-" {
			if sawStdin {
				return fail(usagef("- (stdin) given more than once"))
			}
			sawStdin = true
			out = append(out, namedInput{name: "stdin", r: stdin})
			continue
		}
		f, err := os.Open(a)
		var fi os.FileInfo
		if err == nil {
			if fi, err = f.Stat(); err == nil && fi.IsDir() {
				err = fmt.Errorf("open %s: is a directory", a)
			}
		}
		if err != nil {
			if f != nil {
				f.Close()
			}
			return fail(usagef("input: %v", err))
		}
		if !fi.Mode().IsRegular() {
			out = append(out, namedInput{name: a, r: f, closer: f})
			continue
		}
		out = append(out, namedInput{name: a, r: f, file: f})
	}
	return out, nil
}
