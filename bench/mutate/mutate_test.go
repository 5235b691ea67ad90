package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryMutationResolvesOnce keeps the list from rotting: every search
// text occurs exactly once in the repository's non-test Go files, every id
// is used once, and every package named exists. It runs in go test ./...
// (the mutation run itself does not).
func TestEveryMutationResolvesOnce(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadList("mutations.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 40 {
		t.Errorf("the list has %d mutations, want 40 (issue 21)", len(ms))
	}
	src, err := sources(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locate(ms, src); err != nil {
		t.Error(err)
	}
	for _, m := range ms {
		for _, p := range m.Pkgs {
			found := false
			for f := range src {
				if "./"+filepath.ToSlash(filepath.Dir(f)) == p {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s names package %s, which has no non-test Go file", m.ID, p)
			}
		}
	}
}

func TestLocateRefusesAmbiguousAndMissingText(t *testing.T) {
	src := map[string]string{"a/a.go": "x := 1\nx := 1\n", "b/b.go": "y := 2\n"}
	ms := []Mutation{
		{ID: "twice", Find: "x := 1"},
		{ID: "never", Find: "z := 3"},
		{ID: "once", Find: "y := 2"},
	}
	where, err := locate(ms, src)
	if err == nil {
		t.Fatal("locate accepted a text found twice and one found never")
	}
	for _, want := range []string{"twice (list line 0): search text occurs 2 times", "never (list line 0): search text occurs 0 times"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if got := where["once"]; got != "b/b.go" {
		t.Errorf("once resolved to %q, want b/b.go", got)
	}
}

func TestParseList(t *testing.T) {
	list := "# comment\n\n== X01 ./a ./b\nwhat: flip\nwhy: breaks\n- \tif a < b {\n- \t\treturn\n+ \tif a <= b {\n+ \t\treturn\n\n== X02 ./c\nwhat: drop\nwhy: gone\n- \tsave()\n"
	ms, err := parseList(strings.NewReader(list))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 {
		t.Fatalf("got %d mutations, want 2", len(ms))
	}
	if got, want := ms[0].Find, "\tif a < b {\n\t\treturn"; got != want {
		t.Errorf("find = %q, want %q", got, want)
	}
	if got, want := ms[0].Repl, "\tif a <= b {\n\t\treturn"; got != want {
		t.Errorf("repl = %q, want %q", got, want)
	}
	if got := strings.Join(ms[0].Pkgs, " "); got != "./a ./b" {
		t.Errorf("pkgs = %q", got)
	}
	if ms[1].Repl != "" || ms[1].Find != "\tsave()" {
		t.Errorf("deletion parsed as find %q repl %q", ms[1].Find, ms[1].Repl)
	}
	for _, bad := range []string{
		"== X01 ./a\nwhat: w\nwhy: y\n",                                          // no find
		"== X01 ./a\nwhy: y\n- a\n+ b\n",                                         // no what
		"== X01\nwhat: w\nwhy: y\n- a\n",                                         // no package
		"== X01 ./a\nwhat: w\nwhy: y\n- a\n+ a\n",                                // no change
		"== X01 ./a\nwhat: w\nwhy: y\n- a\n\n== X01 ./a\nwhat: w\nwhy: y\n- b\n", // id twice
		"stray\n",
	} {
		if _, err := parseList(strings.NewReader(bad)); err == nil {
			t.Errorf("parseList accepted %q", bad)
		}
	}
}

// The package the text was found in is tested first, wherever the code
// moved; the listed packages follow, once each.
func TestPackagesStartWithWhereTheTextIs(t *testing.T) {
	got := strings.Join(packages("internal/policy/decide.go", []string{"./internal/remediate", "./internal/policy", "./internal/remediate"}), " ")
	if want := "./internal/policy ./internal/remediate"; got != want {
		t.Errorf("packages = %q, want %q", got, want)
	}
}
