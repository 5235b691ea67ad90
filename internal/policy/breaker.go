package policy

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// BreakerOpenError is what Store.Claim returns when the zone's storm breaker
// is open: Limit recreates or resets already started in Zone within Window.
// The handler turns it into a skip whose reason is Error() (it starts with
// "breaker open"); on the one claim that tripped it (Tripped) the record also
// carries it as Err, so exactly one ERROR record pages a person per trip.
type BreakerOpenError struct {
	Zone    string
	Started int           // recreates and resets started in Zone within Window
	Limit   int           // Config.BreakerLimit
	Window  time.Duration // Config.BreakerWindow
	Until   time.Time     // when the oldest counted start leaves the window
	Tripped bool          // this claim is the first one refused since the breaker was last closed
}

func (e *BreakerOpenError) Error() string {
	return fmt.Sprintf("breaker open: %d recreates/resets started in zone %s within %s (limit %d); closes at %s or with `autoheal breaker reset --zone %s`",
		e.Started, e.Zone, e.Window, e.Limit, e.Until.UTC().Format(time.RFC3339), e.Zone)
}

// ParseBreaker parses a breaker setting LIMIT/WINDOW, such as "48/1h".
func ParseBreaker(s string) (limit int, window time.Duration, err error) {
	l, w, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, fmt.Errorf("breaker %q: want LIMIT/WINDOW such as 48/1h", s)
	}
	limit, err = strconv.Atoi(l)
	if err != nil || limit <= 0 {
		return 0, 0, fmt.Errorf("breaker %q: LIMIT %q is not a positive integer", s, l)
	}
	window, err = time.ParseDuration(w)
	if err != nil || window <= 0 {
		return 0, 0, fmt.Errorf("breaker %q: WINDOW %q is not a positive duration such as 1h", s, w)
	}
	return limit, window, nil
}
