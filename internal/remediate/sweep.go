package remediate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"sync"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

// SweepOptions says what a sweep lists and how long it may take.
type SweepOptions struct {
	Projects, Zones []string
	Budget          time.Duration // 0 = no limit
	// Follow: after the listing, while recoveries are unfinished, the sweep
	// stays until Follow after its start, continuing each recovery when
	// its next look is due (Recovery.NextLookAt, LookAgain after a step),
	// then returns. Sweeps come once a minute (Cloud Scheduler's finest
	// schedule); without this a recovery would take one step per minute,
	// and a delete then a create, each a few seconds to minutes long, would
	// cost two or three minutes of waiting for sweeps beyond the operations
	// themselves. Set it under the sweep interval, so that the next sweep
	// takes over. A sweep with nothing unfinished returns at once: an idle
	// fleet costs no longer sweeps. At most one follower runs at a time
	// (the Store's FollowerLease, follower.go): a sweep that finds it held
	// by a follow kick's run does not follow. 0 = return after the listing. It waits
	// on real timers: only a caller on the wall clock sets it (the
	// function; never replay or a test on a virtual clock).
	Follow time.Duration
}

// SweepResult is what a sweep did.
type SweepResult struct {
	// Records are the records written. A swept node whose decision is a
	// plain record (healthy, stopped on purpose, …) with nothing new is
	// looked at but not recorded, so a sweep every few minutes does not
	// flood the audit trail; a maintenance event first seen in a node's
	// healthDescription is recorded once.
	Records  []Record
	Nodes    int      // opted-in nodes looked at
	Complete bool     // false when the budget ran out; the cursor is saved
	Errors   []string // locations that could not be listed (permanent errors); the sweep went on
	// Chain: the sweep's follow phase held the follower lease and ended
	// with a recovery's look due within another Follow: the caller
	// publishes a follow kick (FollowResult.Chain).
	Chain bool
}

// maintenanceRE finds the time in "The TPU had a maintenance event at <time>".
var maintenanceRE = regexp.MustCompile(`maintenance event at (\S+)`)

// Sweep catches what the logs missed. It (1) continues unfinished recoveries
// whose lease expired (a failed one holds its lease as a back-off, so a
// stockout is retried at most once per lease, and at most once per sweep)
// and acts on due deferrals, then (2) lists the nodes of Projects × Zones,
// page by page from the saved cursor, and decides about every opted-in node
// as for an event without one (ev.Method ""). When the budget runs out it
// saves the cursor and returns Complete false; the next sweep resumes there.
// The error is non-nil only when the sweep could not go on (transient
// failures of a node are in its record and the sweep continues). Last, with
// Handler.Resume, it checks the open incidents (resume_hook.go).
func (h *Handler) Sweep(ctx context.Context, opts SweepOptions) (SweepResult, error) {
	res, err := h.sweep(ctx, opts)
	h.checkOpenIncidents(ctx, &res)
	return res, err
}

func (h *Handler) sweep(ctx context.Context, opts SweepOptions) (SweepResult, error) {
	var res SweepResult
	start := h.Now()
	// over: the budget is spent, or the caller gave up (the function's
	// deadline): stop between two pages, cursor saved where possible.
	over := func() bool { return ctx.Err() != nil || (opts.Budget > 0 && h.Now().Sub(start) >= opts.Budget) }
	var mu sync.Mutex
	seen := map[string]bool{}
	claim := func(name string) bool {
		mu.Lock()
		defer mu.Unlock()
		if seen[name] {
			return false
		}
		seen[name] = true
		return true
	}
	warned := map[string]bool{} // nodes with a WARNING record this sweep
	add := func(r Record, recorded bool) {
		if recorded {
			mu.Lock()
			res.Records = append(res.Records, r)
			if r.Severity == SeverityWarning && r.Err == "" {
				warned[r.Node] = true
			}
			mu.Unlock()
		}
	}

	// (1) Unfinished recoveries whose next look is due (Continue), then due
	// deferrals, each set at most Workers at once.
	if _, err := h.continueDue(ctx, claim, add); err != nil {
		return res, fmt.Errorf("sweep: %w", err)
	}
	if over() {
		return res, nil
	}
	due, err := h.Store.DueDeferrals(ctx, h.Now())
	if err != nil {
		return res, fmt.Errorf("sweep: list due deferrals: %w", err)
	}
	var dueDefs []Deferral
	for _, d := range due {
		if claim(d.Node) {
			dueDefs = append(dueDefs, d)
		}
	}
	h.parallel(ctx, len(dueDefs), func(i int) { add(h.sweepNode(ctx, dueDefs[i].Node, nil, "", false, nil)) })
	// Every paused node our recovery left deleted gets its WARNING record
	// each sweep, also when its recovery was not due for a look.
	mu.Lock()
	already := maps.Clone(warned)
	mu.Unlock()
	if err := h.warnPausedDeleted(ctx, already, add); err != nil {
		return res, fmt.Errorf("sweep: %w", err)
	}

	// (2) Every opted-in node, from the cursor, a page at a time.
	if err := h.sweepListed(ctx, opts, over, claim, add, &res); err != nil {
		return res, err
	}
	// (3) Follow the unfinished recoveries until opts.Follow, under the
	// follower lease (follower.go): while a follow kick's run holds it,
	// the sweep lists but leaves the following to that run.
	if opts.Follow > 0 {
		_, chain, err := h.followLeased(ctx, start, opts.Follow, over, add)
		res.Chain = chain
		if err != nil {
			return res, fmt.Errorf("sweep: %w", err)
		}
	}
	return res, nil
}

