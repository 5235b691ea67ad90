package tpufake

import (
	"encoding/base64"
	"fmt"

	tpu "google.golang.org/api/tpu/v2"
)

// Paging anomalies of nodes.list, as a FailRule's Page. The page tokens are
// opaque to callers; this fake's token for "the nodes after the one seen
// n-th" is base64url("after:n"), and "after:0" is a token (not empty)
// naming the first page.

// PageFault is what goes wrong with one nodes.list answer.
type PageFault int

// Page faults.
const (
	PageNone PageFault = iota
	// PageRepeat: the answer's nextPageToken is the request's own token
	// (for the first page, a token naming the first page): the same page
	// comes again. Applies to every answer.
	PageRepeat
	// PageLoopToFirst: the last page's nextPageToken, instead of empty, names
	// the first page: a listing that follows tokens never ends. Applies only
	// to a last page.
	PageLoopToFirst
	// PageSkip: the nextPageToken passes over the following page, whose
	// nodes are never listed. Applies only to an answer with a next page.
	PageSkip
	// PageEmpty: the answer has no nodes and a nextPageToken naming the page
	// it should have been. Applies to every answer.
	PageEmpty
)

var pageNames = [...]string{"none", "repeat", "loop-to-first", "skip", "empty"}

func (p PageFault) String() string {
	if p >= 0 && int(p) < len(pageNames) {
		return pageNames[p]
	}
	return "page(?)"
}

// pageToken is the token of the nodes after the one seen seq-th.
func pageToken(seq int) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "after:%d", seq))
}

// matchPage returns the first page rule for a nodes.list of parent whose
// fault applies to an answer that is (or is not) the last page and has (or
// has not) a next page, counting its use, or PageNone. Called with s.mu held.
func (s *Server) matchPage(parent string, last bool) PageFault {
	for i, r := range s.rules {
		if r.Page == PageNone || r.RPC != "nodes.list" || (r.Name != "" && r.Name != parent) {
			continue
		}
		if r.Page == PageLoopToFirst && !last || r.Page == PageSkip && last {
			continue
		}
		if !r.take(i, s) {
			continue
		}
		return r.Page
	}
	return PageNone
}

// applyPage changes resp, the answer to a request with token, as fault
// says. next is the sequence after which the page after the next one
// starts (for PageSkip), 0 when there is none. Called with s.mu held.
func applyPage(resp *tpu.ListNodesResponse, fault PageFault, token string, skipTo int) {
	self := token
	if self == "" {
		self = pageToken(0)
	}
	switch fault {
	case PageRepeat:
		resp.NextPageToken = self
	case PageLoopToFirst:
		resp.NextPageToken = pageToken(0)
	case PageSkip:
		if skipTo > 0 {
			resp.NextPageToken = pageToken(skipTo)
		} else {
			resp.NextPageToken = ""
		}
	case PageEmpty:
		resp.Nodes = nil
		resp.NextPageToken = self
	}
}
