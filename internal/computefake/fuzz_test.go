package computefake_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/tpu-autoheal/autoheal/internal/computefake"
)

// FuzzReadFleet: any input gives a fleet or an error, never a panic, and a
// fleet it accepts seeds a server and writes back to one it accepts again.
func FuzzReadFleet(f *testing.F) {
	for _, p := range []string{"testdata/fleet.json", "testdata/fleet-combined.json", "testdata/describe-web-1.json"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`[{"name":"a","zone":"projects/acme-ml/zones/z-a","machineType":"x"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fl, err := computefake.ReadFleet(bytes.NewReader(data))
		if err != nil {
			return
		}
		s := computefake.New(fl)
		defer s.Close()
		var buf bytes.Buffer
		if err := s.Fleet().Write(&buf); err != nil {
			t.Fatal(err)
		}
		if _, err := computefake.ReadFleet(&buf); err != nil {
			t.Fatalf("a served fleet does not read back: %v\n%s", err, buf.String())
		}
	})
}

// FuzzListFilter: any filter is answered (a list or a 400), never a panic.
func FuzzListFilter(f *testing.F) {
	for _, s := range []string{"labels.tpu-autoheal=enabled", `(labels.a = "b") AND name:x*`, "status!=TERMINATED", `name="\"`, "a OR b", "labels.:*"} {
		f.Add(s)
	}
	fl, err := computefake.ReadFleetFile("testdata/fleet.json")
	if err != nil {
		f.Fatal(err)
	}
	s := computefake.New(fl)
	f.Cleanup(s.Close)
	svc, err := s.Service(context.Background())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, filter string) {
		_, _ = svc.Instances.List("acme-ml", "us-central1-c").Filter(filter).Do()
	})
}
