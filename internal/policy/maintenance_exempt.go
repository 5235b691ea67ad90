package policy

import (
	"fmt"
	"time"
)

// DefaultMaintenanceMax bounds the maintenance exemption: this long after
// the maintenance started (its windowStartTime, or our own
// performMaintenance when that was earlier), a node still unhealthy is
// treated as any unhealthy node (AUTOHEAL_MAINTENANCE_MAX).
const DefaultMaintenanceMax = 4 * time.Hour

// OurMaintenance is a maintenance tpu-autoheal started itself (mode early:
// the notice's maintain step claimed, performMaintenance called): the
// handler reads it from the notice ledger for a node that is unhealthy or
// in progress, since after its maintenance the platform may no longer show
// the node's upcomingMaintenance.
type OurMaintenance struct {
	Started                time.Time // when the maintain step was claimed (performMaintenance sent)
	WindowStart, WindowEnd string    // the window of the notice it was for (RFC 3339)
}

// maintenanceExemption says whether the grace of an unhealthy or
// in-progress node must not run yet because the node is in maintenance:
// its upcomingMaintenance is ONGOING, or it is within the window's length
// after our own performMaintenance (obs.Maintenance). The grace starts once
// neither holds: at the later of the window's end and the end of ONGOING
// (graceFrom). A hard cap (cfg.MaintenanceMax after the maintenance
// started) ends the exemption whatever the node says, so a node stuck in
// maintenance is still healed. ok is false when the node is not in
// maintenance at all (the grace runs as usual from since).
//
// While exempt, graceFrom is what the node's deferral keeps as its Since
// (now: so that, once the exemption is over, Since is the last look in
// maintenance), or zero to keep the pending Since (maintenance with no
// window start: the cap then counts from when it was first seen).
func maintenanceExemption(obs Observed, since, now time.Time, cfg Config) (exempt bool, graceFrom, due time.Time, why string, ok bool) {
	node := obs.Node
	if node == nil {
		return false, since, time.Time{}, "", false
	}
	um := node.UpcomingMaintenance
	ongoing := um != nil && um.MaintenanceStatus == maintenanceOngoing
	ours := obs.Maintenance
	if !ongoing && ours == nil {
		return false, since, time.Time{}, "", false
	}
	var wStart, wEnd time.Time
	if um != nil {
		wStart, wEnd = parseTime(um.WindowStartTime), parseTime(um.WindowEndTime)
	}
	if ours != nil && (wStart.IsZero() || wEnd.IsZero()) {
		wStart, wEnd = parseTime(ours.WindowStart), parseTime(ours.WindowEnd)
	}
	maxFor := cfg.MaintenanceMax
	if maxFor <= 0 {
		maxFor = DefaultMaintenanceMax
	}
	// start: when the maintenance began. Ours may have begun days before
	// its window (mode early): then it lasts as long as its window, from
	// when we started it.
	start, end := wStart, wEnd
	if ours != nil && (start.IsZero() || ours.Started.Before(start)) {
		length := maxFor
		if !wStart.IsZero() && wEnd.After(wStart) {
			length = wEnd.Sub(wStart)
		}
		start, end = ours.Started, ours.Started.Add(length)
	}
	restart := now
	if start.IsZero() {
		start, restart = since, time.Time{} // ONGOING with no window: from when it was first seen so
	}
	limit := start.Add(maxFor)
	what := "maintenance ONGOING"
	if !ongoing {
		what = fmt.Sprintf("in the maintenance tpu-autoheal started at %s", stamp(ours.Started))
	}
	if now.Before(limit) && (ongoing || now.Before(end)) {
		due = limit
		if !end.IsZero() && end.After(now) && end.Before(due) && !ongoing {
			due = end
		}
		if next := now.Add(cfg.UnhealthyGrace); cfg.UnhealthyGrace > 0 && next.Before(due) {
			due = next
		}
		why = fmt.Sprintf("%s: the grace starts once it ends (at the latest %s, %s after it started)", what, stamp(limit), roundDur(maxFor))
		return true, restart, due, why, true
	}
	// The exemption is over: the grace runs from the later of the window's
	// end and the last look in maintenance (since, which the exemption
	// kept at that look), never later than the cap.
	graceFrom = since
	if end.After(graceFrom) {
		graceFrom = end
	}
	if graceFrom.After(limit) {
		graceFrom = limit
	}
	if graceFrom.After(now) {
		graceFrom = now
	}
	why = what + " is over"
	if !now.Before(limit) {
		why = fmt.Sprintf("%s past its bound %s (%s after it started)", what, stamp(limit), roundDur(maxFor))
	}
	return false, graceFrom, time.Time{}, why, true
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}
