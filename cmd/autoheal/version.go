package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// readBuildInfo is debug.ReadBuildInfo, replaced in tests.
var readBuildInfo = debug.ReadBuildInfo

const versionHelp = `Usage: autoheal version

Prints the module version and the VCS revision the binary was built from, as
the Go toolchain stamped them.

` + exitCodesHelp

// runVersion prints the module version and the VCS revision the binary was
// built from, as the Go toolchain stamped them.
func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", versionHelp, stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("version takes no arguments (got %q)", fs.Args())
	}
	_, err := fmt.Fprintln(stdout, versionLine())
	return err
}

func versionLine() string {
	bi, ok := readBuildInfo()
	if !ok {
		return "autoheal: no build information (not built with module support)"
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	parts := []string{"autoheal", bi.Main.Path, version}
	var rev, when string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev != "" {
		r := "revision " + rev
		if modified {
			r += " (modified)"
		}
		if when != "" {
			r += " of " + when
		}
		parts = append(parts, r)
	} else {
		parts = append(parts, "revision unknown")
	}
	parts = append(parts, bi.GoVersion)
	return strings.Join(parts, " ")
}
