// Command parsebench reads a log export with the project's reader
// (internal/events) and does what the benchmark's jq filter does: for every
// tpu.nodes.terminate entry it prints {"insertId":…,"r":<terminateReason>}.
// It prints the number of entries selected and rejected to stderr.
//
//	parsebench export.jsonl > /dev/null
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "parsebench:", err)
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("parsebench", flag.ContinueOnError)
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to `file`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: parsebench [-cpuprofile FILE] EXPORT")
	}
	if *cpuprofile != "" {
		pf, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(stdout, 256<<10)
	r := events.NewReader(f, events.Options{})
	var selected, rejected, other int
	var line []byte
	for {
		it, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		switch {
		case it.Err != nil:
			rejected++
		case it.Event.Method == events.MethodTerminate:
			selected++
			line = append(line[:0], `{"insertId":`...)
			line = appendJSONString(line, it.Event.InsertID)
			line = append(line, `,"r":`...)
			line = appendJSONString(line, it.Event.TerminateReason)
			line = append(line, "}\n"...)
			w.Write(line)
		default:
			other++
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "selected %d other %d rejected %d\n", selected, other, rejected)
	return nil
}

// appendJSONString appends s as a JSON string the way jq -c prints it: '"'
// and '\\' escaped, control characters as \uXXXX (or their short escapes),
// everything else as is.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c != 0x7f {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\t':
			b = append(b, '\\', 't')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, `\u00`...)
			b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
