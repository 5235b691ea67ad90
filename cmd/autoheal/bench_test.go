package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// entryStream generates n terminate entries, JSON Lines, spread over nodes.
type entryStream struct {
	n, i, nodes int
	buf         []byte
}

func (s *entryStream) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		if s.i == s.n {
			return 0, io.EOF
		}
		s.buf = fmt.Appendf(nil, `{"insertId":"bench-%d","timestamp":"2026-11-20T03:44:36Z","logName":"projects/acme-ml/logs/cloudaudit.googleapis.com%%2Fsystem_event","protoPayload":{"serviceName":"tpu.googleapis.com","methodName":"tpu.nodes.terminate","resourceName":"projects/acme-ml/locations/us-central2-b/nodes/bench-%d","authenticationInfo":{"principalEmail":"system@google.com"},"metadata":{"terminateReason":"Terminated due to a maintenance event"}},"resource":{"type":"audited_resource","labels":{"project_id":"acme-ml"}}}`+"\n", s.i, s.i%s.nodes)
		s.i++
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// BenchmarkReplay measures replay end to end, one op per entry: read, parse,
// GetNode from the simulated control plane over loopback HTTP, decide,
// record, print. The fleet is 100 opted-in READY/HEALTHY nodes, the common
// case of a maintenance wave that recovered by itself.
func BenchmarkReplay(b *testing.B) {
	const nodes = 100
	var f tpufake.Fleet
	for i := range nodes {
		f.Nodes = append(f.Nodes, &tpu.Node{
			Name: fmt.Sprintf("projects/acme-ml/locations/us-central2-b/nodes/bench-%d", i), AcceleratorType: "v4-8",
			RuntimeVersion: "tpu-ubuntu2204-base", State: "READY", Health: "HEALTHY",
			Labels: map[string]string{"tpu-autoheal": "enabled"},
		})
	}
	fleet := filepath.Join(b.TempDir(), "fleet.json")
	out, err := os.Create(fleet)
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Write(out); err != nil {
		b.Fatal(err)
	}
	out.Close()

	b.ReportAllocs()
	b.ResetTimer()
	in := &entryStream{n: b.N, nodes: nodes}
	if err := run(context.Background(), []string{"replay", "--fleet", fleet, "--format", "json", "-"}, in, io.Discard, io.Discard); err != nil {
		b.Fatal(err)
	}
}
