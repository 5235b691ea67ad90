package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// Item is one element of a stream read by a Reader.
type Item struct {
	Index  int    // position in the stream, from 0, counting rejected elements too
	Offset int64  // byte offset in the stream of the element's first byte
	Data   []byte // the element's bytes as read (for a rejected one, at most its first 2×MaxEntryBytes)
	Event  Event  // the parsed event when Err is nil
	Err    error  // a *RejectError when the element is not an event; the stream goes on
}

// Reader reads a stream of log entries in any of the forms replay accepts,
// detected from the bytes:
//
//   - a JSON array, as `gcloud logging read --format=json` prints it (several
//     arrays one after another are read in turn);
//   - a single object, compact or pretty-printed over many lines;
//   - JSON Lines, or objects simply concatenated.
//
// Each element may be a LogEntry, a Pub/Sub push body or CloudEvent data
// (see Parse). Memory stays bounded whatever the input size: elements are
// framed by a small byte scanner, never by loading the input, and an element
// longer than the limit (2×MaxEntryBytes of raw bytes, room for an envelope)
// is skipped without being kept.
//
// We frame elements ourselves instead of using json.Decoder because the
// Decoder buffers a whole value before returning it, so one huge element
// would be held in memory entirely, and because it cannot continue after a
// syntax error.
//
// A Reader is not safe for concurrent use.
//
// Recovery from a malformed element:
//
//   - Outside an array (JSON Lines, concatenated objects), a malformed element
//     yields one Item with a malformed-json Err, and reading resumes at the
//     next line that starts with '{' in its first column. A line that starts
//     with neither '{' nor '[' (which opens an array) is one malformed Item.
//     While an object is open, a
//     '{' in the first column of a line is taken as the start of the next
//     entry and the open one as truncated: formatters (gcloud, jq, encoders)
//     indent nested values, so this only misreads hand-made JSON that puts a
//     nested object at column 0.
//   - Inside an array, a structural error (a missing comma, an unclosed
//     bracket, a raw newline inside a string, input ending early) leaves no
//     reliable place to resume: the Reader yields one Item with Err and then
//     reports io.EOF. An element that is well framed but invalid inside (say
//     {"a" 1}) is rejected alone and the array continues.
type Reader struct {
	r    io.Reader
	opts Options

	buf      []byte
	pos, end int
	off      int64 // bytes consumed so far
	readErr  error // error returned by r together with the last bytes
	err      error // sticky error returned by Next

	lineStart bool // the previous byte was '\n' (or nothing was read yet)
	mode      readMode
	index     int
	start     int64 // offset of the element being read (Item.Offset)

	causes causeCache // classifications of recent entries (the fast path's)

	elem  []byte // scratch for the element being framed
	over  bool   // elem was cut at the limit
	stack []byte // open brackets of the element being framed
	bad   string // why framing failed
}

type readMode int

const (
	modeTop        readMode = iota // between top-level values
	modeArrayFirst                 // just after '['
	modeArrayValue                 // after ',' in an array
	modeArrayNext                  // after an array element
)

// maxDepth bounds the nesting of an element, as encoding/json does.
const maxDepth = 10000

const readBufferSize = 256 << 10

// topUpBelow is how few unread bytes make fastElement read more when the
// element does not end in them. Small, so that an element the fast path
// declines anyway (an envelope, say) costs at most one move of this many
// bytes per buffer.
const topUpBelow = 16 << 10

// NewReader returns a Reader of the entries in r; opts are passed to Parse
// for each element.
func NewReader(r io.Reader, opts Options) *Reader {
	return &Reader{r: r, opts: opts, buf: make([]byte, readBufferSize), lineStart: true}
}

