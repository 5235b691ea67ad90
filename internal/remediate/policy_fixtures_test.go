package remediate

import (
	"encoding/json"
	"fmt"
	"time"

	tpu "google.golang.org/api/tpu/v2"
)

// Fixtures of the policy's tests (internal/policy's decide_test.go and
// maintenance_test.go) that this package's tests use too: a copy, since
// one package's test files are not another's.

var maintNow = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

const maintWindow = "2026-12-08T02:00:00Z"

func maintNode(status, typ string, canReschedule bool, label string, workers int) *tpu.Node {
	n := &tpu.Node{
		Name:  "projects/p/locations/us-central2-b/nodes/llm",
		State: "READY", Health: "HEALTHY",
		Labels: map[string]string{"tpu-autoheal": "enabled"},
		UpcomingMaintenance: &tpu.UpcomingMaintenance{
			MaintenanceStatus: status, Type: typ, CanReschedule: canReschedule,
			WindowStartTime: maintWindow, WindowEndTime: "2026-12-08T06:00:00Z",
		},
	}
	if label != "" {
		n.Labels[MaintenanceLabel] = label
	}
	for w := range workers {
		n.NetworkEndpoints = append(n.NetworkEndpoints, &tpu.NetworkEndpoint{IpAddress: fmt.Sprintf("10.0.0.%d", w+2)})
	}
	return n
}

func checkpoint(worker, notice string) GuestAttribute {
	v, _ := json.Marshal(CheckpointReport{Notice: notice, Checkpoint: "gs://b/ckpt/step-100", Time: "2026-12-01T09:50:00Z"})
	return GuestAttribute{Worker: worker, Namespace: CheckpointNamespace, Key: CheckpointKey, Value: string(v)}
}
