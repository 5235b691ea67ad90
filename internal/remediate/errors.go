package remediate

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"google.golang.org/api/googleapi"
)

// IsNotFound reports whether err is the TPU API's NOT_FOUND (HTTP 404).
func IsNotFound(err error) bool {
	return apiCode(err) == http.StatusNotFound
}

// IsAlreadyExists reports whether err is the TPU API's ALREADY_EXISTS (HTTP
// 409 with status ALREADY_EXISTS, or any 409 without a status: ABORTED
// conflicts are not "already exists").
func IsAlreadyExists(err error) bool {
	if apiCode(err) != http.StatusConflict {
		return false
	}
	return !strings.Contains(apiStatus(err), "ABORTED")
}

// IsTransient reports whether err may go away by itself soon, so retrying
// the same call (in-process, or by Pub/Sub redelivery) is right: 429 rate
// limits other than a stockout, 500, 502, 503, 504, deadlines and broken
// connections. A stockout or quota RESOURCE_EXHAUSTED on create is not
// transient (see isExhausted): a quick retry does not bring capacity back.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	switch code := apiCode(err); code {
	case http.StatusTooManyRequests:
		return !isStockout(err)
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case 0:
	default:
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe)
}

// isExhausted reports whether err is RESOURCE_EXHAUSTED (HTTP 429): on a
// create, a stockout or a quota; the recovery fails and is retried later.
func isExhausted(err error) bool {
	return apiCode(err) == http.StatusTooManyRequests || strings.Contains(apiStatus(err), "RESOURCE_EXHAUSTED")
}

// isStockout reports whether a RESOURCE_EXHAUSTED error is about capacity or
// quota rather than request rate.
func isStockout(err error) bool {
	s := strings.ToLower(apiStatus(err))
	for _, w := range []string{"stockout", "capacity", "insufficient"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	// A resource quota (chips), not a request-rate quota.
	return strings.Contains(s, "quota") && !strings.Contains(s, "per minute") && !strings.Contains(s, "rate")
}

func apiCode(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

// apiStatus is the error's message, body and reasons, for matching words.
func apiStatus(err error) string {
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return ""
	}
	var b strings.Builder
	b.WriteString(ge.Message)
	b.WriteString(" ")
	b.WriteString(ge.Body)
	for _, e := range ge.Errors {
		b.WriteString(" " + e.Reason + " " + e.Message)
	}
	return b.String()
}

// Backoff is the in-process retry policy for transient TPU API errors:
// capped, jittered exponential backoff. The zero value means DefaultBackoff.
type Backoff struct {
	Initial  time.Duration // first wait
	Max      time.Duration // cap of one wait
	Attempts int           // calls in all, the first included
}

// DefaultBackoff: 5 calls over about 15 s, well inside a function's timeout;
// after that the error goes back to Pub/Sub, which redelivers.
func DefaultBackoff() Backoff {
	return Backoff{Initial: time.Second, Max: 8 * time.Second, Attempts: 5}
}

func (b Backoff) orDefault() Backoff {
	if b.Attempts <= 0 {
		return DefaultBackoff()
	}
	return b
}

// retry calls f until it succeeds, fails with an error that transient says
// is not worth retrying, the attempts are used up or ctx is done. It returns
// f's last error.
func (b Backoff) retry(ctx context.Context, transient func(error) bool, f func() error) error {
	b = b.orDefault()
	wait := b.Initial
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || !transient(err) || attempt >= b.Attempts || ctx.Err() != nil {
			return err
		}
		// Jitter in [wait/2, wait].
		d := wait/2 + rand.N(wait/2+1)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait *= 2
		if b.Max > 0 && wait > b.Max {
			wait = b.Max
		}
	}
}