// Next returns the next element. A rejected element is an Item with Err set,
// not an error: the caller records it and calls Next again. Next returns
// io.EOF at the end of the stream and any other error when reading the
// underlying reader fails; both are final.
func (r *Reader) Next() (it Item, err error) {
	if r.err != nil {
		return Item{}, r.err
	}
	for {
		c, err := r.skipSpace()
		r.start = r.off
		if err == io.EOF {
			if r.mode != modeTop {
				r.err = io.EOF
				return r.item(nil, reject(CodeMalformedJSON, "", "input ends inside a JSON array (at byte %d)", r.off)), nil
			}
			r.err = io.EOF
			return Item{}, io.EOF
		}
		if err != nil {
			return Item{}, r.fail(err)
		}
		switch r.mode {
		case modeTop:
			switch c {
			case '[':
				r.consume(1)
				r.mode = modeArrayFirst
				continue
			case '{':
				if r.fastElement(&it, true) {
					return it, nil
				}
				return r.element()
			default:
				return r.junkLine()
			}
		case modeArrayNext:
			switch c {
			case ',':
				r.consume(1)
				r.mode = modeArrayValue
				continue
			case ']':
				r.consume(1)
				r.mode = modeTop
				continue
			}
			return r.arrayStop(fmt.Sprintf("%q after an array element, want ',' or ']'", c))
		case modeArrayFirst, modeArrayValue:
			if c == ']' && r.mode == modeArrayFirst {
				r.consume(1)
				r.mode = modeTop
				continue
			}
			if c == ']' || c == ',' || c == '}' {
				return r.arrayStop(fmt.Sprintf("%q where an array element should be", c))
			}
			r.mode = modeArrayNext
			if r.fastElement(&it, false) {
				return it, nil
			}
			return r.element()
		}
	}
}

func (r *Reader) fail(err error) error {
	r.err = fmt.Errorf("read log entries at byte %d: %w", r.off, err)
	return r.err
}

func (r *Reader) item(data []byte, err error) Item {
	it := Item{Index: r.index, Offset: r.start, Data: data, Err: err}
	r.index++
	return it
}

// arrayStop yields the reject after which an array cannot be resumed.
func (r *Reader) arrayStop(why string) (Item, error) {
	r.err = io.EOF
	return r.item(nil, reject(CodeMalformedJSON, "", "%s (at byte %d); the rest of the array is not read", why, r.off)), nil
}

// element frames the value at the cursor and parses it.
func (r *Reader) element() (Item, error) {
	inArray := r.mode != modeTop
	start := r.off
	res, err := r.frame(!inArray)
	if err != nil {
		return Item{}, r.fail(err)
	}
	data := bytes.Clone(r.elem)
	switch res {
	case frameOK:
		if r.over {
			return r.item(data, reject(CodeTooLarge, "", "element at byte %d is %d bytes, over the %d-byte limit", start, r.off-start, r.opts.maxRaw())), nil
		}
		ev, perr := Parse(data, r.opts)
		it := r.item(data, perr)
		it.Event = ev
		return it, nil
	case frameCut:
		return r.item(data, reject(CodeMalformedJSON, "", "entry at byte %d is cut short: a new entry starts at byte %d before it closes", start, r.off)), nil
	case frameEOF:
		r.err = io.EOF
		return r.item(data, reject(CodeMalformedJSON, "", "input ends inside the entry starting at byte %d", start)), nil
	default: // frameBad
		bad := reject(CodeMalformedJSON, "", "entry at byte %d: %s", start, r.bad)
		if inArray {
			r.err = io.EOF
			bad.Reason += "; the rest of the array is not read"
			return r.item(data, bad), nil
		}
		if err := r.resync(); err != nil && err != io.EOF {
			return Item{}, r.fail(err)
		}
		return r.item(data, bad), nil
	}
}

