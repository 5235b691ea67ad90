package remediate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// A node in maintenance (ONGOING, or the one tpu-autoheal started) is not
// counted against its grace until the maintenance is over; the grace then
// starts at the later of the window's end and the last look in
// maintenance; AUTOHEAL_MAINTENANCE_MAX after the maintenance started ends
// the exemption whatever the node says.
func TestMaintenanceExemptsTheGraceWithinItsBound(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	node := func(status string, ws, we time.Duration) *tpu.Node {
		n := fullNode("READY")
		n.HealthDescription = ""
		if status != "" {
			n.UpcomingMaintenance = &tpu.UpcomingMaintenance{Type: "SCHEDULED", MaintenanceStatus: status, WindowStartTime: at(ws), WindowEndTime: at(we)}
		}
		return n
	}
	ours := func(started time.Duration) *remediate.OurMaintenance {
		// Started days before its window (mode early), whose length is 4h.
		return &remediate.OurMaintenance{Started: now.Add(started), WindowStart: at(7 * 24 * time.Hour), WindowEnd: at(7*24*time.Hour + 4*time.Hour)}
	}
	for _, tc := range []struct {
		name   string
		obs    remediate.Observed
		since  time.Duration // the pending deferral's Since, before now
		max    time.Duration // Config.MaintenanceMax (0 = default 4h)
		want   remediate.Action
		reason string // in the decision's reason
	}{
		{name: "ONGOING an hour, within the bound: not recreated", obs: remediate.Observed{Node: node("ONGOING", -time.Hour, 3*time.Hour)}, since: -time.Hour,
			want: remediate.ActionDefer, reason: "maintenance ONGOING"},
		{name: "ONGOING past the bound after the window start: recreated", obs: remediate.Observed{Node: node("ONGOING", -5*time.Hour, -time.Hour)}, since: -2 * time.Hour,
			want: remediate.ActionRecreate, reason: "past its bound"},
		{name: "ONGOING five hours with AUTOHEAL_MAINTENANCE_MAX 8h: not recreated", obs: remediate.Observed{Node: node("ONGOING", -5*time.Hour, -time.Hour)}, since: -2 * time.Hour, max: 8 * time.Hour,
			want: remediate.ActionDefer},
		{name: "in the maintenance we started 30 minutes ago: not recreated", obs: remediate.Observed{Node: node("", 0, 0), Maintenance: ours(-30 * time.Minute)}, since: -30 * time.Minute,
			want: remediate.ActionDefer, reason: "tpu-autoheal started"},
		{name: "ours, its window's length and the bound passed: recreated", obs: remediate.Observed{Node: node("", 0, 0), Maintenance: ours(-5 * time.Hour)}, since: -5 * time.Hour,
			want: remediate.ActionRecreate},
		{name: "ONGOING ended 2 minutes ago (last look in it): the grace has just started", obs: remediate.Observed{Node: node("", 0, 0)}, since: -2 * time.Minute,
			want: remediate.ActionDefer, reason: "< grace"},
		{name: "PENDING maintenance is no exemption: unhealthy past the grace is recreated", obs: remediate.Observed{Node: node("PENDING", time.Hour, 5*time.Hour)}, since: -time.Hour,
			want: remediate.ActionRecreate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := remediate.DefaultConfig()
			cfg.MaintenanceMax = tc.max
			ev := events.Event{Node: events.NodeRef{Project: project, Zone: zone, Node: nodeID}}
			h := remediate.History{Deferral: &remediate.Deferral{Node: nodeName, Project: project, Since: now.Add(tc.since), Due: now}}
			d := remediate.Decide(ev, tc.obs, h, now, cfg)
			if d.Action != tc.want || !strings.Contains(d.Reason, tc.reason) {
				t.Fatalf("Decide = %s %q, want %s with %q", d.Action, d.Reason, tc.want, tc.reason)
			}
			if d.Action == remediate.ActionDefer && tc.reason != "< grace" && (d.Deferral == nil || !d.Deferral.Since.Equal(now)) {
				t.Errorf("deferral %+v, want its Since now: the grace starts after the exemption", d.Deferral)
			}
		})
	}
}

// Notices are keyed by node id: a claim under the old key (name only)
// made while the node existed is honoured (no second notice), one made
// before the node was created belongs to the node it replaced.
func TestOldKeyNoticeClaimsAreHonouredOnlyForTheNodeTheyWereFor(t *testing.T) {
	for _, tc := range []struct {
		name       string
		claimedAt  time.Time
		wantNotice bool
	}{
		{"claimed under the old key after the node was created: honoured", time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC), false},
		{"claimed under the old key before the node was created: a replacement gets its own", time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newMaintEnv(t, remediate.MaintenancePrepare)
			n := nodeOf(t, e.fake, nodeName)
			n.CreateTime, n.Id = "2026-11-01T00:00:00Z", 77
			e.fake.SetNode(n)
			notices := e.h.Maintenance.Notices.(*ledger.MemoryNotices)
			if _, err := notices.ClaimNotice(context.Background(), remediate.NoticeKey{Node: nodeName, WindowStart: window}, remediate.NoticeStepPrepare, tc.claimedAt); err != nil {
				t.Fatal(err)
			}
			sweepZone(t, e)
			if got := e.fake.Count("nodes.patch", nodeName) > 0; got != tc.wantNotice {
				t.Errorf("notice sent = %v, want %v", got, tc.wantNotice)
			}
		})
	}
}
