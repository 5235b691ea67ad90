package swarm

import (
	"context"
	"fmt"
	"slices"
	"strings"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// Bounds on calls: what a run may spend, whatever the faults. A recovery
// makes a handful of calls per attempt and at most MaxAttempts attempts; a
// sweep lists each zone's pages once (a repeated token ends a zone).
const (
	maxMutationsPerNode = 12 // deletes, creates, patches, maintenance calls of one node
	maxCallsPerDelivery = 80
	// A node's reads: a few per sweep (its listing decides most), and a
	// recovery's looks.
	maxGetsPerSweep, maxGetsBase = 3, 60
	pagesA, pagesB               = 2, 1 // ZoneA's four nodes two a page, ZoneB's two
	listSlack                    = 4    // a failed page retried, a repeated token seen once
)

// check adds every broken invariant to the result.
func (w *world) check(ctx context.Context) {
	v := func(format string, args ...any) {
		w.res.Violations = append(w.res.Violations, fmt.Sprintf(format, args...))
	}
	fleet := map[string]*tpu.Node{}
	for _, n := range w.fake.Fleet().Nodes {
		fleet[n.Name] = n
	}
	recs := w.rec.all()
	audit := w.fake.AuditLog()
	gens := map[string]int{}
	for _, name := range NodeNames {
		// The node is every copy of its name (zones.go): where a zones:
		// fallback moved it, and its records, calls and recoveries there.
		copies := copiesOf(name)
		var n *tpu.Node
		for _, c := range copies {
			if m := fleet[c]; m != nil && (n == nil || n.State == "DELETING") {
				n = m
			}
		}
		var mine []remediate.Record
		for _, r := range recs {
			if slices.Contains(copies, r.Node) {
				mine = append(mine, r)
			}
		}
		abandoned := slices.ContainsFunc(mine, func(r remediate.Record) bool {
			return r.Outcome == remediate.OutcomeAbandoned && r.Spec != nil
		})
		var deletedBy []string // people whose delete of the node started
		ourCreates := 0
		for _, e := range audit {
			if !slices.Contains(copies, e.Resource) {
				continue
			}
			switch {
			case e.First && e.Principal != Us && strings.HasSuffix(e.Method, ".DeleteNode"):
				deletedBy = append(deletedBy, e.Principal)
			case e.Last && e.Code == 0 && e.Principal == Us && strings.HasSuffix(e.Method, ".CreateNode"):
				ourCreates++
			}
		}
		ourDeletes, gets, mutations, refused, gen := 0, 0, 0, 0, 0
		for _, c := range copies {
			ourDeletes += w.fake.Count("nodes.delete", c)
			gets += w.fake.Count("nodes.get", c)
			mutations += w.count(mutatingRPCs, c)
			refused += w.refusedCreates(c)
			if h, err := w.store.History(ctx, c, Project, "", w.clock.now(), 0); err == nil && h.Recovery != nil {
				gen += h.Recovery.Generation
			}
		}
		gone := n == nil || n.State == "DELETING"

		// No node lost: a node the function deleted exists again (in one
		// zone: checkZones), or the recovery was abandoned with an ERROR
		// record carrying the spec, or a person deleted it (and a recovery
		// it closed names them, when their audit entry reached the
		// function).
		if gone && ourDeletes > 0 && !abandoned && len(deletedBy) == 0 {
			state := "NOT FOUND"
			if n != nil {
				state = n.State
			}
			v("%s lost: %s after %d deletes and %d successful creates of ours, nobody else deleted it, and no ERROR record abandons it with its spec",
				short(name), state, ourDeletes, ourCreates)
		}
		if gone && ourDeletes > 0 && !abandoned && len(deletedBy) > 0 && !slices.Contains(deletedBy, Bob) {
			for _, r := range mine {
				if r.Outcome == remediate.OutcomeClosed && !strings.Contains(r.Reason, Alice) && !strings.Contains(r.Err, Alice) {
					v("%s closed without naming the evidence (deleted by %s, whose audit entry was delivered): %q", short(name), Alice, r.Reason)
					break
				}
			}
		}
		// Left broken: an opted-in node still TERMINATED with no ERROR
		// record saying it needs a person.
		if n != nil && (n.State == "TERMINATED" || n.State == "PREEMPTED") && n.Labels["tpu-autoheal"] == "enabled" && !abandoned &&
			!slices.ContainsFunc(mine, func(r remediate.Record) bool {
				return r.Action == remediate.ActionSkip && !strings.HasPrefix(r.Reason, "admin activity")
			}) {
			v("%s left %s: opted in, no recovery finished it and no ERROR record abandons it", short(name), n.State)
		}

		// At most one successful create per recovery (each recovery
		// follows one delete of the node), in whichever zone.
		gens[name] = gen
		if ourCreates > gen {
			v("%s created %d times by %d recoveries", short(name), ourCreates, gen)
		}

		// No call repeated without a bound.
		if mutations > maxMutationsPerNode+refused {
			v("%s: %d mutating calls (%d creates refused for capacity or quota), want at most %d and those", short(name), mutations, refused, maxMutationsPerNode)
		}
		if bound := maxGetsBase + maxGetsPerSweep*w.res.Sweeps; gets > bound {
			v("%s: %d reads in %d sweeps, want at most %d", short(name), gets, w.res.Sweeps, bound)
		}
	}
	w.checkZones(fleet, w.makers(), recs)
	if w.maxPerDelivery > maxCallsPerDelivery {
		v("one delivery made %d TPU calls, want at most %d", w.maxPerDelivery, maxCallsPerDelivery)
	}
	for zone, pages := range map[string]int{ZoneA: pagesA, ZoneB: pagesB} {
		if got := w.listPerSweep[zone]; got > pages+listSlack {
			v("a sweep listed %s %d times (%d pages), want at most %d", zone, got, pages, pages+listSlack)
		}
	}
	w.checkCapacity(gens)
	w.res.Violations = append(w.res.Violations, w.cut...)
	// Nothing acted on from an inauthentic entry.
	w.res.Violations = append(w.res.Violations, w.forgedActed...)
	if len(w.res.Violations) > 0 {
		w.res.Trace = w.trace(recs)
	}
}

// checkForged: a forged entry is rejected, and nothing is changed for it.
func (w *world) checkForged(d delivery, mutationsBefore, recsBefore int) {
	if m := w.count(mutatingRPCs, ""); m != mutationsBefore {
		w.forgedActed = append(w.forgedActed, fmt.Sprintf("%d mutating calls for a %s", m-mutationsBefore, d.what))
	}
	rejected := false
	for _, r := range w.rec.all()[recsBefore:] {
		rejected = rejected || r.Action == remediate.ActionReject
	}
	if !rejected {
		w.forgedActed = append(w.forgedActed, fmt.Sprintf("a %s about %s was not rejected", d.what, short(d.forged.Node)))
	}
}

// trace is every record, one a line, and the calls made of each node.
func (w *world) trace(recs []remediate.Record) string {
	var b strings.Builder
	for _, r := range recs {
		node := "-"
		if r.Node != "" {
			node = short(r.Node)
		}
		fmt.Fprintf(&b, "\n  +%-8v %-3s %-8s %-10s %s", r.Time.Sub(t0), node, r.Action, r.Outcome, r.Reason)
		if r.Err != "" {
			fmt.Fprintf(&b, " [error: %s]", r.Err)
		}
	}
	for _, home := range NodeNames {
		for i, name := range copiesOf(home) {
			if i > 0 && w.count(allRPCs, name) == 0 {
				continue
			}
			fmt.Fprintf(&b, "\n  %s:", strings.TrimPrefix(name, "projects/"+Project+"/locations/"))
			for _, rpc := range append([]string{"nodes.get"}, mutatingRPCs...) {
				if c := w.fake.Count(rpc, name); c > 0 {
					fmt.Fprintf(&b, " %s=%d", rpc, c)
				}
			}
		}
	}
	return b.String()
}
