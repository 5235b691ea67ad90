package events

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// summary is what a reader test checks per item: the node or the reject code.
func summarize(t *testing.T, r *Reader) []string {
	t.Helper()
	var out []string
	for i := 0; i < 10000; i++ {
		it, err := r.Next()
		if err == io.EOF {
			if _, again := r.Next(); again != io.EOF {
				t.Errorf("Next after io.EOF returned %v, want io.EOF again", again)
			}
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if it.Index != len(out) {
			t.Errorf("item %d has Index %d", len(out), it.Index)
		}
		if it.Err != nil {
			var re *RejectError
			if !errors.As(it.Err, &re) {
				t.Fatalf("item %d: %v is not a *RejectError", it.Index, it.Err)
			}
			out = append(out, "reject:"+re.Code)
			continue
		}
		out = append(out, it.Event.Node.Name()+"#"+it.Event.Worker)
	}
	t.Fatal("reader did not stop")
	return nil
}

const (
	llmNode = "projects/acme-ml/locations/us-central2-b/nodes/llm-v4-128#"
	v3Node  = "projects/acme-ml/locations/europe-west4-a/nodes/v3-8-exp#"
)

func TestReaderForms(t *testing.T) {
	maint := compact(t, readFixture(t, "terminate-maintenance.json"))
	restart := compact(t, readFixture(t, "restart.json"))
	tests := []struct {
		name  string
		input string
		want  []string
	}{
		{"gcloud array", string(readFixture(t, "gcloud-read.json")), []string{llmNode, v3Node}},
		{"compact array", "[" + maint + "," + restart + "]", []string{llmNode, v3Node}},
		{"two arrays one after the other", "[" + maint + "]\n[" + restart + "]\n", []string{llmNode, v3Node}},
		{"empty array", " [ ] ", nil},
		{"empty input", "", nil},
		{"only whitespace", " \n\t\r\n", nil},
		{"single pretty-printed object", string(readFixture(t, "terminate-worker.json")), []string{llmNode + "7"}},
		{"single object with a byte order mark", "\xEF\xBB\xBF" + maint, []string{llmNode}},
		{"JSON Lines", maint + "\n" + restart + "\n", []string{llmNode, v3Node}},
		{"JSON Lines with CRLF and no final newline", maint + "\r\n" + restart, []string{llmNode, v3Node}},
		{"concatenated objects without separators", maint + restart + maint, []string{llmNode, v3Node, llmNode}},
		{"pretty-printed objects one after another", string(readFixture(t, "concatenated.json")), []string{v3Node, llmNode, "reject:" + CodeForeignMethod}},
		{"envelopes in JSON Lines", compact(t, readFixture(t, "pubsub-push.json")) + "\n" + compact(t, readFixture(t, "cloudevent-data.json")), []string{llmNode, llmNode}},
		{"envelopes in an array", "[" + string(readFixture(t, "pubsub-push-worker.json")) + "]", []string{llmNode + "7"}},

		{"JSON Lines with a bad line in the middle", maint + "\nnot json at all\n" + restart + "\n", []string{llmNode, "reject:" + CodeMalformedJSON, v3Node}},
		{"JSON Lines with a truncated line", maint[:len(maint)/2] + "\n" + restart + "\n", []string{"reject:" + CodeMalformedJSON, v3Node}},
		{"JSON Lines with a line cut inside a string", maint[:20] + "\n" + restart + "\n", []string{"reject:" + CodeMalformedJSON, v3Node}},
		{"JSON Lines with a scalar line", "42\n" + restart, []string{"reject:" + CodeNotObject, v3Node}},
		{"JSON Lines with an extra closing brace", maint + "}\n" + restart, []string{llmNode, "reject:" + CodeMalformedJSON, v3Node}},
		{"JSON Lines with a mismatched bracket", `{"a":[}` + "\n" + restart, []string{"reject:" + CodeMalformedJSON, v3Node}},
		{"JSON Lines with a well-framed invalid line", `{"a" 1}` + "\n" + restart, []string{"reject:" + CodeMalformedJSON, v3Node}},
		{"last line truncated", maint + "\n" + restart[:30], []string{llmNode, "reject:" + CodeMalformedJSON}},

		{"array with a missing comma stops", "[" + maint + " " + restart + "," + maint + "]", []string{llmNode, "reject:" + CodeMalformedJSON}},
		{"array with a trailing comma stops", "[" + maint + ",]", []string{llmNode, "reject:" + CodeMalformedJSON}},
		{"array with a leading comma stops", "[," + maint + "]", []string{"reject:" + CodeMalformedJSON}},
		{"unterminated array", "[" + maint + ",\n", []string{llmNode, "reject:" + CodeMalformedJSON}},
		{"array cut inside an element", string(readFixture(t, "gcloud-read-truncated.json")), []string{llmNode, llmNode, "reject:" + CodeMalformedJSON}},
		{"array with a string element continues", `["x",` + maint + "]", []string{"reject:" + CodeNotObject, llmNode}},
		{"array with a literal element continues", `[null, true,` + maint + "]", []string{"reject:" + CodeNotObject, "reject:" + CodeNotObject, llmNode}},
		{"array with a raw newline in a string stops", "[" + maint + `,{"a":"x` + "\n" + `"},` + maint + "]", []string{llmNode, "reject:" + CodeMalformedJSON}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, chunked := range []bool{false, true} {
				var in io.Reader = strings.NewReader(tt.input)
				if chunked {
					in = iotest.OneByteReader(in) // the way a slow pipe delivers bytes
				}
				got := summarize(t, NewReader(in, Options{}))
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("items mismatch (one byte at a time: %v) (-want +got):\n%s", chunked, diff)
				}
			}
		})
	}
}

