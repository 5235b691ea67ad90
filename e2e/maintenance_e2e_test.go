//go:build emulator

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

var (
	maintNode = parent + "/nodes/maint-v4-16"
	quietNode = parent + "/nodes/maint-not-opted-in"
)

const maintWindow = "2026-12-08T02:00:00Z"

func maintFleet() tpufake.Fleet {
	n := func(name string, labels map[string]string) *tpu.Node {
		return &tpu.Node{
			Name: name, AcceleratorType: "v4-16", State: "READY", Health: "HEALTHY",
			RuntimeVersion:   "tpu-ubuntu2204-base",
			Labels:           labels,
			Metadata:         map[string]string{"autoheal-train-cmd": "python3 train.py", "autoheal-checkpoint-dir": "gs://acme-e2e/ckpt"},
			NetworkEndpoints: []*tpu.NetworkEndpoint{{IpAddress: "10.0.0.2"}, {IpAddress: "10.0.0.3"}},
			UpcomingMaintenance: &tpu.UpcomingMaintenance{MaintenanceStatus: "PENDING", Type: "SCHEDULED", CanReschedule: true,
				WindowStartTime: maintWindow, WindowEndTime: "2026-12-08T06:00:00Z"},
			Id: 5151, ApiVersion: "V2",
		}
	}
	return tpufake.Fleet{Nodes: []*tpu.Node{
		n(maintNode, map[string]string{"tpu-autoheal": "enabled", "tpu-autoheal-maintenance": "early"}),
		n(quietNode, map[string]string{"team": "vision"}),
	}}
}

// upcomingEntry is a Compute Engine system event about a TPU worker VM.
func upcomingEntry(insertID, instance string, ts time.Time) string {
	e := map[string]any{
		"protoPayload": map[string]any{
			"@type":              "type.googleapis.com/google.cloud.audit.AuditLog",
			"status":             map[string]any{},
			"authenticationInfo": map[string]any{"principalEmail": "system@google.com"},
			"serviceName":        "compute.googleapis.com",
			"methodName":         "compute.instances.upcomingMaintenance",
			"resourceName":       "projects/" + project + "/zones/" + zone + "/instances/" + instance,
			"metadata": map[string]any{"upcomingMaintenance": map[string]any{
				"type": "SCHEDULED", "maintenanceStatus": "PENDING", "canReschedule": true,
				"windowStartTime": maintWindow, "windowEndTime": "2026-12-08T06:00:00Z",
			}},
		},
		"insertId":         insertID,
		"resource":         map[string]any{"type": "gce_instance", "labels": map[string]string{"project_id": project, "zone": zone, "instance_id": "7123456789"}},
		"timestamp":        ts.UTC().Format(time.RFC3339Nano),
		"receiveTimestamp": ts.Add(time.Second).UTC().Format(time.RFC3339Nano),
		"severity":         "NOTICE",
		"logName":          "projects/" + project + "/logs/cloudaudit.googleapis.com%2Fsystem_event",
	}
	b, _ := json.Marshal(e)
	return string(b)
}

func publishSweep(t *testing.T, bin string) {
	t.Helper()
	cmd := exec.Command(bin, "publish", "--topic", topic, "--sweep")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("autoheal publish --sweep: %v\n%s", err, out)
	}
}