// fastElement reads a plain entry straight from the buffer with the fast
// path's scanner, which finds the element's end while it decodes it, so the
// element is not framed first and scanned again. It declines (false, the
// cursor unmoved, though the buffered bytes may have moved to the front of
// the buffer) whenever the general path could answer differently: the
// element does not end within the buffered bytes (after one read more, when
// few were left), is not a plain entry for the fast path, is over the limit,
// or (in a stream) has a '{' at the start of a line inside it, where frame
// would cut.
//
// It fills in *it (a zero Item) in place: an Item is some 400 bytes, and the
// Event in it is made where it is returned instead of being copied there.
func (r *Reader) fastElement(it *Item, stream bool) bool {
	s := scanner{b: r.buf[r.pos:r.end], causes: &r.causes}
	s.e.labelsNil = true
	if !s.object() {
		// Near the end of the buffer the element may just be cut off by
		// it: read on and try once more rather than frame and scan it twice.
		// An element that ends in the buffered bytes was declined, not cut
		// off: reading on would wait on a live stream (a pipe) for input
		// the element does not need.
		if r.end-r.pos > topUpBelow || r.pos == 0 || endsIn(r.buf[r.pos:r.end]) || !r.topUp() {
			return false
		}
		s = scanner{b: r.buf[r.pos:r.end], causes: &r.causes}
		s.e.labelsNil = true
		if !s.object() {
			return false
		}
	}
	elem := s.b[:s.i]
	if len(elem) > r.opts.maxRaw() || stream && s.newline && bytes.Contains(elem, []byte("\n{")) {
		return false
	}
	if it.Err = s.finish(r.opts, &it.Event); it.Err == errDecline {
		*it = Item{}
		return false
	}
	it.Data = bytes.Clone(elem)
	it.Index, it.Offset = r.index, r.start
	r.index++
	r.consume(len(elem))
	return true
}

type frameResult int

const (
	frameOK  frameResult = iota
	frameBad             // malformed; r.bad says why
	frameCut             // a '{' at column 0 began a new entry (not consumed)
	frameEOF             // the input ended inside the element
)

// frame reads one JSON value starting at the cursor into r.elem (at most
// maxRaw bytes of it; r.over tells whether it was cut). It tracks only what
// is needed to find the value's end: strings, escapes and brackets.
// The grammar inside is checked later by Parse.
func (r *Reader) frame(stream bool) (frameResult, error) {
	r.elem, r.over, r.stack, r.bad = r.elem[:0], false, r.stack[:0], ""
	limit := r.opts.maxRaw()
	inStr, esc := false, false
	scalar := false // a bare number/literal (only reachable inside an array)
	first := true
	for {
		if r.pos == r.end {
			if err := r.fill(); err != nil {
				if err == io.EOF {
					if scalar {
						return frameOK, nil
					}
					return frameEOF, nil
				}
				return 0, err
			}
		}
		buf := r.buf[r.pos:r.end]
		done := -1 // index in buf after the element's last byte
		res := frameOK
	scan:
		for i := 0; i < len(buf); i++ {
			c := buf[i]
			if first {
				first = false
				switch c {
				case '{', '[', '"':
				default:
					scalar = true
				}
			}
			if scalar {
				switch c {
				case ',', ']', '}', ' ', '\t', '\r', '\n':
					done = i
					break scan
				}
				continue
			}
			if inStr {
				if esc {
					esc = false
					continue
				}
				// Most bytes of an entry are inside strings: skip the
				// uninteresting ones in a tight loop.
				for c != '"' && c != '\\' && c != '\n' {
					if i++; i == len(buf) {
						break scan
					}
					c = buf[i]
				}
				switch c {
				case '\\':
					esc = true
				case '"':
					inStr = false
					if len(r.stack) == 0 {
						done = i + 1
						break scan
					}
				case '\n':
					r.bad = "a raw newline inside a string"
					res, done = frameBad, i+1
					break scan
				}
				continue
			}
			switch c {
			case '"':
				inStr = true
			case '{', '[':
				// A '{' in the first column while an object is open starts
				// the next entry (see Reader).
				if stream && c == '{' && len(r.stack) > 0 && (i > 0 && buf[i-1] == '\n' || i == 0 && r.lineStart) {
					res, done = frameCut, i
					break scan
				}
				if len(r.stack) >= maxDepth {
					r.bad = "nested too deep"
					res, done = frameBad, i+1
					break scan
				}
				r.stack = append(r.stack, c)
			case '}', ']':
				open := byte('{')
				if c == ']' {
					open = '['
				}
				if len(r.stack) == 0 || r.stack[len(r.stack)-1] != open {
					r.bad = fmt.Sprintf("unbalanced %q", c)
					res, done = frameBad, i+1
					break scan
				}
				r.stack = r.stack[:len(r.stack)-1]
				if len(r.stack) == 0 {
					done = i + 1
					break scan
				}
			}
		}
		if done < 0 {
			r.keep(buf, limit)
			r.consume(len(buf))
			continue
		}
		r.keep(buf[:done], limit)
		r.consume(done)
		return res, nil
	}
}