func compact(t *testing.T, pretty []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, pretty); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestReaderItemDataIsTheElement(t *testing.T) {
	maint := compact(t, readFixture(t, "terminate-maintenance.json"))
	r := NewReader(strings.NewReader("[ "+maint+" ,\n"+maint+"]"), Options{})
	for range 2 {
		it, err := r.Next()
		if err != nil || it.Err != nil {
			t.Fatalf("Next: %v, %v", err, it.Err)
		}
		if diff := cmp.Diff(maint, string(it.Data)); diff != "" {
			t.Errorf("Data mismatch (-want +got):\n%s", diff)
		}
	}
}

// TestReaderStreamsLikeStdin proves the Reader hands out each entry as soon
// as it is complete, without waiting for the rest of the input: the writer
// sends the second entry only after the first has been read.
func TestReaderStreamsLikeStdin(t *testing.T) {
	for _, form := range []struct{ name, open, sep, close string }{
		{"JSON Lines", "", "\n", "\n"},
		{"array", "[\n", ",\n", "]\n"},
	} {
		t.Run(form.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			entry := compact(t, readFixture(t, "terminate-maintenance.json"))
			gotFirst := make(chan struct{})
			go func() {
				defer pw.Close()
				io.WriteString(pw, form.open+entry+form.sep)
				select {
				case <-gotFirst:
				case <-time.After(10 * time.Second):
					pw.CloseWithError(errors.New("the reader did not return the first entry before the second was written"))
					return
				}
				io.WriteString(pw, entry+form.close)
			}()
			r := NewReader(pr, Options{})
			if it, err := r.Next(); err != nil || it.Err != nil {
				t.Fatalf("first Next: %v, %v", err, it.Err)
			}
			close(gotFirst)
			if it, err := r.Next(); err != nil || it.Err != nil {
				t.Fatalf("second Next: %v, %v", err, it.Err)
			}
			if _, err := r.Next(); err != io.EOF {
				t.Fatalf("third Next: %v, want io.EOF", err)
			}
		})
	}
}

func TestReaderRejectsOversizedElementsWithoutKeepingThem(t *testing.T) {
	maint := compact(t, readFixture(t, "terminate-maintenance.json"))
	opts := Options{MaxEntryBytes: 1024}
	huge := `{"protoPayload":{"metadata":{"x":"` + strings.Repeat("y", 1<<20) + `"}}}`
	between := `{"insertId":"` + strings.Repeat("z", 1500) + `"}` // over the entry limit, under the raw one
	for _, form := range []struct{ name, input string }{
		{"JSON Lines", huge + "\n" + between + "\n" + maint + "\n"},
		{"array", "[" + huge + "," + between + "," + maint + "]"},
	} {
		t.Run(form.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(form.input), opts)
			for i, want := range []string{CodeTooLarge, CodeTooLarge, ""} {
				it, err := r.Next()
				if err != nil {
					t.Fatalf("Next: %v", err)
				}
				if len(it.Data) > 2*opts.MaxEntryBytes {
					t.Errorf("item %d kept %d bytes, want at most %d", i, len(it.Data), 2*opts.MaxEntryBytes)
				}
				var re *RejectError
				switch {
				case want == "" && it.Err != nil:
					t.Errorf("item %d: %v", i, it.Err)
				case want != "" && (!errors.As(it.Err, &re) || re.Code != want):
					t.Errorf("item %d: error %v, want %s", i, it.Err, want)
				}
			}
		})
	}
}

func TestReaderRejectsDeepNesting(t *testing.T) {
	restart := compact(t, readFixture(t, "restart.json"))
	deep := strings.Repeat("[", maxDepth+1)
	got := summarize(t, NewReader(strings.NewReader(`{"a":`+deep+"\n"+restart+"\n"), Options{}))
	if diff := cmp.Diff([]string{"reject:" + CodeMalformedJSON, v3Node}, got); diff != "" {
		t.Errorf("items mismatch (-want +got):\n%s", diff)
	}
}

