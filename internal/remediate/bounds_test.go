package remediate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

const zone2 = "us-east5-a"

// boundsFleet is five healthy opted-in nodes in zone (three pages of two)
// and a TERMINATED one in zone2.
func boundsFleet() (tpufake.Fleet, string) {
	var nodes []*tpu.Node
	for i := range 5 {
		n := fullNode("READY")
		n.Name, n.Health, n.HealthDescription = fmt.Sprintf("projects/%s/locations/%s/nodes/ok-%d", project, zone, i), "HEALTHY", ""
		n.Id = int64(100 + i)
		nodes = append(nodes, n)
	}
	broken := fullNode("TERMINATED")
	broken.Name = fmt.Sprintf("projects/%s/locations/%s/nodes/broken", project, zone2)
	return tpufake.Fleet{Nodes: append(nodes, broken)}, broken.Name
}

// Every paging anomaly that would loop a listing ends the zone's listing,
// with one WARNING record naming the zone, within a bound of pages; the
// sweep goes on to the next zone, and the cursor never saves the token.
func TestSweepEndsAZoneWhosePageTokenComesAgain(t *testing.T) {
	parent := "projects/" + project + "/locations/" + zone
	for _, tc := range []struct {
		fault tpufake.PageFault
		max   int // listings of the looping zone
	}{
		{tpufake.PageRepeat, 2},      // the first page, then its own token again
		{tpufake.PageLoopToFirst, 4}, // three pages, the first again by another token, then a token seen
		{tpufake.PageEmpty, 2},       // an empty page naming itself
	} {
		t.Run(tc.fault.String(), func(t *testing.T) {
			fleet, broken := boundsFleet()
			e := newEnv(t, fleet, tpufake.WithPageSize(2))
			e.fake.Fail(tpufake.FailRule{RPC: "nodes.list", Name: parent, Page: tc.fault})
			// The deadline only keeps a looping sweep from running forever.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := e.h.Sweep(ctx, remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone, zone2}})
			if err != nil {
				t.Fatal(err)
			}
			if got := e.fake.Count("nodes.list", parent); got > tc.max {
				t.Errorf("%d listings of %s, want at most %d", got, parent, tc.max)
			}
			if got := e.fake.Count("nodes.delete", broken); got != 1 {
				t.Errorf("%d deletes of %s in the next zone, want 1 (the sweep went on)", got, broken)
			}
			var warnings []remediate.Record
			for _, r := range res.Records {
				if r.Severity == remediate.SeverityWarning {
					warnings = append(warnings, r)
				}
			}
			if len(warnings) != 1 || warnings[0].Zone != zone || !strings.Contains(warnings[0].Reason, "page token") || !strings.Contains(warnings[0].Reason, zone) {
				t.Errorf("WARNING records %+v, want one naming zone %s and its page token", warnings, zone)
			}
			if !res.Complete {
				t.Error("sweep not complete: a looping zone must not use up the budget")
			}
			if c, _ := e.store.SweepCursor(context.Background()); c != "" {
				t.Errorf("cursor %q after a complete sweep, want empty", c)
			}
		})
	}
}

// Sweeps cut short by their budget in the middle of a looping zone save a
// cursor and resume there: each still finds the loop (the tokens of its own
// listing), so the listings stay bounded and a later sweep reaches the
// next zone.
func TestSweepsCutShortInALoopingZoneStillReachTheNextZone(t *testing.T) {
	parent := "projects/" + project + "/locations/" + zone
	fleet, broken := boundsFleet()
	e := newEnv(t, fleet, tpufake.WithPageSize(2))
	e.fake.Fail(tpufake.FailRule{RPC: "nodes.list", Name: parent, Page: tpufake.PageLoopToFirst})
	e.clock.tick = time.Second // every reading of the clock takes a second: budgets run out
	opts := remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone, zone2}, Budget: 20 * time.Second}
	const sweeps = 12
	var cursors []string
	for range sweeps {
		if _, err := e.h.Sweep(context.Background(), opts); err != nil {
			t.Fatal(err)
		}
		c, _ := e.store.SweepCursor(context.Background())
		cursors = append(cursors, c)
		if e.fake.Count("nodes.delete", broken) > 0 {
			break
		}
	}
	if got := e.fake.Count("nodes.delete", broken); got != 1 {
		t.Errorf("%d deletes of %s after %d sweeps, want 1 (cursors %q)", got, broken, len(cursors), cursors)
	}
	if got, bound := e.fake.Count("nodes.list", parent), len(cursors)*4; got > bound {
		t.Errorf("%d listings of %s in %d sweeps, want at most %d", got, parent, len(cursors), bound)
	}
}