func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestUpcomingMaintenanceIsPreparedThenMaintainedOnce(t *testing.T) {
	startEmulators(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	tpuSrv := tpufake.New(maintFleet())
	t.Cleanup(tpuSrv.Close)
	bin := buildCLI(t)
	addr, out := serve(t, bin, []string{
		"AUTOHEAL_PROJECT=" + project,
		"AUTOHEAL_PROJECTS=" + project,
		"AUTOHEAL_ZONES=" + zone,
		"AUTOHEAL_TPU_ENDPOINT=" + tpuSrv.URL(),
		"AUTOHEAL_RECORD_TO=stdout",
		// The schedule is compressed into seconds here: the sweep gate's
		// minimum interval (30s) would turn most of its sweeps away.
		"AUTOHEAL_SWEEP_MIN_INTERVAL=0s",
		"AUTOHEAL_MAINTENANCE=prepare", // the node's label says early
		fmt.Sprintf("AUTOHEAL_FIRESTORE_DATABASE=e2e-maint-%d", time.Now().UnixNano()%1e9),
	})
	proxy := httptest.NewServer(&pushCounter{target: "http://" + addr})
	t.Cleanup(proxy.Close)
	client, err := pubsub.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/" + project + "/subscriptions/" + topicID + "-push", Topic: topic,
		PushConfig: &pubsubpb.PushConfig{PushEndpoint: proxy.URL + "/" + topic}, AckDeadlineSeconds: 60,
	}); err != nil {
		t.Fatalf("create push subscription: %v", err)
	}

	// 1. The worker VM's upcomingMaintenance entry: one metadata patch of the
	// opted-in node of that zone.
	file := filepath.Join(t.TempDir(), "upcoming.jsonl")
	entry := upcomingEntry("e2e-upcoming-w0", "t1v-n-5f3a2b1c-w-0", time.Now().Add(-time.Minute))
	if err := os.WriteFile(file, []byte(entry+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	publish(t, bin, file)
	waitFor(ctx, t, "the entry's record", func() bool {
		for _, r := range records(out.all()) {
			if r.InsertID == "e2e-upcoming-w0" {
				return true
			}
		}
		return false
	})
	// The entry alone (a zone hint: it names a worker VM, not the node)
	// leads to the patch.
	waitFor(ctx, t, "the metadata patch", func() bool { return tpuSrv.Count("nodes.patch", maintNode) >= 1 })
	var node *tpu.Node
	for _, n := range tpuSrv.Fleet().Nodes {
		if n.Name == maintNode {
			node = n
		}
	}
	var notice remediate.MaintenanceNotice
	if err := json.Unmarshal([]byte(node.Metadata[remediate.NoticeMetadataKey]), &notice); err != nil || notice.Notice != maintWindow {
		t.Fatalf("notice in metadata %q: %v", node.Metadata[remediate.NoticeMetadataKey], err)
	}
	if node.Metadata["autoheal-train-cmd"] != "python3 train.py" {
		t.Errorf("metadata %v: other keys lost", node.Metadata)
	}

	// 2. Before the guest reports, a sweep starts nothing.
	publishSweep(t, bin)
	time.Sleep(3 * time.Second)
	if got := tpuSrv.Count("nodes.performMaintenance", ""); got != 0 {
		t.Fatalf("performMaintenance before the checkpoint: %d", got)
	}

	// 3. The simulated guest reports the checkpoint on both workers; the next
	// sweep starts the maintenance, once.
	report, _ := json.Marshal(remediate.CheckpointReport{Notice: maintWindow, Checkpoint: "gs://acme-e2e/ckpt/step-9000", Time: time.Now().UTC().Format(time.RFC3339)})
	for _, w := range []string{"0", "1"} {
		tpuSrv.SetGuestAttribute(maintNode, tpufake.GuestAttribute{Worker: w, Namespace: "autoheal", Key: "checkpoint", Value: string(report)})
	}
	publishSweep(t, bin)
	waitFor(ctx, t, "performMaintenance", func() bool { return tpuSrv.Count("nodes.performMaintenance", maintNode) >= 1 })
	publishSweep(t, bin)
	publish(t, bin, file) // the entry again
	time.Sleep(5 * time.Second)

	for _, c := range []struct {
		rpc, name string
		want      int
	}{
		{"nodes.patch", maintNode, 1},
		{"nodes.performMaintenance", maintNode, 1},
		{"nodes.patch", quietNode, 0},
		{"nodes.getGuestAttributes", quietNode, 0},
		{"nodes.performMaintenance", quietNode, 0},
	} {
		if got := tpuSrv.Count(c.rpc, c.name); got != c.want {
			t.Errorf("%s of %s: %d, want %d", c.rpc, c.name, got, c.want)
		}
	}
	var actions []string
	for _, r := range records(out.all()) {
		if r.Node == maintNode && (r.Action == "prepare" || r.Action == "maintain") {
			actions = append(actions, r.Action)
		}
	}
	if strings.Join(actions, ",") != "prepare,maintain" {
		t.Errorf("records of %s: %v, want prepare then maintain", maintNode, actions)
	}
}