// followTick is the shortest pause between two rounds of follow.
const followTick = time.Second

// follow continues unfinished recoveries as their next looks come due,
// until none is unfinished or the next look is after until. It sleeps on
// the wall clock between looks, so only a handler on the wall clock (Now
// nil: the function) follows; one on a virtual clock (replay, tests)
// finishes its recoveries with Drain.
//
// looked (filled in): a recovery's NextLookAt when follow last took it. A
// look that did not move it on (a pause, a guard, a ledger that failed)
// leaves it to the next sweep instead of retaking it every tick.
func (h *Handler) follow(ctx context.Context, until time.Time, over func() bool, add func(Record, bool), looked map[string]time.Time) error {
	stuck := func(rec Recovery) bool {
		last, ok := looked[rec.Node]
		return ok && !rec.NextLookAt.After(last)
	}
	for !over() && h.Now().Before(until) {
		recs, err := h.Store.Unfinished(ctx)
		if err != nil {
			return fmt.Errorf("follow: list unfinished recoveries: %w", err)
		}
		var next time.Time
		current := map[string]Recovery{}
		for _, rec := range recs {
			if stuck(rec) {
				continue
			}
			current[rec.Node] = rec
			at := rec.NextLookAt
			if rec.LeaseUntil.After(at) {
				at = rec.LeaseUntil
			}
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
		if len(current) == 0 || next.After(until) {
			return nil
		}
		// At least followTick between rounds: a look that could not be
		// saved (the ledger failing) must not spin.
		if d := max(next.Sub(h.Now()), followTick); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
		// Only a recovery due now is looked at, so only it is marked
		// looked: marking one whose look is still ahead (a wave's
		// recoveries come due seconds apart) would leave it "stuck" at
		// the next round and unfollowed until the next sweep.
		before := h.Now()
		take := func(node string) bool {
			rec, ok := current[node]
			if ok && !before.Before(rec.LeaseUntil) && !before.Before(rec.NextLookAt) {
				looked[node] = rec.NextLookAt
			}
			return ok
		}
		if _, err := h.continueDue(ctx, take, add); err != nil {
			return err
		}
	}
	return nil
}

// sweepListed lists the nodes of opts' projects × zones from the saved
// cursor and decides about every opted-in node of a page, at most Workers
// at once; res.Complete tells whether it got to the end.
func (h *Handler) sweepListed(ctx context.Context, opts SweepOptions, over func() bool, claim func(string) bool, add func(Record, bool), res *SweepResult) error {
	cursor, err := h.Store.SweepCursor(ctx)
	if err != nil {
		return fmt.Errorf("sweep: read cursor: %w", err)
	}
	cp, cz, token := parseCursor(cursor, opts)
	for pi := cp; pi < len(opts.Projects); pi++ {
		for zi := 0; zi < len(opts.Zones); zi++ {
			if pi == cp && zi < cz {
				continue
			}
			project, zone := opts.Projects[pi], opts.Zones[zi]
			parent := fmt.Sprintf("projects/%s/locations/%s", project, zone)
			// tokens: the page tokens of this listing so far. A token
			// that comes again would list the same pages forever (a
			// nextPageToken pointing back): the zone's listing ends
			// there, and the cursor never saves it.
			tokens := pageTokens{}
			tokens.seen(token)
			for {
				if over() {
					return h.saveCursor(ctx, project+"/"+zone+"/"+token)
				}
				var nodes []*tpu.Node
				var next string
				r := Record{}
				err := h.call(ctx, &r, "list", "", func(ctx context.Context) (string, error) {
					var err error
					nodes, next, err = h.TPU.ListNodes(ctx, parent, token)
					return "", err
				})
				if err != nil {
					if k := KindOf(err); k != KindTransient && k != KindStockout && k != KindQuota {
						// NOT FOUND (no such location in the project) or a
						// permanent error: the other locations still count.
						// A location that cannot be listed (permission
						// denied, say) is recorded as an ERROR each sweep:
						// a sweep that sees nothing must not look fine.
						if k != KindNotFound {
							res.Errors = append(res.Errors, err.Error())
							r.Time, r.Zone, r.Action = h.Now(), zone, ActionSkip
							r.Reason = "sweep: cannot list " + parent + ": its nodes are not checked"
							r.Err = err.Error()
							_ = h.Recorder.Record(ctx, r)
							res.Records = append(res.Records, r)
						}
						break
					}
					_ = h.saveCursor(ctx, project+"/"+zone+"/"+token)
					return fmt.Errorf("sweep: %w", err)
				}
				var page []*tpu.Node
				for _, n := range nodes {
					if n == nil || n.Labels[h.Config.LabelKey] != h.Config.LabelValue || !claim(n.Name) {
						continue
					}
					page = append(page, n)
				}
				res.Nodes += len(page)
				hists := h.pageHistories(ctx, project, page)
				h.parallel(ctx, len(page), func(i int) {
					var hist *History
					if hh, ok := hists[page[i].Name]; ok {
						hist = &hh
					}
					add(h.sweepNode(ctx, page[i].Name, page[i], "", true, hist))
				})
				if next == "" {
					break
				}
				if tokens.seen(next) {
					rec := h.pageLoopRecord(ctx, zone, parent, next, tokens.pages())
					res.Records = append(res.Records, rec)
					break
				}
				token = next
			}
			token = ""
		}
	}
	res.Complete = true
	return h.saveCursor(ctx, "")
}

// pageHistories reads the ledger once for a listed page of one project's
// nodes, when there is a batched read (Deps.Histories). Only the nodes whose
// listing alone is enough to decide (healthy, stopped on purpose) use it:
// any other node is read again, and so is its history, just before
// deciding. nil (every node reads its own history) when there is no
// batched read or it failed: a slower sweep, not a skipped one.
func (h *Handler) pageHistories(ctx context.Context, project string, page []*tpu.Node) map[string]History {
	hr := h.Histories
	if hr == nil {
		return nil
	}
	var names []string
	for _, n := range page {
		if healthy(n) || onPurpose(n.State) {
			names = append(names, n.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	hists, err := hr.Histories(ctx, names, project, h.Now(), h.Config.Window)
	if err != nil {
		h.Log.Warn("sweep: batched ledger read failed; reading node by node", "project", project, "nodes", len(names), "error", err.Error())
		return nil
	}
	return hists
}

func (h *Handler) saveCursor(ctx context.Context, c string) error {
	if err := h.Store.SetSweepCursor(ctx, c); err != nil {
		return fmt.Errorf("sweep: save cursor %q: %w", c, err)
	}
	return nil
}

// parseCursor turns "project/zone/pageToken" into indexes into opts; a
// cursor naming a project or zone no longer swept starts over.
func parseCursor(c string, opts SweepOptions) (pi, zi int, token string) {
	if c == "" {
		return 0, 0, ""
	}
	p := strings.SplitN(c, "/", 3)
	if len(p) != 3 {
		return 0, 0, ""
	}
	pi, zi = indexOf(opts.Projects, p[0]), indexOf(opts.Zones, p[1])
	if pi < 0 || zi < 0 {
		return 0, 0, ""
	}
	return pi, zi, p[2]
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// sweepNode decides about one node without an event: listed (node given) or
// from the ledger (node read now). hist, when not nil, is the node's history
// from the page's batched read, used only when the listing is enough to
// decide. It reports whether a record was written.
func (h *Handler) sweepNode(ctx context.Context, name string, listed *tpu.Node, cause events.Cause, quiet bool, hist *History) (Record, bool) {
	_, project, zone, nodeID, err := parseNodeName(name)
	if err != nil {
		r := Record{Time: h.Now(), Node: name, Action: ActionReject, Reason: err.Error(), DryRun: h.Config.DryRun}
		_ = h.Recorder.Record(ctx, r)
		return r, true
	}
	ev := events.Event{Node: events.NodeRef{Project: project, Zone: zone, Node: nodeID}, Cause: cause}
	r := h.newRecord(ev)
	var obs Observed
	var o processOpts
	if listed != nil && (healthy(listed) || onPurpose(listed.State)) {
		// Only a harmless decision (record) is made from the listing: it
		// may be minutes old by now. Anything else reads the node again.
		obs.Node = listed
		o.hist = hist
		if listed.QueuedResource != "" {
			qr, err := timedGet(h, ctx, &r, EffectGetQR, listed.QueuedResource, h.TPU.GetQueuedResource)
			if err != nil {
				rec, _ := h.failObserve(ctx, ev, r, err)
				return rec, true
			}
			obs.QueuedResource = qr
		}
	} else {
		obs, err = h.observe(ctx, name, &r)
		if err != nil {
			rec, _ := h.failObserve(ctx, ev, r, err)
			return rec, true
		}
	}
	if obs.Node != nil && ev.Cause == "" {
		ev.Cause = causeOf(obs.Node)
		r.Cause = ev.Cause
	}
	o.quiet = quiet
	if obs.Node != nil {
		if m := maintenanceRE.FindStringSubmatch(obs.Node.HealthDescription); m != nil {
			id := "maintenance:" + name + ":" + m[1]
			first, err := h.Store.MarkEvent(ctx, id, r.Time.Add(h.eventTTL()))
			if err == nil && first {
				o.markID = id
				o.markTime, _ = time.Parse(time.RFC3339Nano, m[1])
			}
		}
	}
	o.sweep = true
	rec, err := h.process(ctx, ev, obs, r, o)
	if errors.Is(err, errRefusedBefore) {
		return rec, false
	}
	recorded := !(quiet && rec.Action == ActionRecord && rec.Err == "" && o.markID == "")
	return rec, recorded
}

// pageTokens remembers the page tokens of one listing: a token that comes
// again names pages already listed (a nextPageToken pointing back to an
// earlier page), and following it would never end. The first page's
// request ("" ) counts as a token too.
type pageTokens map[string]bool

// seen notes token and reports whether it was already noted.
func (p pageTokens) seen(token string) bool {
	if p[token] {
		return true
	}
	p[token] = true
	return false
}

// pages is how many pages the listing asked for.
func (p pageTokens) pages() int { return len(p) }

// pageLoopRecord writes the WARNING record of a listing whose page token
// came again: the zone's listing ended there (its nodes after the loop, if
// any, are not looked at by this listing), so a person knows the API
// misbehaved and which zone was not fully seen.
func (h *Handler) pageLoopRecord(ctx context.Context, zone, parent, token string, pages int) Record {
	r := Record{Time: h.Now(), Zone: zone, Action: ActionSkip, Severity: SeverityWarning, DryRun: h.Config.DryRun}
	r.Reason = fmt.Sprintf("list %s: page token %q came again after %d pages: the listing of zone %s ends there (a nextPageToken that points back would loop forever)", parent, shortToken(token), pages, zone)
	_ = h.Recorder.Record(ctx, r)
	return r
}

// shortToken is token cut to a length a record can carry.
func shortToken(token string) string {
	if len(token) > 40 {
		return token[:40] + "…"
	}
	return token
}

// warnPausedDeleted writes a WARNING record for every unfinished recovery
// that deleted its node and is held back by a pause, unless warned already
// has one for it: the node is down until `autoheal resume`, and a person
// must not forget it.
func (h *Handler) warnPausedDeleted(ctx context.Context, warned map[string]bool, add func(Record, bool)) error {
	recs, err := h.Store.Unfinished(ctx)
	if err != nil {
		return fmt.Errorf("list unfinished recoveries: %w", err)
	}
	for _, rec := range recs {
		if warned[rec.Node] || !DeletedWhilePaused(&rec) {
			continue
		}
		now := h.Now()
		hist, err := h.Store.History(ctx, rec.Node, rec.Project, "", now, h.Config.Window)
		if err != nil {
			return fmt.Errorf("history of %s: %w", rec.Node, err)
		}
		if hist.Pause == nil {
			continue
		}
		r := Record{Time: now, Node: rec.Node, Zone: zoneOf(rec.Node), Cause: rec.Cause, Action: ActionSkip, Severity: SeverityWarning,
			Phase: rec.Phase, Generation: rec.Generation, DryRun: h.Config.DryRun}
		r.Reason = pausedDeletedReason(rec, *hist.Pause, now) + "; " + hist.Pause.Why()
		_ = h.Recorder.Record(ctx, r)
		add(r, true)
	}
	return nil
}
