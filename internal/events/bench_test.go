package events

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// mixedExport is n entries in the benchmark's mix (35% node terminates with
// a reason, 35% per-worker terminates, 15% restarts, 15% foreign methods),
// as JSON Lines or as gcloud's pretty-printed array.
func mixedExport(b testing.TB, n int, array bool) []byte {
	b.Helper()
	var kinds []string
	for _, f := range []struct {
		file   string
		weight int
	}{{"terminate-maintenance.json", 7}, {"terminate-worker.json", 7}, {"restart.json", 3}, {"foreign-method.json", 3}} {
		data := readFixture(b, f.file)
		if !array {
			var c bytes.Buffer
			if err := json.Compact(&c, data); err != nil {
				b.Fatal(err)
			}
			data = c.Bytes()
		}
		for range f.weight {
			kinds = append(kinds, strings.TrimSpace(string(data)))
		}
	}
	var out bytes.Buffer
	if array {
		out.WriteString("[\n")
	}
	for i := range n {
		out.WriteString(kinds[i%len(kinds)])
		if array && i < n-1 {
			out.WriteString(",")
		}
		out.WriteString("\n")
	}
	if array {
		out.WriteString("]\n")
	}
	return out.Bytes()
}

// BenchmarkReaderMix reads the benchmark's mix from memory; one op is one
// entry.
func BenchmarkReaderMix(b *testing.B) {
	for _, form := range []struct {
		name  string
		array bool
	}{{"jsonl", false}, {"array", true}} {
		b.Run(form.name, func(b *testing.B) {
			const n = 20_000
			data := mixedExport(b, n, form.array)
			b.SetBytes(int64(len(data) / n))
			b.ReportAllocs()
			b.ResetTimer()
			read := 0
			for read < b.N {
				r := NewReader(bytes.NewReader(data), Options{})
				for read < b.N {
					_, err := r.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					read++
				}
			}
		})
	}
}

// BenchmarkParsePaths compares the fast path with the reference
// (encoding/json) path on one node terminate.
func BenchmarkParsePaths(b *testing.B) {
	var c bytes.Buffer
	if err := json.Compact(&c, readFixture(b, "terminate-worker.json")); err != nil {
		b.Fatal(err)
	}
	entry := c.Bytes()
	for _, p := range []struct {
		name  string
		parse func([]byte, Options) (Event, error)
	}{{"fast", Parse}, {"reference", parseReference}} {
		b.Run(p.name, func(b *testing.B) {
			b.SetBytes(int64(len(entry)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.parse(entry, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
