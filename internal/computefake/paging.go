package computefake

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// Page tokens are opaque to callers: base64 of "after:<seq>", the first-seen
// sequence number of the last item already returned, so the same place in a
// listing has the same token (a listing that comes back to a place repeats a
// token) and tokens stay valid when items are added or removed meanwhile.
// The token after an empty page (PageEmpty) is another string for the same
// place ("after:<seq>:e").

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

// token is the page token that goes on after sequence number after.
func token(after int) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "after:%d", after))
}

// afterToken reads a page token ("" = from the start).
func afterToken(tok string) (int, *apiError) {
	if tok == "" {
		return 0, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	rest, ok := strings.CutPrefix(strings.TrimSuffix(string(raw), ":e"), "after:")
	n, err2 := strconv.Atoi(rest)
	if err != nil || !ok || err2 != nil || n < 0 {
		return 0, invalid("pageToken", tok, "The page token is not one this server handed out.")
	}
	return n, nil
}

// paginate picks the page of items (ordered by seq) after tok, of size
// items, and the next page's token; fault makes the page odd. Called with
// s.mu held.
func paginate[T any](items []T, seq func(T) int, tok string, size int, fault PageFault) ([]T, string, *apiError) {
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
		next = token(seq(page[len(page)-1]))
	}
	switch fault {
	case PageRepeat:
		next = tok
		if next == "" {
			next = token(0)
		}
	case PageSkip:
		if skipped := rest[len(page):]; len(skipped) > size {
			next = token(seq(skipped[size-1]))
		} else {
			next = ""
		}
	case PageRestart:
		next = token(0)
	case PageEmpty:
		page, next = nil, base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "after:%d:e", after))
	}
	return page, next, nil
}
