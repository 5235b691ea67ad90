package remediate

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRemediateReadsOnlyKinds: the Google API error mapping lives in the
// adapters (package googleerr); no non-test file of remediate imports an
// API error type, a transport's codes or the network to classify errors.
func TestRemediateReadsOnlyKinds(t *testing.T) {
	forbidden := []string{
		"google.golang.org/api/googleapi",
		"github.com/googleapis/gax-go/v2/apierror",
		"google.golang.org/grpc/codes",
		"google.golang.org/grpc/status",
		"net",
		"syscall",
	}
	// bounds_handler.go reads the ledger's (Firestore's) INVALID_ARGUMENT,
	// a gRPC status, not a TPU API error. It goes when the ledger returns
	// that refusal as a failure kind of its own.
	allowed := map[string]map[string]bool{
		"bounds_handler.go": {"google.golang.org/grpc/codes": true, "google.golang.org/grpc/status": true},
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if path == bad && !allowed[name][path] {
					t.Errorf("%s imports %s: classify errors in the adapter (googleerr), read kinds here (failure)", name, path)
				}
			}
		}
	}
}
