package policy

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strings"
	"time"
)

// StockoutBase is the back-off window of a recovery's first stockout: the
// nth waits a delay drawn from [W/2, W) with W = StockoutBase×2^(n-1),
// capped at the lease (what a stockout waited before it had a back-off).
// The draw is seeded (Config.StockoutSeed) per node and stockout number:
// deterministic for replay, and never in lockstep across the nodes of one
// wave, whose creates were refused in the same second.
const StockoutBase = 2 * time.Minute

// StockoutWindow is the window [lo, hi) the nth stockout's delay is drawn
// from.
func StockoutWindow(cfg Config, n int) (lo, hi time.Duration) {
	w := StockoutBase
	for i := 1; i < n && w < leaseOf(cfg); i++ {
		w *= 2
	}
	w = min(w, leaseOf(cfg))
	return w / 2, w
}

// StockoutDelay is how long the nth stockout of node's recovery waits
// before the create is tried again.
func StockoutDelay(cfg Config, node string, n int) time.Duration {
	lo, hi := StockoutWindow(cfg, n)
	return lo + time.Duration(jitter(cfg.StockoutSeed, node, n)*float64(hi-lo))
}

// jitter is a number in [0, 1) drawn from seed, node and n alone.
func jitter(seed uint64, node string, n int) float64 {
	h := fnv.New64a()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], seed)
	binary.LittleEndian.PutUint64(b[8:], uint64(n))
	h.Write(b[:])
	h.Write([]byte(node))
	// splitmix64's finaliser: FNV's low bits alone are poorly mixed.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

// Refusal is a create the API refused for want of capacity (a stockout) or
// quota, as a record says it: which, where, in the API's own words, and
// when the create is tried again.
type Refusal struct {
	Kind      string    // "stockout" or "quota"
	Scope     string    // "zone" or "region" (from the wording; a stockout is the zone's)
	Zone      string    // the zone the create was sent to
	Message   string    // the API's wording, kept
	Stockouts int       // this incident's stockouts so far
	RetryAt   time.Time // when the create is tried again
	// Fallback is what the node's autoheal-stockout asked for and what is
	// done about it ("wait"; "zones:…: another zone after 3 stockouts (1
	// so far)"; "zones: refused: …: waiting in Z"). Stockouts only.
	Fallback string
}

// RefusalOf is the refusal rec's last failure was (LastKind), or nil when
// it was no stockout or quota. Its message is the API's wording, after
// the "STEP (KIND): " fail writes LastError with.
func RefusalOf(rec Recovery, cfg Config) *Refusal {
	k := rec.LastKind
	if !k.Exhausted() {
		return nil
	}
	mark := " (" + k.String() + "): "
	i := strings.Index(rec.LastError, mark)
	if i < 0 {
		return nil
	}
	_, _, zone, _, _ := ParseNodeName(rec.Node)
	msg := rec.LastError[i+len(mark):]
	r := &Refusal{Kind: k.String(), Scope: QuotaScope(k, msg), Zone: zone, Message: msg,
		Stockouts: rec.Stockouts, RetryAt: rec.NextLookAt}
	if k == KindStockout {
		r.Fallback = describeFallback(rec, cfg)
	}
	return r
}

// String is the refusal in a record's words.
func (r Refusal) String() string {
	return fmt.Sprintf("%s in %s (%s scope): %s", r.Kind, r.Zone, r.Scope, r.Message)
}
