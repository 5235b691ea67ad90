package computevm

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSetPerInstanceKeepsTheNewestEntryOfEachInstance(t *testing.T) {
	a, b := "projects/p/zones/z/instances/a", "projects/p/zones/z/instances/b"
	at := time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)
	t.Run("maintenance calls", func(t *testing.T) {
		list := []MaintenanceSent{{Instance: a, ID: 1, Window: "w1"}, {Instance: b, ID: 2, Window: "w1"}}
		got := setPerInstance(list, MaintenanceSent{Instance: a, ID: 1, Window: "w2", At: at})
		want := []MaintenanceSent{{Instance: a, ID: 1, Window: "w2", At: at}, {Instance: b, ID: 2, Window: "w1"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("faulty-host reports", func(t *testing.T) {
		var list []FaultyReport
		for i := range 3 {
			list = setPerInstance(list, FaultyReport{Instance: a, At: at.Add(time.Duration(i) * time.Hour)})
		}
		list = setPerInstance(list, FaultyReport{Instance: b, At: at})
		want := []FaultyReport{{Instance: b, At: at}, {Instance: a, At: at.Add(2 * time.Hour)}}
		if diff := cmp.Diff(want, list); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

// TestMaintainedUntilIsBoundedByTheSendPlusTheWindow: a maintenance started
// early runs from the send; the exemption from the stuck grace lasts the
// window's length from then, never to a window a week ahead, and never
// past the window's end.
func TestMaintainedUntilIsBoundedByTheSendPlusTheWindow(t *testing.T) {
	const vm = "projects/p/zones/z/instances/vm"
	sent := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name, window, end string
		at                time.Time
		want              time.Time
	}{
		{"a week ahead, started now: 10:00 plus the 4h window", "2026-11-27T10:00:00Z", "2026-11-27T14:00:00Z", sent, time.Date(2026, 11, 20, 14, 0, 0, 0, time.UTC)},
		{"sent inside the window: its end", "2026-11-20T09:00:00Z", "2026-11-20T11:00:00Z", sent, time.Date(2026, 11, 20, 11, 0, 0, 0, time.UTC)},
		{"no send time: the window's end", "2026-11-27T10:00:00Z", "2026-11-27T14:00:00Z", time.Time{}, time.Date(2026, 11, 27, 14, 0, 0, 0, time.UTC)},
		{"unreadable end: none", "2026-11-27T10:00:00Z", "soon", sent, time.Time{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := SliceState{Maintained: []MaintenanceSent{{Instance: vm, ID: 7, Window: tt.window, WindowEnd: tt.end, At: tt.at}}}
			if got := s.maintainedUntil(vm, 7); !got.Equal(tt.want) {
				t.Errorf("maintainedUntil = %v, want %v", got, tt.want)
			}
			if got := s.maintainedUntil(vm, 8); !got.IsZero() {
				t.Errorf("another instance id: %v, want zero", got)
			}
		})
	}
}
