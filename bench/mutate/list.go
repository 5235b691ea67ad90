package main

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Mutation is one hand-chosen change to the program that a test should
// notice. It is located by Find, a text that occurs exactly once in the
// repository's non-test Go files (not by path, so a file moved to another
// package keeps its mutations).
type Mutation struct {
	ID   string
	Pkgs []string // packages whose tests should kill it, e.g. ./internal/ledger
	What string   // the change, for a person
	Why  string   // what an SRE would see if it shipped
	Find string
	Repl string
	Line int // line of the "==" header in the list, for messages
}

// parseList reads the mutation list. Its format, one block per mutation:
//
//	== ID ./pkg [./pkg ...]
//	what: the change, in a few words
//	why: what breaks for an operator
//	- text to find (one line per "- " line; tabs kept)
//	+ text to put instead (none: the text is deleted)
//
// Lines starting with "#" and blank lines between blocks are ignored.
func parseList(r io.Reader) ([]Mutation, error) {
	var ms []Mutation
	var cur *Mutation
	var find, repl []string
	flush := func() error {
		if cur == nil {
			return nil
		}
		switch {
		case len(find) == 0:
			return fmt.Errorf("line %d: %s has no \"- \" line", cur.Line, cur.ID)
		case cur.What == "" || cur.Why == "":
			return fmt.Errorf("line %d: %s needs a what line and a why line", cur.Line, cur.ID)
		case len(cur.Pkgs) == 0:
			return fmt.Errorf("line %d: %s names no package", cur.Line, cur.ID)
		}
		cur.Find = strings.Join(find, "\n")
		cur.Repl = strings.Join(repl, "\n")
		if cur.Find == cur.Repl {
			return fmt.Errorf("line %d: %s changes nothing", cur.Line, cur.ID)
		}
		ms = append(ms, *cur)
		cur, find, repl = nil, nil, nil
		return nil
	}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "== "):
			if err := flush(); err != nil {
				return nil, err
			}
			f := strings.Fields(line[3:])
			if len(f) < 2 {
				return nil, fmt.Errorf("line %d: want \"== ID ./pkg...\"", n)
			}
			cur = &Mutation{ID: f[0], Pkgs: f[1:], Line: n}
		case cur == nil && (line == "" || strings.HasPrefix(line, "#")):
		case cur == nil:
			return nil, fmt.Errorf("line %d: text outside a block: %q", n, line)
		case strings.HasPrefix(line, "what: "):
			cur.What = strings.TrimPrefix(line, "what: ")
		case strings.HasPrefix(line, "why: "):
			cur.Why = strings.TrimPrefix(line, "why: ")
		case strings.HasPrefix(line, "- ") || line == "-":
			find = append(find, strings.TrimPrefix(strings.TrimPrefix(line, "-"), " "))
		case strings.HasPrefix(line, "+ ") || line == "+":
			repl = append(repl, strings.TrimPrefix(strings.TrimPrefix(line, "+"), " "))
		case line == "":
			if err := flush(); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("line %d: %s: unexpected %q", n, cur.ID, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, m := range ms {
		if seen[m.ID] {
			return nil, fmt.Errorf("line %d: id %s used twice", m.Line, m.ID)
		}
		seen[m.ID] = true
	}
	return ms, nil
}

// loadList reads the list at path.
func loadList(path string) ([]Mutation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ms, err := parseList(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ms, nil
}

// sources returns the contents of the non-test Go files under root, by
// path relative to root. Hidden directories, testdata and this tool's own
// directory are left out.
func sources(root string) (map[string]string, error) {
	self := filepath.Join("bench", "mutate")
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor" || rel == self) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = string(b)
		return nil
	})
	return out, err
}

// locate returns the file (relative to the root the sources came from) in
// which each mutation's Find occurs, or an error naming every mutation
// whose text occurs zero times or more than once.
func locate(ms []Mutation, src map[string]string) (map[string]string, error) {
	where := map[string]string{}
	var bad []string
	for _, m := range ms {
		var files []string
		count := 0
		for p, s := range src {
			if c := strings.Count(s, m.Find); c > 0 {
				count += c
				files = append(files, p)
			}
		}
		if count != 1 {
			bad = append(bad, fmt.Sprintf("%s (list line %d): search text occurs %d times in non-test Go %v", m.ID, m.Line, count, files))
			continue
		}
		where[m.ID] = files[0]
	}
	if len(bad) > 0 {
		return where, fmt.Errorf("%d of %d mutations do not resolve:\n  %s", len(bad), len(ms), strings.Join(bad, "\n  "))
	}
	return where, nil
}
