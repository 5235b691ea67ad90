package events

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestItemOffsetIsWhereTheElementStarts: replay reads entries back by offset
// (to decide a newest-first export oldest first) and names a reject's place.
func TestItemOffsetIsWhereTheElementStarts(t *testing.T) {
	inputs := map[string]string{
		"json lines":  "{\"a\":1}\n\n  {\"b\":2}\nnot json\n{\"c\":3}\n",
		"array":       "[\n  {\"a\":1},\n  {\"b\": [1, 2]}\n]\n[{\"c\":3}]",
		"pretty":      "{\n  \"a\": {\n    \"b\": 1\n  }\n}\n{\"c\":3}",
		"with a BOM":  "\xef\xbb\xbf{\"a\":1}\n{\"b\":2}",
		"cut entries": "{\"a\":\n{\"b\":2}\n",
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			r := NewReader(strings.NewReader(in), Options{})
			n := 0
			for {
				it, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				n++
				if len(it.Data) == 0 {
					continue
				}
				if it.Offset < 0 || it.Offset > int64(len(in)) || !bytes.HasPrefix([]byte(in[it.Offset:]), it.Data) {
					t.Errorf("item %d: Offset %d, but the input there is %q, not %q", it.Index, it.Offset, in[min(int(it.Offset), len(in)):], it.Data)
				}
			}
			if n < 2 {
				t.Errorf("read %d items, want several", n)
			}
		})
	}
}
