package computefake

import (
	"math/rand/v2"
	"slices"
	"time"
)

// FaultKind is one kind of fault FailRandomly draws.
type FaultKind string

// The fault kinds. Each applies to the calls it makes sense for: the ones
// with an effect to mutating calls, the paging ones to list calls.
const (
	KindError                 FaultKind = "error"                   // an error code, no effect
	KindErrorApplied          FaultKind = "error-applied"           // an error code, the call took effect
	KindErrorAppliedLater     FaultKind = "error-applied-later"     // an error code, the call takes effect later
	KindHang                  FaultKind = "hang"                    // held past the caller's deadline, no effect
	KindHangApplied           FaultKind = "hang-applied"            // held past the deadline, took effect (now or later)
	KindLost                  FaultKind = "lost"                    // took effect, the answer is lost
	KindMalformed             FaultKind = "malformed"               // 200 with a body that is not JSON
	KindOperationError        FaultKind = "operation-error"         // the operation ends in error, no effect
	KindOperationErrorApplied FaultKind = "operation-error-applied" // the operation ends in error, the effect happened
	KindCapacity              FaultKind = "capacity"                // the operation ends with a capacity error
	KindReadLag               FaultKind = "read-lag"                // reads show the old state for a while
	KindPageRepeat            FaultKind = "page-repeat"
	KindPageRestart           FaultKind = "page-restart"
	KindPageSkip              FaultKind = "page-skip"
	KindPageEmpty             FaultKind = "page-empty"
)

// AllKinds are every fault kind, in the order FailRandomly draws among them.
var AllKinds = []FaultKind{
	KindError, KindErrorApplied, KindErrorAppliedLater, KindHang, KindHangApplied, KindLost, KindMalformed,
	KindOperationError, KindOperationErrorApplied, KindCapacity, KindReadLag, KindPageRepeat, KindPageRestart, KindPageSkip, KindPageEmpty,
}

// DefaultCodes are the error codes FailRandomly draws from by default.
var DefaultCodes = []int{400, 403, 404, 409, 412, 429, 500, 503}

// Chaos says what FailRandomly injects.
type Chaos struct {
	// Seed seeds the generator (math/rand/v2's PCG): the same seed, fleet,
	// clock and sequence of calls inject the same faults into the same calls.
	Seed uint64
	// Rate is the chance that a call gets a fault (0 to 1).
	Rate float64
	// Kinds are the kinds drawn from (nil = AllKinds); a call gets only a
	// kind that applies to it, and none when no listed kind does.
	Kinds []FaultKind
	// Codes are the error codes drawn from (nil = DefaultCodes).
	Codes []int
	// MaxDelay bounds the drawn AppliedAfter and ReadLag (default 2 minutes).
	MaxDelay time.Duration
	// Methods restricts the faults to these methods (nil = every method).
	Methods []string
}

type chaosState struct {
	Chaos
	rng *rand.Rand
}

// FailRandomly draws a fault for every call that no Fail rule matches, as c
// says, from a generator seeded with c.Seed. The draws happen in the order
// the calls arrive, under the server's lock: a caller that makes its calls
// one at a time on a virtual clock gets the same faults on every run, and
// Requests (with each request's Fault) is the same log. A later call
// replaces the generator.
func (s *Server) FailRandomly(c Chaos) {
	if c.Kinds == nil {
		c.Kinds = AllKinds
	}
	if c.Codes == nil {
		c.Codes = DefaultCodes
	}
	if c.MaxDelay <= 0 {
		c.MaxDelay = 2 * time.Minute
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chaos = &chaosState{Chaos: c, rng: newRand(c.Seed)}
}

// kindApplies reports whether k can be injected into a call of method.
func kindApplies(k FaultKind, method string) bool {
	switch k {
	case KindError, KindHang, KindMalformed:
		return true
	case KindPageRepeat, KindPageRestart, KindPageSkip, KindPageEmpty:
		return listing[method]
	}
	return mutating[method]
}

// drawFault draws the call's fault, or nil. Every call that reaches it
// draws the same number of values whatever it gets, so one call's fault
// does not shift the next one's. Called with s.mu held.
func (s *Server) drawFault(rt route) *FailRule {
	c := s.chaos
	if c == nil || c.Methods != nil && !slices.Contains(c.Methods, rt.method) {
		return nil
	}
	roll, pick, code, delay := c.rng.Float64(), c.rng.IntN(1<<30), c.rng.IntN(1<<30), c.rng.Int64N(int64(c.MaxDelay))
	if roll >= c.Rate {
		return nil
	}
	var kinds []FaultKind
	for _, k := range c.Kinds {
		if kindApplies(k, rt.method) {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return nil
	}
	d := time.Duration(delay) + time.Second
	f := &FailRule{Method: rt.method, Resource: rt.resource, Code: c.Codes[code%len(c.Codes)]}
	switch kinds[pick%len(kinds)] {
	case KindError:
	case KindErrorApplied:
		f.Applied = true
	case KindErrorAppliedLater:
		f.Applied, f.AppliedAfter = true, d
	case KindHang:
		f.Code, f.Hang = 0, true
	case KindHangApplied:
		f.Code, f.Hang, f.Applied = 0, true, true
		if pick%2 == 1 {
			f.AppliedAfter = d
		}
	case KindLost:
		f.Code, f.Lost, f.Applied = 0, true, true
	case KindMalformed:
		f.Code, f.Malformed = 0, true
	case KindOperationError, KindOperationErrorApplied:
		f.OperationError = true
		f.Applied = kinds[pick%len(kinds)] == KindOperationErrorApplied
		f.Reason = "INTERNAL_ERROR"
		if f.Code < 500 {
			f.Code = 500
		}
	case KindCapacity:
		f.Code = 0
		f.Capacity = []Capacity{ZoneResourcePoolExhausted, ZoneResourcePoolExhaustedWithDetails, QuotaExceededRegion, QuotaExceededZone}[code%4]
		f.OperationError = true
	case KindReadLag:
		f.Code, f.ReadLag = 0, d
	case KindPageRepeat:
		f.Code, f.Page = 0, PageRepeat
	case KindPageRestart:
		f.Code, f.Page = 0, PageRestart
	case KindPageSkip:
		f.Code, f.Page = 0, PageSkip
	case KindPageEmpty:
		f.Code, f.Page = 0, PageEmpty
	}
	return f
}
