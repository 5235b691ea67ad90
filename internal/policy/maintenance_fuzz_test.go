package policy

import (
	"testing"
	"time"

	tpu "google.golang.org/api/tpu/v2"
)

// FuzzDecideMaintenance feeds outside input (the notice in metadata, the
// guest's checkpoint reports, the API's maintenance fields, the label) to
// DecideMaintenance: it must never panic, and maintain only when the guest
// reported the node's own notice.
func FuzzDecideMaintenance(f *testing.F) {
	f.Add(`{"notice":"2026-12-08T02:00:00Z","sentAt":"2026-12-01T09:50:00Z"}`, `{"notice":"2026-12-08T02:00:00Z"}`, "PENDING", "2026-12-08T02:00:00Z", "early", true)
	f.Add(`not json`, `{"notice":1}`, "ONGOING", "", "sometimes", false)
	f.Fuzz(func(t *testing.T, sent, report, status, window, label string, canReschedule bool) {
		n := maintNode(status, "SCHEDULED", canReschedule, label, 1)
		n.UpcomingMaintenance = &tpu.UpcomingMaintenance{MaintenanceStatus: status, WindowStartTime: window, CanReschedule: canReschedule}
		n.Metadata = map[string]string{NoticeMetadataKey: sent}
		obs := MaintenanceObserved{Node: n, Steps: map[string]time.Time{NoticeStepPrepare: maintNow.Add(-time.Minute)}, CheckpointsRead: true,
			Checkpoints: []GuestAttribute{{Worker: "0", Namespace: CheckpointNamespace, Key: CheckpointKey, Value: report}}}
		d := DecideMaintenance(obs, maintNow, DefaultConfig())
		if d.Action == ActionMaintain && len(missingWorkers(obs.Checkpoints, window, 1)) != 0 {
			t.Errorf("maintain without a report of notice %q: %+v", window, d)
		}
	})
}