func TestReaderReturnsReadErrors(t *testing.T) {
	boom := errors.New("disk on fire")
	maint := compact(t, readFixture(t, "terminate-maintenance.json"))
	r := NewReader(io.MultiReader(strings.NewReader(maint+"\n"+maint[:50]), iotest.ErrReader(boom)), Options{})
	if it, err := r.Next(); err != nil || it.Err != nil {
		t.Fatalf("first Next: %v, %v", err, it.Err)
	}
	_, err := r.Next()
	if !errors.Is(err, boom) {
		t.Fatalf("second Next: %v, want %v", err, boom)
	}
	if _, again := r.Next(); !errors.Is(again, boom) {
		t.Errorf("Next after a read error: %v, want it again", again)
	}
}

func TestReaderAppliesOptions(t *testing.T) {
	in := string(readFixture(t, "gcloud-read.json"))
	got := summarize(t, NewReader(strings.NewReader(in), Options{AllowedProjects: []string{"someone-else"}}))
	want := []string{"reject:" + CodeProjectNotAllowed, "reject:" + CodeProjectNotAllowed}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("items mismatch (-want +got):\n%s", diff)
	}
}

// generated is an endless-looking stream of n distinct entries, produced on
// the fly so that tests and benchmarks can read gigabytes without holding them.
type generated struct {
	n, i             int
	array            bool
	pending          []byte
	started, stopped bool
	entryBytes       int
}

const generatedTemplate = `{"protoPayload":{"@type":"type.googleapis.com/google.cloud.audit.AuditLog","status":{},"authenticationInfo":{"principalEmail":"system@google.com"},"serviceName":"tpu.googleapis.com","methodName":"tpu.nodes.terminate","resourceName":"projects/acme-ml/locations/us-central2-b/nodes/node-%d","metadata":{"terminateReason":"Terminated due to a maintenance event"}},"insertId":"gen%010d","resource":{"type":"audited_resource","labels":{"project_id":"acme-ml","service":"tpu.googleapis.com","method":"tpu.nodes.terminate"}},"timestamp":"2026-11-20T03:44:36.265703305Z","severity":"NOTICE","logName":"projects/acme-ml/logs/cloudaudit.googleapis.com%%2Fsystem_event","receiveTimestamp":"2026-11-20T03:44:37.010012941Z"}`

func newGenerated(n int, array bool) *generated {
	return &generated{n: n, array: array, entryBytes: len(fmt.Sprintf(generatedTemplate, 0, 0)) + 1}
}

func (g *generated) Read(p []byte) (int, error) {
	total := 0
	for len(p) > 0 {
		if len(g.pending) == 0 {
			switch {
			case !g.started:
				g.started = true
				if g.array {
					g.pending = append(g.pending, "[\n"...)
				}
			case g.i < g.n:
				g.pending = fmt.Appendf(g.pending[:0], generatedTemplate, g.i%1000, g.i)
				if g.array && g.i < g.n-1 {
					g.pending = append(g.pending, ',')
				}
				g.pending = append(g.pending, '\n')
				g.i++
			case !g.stopped:
				g.stopped = true
				if g.array {
					g.pending = append(g.pending[:0], "]\n"...)
				}
			default:
				if total == 0 {
					return 0, io.EOF
				}
				return total, nil
			}
		}
		n := copy(p, g.pending)
		g.pending = g.pending[n:]
		p = p[n:]
		total += n
	}
	return total, nil
}

// TestReaderMemoryStaysBounded reads 60k generated entries (about 43 MB)
// and checks that the live heap does not grow with the input.
func TestReaderMemoryStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 2×43 MB")
	}
	for _, array := range []bool{false, true} {
		const n = 60_000
		r := NewReader(newGenerated(n, array), Options{})
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		var base, peak uint64
		for i := 0; ; i++ {
			it, err := r.Next()
			if err == io.EOF {
				if i != n {
					t.Fatalf("array %v: read %d entries, want %d", array, i, n)
				}
				break
			}
			if err != nil || it.Err != nil {
				t.Fatalf("entry %d: %v, %v", i, err, it.Err)
			}
			if i == 1000 {
				base = heap()
			}
			if i%10_000 == 0 && i > 1000 {
				peak = max(peak, heap())
			}
		}
		if growth := int64(peak) - int64(base); growth > 4<<20 {
			t.Errorf("array %v: heap grew by %d bytes over %d entries, want under 4 MiB", array, growth, n)
		}
	}
}

