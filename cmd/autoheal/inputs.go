package main

import (
	"fmt"
	"io"
	"os"
)

// namedInput is one input argument opened: a file, or stdin ("-").
type namedInput struct {
	name string
	r    io.Reader
	file *os.File // nil for stdin
}

// openArgs opens every FILE argument (- is stdin, at most once) up front,
// so that an unreadable file or a directory is a usage error before
// anything is read. On error, what was opened is closed again.
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
		if err == nil {
			var fi os.FileInfo
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
		out = append(out, namedInput{name: a, r: f, file: f})
	}
	return out, nil
}
