package tpufake_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// FuzzReadFleet checks that ReadFleet never panics on outside input and that
// whatever it accepts survives Write and ReadFleet unchanged.
func FuzzReadFleet(f *testing.F) {
	for _, path := range []string{fleetFile, queuedFleetFile, "testdata/node-without-name.json"} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"name":"projects/p/locations/z/nodes/a"}`))
	f.Add([]byte(`[null, 1, "x"]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fleet, err := tpufake.ReadFleet(bytes.NewReader(data))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := fleet.Write(&buf); err != nil {
			t.Fatalf("Write of an accepted fleet: %v", err)
		}
		again, err := tpufake.ReadFleet(&buf)
		if err != nil {
			t.Fatalf("ReadFleet of Write output: %v\n%s", err, buf.Bytes())
		}
		if diff := cmp.Diff(fleet, again); diff != "" {
			t.Fatalf("round trip changed the fleet (-first +second):\n%s", diff)
		}
	})
}
