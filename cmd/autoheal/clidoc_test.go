package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestCLIDocNamesEveryFlag: docs/cli.md has a section per command that
// names every flag the command's -h lists, and no flag it does not take;
// and the exit-code table in the help is the one in the doc.
func TestCLIDocNamesEveryFlag(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	parts := regexp.MustCompile(`(?m)^### autoheal (\w+)\n`).FindAllStringSubmatchIndex(string(doc), -1)
	for i, p := range parts {
		end := len(doc)
		if i+1 < len(parts) {
			end = parts[i+1][0]
		}
		if j := strings.Index(string(doc[p[1]:end]), "\n## "); j >= 0 {
			end = p[1] + j
		}
		sections[string(doc[p[2]:p[3]])] = string(doc[p[1]:end])
	}
	helpFlag := regexp.MustCompile(`(?m)^  -([a-z][a-z-]*)`)
	docFlag := regexp.MustCompile("`--([a-z][a-z-]*)")
	commands := []string{"demo", "replay", "sweep", "report", "status", "pause", "resume", "breaker", "publish", "serve", "simulate", "preflight", "version"}
	for _, c := range commands {
		sec, ok := sections[c]
		if !ok {
			t.Errorf("docs/cli.md has no section ### autoheal %s", c)
			continue
		}
		r := runCLI(t, nil, c, "-h")
		help := map[string]bool{}
		for _, m := range helpFlag.FindAllStringSubmatch(r.stderr, -1) {
			help[m[1]] = true
		}
		documented := map[string]bool{}
		for _, m := range docFlag.FindAllStringSubmatch(sec, -1) {
			documented[m[1]] = true
		}
		for _, f := range sortedKeys(help) {
			if !documented[f] {
				t.Errorf("autoheal %s takes --%s, which its section of docs/cli.md does not name", c, f)
			}
		}
		for _, f := range sortedKeys(documented) {
			if !help[f] {
				t.Errorf("docs/cli.md names --%s for autoheal %s, which takes no such flag", f, c)
			}
		}
		if !strings.Contains(r.stderr, "Exit codes, the same for every command") {
			t.Errorf("autoheal %s -h has no exit-code table", c)
		}
	}
	// The help's table and the doc's list the same codes in the same
	// order of precedence.
	codes := regexp.MustCompile(`(?m)^  ([0-9])  `).FindAllStringSubmatch(exitCodesHelp, -1)
	var helpOrder []string
	for _, m := range codes {
		helpOrder = append(helpOrder, m[1])
	}
	docRows := regexp.MustCompile(`(?m)^\| ([0-9]) \| `).FindAllStringSubmatch(string(doc), -1)
	var docOrder []string
	for _, m := range docRows {
		docOrder = append(docOrder, m[1])
	}
	if strings.Join(helpOrder, " ") != strings.Join(docOrder, " ") || strings.Join(helpOrder, " ") != "0 2 3 1 5 4" {
		t.Errorf("exit codes in the help %v, in docs/cli.md %v; want both 0 2 3 1 5 4 (0, then by precedence)", helpOrder, docOrder)
	}
	var prec []string
	for _, c := range exitPrecedence {
		prec = append(prec, string(rune('0'+c)))
	}
	if got := strings.Join(prec, " "); got != "2 3 1 5 4" || !strings.Contains(exitCodesHelp, "first of\n2 3 1 5 4 wins") || !strings.Contains(string(doc), "first in the order 2, 3, 1, 5, 4 wins") {
		t.Errorf("precedence in the code %s; the help and docs/cli.md must say 2 3 1 5 4", got)
	}
}
