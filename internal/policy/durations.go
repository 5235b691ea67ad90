package policy

import (
	"strings"
	"time"
)

// ShortDuration prints a duration as a person writes it: 24h for 24h0m0s,
// 1h30m for 1h30m0s, 30m for 30m0s. Records, the CLI and the function's
// reasons all print durations this way.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