// keep appends b to the element, up to limit bytes.
func (r *Reader) keep(b []byte, limit int) {
	if r.over {
		return
	}
	if room := limit - len(r.elem); len(b) > room {
		r.elem = append(r.elem, b[:room]...)
		r.over = true
		return
	}
	r.elem = append(r.elem, b...)
}

// junkLine rejects a top-level line that does not start a JSON object or
// array, consuming it through its newline.
func (r *Reader) junkLine() (Item, error) {
	r.elem, r.over = r.elem[:0], false
	limit := r.opts.maxRaw()
	start := r.off
	for {
		if r.pos == r.end {
			if err := r.fill(); err == io.EOF {
				break
			} else if err != nil {
				return Item{}, r.fail(err)
			}
		}
		buf := r.buf[r.pos:r.end]
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			r.keep(buf[:i], limit)
			r.consume(i + 1)
			break
		}
		r.keep(buf, limit)
		r.consume(len(buf))
	}
	data := bytes.Clone(bytes.TrimRight(r.elem, "\r"))
	if json.Valid(data) {
		_, err := Parse(data, r.opts) // a JSON scalar: not-object
		return r.item(data, err), nil
	}
	shown := data
	if len(shown) > 40 {
		shown = shown[:40]
	}
	return r.item(data, reject(CodeMalformedJSON, "", "line at byte %d is not a JSON object: %q", start, shown)), nil
}

// resync skips to the next line that starts with '{'.
func (r *Reader) resync() error {
	for {
		if r.pos == r.end {
			if err := r.fill(); err != nil {
				return err
			}
		}
		buf := r.buf[r.pos:r.end]
		if r.lineStart && buf[0] == '{' {
			return nil
		}
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			r.consume(len(buf))
			continue
		}
		r.consume(i + 1)
	}
}

// skipSpace skips whitespace (and a UTF-8 byte order mark at the start) and
// returns the next byte without consuming it.
func (r *Reader) skipSpace() (byte, error) {
	for {
		if r.pos == r.end {
			if err := r.fill(); err != nil {
				return 0, err
			}
		}
		c := r.buf[r.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
		case r.off < 3 && (c == 0xEF || c == 0xBB || c == 0xBF):
		default:
			return c, nil
		}
		r.consume(1)
	}
}

// consume moves past n buffered bytes, remembering whether the last one
// ended a line.
func (r *Reader) consume(n int) {
	if n > 0 {
		r.lineStart = r.buf[r.pos+n-1] == '\n'
	}
	r.pos += n
	r.off += int64(n)
}

// endsIn reports whether the object at the start of b ends within b: the
// brackets' balance found outside strings, nothing else checked (frame and
// Parse check the grammar). Anything but an object is not the fast path's
// to read on for: it counts as ended.
func endsIn(b []byte) bool {
	if len(b) == 0 || b[0] != '{' {
		return true
	}
	depth := 0
	inStr, esc := false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case inStr:
			switch c {
			case '\\':
				esc = true
			case '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth--; depth == 0 {
				return true
			}
		}
	}
	return false
}

// topUp moves the unread bytes to the front of the buffer and reads once
// after them (one Read, as fill does: a live stream must not wait for a
// full buffer). It reports whether anything was added.
func (r *Reader) topUp() bool {
	if r.readErr != nil {
		return false
	}
	r.end = copy(r.buf, r.buf[r.pos:r.end])
	r.pos = 0
	for empty := 0; ; empty++ {
		n, err := r.r.Read(r.buf[r.end:])
		r.end += n
		if err != nil {
			r.readErr = err
		}
		if n > 0 || err != nil {
			return n > 0
		}
		if empty >= 100 {
			r.readErr = io.ErrNoProgress
			return false
		}
	}
}

// fill reads more input into the empty buffer. It returns io.EOF at the end.
func (r *Reader) fill() error {
	if r.readErr != nil {
		return r.readErr
	}
	r.pos, r.end = 0, 0
	for empty := 0; ; empty++ {
		n, err := r.r.Read(r.buf)
		r.end = n
		if err != nil {
			r.readErr = err
		}
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
		if empty >= 100 {
			r.readErr = io.ErrNoProgress
			return r.readErr
		}
	}
}
