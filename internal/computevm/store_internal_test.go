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