// A zone hint over a looping zone ends its listing at the repeated token
// and answers; over a zone with more pages than its bound it stops at the
// bound; both say so in the entry's record.
func TestZoneHintIsBoundedByTokensAndPages(t *testing.T) {
	parent := "projects/" + project + "/locations/" + zone
	hint := events.Event{Kind: events.KindZoneHint, InsertID: "h1", Time: start, Method: "compute.instances.preempted",
		Node: events.NodeRef{Project: project, Zone: zone}}
	t.Run("repeated token", func(t *testing.T) {
		fleet, _ := boundsFleet()
		e := newEnv(t, fleet, tpufake.WithPageSize(2))
		e.fake.Fail(tpufake.FailRule{RPC: "nodes.list", Name: parent, Page: tpufake.PageLoopToFirst})
		res, err := e.h.HandleZoneHint(context.Background(), hint)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.fake.Count("nodes.list", parent); got > 4 {
			t.Errorf("%d listings, want at most 4", got)
		}
		last := res.Records[len(res.Records)-1]
		if !strings.Contains(last.Reason, "page token came again") {
			t.Errorf("zone hint record %q, want it to say the page token came again", last.Reason)
		}
	})
	t.Run("pages", func(t *testing.T) {
		var nodes []*tpu.Node
		for i := range 3 * remediate.DefaultZoneHintPages {
			n := fullNode("READY")
			n.Name, n.Health, n.HealthDescription, n.Id = fmt.Sprintf("%s/nodes/n-%03d", parent, i), "HEALTHY", "", int64(1000+i)
			n.Labels = map[string]string{} // not opted in: pages without a node to look at
			nodes = append(nodes, n)
		}
		e := newEnv(t, tpufake.Fleet{Nodes: nodes}, tpufake.WithPageSize(1))
		res, err := e.h.HandleZoneHint(context.Background(), hint)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.fake.Count("nodes.list", parent); got > remediate.DefaultZoneHintPages {
			t.Errorf("%d listings, want at most %d", got, remediate.DefaultZoneHintPages)
		}
		if res.Complete || !strings.Contains(res.Records[len(res.Records)-1].Reason, "bounded at") {
			t.Errorf("zone hint complete=%v record %q, want it bounded", res.Complete, res.Records[len(res.Records)-1].Reason)
		}
	})
}

// A node whose spec the ledger cannot hold is refused before the claim:
// nothing claimed or deleted, one ERROR record, the event acknowledged
// (nil error: permanent); later looks are plain skips.
func TestOverSizeSpecIsRefusedBeforeTheClaim(t *testing.T) {
	n := fullNode("TERMINATED")
	n.Metadata["big"] = strings.Repeat("x", remediate.MaxSpecBytes)
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{n}})
	ctx := context.Background()
	r, err := e.h.Handle(ctx, terminate("e1"))
	if err != nil {
		t.Fatalf("Handle = %v, want nil: a spec too large can never be saved, a retry cannot help", err)
	}
	if r.Err == "" || !strings.Contains(r.Err, "bytes encoded") {
		t.Errorf("record error %q, want it to say the spec's size", r.Err)
	}
	for range 3 {
		e.clock.Advance(time.Minute)
		sweepZone(t, e)
	}
	if _, err := e.h.Handle(ctx, terminate("e2")); err != nil {
		t.Fatal(err)
	}
	if got := e.fake.Count("nodes.delete", nodeName); got != 0 {
		t.Errorf("%d deletes, want 0", got)
	}
	errs := 0
	for _, r := range e.records.list() {
		if r.Node == nodeName && r.Err != "" {
			errs++
		}
	}
	if errs != 1 {
		t.Errorf("%d ERROR records, want 1", errs)
	}
	if u, _ := e.store.Unfinished(ctx); len(u) != 0 {
		t.Errorf("%d unfinished recoveries, want none claimed", len(u))
	}
	// Just under the limit, the recovery goes ahead.
	n2 := fullNode("TERMINATED")
	n2.Metadata["big"] = strings.Repeat("x", remediate.MaxSpecBytes-8<<10)
	e2 := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{n2}})
	if _, err := e2.h.Handle(ctx, terminate("e1")); err != nil {
		t.Fatal(err)
	}
	if got := e2.fake.Count("nodes.delete", nodeName); got != 1 {
		t.Errorf("%d deletes of a node just under the limit, want 1", got)
	}
}
