package report

import (
	"encoding/json"
	"io"
	"sort"
	"strings"
)

// Goodput buckets. The first two are ml-goodput-measurement's badput types
// (BadputType in Google's library); CapacityWaitBucket is ours: that
// library has no name for waiting for capacity, which it would count as
// infrastructure recovery.
const (
	InfrastructureRecoveryBucket = "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION"
	WastedProgressBucket         = "WASTED_PROGRESS_FROM_DISRUPTION"
	CapacityWaitBucket           = "CAPACITY_WAIT"
)

// JobGoodput is what a job's incidents cost, in goodput terms: one object
// of `autoheal report --format goodput`.
type JobGoodput struct {
	// Job is the job's name: its nodes' metadata autoheal-job, else their
	// queued resource, else the node's full name.
	Job       string   `json:"job"`
	Nodes     []string `json:"nodes"`
	Incidents int      `json:"incidents"`
	// BadputSeconds holds ml-goodput-measurement's buckets:
	// INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION (each incident's downtime,
	// from its disruption until training resumed — or the node READY,
	// when no resume was reported — less its capacity wait) and
	// WASTED_PROGRESS_FROM_DISRUPTION (progress lost: the disruption less
	// the checkpoint resumed from, as the guest reported it).
	BadputSeconds map[string]float64 `json:"badputSeconds"`
	// AutohealBadputSeconds holds our bucket CAPACITY_WAIT: the time
	// recoveries waited for capacity (creates refused for a stockout).
	AutohealBadputSeconds map[string]float64 `json:"autohealBadputSeconds"`
	// WastedProgressUnknown counts incidents whose progress lost was not
	// reported (no resume record): not in WASTED_PROGRESS_FROM_DISRUPTION.
	WastedProgressUnknown int `json:"wastedProgressUnknown"`
}

// JobOf is the job an incident counts toward.
func JobOf(in Incident) string {
	if in.Job != "" {
		return in.Job
	}
	return in.Node
}

// counted reports whether an incident is a disruption the goodput counts:
// not one we left alone (skipped: its cost is not tracked), nor a notice
// alone (no outage).
func counted(in Incident) bool {
	return !strings.HasPrefix(in.Outcome, OutcomeSkipped) && in.Downtime > 0
}

// Goodput totals the incidents per job, by job name.
func Goodput(incs []Incident) []JobGoodput {
	byJob := map[string]*JobGoodput{}
	nodes := map[string]map[string]bool{}
	for _, in := range incs {
		if !counted(in) {
			continue
		}
		name := JobOf(in)
		g := byJob[name]
		if g == nil {
			g = &JobGoodput{Job: name, BadputSeconds: map[string]float64{InfrastructureRecoveryBucket: 0, WastedProgressBucket: 0},
				AutohealBadputSeconds: map[string]float64{CapacityWaitBucket: 0}}
			byJob[name], nodes[name] = g, map[string]bool{}
		}
		if !nodes[name][in.Node] {
			nodes[name][in.Node] = true
			g.Nodes = append(g.Nodes, in.Node)
		}
		g.Incidents++
		wait := min(in.CapacityWait, in.Downtime)
		g.BadputSeconds[InfrastructureRecoveryBucket] += (in.Downtime - wait).Seconds()
		g.AutohealBadputSeconds[CapacityWaitBucket] += wait.Seconds()
		if in.LostProgressKnown {
			g.BadputSeconds[WastedProgressBucket] += in.LostProgress.Seconds()
		} else {
			g.WastedProgressUnknown++
		}
	}
	out := make([]JobGoodput, 0, len(byJob))
	for _, g := range byJob {
		for k, v := range g.BadputSeconds {
			g.BadputSeconds[k] = round3(v)
		}
		for k, v := range g.AutohealBadputSeconds {
			g.AutohealBadputSeconds[k] = round3(v)
		}
		sort.Strings(g.Nodes)
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Job < out[j].Job })
	return out
}

// WriteGoodput prints one JSON object per job, one a line.
func WriteGoodput(w io.Writer, incs []Incident) error {
	enc := json.NewEncoder(w)
	for _, g := range Goodput(incs) {
		if err := enc.Encode(g); err != nil {
			return err
		}
	}
	return nil
}

// Exclusion is one interval ml-goodput-measurement's exclusion query
// leaves out of a job's goodput: an incident from its detection until
// training resumed (or the node READY again when no resume was reported,
// or the last record when neither happened), capacity waits included.
type Exclusion struct {
	Start string `json:"start_time_utc"`
	End   string `json:"end_time_utc"`
}

// exclusionTime is the format of an exclusion's times: RFC 3339 in UTC.
const exclusionTime = "2006-01-02T15:04:05Z07:00"

// Exclusions are the incidents' exclusion intervals, one per counted
// incident, in the order they started.
func Exclusions(incs []Incident) []Exclusion {
	out := []Exclusion{}
	for _, in := range incs {
		if !counted(in) {
			continue
		}
		end := in.End
		switch {
		case !in.Resumed.IsZero():
			end = in.Resumed
		case !in.Recovered.IsZero():
			end = in.Recovered
		}
		if end.Before(in.Detected) {
			end = in.Detected
		}
		out = append(out, Exclusion{Start: in.Detected.UTC().Format(exclusionTime), End: end.UTC().Format(exclusionTime)})
	}
	return out
}

// WriteExclusions writes the exclusion intervals as one JSON array.
func WriteExclusions(w io.Writer, incs []Incident) error {
	b, err := json.MarshalIndent(Exclusions(incs), "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
