package function

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// The deployed source: what Terraform's archive of the repository must
// contain, and all the Go buildpack gets. Terraform's tests check the
// archive's excludes against SourceFiles; buildtest builds exactly these files.
var (
	// SourceRootFiles are the files taken from the repository root, besides
	// the root package's non-test *.go files.
	SourceRootFiles = []string{"go.mod", "go.sum"}
	// SourceDirs are taken whole, recursively, except test files
	// (*_test.go) and testdata directories.
	SourceDirs = []string{"function", "internal", "startup"}
)

// SourceFiles lists the files of the deployed source under the repository
// root: slash-separated paths relative to root, sorted.
func SourceFiles(root string) ([]string, error) {
	out := append([]string(nil), SourceRootFiles...)
	entries, err := filepath.Glob(filepath.Join(root, "*.go"))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if name := filepath.Base(e); !strings.HasSuffix(name, "_test.go") {
			out = append(out, name)
		}
	}
	for _, dir := range SourceDirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasSuffix(d.Name(), "_test.go") || !d.Type().IsRegular() {
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("source files under %s: %w", path.Join(root, dir), err)
		}
	}
	sort.Strings(out)
	return out, nil
}
