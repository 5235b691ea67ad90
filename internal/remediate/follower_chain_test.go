package remediate

import (
	"testing"
	"time"
)

func TestChainWanted(t *testing.T) {
	now := time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)
	const window = 50 * time.Second
	n := "projects/p/locations/us-central2-b/nodes/a"
	for _, tc := range []struct {
		name   string
		rec    Recovery
		looked map[string]time.Time
		want   bool
	}{
		{"a look due in 5s chains", Recovery{Node: n, NextLookAt: now.Add(5 * time.Second)}, nil, true},
		{"a look overdue chains", Recovery{Node: n, NextLookAt: now.Add(-time.Second)}, nil, true},
		{"a look after the next window waits for a sweep", Recovery{Node: n, NextLookAt: now.Add(window)}, nil, false},
		{"a stockout's back-off (a lease ahead) waits for a sweep", Recovery{Node: n, NextLookAt: now.Add(15 * time.Minute)}, nil, false},
		{"a recovery held by a delivery under way waits for its lease", Recovery{Node: n, LeaseUntil: now.Add(15 * time.Minute)}, nil, false},
		{"a look this follower took without moving it on does not chain (a pause would chain forever)",
			Recovery{Node: n, NextLookAt: now.Add(-time.Second)}, map[string]time.Time{n: now.Add(-time.Second)}, false},
		{"a look moved on since this follower took it chains",
			Recovery{Node: n, NextLookAt: now.Add(5 * time.Second)}, map[string]time.Time{n: now.Add(-time.Second)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := chainWanted([]Recovery{tc.rec}, tc.looked, now, window); got != tc.want {
				t.Errorf("chainWanted = %v, want %v", got, tc.want)
			}
		})
	}
	if chainWanted(nil, nil, now, window) {
		t.Errorf("chainWanted of nothing unfinished = true")
	}
}
