package main

import (
	"time"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// markSlack is how far behind the newest entry decided a mark is kept by
// the replay's mark window. Decided in time order, a duplicate of an entry
// has the original's timestamp (Cloud Logging's identity of an entry,
// remediate.EventKey, includes it), so it comes right after the original:
// the slack only covers an input that says it is ascending (--order asc)
// but is a little out of order.
const markSlack = 5 * time.Minute

// markWindow bounds the in-memory ledger's event marks during a replay that
// decides in time order. The function keeps a mark for EventTTL (7 days) so
// that Pub/Sub's redeliveries are recognised; replay would keep one mark per
// entry for the whole run (its clock is the wall clock, or the entries'
// clock that moves days through a long export), so its memory grew with
// the input. Every so many entries (as many as the marks left by the last
// purge, at least minMarkPurge: O(1) amortized per entry) it forgets the
// marks of entries older than the newest entry decided minus markSlack: no
// entry still to come can repeat them.
type markWindow struct {
	store     *ledger.Memory
	newest    time.Time
	since     int // entries since the last purge
	purgeNext int // entries between purges: the marks left by the last one
}

const minMarkPurge = 4096

// seen notes an entry about to be decided at time t.
func (w *markWindow) seen(t time.Time) {
	if w == nil {
		return
	}
	if t.After(w.newest) {
		w.newest = t
	}
	w.since++
	if w.since < max(w.purgeNext, minMarkPurge) {
		return
	}
	w.since = 0
	horizon := w.newest.Add(-markSlack)
	w.purgeNext = w.store.ForgetEvents(func(id string, _ time.Time) bool {
		t, ok := remediate.EventKeyTime(id)
		return ok && t.Before(horizon)
	})
}