// BenchmarkReader reads generated entries; one op is one entry, so allocs/op
// is allocations per entry and MB/s the throughput.
func BenchmarkReader(b *testing.B) {
	for _, form := range []struct {
		name  string
		array bool
	}{{"jsonl", false}, {"array", true}} {
		b.Run(form.name, func(b *testing.B) {
			g := newGenerated(b.N, form.array)
			b.SetBytes(int64(g.entryBytes))
			b.ReportAllocs()
			r := NewReader(g, Options{})
			b.ResetTimer()
			for i := 0; ; i++ {
				it, err := r.Next()
				if err == io.EOF {
					if i != b.N {
						b.Fatalf("read %d entries, want %d", i, b.N)
					}
					return
				}
				if err != nil || it.Err != nil {
					b.Fatalf("entry %d: %v, %v", i, err, it.Err)
				}
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	entry := []byte(fmt.Sprintf(generatedTemplate, 1, 1))
	b.SetBytes(int64(len(entry)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(entry, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// chunkReader returns at most n bytes per Read, so that entries straddle
// the Reader's buffer wherever the chunks happen to end.
type chunkReader struct {
	r io.Reader
	n int
}

func (c chunkReader) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}

// TestReaderSameItemsWhateverTheReadSizes reads an export several buffers
// long, with malformed lines among the entries, in reads of odd sizes: the
// items (offsets, bytes, events, rejects) are those of reading it whole, and
// each is what Parse makes of its bytes.
func TestReaderSameItemsWhateverTheReadSizes(t *testing.T) {
	for _, array := range []bool{false, true} {
		data := mixedExport(t, 1500, array)
		if !array {
			lines := bytes.SplitAfter(data, []byte("\n"))
			for i := 5; i < len(lines); i += 97 {
				lines[i] = append([]byte(`{"insertId":"cut`+"\n"), lines[i]...)
			}
			data = bytes.Join(lines, nil)
		}
		if len(data) < 3*readBufferSize {
			t.Fatalf("export of %d bytes is not several buffers long", len(data))
		}
		readAll := func(in io.Reader) []Item {
			var items []Item
			r := NewReader(in, Options{})
			for {
				it, err := r.Next()
				if err == io.EOF {
					return items
				}
				if err != nil {
					t.Fatal(err)
				}
				items = append(items, it)
			}
		}
		whole := readAll(bytes.NewReader(data))
		for _, it := range whole {
			if got := data[it.Offset : it.Offset+int64(len(it.Data))]; !bytes.Equal(got, it.Data) {
				t.Fatalf("item %d: Data %.40q is not the input at its offset %d (%.40q)", it.Index, it.Data, it.Offset, got)
			}
			ev, err := Parse(it.Data, Options{})
			if (err == nil) != (it.Err == nil) {
				t.Fatalf("item %d: Parse says %v, the Reader %v", it.Index, err, it.Err)
			}
			if diff := cmp.Diff(ev, it.Event); diff != "" {
				t.Fatalf("item %d: event differs from Parse (-Parse +Reader):\n%s", it.Index, diff)
			}
		}
		for _, n := range []int{4093, 7919, 65521, readBufferSize - 1} {
			// reflect.DeepEqual first: cmp.Diff of thousands of items is slow.
			if got := readAll(chunkReader{bytes.NewReader(data), n}); !reflect.DeepEqual(whole, got) {
				t.Errorf("array %v, reads of %d bytes: items differ (-whole +chunked):\n%s", array, n, cmp.Diff(whole, got))
			}
		}
	}
}

// readsOnce hands out data in one Read and counts the Reads after it: a
// live stream (a pipe) whose writer waits, where such a Read would block.
type readsOnce struct {
	data  []byte
	after int
}

func (r *readsOnce) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		r.after++
		return 0, io.EOF
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// An element that is whole in the bytes read so far is returned without
// another Read, also when the fast path declines it (an envelope, a
// malformed object, an escaped member name): on a pipe that Read would
// wait for the writer. (Reading on after any decline once made
// `replay -` wait on a live stream.)
func TestReaderDoesNotReadOnForAWholeElement(t *testing.T) {
	entry := compact(t, readFixture(t, "terminate-maintenance.json"))
	envelope := `{"message":{"data":"` + base64.StdEncoding.EncodeToString([]byte(entry)) + `"}}`
	for name, second := range map[string]string{
		"entry":              entry,
		"pub/sub push body":  envelope,
		"malformed object":   `{"a" 1}`,
		"escaped key":        strings.Replace(entry, `"protoPayload"`, `"\u0070rotoPayload"`, 1),
		"object then scalar": `{"a":[1,{"b":"}"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			src := &readsOnce{data: []byte(entry + "\n" + second + "\n")}
			r := NewReader(src, Options{})
			for i := range 2 {
				if _, err := r.Next(); err != nil {
					t.Fatalf("Next %d: %v", i+1, err)
				}
			}
			if src.after != 0 {
				t.Errorf("%d Reads after the data before the second element was returned, want 0", src.after)
			}
		})
	}
}
