package report

import (
	"sort"
	"time"
)

// Count is one key of a breakdown and how many incidents have it.
type Count struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

// Summary is what a set of incidents cost.
type Summary struct {
	Incidents int
	From, To  time.Time // first event of the first incident, last record of any
	ByCause   []Count   // most first, then by key
	ByOutcome []Count
	// Recovered is how many incidents saw the node READY again; the time to
	// recover (READY − first event) percentiles are over them, nearest rank.
	Recovered         int
	RecoverMedian     time.Duration
	RecoverP95        time.Duration
	Resumed           int // incidents with training resumed reported
	Downtime          time.Duration
	ChipHoursLost     float64
	LostProgress      time.Duration // sum over incidents that know theirs
	LostProgressKnown int
	// CapacityWait is the time recoveries waited for capacity (part of
	// Downtime), over CapacityWaits incidents.
	CapacityWait  time.Duration
	CapacityWaits int
}

// Summarize computes the summary of incidents.
func Summarize(incs []Incident) Summary {
	s := Summary{Incidents: len(incs)}
	causes, outcomes := map[string]int{}, map[string]int{}
	var ttr []time.Duration
	for _, in := range incs {
		if s.From.IsZero() || in.Start.Before(s.From) {
			s.From = in.Start
		}
		if in.End.After(s.To) {
			s.To = in.End
		}
		cause := in.Cause
		if cause == "" {
			cause = "unknown"
		}
		causes[cause]++
		outcomes[in.Outcome]++
		if d, ok := in.TimeToRecover(); ok {
			ttr = append(ttr, d)
		}
		if !in.Resumed.IsZero() {
			s.Resumed++
		}
		s.Downtime += in.Downtime
		if in.CapacityWait > 0 {
			s.CapacityWait += in.CapacityWait
			s.CapacityWaits++
		}
		s.ChipHoursLost += in.ChipHoursLost()
		if in.LostProgressKnown {
			s.LostProgress += in.LostProgress
			s.LostProgressKnown++
		}
	}
	s.ByCause, s.ByOutcome = counts(causes), counts(outcomes)
	s.Recovered = len(ttr)
	s.RecoverMedian, s.RecoverP95 = Percentile(ttr, 50), Percentile(ttr, 95)
	return s
}

func counts(m map[string]int) []Count {
	out := make([]Count, 0, len(m))
	for k, n := range m {
		out = append(out, Count{k, n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].N != out[j].N {
			return out[i].N > out[j].N
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// Percentile is the p-th percentile of ds by nearest rank: the smallest
// value with at least p% of the values at or below it (0 for none).
func Percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := (p*len(s) + 99) / 100 // ceil(p/100 × n)
	if rank < 1 {
		rank = 1
	}
	return s[rank-1]
}
