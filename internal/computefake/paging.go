package computefake

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// Page tokens are opaque to callers: base64 of "p<serial>:after:<seq>", the
// first-seen sequence number of the last item already returned. The serial
// makes every token the server hands out a new string, so a caller that
// sees a token twice knows it was given the same one again (PageRepeat);
// tokens stay valid when items are added or removed meanwhile.

// maxPageSize is the largest maxResults Compute Engine accepts.
const maxPageSize = 500

// pageSize reads a request's maxResults (0 or absent = def).
func pageSize(maxResults string, def int) (int, *apiError) {
	if maxResults == "" {
		return min(max(def, 1), maxPageSize), nil
	}
	n, err := strconv.Atoi(maxResults)
	if err != nil || n < 0 || n > maxPageSize {
		return 0, invalid("maxResults", maxResults, fmt.Sprintf("Must be a number from 0 to %d.", maxPageSize))
	}
	if n == 0 {
		n = def
	}
	return min(max(n, 1), maxPageSize), nil
}

// token makes a page token that goes on after sequence number after.
// Called with s.mu held.
func (s *Server) token(after int) string {
	s.seq++ // shares the name sequence: any increasing serial does
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "p%d:after:%d", s.seq, after))
}

// afterToken reads a page token ("" = from the start).
func afterToken(tok string) (int, *apiError) {
	if tok == "" {
		return 0, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	_, rest, ok := strings.Cut(string(raw), ":after:")
	n, err2 := strconv.Atoi(rest)
	if err != nil || !ok || err2 != nil || n < 0 {
		return 0, invalid("pageToken", tok, "The page token is not one this server handed out.")
	}
	return n, nil
}

// paginate picks the page of items (ordered by seq) after tok, of size
// items, and the next page's token; fault makes the page odd. Called with
// s.mu held.
func paginate[T any](s *Server, items []T, seq func(T) int, tok string, size int, fault PageFault) ([]T, string, *apiError) {
	after, e := afterToken(tok)
	if e != nil {
		return nil, "", e
	}
	var rest []T
	for _, it := range items {
		if seq(it) > after {
			rest = append(rest, it)
		}
	}
	page := rest[:min(size, len(rest))]
	next := ""
	if len(rest) > len(page) {
		next = s.token(seq(page[len(page)-1]))
	}
	switch fault {
	case PageRepeat:
		next = tok
		if next == "" {
			next = s.token(0)
		}
	case PageSkip:
		if skipped := rest[len(page):]; len(skipped) > size {
			next = s.token(seq(skipped[size-1]))
		} else {
			next = ""
		}
	case PageEmpty:
		page, next = nil, s.token(after)
	}
	return page, next, nil
}
