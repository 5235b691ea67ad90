// Package ledgertest is the contract every remediate.Store must meet: dedupe,
// claims with leases and takeover, the cooldown and caps re-checked inside
// the claim, lease loss, unfinished recoveries, deferrals, the sweep cursor,
// concurrent claims and a lossless spec round trip. Run it against each
// store implementation; it must never depend on one store's internals.
package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	tpu "google.golang.org/api/tpu/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// NewStore returns a fresh, empty store for one subtest. Stores must use the
// default clock (time.Now) for event expiry. A store is the whole ledger
// (ledger.Admin: the Store, the follower lease, the batched read, pauses):
// no part of the contract is found by type assertion.
type NewStore func(t *testing.T) ledger.Admin

// Options tune the suite for slower stores.
type Options struct {
	// Claimants is how many goroutines race to claim one node (default 32).
	Claimants int
	// NewClaimant, when set, returns the store a racing goroutine uses
	// (e.g. one with its own client over the same database as base).
	NewClaimant func(t *testing.T, base ledger.Admin) ledger.Admin
	// StormClaims is how many distinct nodes of one zone claim at once in
	// the storm breaker test (default 500), against StormLimit (default
	// remediate.DefaultBreakerLimit).
	StormClaims, StormLimit int
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	project = "proj-a"
	nodeA   = "projects/proj-a/locations/us-central2-b/nodes/llm-v4-a"
	nodeB   = "projects/proj-a/locations/us-central2-b/nodes/llm-v4-b"
	nodeC   = "projects/proj-a/locations/us-central2-b/nodes/llm-v4-c"
	nodeX   = "projects/proj-x/locations/us-central2-b/nodes/other"
)

func cfg() remediate.Config {
	c := remediate.DefaultConfig()
	c.Lease = time.Minute
	c.Cooldown = 30 * time.Minute
	c.Window = 24 * time.Hour
	c.MaxRecreates = 3
	c.MaxInFlight = 2
	return c
}

func req(node, holder string, now time.Time) remediate.ClaimRequest {
	p := project
	if node == nodeX {
		p = "proj-x"
	}
	return remediate.ClaimRequest{
		Node: node, Project: p, Holder: holder, Now: now,
		Action: remediate.ActionRecreate, EventID: "ev-" + holder, Cause: events.CauseMaintenance,
		Config: cfg(),
	}
}

// Spec is a node spec using every field a recreate carries, for round-trip
// checks.
func Spec(name string) *tpu.Node {
	return &tpu.Node{
		Name:              name,
		AcceleratorType:   "v4-128",
		AcceleratorConfig: &tpu.AcceleratorConfig{Type: "V4", Topology: "4x4x4"},
		RuntimeVersion:    "tpu-ubuntu2204-base",
		Description:       "llm training slice",
		CidrBlock:         "10.128.0.0/20",
		NetworkConfig: &tpu.NetworkConfig{
			Network: "projects/proj-a/global/networks/default", Subnetwork: "projects/proj-a/regions/us-central2/subnetworks/default",
			EnableExternalIps: true, CanIpForward: true, QueueCount: 4,
		},
		ServiceAccount:         &tpu.ServiceAccount{Email: "trainer@proj-a.iam.gserviceaccount.com", Scope: []string{"https://www.googleapis.com/auth/cloud-platform"}},
		SchedulingConfig:       &tpu.SchedulingConfig{Spot: true, Preemptible: false, Reserved: true},
		Labels:                 map[string]string{"tpu-autoheal": "enabled", "team": "llm", "tpu-autoheal-generation": "3"},
		Tags:                   []string{"tpu", "allow-ssh"},
		DataDisks:              []*tpu.AttachedDisk{{SourceDisk: "projects/proj-a/zones/us-central2-b/disks/ckpt", Mode: "READ_WRITE"}, {SourceDisk: "projects/proj-a/zones/us-central2-b/disks/data", Mode: "READ_ONLY"}},
		ShieldedInstanceConfig: &tpu.ShieldedInstanceConfig{EnableSecureBoot: true},
		BootDiskConfig:         &tpu.BootDiskConfig{CustomerEncryptionKey: &tpu.CustomerEncryptionKey{KmsKeyName: "projects/proj-a/locations/us/keyRings/r/cryptoKeys/k"}},
		Metadata: map[string]string{
			"startup-script": "#!/bin/bash\nset -euo pipefail\necho 'resume from gs://b/ckpt' \"$HOSTNAME\"\n",
			"ssh-keys":       "alice:ssh-ed25519 AAAA alice@example.com",
			"unicode":        "äöü ✓ \t\x00end",
		},
	}
}

// OversizeSpec is Spec(name) with a metadata value that makes its encoding
// longer than Firestore keeps in one field (1,048,487 bytes).
func OversizeSpec(name string) *tpu.Node {
	n := Spec(name)
	n.Metadata["blob"] = strings.Repeat("x", 1<<20)
	return n
}

// Run runs the whole contract against stores made by newStore.
func Run(t *testing.T, newStore NewStore, opts Options) {
	if opts.Claimants <= 0 {
		opts.Claimants = 32
	}
	if opts.StormClaims <= 0 {
		opts.StormClaims = 500
	}
	if opts.StormLimit <= 0 {
		opts.StormLimit = remediate.DefaultBreakerLimit
	}
	ctx := context.Background()
	runGuards(t, newStore, opts)
	runFollower(t, newStore, opts) // follower.go
	runEvidence(t, newStore)       // evidence.go
	runOldShapes(t, newStore)      // oldshape.go

	t.Run("event is first only once", func(t *testing.T) {
		s := newStore(t)
		exp := time.Now().Add(time.Hour)
		got1 := mustMark(t, s, "insert-1", exp)
		got2 := mustMark(t, s, "insert-1", exp)
		got3 := mustMark(t, s, "insert-2", exp)
		if !got1 || got2 || !got3 {
			t.Errorf("MarkEvent first = %v, %v, %v; want true, false, true", got1, got2, got3)
		}
		h := mustHistory(t, s, nodeA, "insert-1", time.Now())
		if !h.EventSeen {
			t.Error("History.EventSeen = false for a marked event; want true")
		}
		h = mustHistory(t, s, nodeA, "never-marked", time.Now())
		if h.EventSeen {
			t.Error("History.EventSeen = true for an unmarked event; want false")
		}
	})

	t.Run("expired event mark is forgotten", func(t *testing.T) {
		s := newStore(t)
		mustMark(t, s, "insert/with:odd chars", time.Now().Add(-time.Minute))
		if got := mustMark(t, s, "insert/with:odd chars", time.Now().Add(time.Hour)); !got {
			t.Error("MarkEvent after expiry: first = false; want true")
		}
		if got := mustMark(t, s, "insert/with:odd chars", time.Now().Add(time.Hour)); got {
			t.Error("MarkEvent of a live mark: first = true; want false")
		}
		h := mustHistory(t, s, nodeA, "insert/with:odd chars", time.Now().Add(2*time.Hour))
		if h.EventSeen {
			t.Error("History.EventSeen after the mark's expiry = true; want false")
		}
	})

	t.Run("new claim starts generation one at phase claimed", func(t *testing.T) {
		s := newStore(t)
		got := mustClaim(t, s, req(nodeA, "h1", t0))
		want := remediate.Recovery{
			Node: nodeA, Project: project, Action: remediate.ActionRecreate, Phase: remediate.PhaseClaimed,
			Generation: 1, Holder: "h1", LeaseUntil: t0.Add(time.Minute), Attempts: 1,
			EventID: "ev-h1", Cause: events.CauseMaintenance, StartedAt: t0, UpdatedAt: t0,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Claim (-want +got):\n%s", diff)
		}
		h := mustHistory(t, s, nodeA, "", t0)
		if diff := cmp.Diff(&want, h.Recovery); diff != "" {
			t.Errorf("History.Recovery (-want +got):\n%s", diff)
		}
	})

	t.Run("live lease blocks every other claim, the holder's too", func(t *testing.T) {
		s := newStore(t)
		mustClaim(t, s, req(nodeA, "h1", t0))
		for _, holder := range []string{"h2", "h1"} {
			_, err := s.Claim(ctx, req(nodeA, holder, t0.Add(59*time.Second)))
			if !errors.Is(err, remediate.ErrClaimed) {
				t.Errorf("Claim by %s during a live lease: err = %v; want ErrClaimed", holder, err)
			}
		}
	})

	t.Run("expired lease is taken over with phase spec and ops kept", func(t *testing.T) {
		s := newStore(t)
		r := mustClaim(t, s, req(nodeA, "h1", t0))
		r.Phase = remediate.PhaseDeleting
		r.Spec = Spec(nodeA)
		r.NodeID, r.DeleteSent = 4721934471238, true
		r.DeleteOp = "projects/proj-a/locations/us-central2-b/operations/op-del"
		r.UpdatedAt = t0.Add(10 * time.Second)
		mustUpdate(t, s, r)

		// Update renewed the lease to UpdatedAt+Lease: still live at t0+65s.
		if _, err := s.Claim(ctx, req(nodeA, "h2", t0.Add(65*time.Second))); !errors.Is(err, remediate.ErrClaimed) {
			t.Fatalf("Claim before the renewed lease expired: err = %v; want ErrClaimed", err)
		}
		at := t0.Add(71 * time.Second)
		got := mustClaim(t, s, req(nodeA, "h2", at))
		want := r
		want.Holder, want.Attempts, want.LeaseUntil, want.UpdatedAt = "h2", 2, at.Add(time.Minute), at
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("takeover (-want +got):\n%s", diff)
		}
		// The old holder has lost the claim.
		r.Phase = remediate.PhaseDeleted
		if err := s.Update(ctx, r); !errors.Is(err, remediate.ErrLeaseLost) {
			t.Errorf("Update by the taken-over holder: err = %v; want ErrLeaseLost", err)
		}
		got.Phase = remediate.PhaseDeleted
		got.UpdatedAt = at.Add(time.Second)
		mustUpdate(t, s, got)
	})

	t.Run("holder with an expired lease not taken over may still update", func(t *testing.T) {
		s := newStore(t)
		r := mustClaim(t, s, req(nodeA, "h1", t0))
		r.Phase = remediate.PhaseSaved
		r.UpdatedAt = t0.Add(5 * time.Minute)
		mustUpdate(t, s, r)
		h := mustHistory(t, s, nodeA, "", t0.Add(5*time.Minute))
		if got, want := h.Recovery.LeaseUntil, t0.Add(6*time.Minute); !got.Equal(want) {
			t.Errorf("LeaseUntil after a late update = %v; want %v", got, want)
		}
	})

	t.Run("takeover by the same holder is a new attempt: the old attempt loses the claim", func(t *testing.T) {
		// One holder id is shared by every request of one function
		// instance: the claim token is holder AND attempt, so a stalled
		// request of an instance that took its own recovery over cannot
		// write over the new attempt.
		s := newStore(t)
		old := mustClaim(t, s, req(nodeA, "h1", t0))
		at := t0.Add(2 * time.Minute) // the lease (1 min) expired
		cur := mustClaim(t, s, req(nodeA, "h1", at))
		if cur.Attempts != 2 || cur.Holder != "h1" {
			t.Fatalf("takeover by the same holder = holder %s attempt %d; want h1 attempt 2", cur.Holder, cur.Attempts)
		}
		old.Phase, old.UpdatedAt = remediate.PhaseDeleting, at.Add(time.Second)
		if err := s.Update(ctx, old); !errors.Is(err, remediate.ErrLeaseLost) {
			t.Errorf("Update by attempt 1 after attempt 2 took over (same holder): err = %v; want ErrLeaseLost", err)
		}
		if h := mustHistory(t, s, nodeA, "", at); h.Recovery == nil || h.Recovery.Phase != remediate.PhaseClaimed || h.Recovery.Attempts != 2 {
			t.Errorf("after the stale update: recovery %+v; want attempt 2 still claimed", h.Recovery)
		}
	})

	t.Run("lease is released at NextLookAt", func(t *testing.T) {
		// A recovery waiting for its operation is looked at by whoever
		// comes at NextLookAt (a sweep of another instance), not only once
		// the lease the update renewed has run out.
		s := newStore(t)
		r := mustClaim(t, s, req(nodeA, "h1", t0))
		r.Phase, r.Spec, r.DeleteSent = remediate.PhaseDeleting, Spec(nodeA), true
		r.UpdatedAt = t0.Add(time.Second)
		r.NextLookAt = t0.Add(5 * time.Second) // well before UpdatedAt+Lease (61 s)
		mustUpdate(t, s, r)
		h := mustHistory(t, s, nodeA, "", t0.Add(time.Second))
		if got := h.Recovery.LeaseUntil; !got.Equal(r.NextLookAt) {
			t.Errorf("LeaseUntil after an update with NextLookAt %v = %v; want NextLookAt", r.NextLookAt, got)
		}
		got := mustClaim(t, s, req(nodeA, "h2", r.NextLookAt))
		if got.Holder != "h2" || got.Attempts != 2 || got.Phase != remediate.PhaseDeleting {
			t.Errorf("claim at NextLookAt = holder %s attempt %d phase %s; want h2 attempt 2 deleting (a takeover)", got.Holder, got.Attempts, got.Phase)
		}
	})

	t.Run("update without a claim loses the lease", func(t *testing.T) {
		s := newStore(t)
		err := s.Update(ctx, remediate.Recovery{Node: nodeA, Project: project, Holder: "h1", Generation: 1, Attempts: 1, Phase: remediate.PhaseSaved})
		if !errors.Is(err, remediate.ErrLeaseLost) {
			t.Errorf("Update with no claim: err = %v; want ErrLeaseLost", err)
		}
	})

	t.Run("finished recovery cannot be reopened by its holder", func(t *testing.T) {
		s := newStore(t)
		r := finish(t, s, nodeA, "h1", t0)
		r.Phase = remediate.PhaseCreating
		if err := s.Update(ctx, r); !errors.Is(err, remediate.ErrLeaseLost) {
			t.Errorf("Update of a done recovery back to creating: err = %v; want ErrLeaseLost", err)
		}
	})

	t.Run("done recovery enters history and the next claim is generation two", func(t *testing.T) {
		s := newStore(t)
		finish(t, s, nodeA, "h1", t0)
		h := mustHistory(t, s, nodeA, "", t0.Add(time.Hour))
		if diff := cmp.Diff([]time.Time{t0}, h.Recreates); diff != "" {
			t.Errorf("History.Recreates (-want +got):\n%s", diff)
		}
		if h.Recovery == nil || h.Recovery.Phase != remediate.PhaseDone {
			t.Errorf("History.Recovery = %+v; want the done recovery", h.Recovery)
		}
		got := mustClaim(t, s, req(nodeA, "h2", t0.Add(time.Hour)))
		if got.Generation != 2 || got.Attempts != 1 || got.Phase != remediate.PhaseClaimed || got.Spec != nil {
			t.Errorf("second claim = gen %d attempts %d phase %s spec %v; want gen 2 attempts 1 claimed no spec",
				got.Generation, got.Attempts, got.Phase, got.Spec)
		}
	})

	t.Run("recreate counts from the delete request, so a crash cannot bypass the cooldown", func(t *testing.T) {
		s := newStore(t)
		r := mustClaim(t, s, req(nodeA, "h1", t0))
		r.Phase, r.Spec, r.UpdatedAt = remediate.PhaseSaved, Spec(nodeA), t0
		mustUpdate(t, s, r)
		if h := mustHistory(t, s, nodeA, "", t0); len(h.Recreates) != 0 {
			t.Errorf("Recreates after only saving the spec = %v; want none", h.Recreates)
		}
		r.Phase = remediate.PhaseDeleting
		mustUpdate(t, s, r)
		if h := mustHistory(t, s, nodeA, "", t0); len(h.Recreates) != 1 {
			t.Errorf("Recreates after the delete request = %v; want one", h.Recreates)
		}
		r.Phase = remediate.PhaseFailed
		mustUpdate(t, s, r)
		r.Phase = remediate.PhaseDone
		mustUpdate(t, s, r)
		if h := mustHistory(t, s, nodeA, "", t0); len(h.Recreates) != 1 {
			t.Errorf("Recreates after done = %v; want still one", h.Recreates)
		}
	})

	t.Run("recovery closed without a delete does not count as a recreate", func(t *testing.T) {
		s := newStore(t)
		r := mustClaim(t, s, req(nodeA, "h1", t0))
		r.Phase = remediate.PhaseFailed
		mustUpdate(t, s, r)
		r.Phase = remediate.PhaseDone
		mustUpdate(t, s, r)
		if h := mustHistory(t, s, nodeA, "", t0); len(h.Recreates) != 0 {
			t.Errorf("Recreates = %v; want none", h.Recreates)
		}
	})

	guards := []struct {
		name  string
		setup func(t *testing.T, s remediate.Store)
		claim remediate.ClaimRequest
		want  error
	}{
		{
			name:  "claim within the cooldown is refused",
			setup: func(t *testing.T, s remediate.Store) { finish(t, s, nodeA, "h1", t0) },
			claim: req(nodeA, "h2", t0.Add(29*time.Minute)),
			want:  remediate.ErrCooldown,
		},
		{
			name:  "claim after the cooldown is allowed",
			setup: func(t *testing.T, s remediate.Store) { finish(t, s, nodeA, "h1", t0) },
			claim: req(nodeA, "h2", t0.Add(30*time.Minute)),
		},
		{
			name: "claim at the window cap is refused",
			setup: func(t *testing.T, s remediate.Store) {
				for i := 0; i < 3; i++ {
					finish(t, s, nodeA, fmt.Sprint("h", i), t0.Add(time.Duration(i)*time.Hour))
				}
			},
			claim: req(nodeA, "h9", t0.Add(3*time.Hour)),
			want:  remediate.ErrWindowCap,
		},
		{
			name: "claim once the oldest recreate left the window is allowed",
			setup: func(t *testing.T, s remediate.Store) {
				for i := 0; i < 3; i++ {
					finish(t, s, nodeA, fmt.Sprint("h", i), t0.Add(time.Duration(i)*time.Hour))
				}
			},
			claim: req(nodeA, "h9", t0.Add(24*time.Hour+time.Second)),
		},
		{
			name: "claim at the project in-flight cap is refused",
			setup: func(t *testing.T, s remediate.Store) {
				mustClaim(t, s, req(nodeB, "h1", t0))
				mustClaim(t, s, req(nodeC, "h2", t0))
			},
			claim: req(nodeA, "h3", t0),
			want:  remediate.ErrInFlightCap,
		},
		{
			name: "in-flight recoveries of another project do not count",
			setup: func(t *testing.T, s remediate.Store) {
				mustClaim(t, s, req(nodeB, "h1", t0))
				mustClaim(t, s, req(nodeX, "h2", t0))
			},
			claim: req(nodeA, "h3", t0),
		},
		{
			name: "finished recoveries leave the in-flight count",
			setup: func(t *testing.T, s remediate.Store) {
				mustClaim(t, s, req(nodeB, "h1", t0))
				finish(t, s, nodeC, "h2", t0)
			},
			claim: req(nodeA, "h3", t0),
		},
		{
			name: "takeover of the node's own unfinished recovery ignores the caps",
			setup: func(t *testing.T, s remediate.Store) {
				for i := 0; i < 2; i++ {
					finish(t, s, nodeA, fmt.Sprint("h", i), t0.Add(time.Duration(i)*time.Hour))
				}
				r := mustClaim(t, s, req(nodeA, "h2", t0.Add(2*time.Hour)))
				r.Phase, r.Spec, r.UpdatedAt = remediate.PhaseDeleting, Spec(nodeA), t0.Add(2*time.Hour)
				mustUpdate(t, s, r)
				mustClaim(t, s, req(nodeB, "h3", t0.Add(2*time.Hour)))
			},
			// Cooldown (30m), window cap (3 counted) and in-flight cap (1
			// other) would all refuse a new claim.
			claim: func() remediate.ClaimRequest {
				r := req(nodeA, "h5", t0.Add(2*time.Hour+2*time.Minute))
				r.Config.MaxInFlight = 1
				return r
			}(),
		},
	}
	for _, tc := range guards {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			tc.setup(t, s)
			_, err := s.Claim(ctx, tc.claim)
			if tc.want == nil && err != nil {
				t.Errorf("Claim: err = %v; want success", err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Claim: err = %v; want %v", err, tc.want)
			}
		})
	}

	t.Run("history counts in-flight recoveries of other nodes in the project", func(t *testing.T) {
		s := newStore(t)
		mustClaim(t, s, req(nodeA, "h1", t0))
		mustClaim(t, s, req(nodeB, "h2", t0))
		mustClaim(t, s, req(nodeX, "h3", t0))
		if got := mustHistory(t, s, nodeA, "", t0).InFlight; got != 1 {
			t.Errorf("InFlight for node A = %d; want 1 (node B)", got)
		}
		if got := mustHistory(t, s, nodeC, "", t0).InFlight; got != 2 {
			t.Errorf("InFlight for node C = %d; want 2", got)
		}
	})

	t.Run("unfinished lists failed and in-progress recoveries, not done ones", func(t *testing.T) {
		s := newStore(t)
		finish(t, s, nodeC, "h3", t0)
		a := mustClaim(t, s, req(nodeA, "h1", t0))
		a.Phase, a.Spec, a.LastError = remediate.PhaseFailed, Spec(nodeA), "create: quota"
		mustUpdate(t, s, a)
		b := mustClaim(t, s, req(nodeB, "h2", t0))
		got, err := s.Unfinished(ctx)
		if err != nil {
			t.Fatalf("Unfinished: %v", err)
		}
		a.LeaseUntil = t0.Add(time.Minute)
		if diff := cmp.Diff([]remediate.Recovery{a, b}, got); diff != "" {
			t.Errorf("Unfinished (-want +got):\n%s", diff)
		}
	})

	t.Run("spec round trips losslessly and is never aliased", func(t *testing.T) {
		s := newStore(t)
		r := mustClaim(t, s, req(nodeA, "h1", t0))
		spec := Spec(nodeA)
		r.Phase, r.Spec, r.NodeID, r.DeleteSent = remediate.PhaseSaved, spec, 4721934471238, true
		mustUpdate(t, s, r)
		spec.Labels["team"] = "mutated after save"
		spec.DataDisks[0].Mode = "MUTATED"

		h := mustHistory(t, s, nodeA, "", t0)
		if diff := cmp.Diff(Spec(nodeA), h.Recovery.Spec); diff != "" {
			t.Errorf("saved spec (-want +got):\n%s", diff)
		}
		// The identity of the node whose spec was saved, and whether its
		// delete was requested, decide what a resumed recovery may touch.
		if got := h.Recovery; got.NodeID != 4721934471238 || !got.DeleteSent {
			t.Errorf("saved NodeID, DeleteSent = %d, %t; want 4721934471238, true", got.NodeID, got.DeleteSent)
		}
		h.Recovery.Spec.Metadata["startup-script"] = "mutated after read"
		un, err := s.Unfinished(ctx)
		if err != nil || len(un) != 1 {
			t.Fatalf("Unfinished = %v, %v; want one recovery", un, err)
		}
		if diff := cmp.Diff(Spec(nodeA), un[0].Spec); diff != "" {
			t.Errorf("spec after mutating a returned copy (-want +got):\n%s", diff)
		}
	})

	t.Run("a spec over the ledger's limit for one value is refused for good and nothing is saved", func(t *testing.T) {
		s := newStore(t)
		r := mustClaim(t, s, req(nodeA, "h1", t0))
		r.Phase, r.Spec = remediate.PhaseSaved, OversizeSpec(nodeA)
		err := s.Update(ctx, r)
		if err == nil {
			t.Fatal("Update of an oversize spec succeeded, want it refused")
		}
		if k := remediate.KindOf(err); k != remediate.KindPermanent {
			t.Errorf("Update of an oversize spec: %v, kind %s; want kind permanent (no retry mends it)", err, k)
		}
		if h := mustHistory(t, s, nodeA, "", t0); h.Recovery == nil || h.Recovery.Phase != remediate.PhaseClaimed || h.Recovery.Spec != nil {
			t.Errorf("after the refusal: %+v, want the claimed recovery as it was, no spec", h.Recovery)
		}
		// A spec the ledger can hold is saved after it: the refusal
		// was of that write, not of the recovery.
		r.Spec = Spec(nodeA)
		mustUpdate(t, s, r)
	})

	t.Run("abandoned recovery is terminal: not unfinished, not in flight, spec kept", func(t *testing.T) {
		s := newStore(t)
		a := mustClaim(t, s, req(nodeA, "h1", t0))
		a.Phase, a.Spec, a.NodeID, a.DeleteSent = remediate.PhaseDeleted, Spec(nodeA), 42, true
		mustUpdate(t, s, a)
		a.Phase, a.LastError = remediate.PhaseAbandoned, "create: INVALID_ARGUMENT"
		mustUpdate(t, s, a)
		if got := mustUnfinished(t, s); len(got) != 0 {
			t.Errorf("Unfinished = %v; want none (abandoned is terminal)", got)
		}
		h := mustHistory(t, s, nodeB, "", t0)
		if h.InFlight != 0 {
			t.Errorf("InFlight for node B = %d; want 0 (an abandoned recovery of A is not in flight)", h.InFlight)
		}
		h = mustHistory(t, s, nodeA, "", t0)
		if h.Recovery == nil || h.Recovery.Phase != remediate.PhaseAbandoned || h.Recovery.LastError != a.LastError {
			t.Fatalf("History recovery = %+v; want the abandoned one", h.Recovery)
		}
		if diff := cmp.Diff(Spec(nodeA), h.Recovery.Spec); diff != "" {
			t.Errorf("spec of the abandoned recovery (-want +got):\n%s", diff)
		}
		// An abandoned recovery cannot be resumed by its old holder...
		a.Phase = remediate.PhaseDeleted
		if err := s.Update(ctx, a); !errors.Is(err, remediate.ErrLeaseLost) {
			t.Errorf("Update of an abandoned recovery back to deleted: err = %v; want ErrLeaseLost", err)
		}
		// ... and a new claim (after the cooldown) starts a new generation.
		next := mustClaim(t, s, req(nodeA, "h2", t0.Add(31*time.Minute)))
		if next.Generation != a.Generation+1 || next.Phase != remediate.PhaseClaimed {
			t.Errorf("claim after abandoned = gen %d phase %s; want gen %d claimed", next.Generation, next.Phase, a.Generation+1)
		}
	})

	t.Run("due deferrals are listed at or after their due time", func(t *testing.T) {
		s := newStore(t)
		d1 := remediate.Deferral{Node: nodeA, Project: project, Since: t0, Due: t0.Add(10 * time.Minute), Reason: "unhealthy maintenance"}
		d2 := remediate.Deferral{Node: nodeB, Project: project, Since: t0, Due: t0.Add(5 * time.Minute), Reason: "restarting"}
		d3 := remediate.Deferral{Node: nodeC, Project: project, Since: t0, Due: t0.Add(time.Hour), Reason: "creating"}
		for _, d := range []remediate.Deferral{d1, d2, d3} {
			if err := s.SetDeferral(ctx, d); err != nil {
				t.Fatalf("SetDeferral: %v", err)
			}
		}
		if got := mustDue(t, s, t0.Add(4*time.Minute)); len(got) != 0 {
			t.Errorf("DueDeferrals before any is due = %v; want none", got)
		}
		if diff := cmp.Diff([]remediate.Deferral{d2, d1}, mustDue(t, s, t0.Add(10*time.Minute))); diff != "" {
			t.Errorf("DueDeferrals (-want +got):\n%s", diff)
		}
		if got := mustHistory(t, s, nodeA, "", t0); got.Deferral == nil || cmp.Diff(d1, *got.Deferral) != "" {
			t.Errorf("History.Deferral = %+v; want %+v", got.Deferral, d1)
		}
		// Replacing moves the due time; clearing removes it.
		d1.Due = t0.Add(2 * time.Hour)
		if err := s.SetDeferral(ctx, d1); err != nil {
			t.Fatalf("SetDeferral: %v", err)
		}
		if err := s.ClearDeferral(ctx, nodeB); err != nil {
			t.Fatalf("ClearDeferral: %v", err)
		}
		if err := s.ClearDeferral(ctx, "projects/p/locations/z/nodes/never-deferred"); err != nil {
			t.Errorf("ClearDeferral of an absent deferral: %v; want nil", err)
		}
		if diff := cmp.Diff([]remediate.Deferral{d3}, mustDue(t, s, t0.Add(90*time.Minute))); diff != "" {
			t.Errorf("DueDeferrals after replace and clear (-want +got):\n%s", diff)
		}
		if got := mustHistory(t, s, nodeB, "", t0); got.Deferral != nil {
			t.Errorf("History.Deferral after clear = %+v; want nil", got.Deferral)
		}
	})

	t.Run("a user's hold is kept per node until cleared", func(t *testing.T) {
		s := newStore(t)
		hold := remediate.Hold{Node: nodeA, Project: project, NodeID: 4721934471238, Since: t0, EventID: "user-stop-1", Reason: "terminated by a user"}
		if err := s.SetHold(ctx, hold); err != nil {
			t.Fatalf("SetHold: %v", err)
		}
		if got := mustHistory(t, s, nodeA, "", t0); got.Hold == nil || cmp.Diff(hold, *got.Hold) != "" {
			t.Errorf("History.Hold = %+v; want %+v", got.Hold, hold)
		}
		if got := mustHistory(t, s, nodeB, "", t0); got.Hold != nil {
			t.Errorf("History.Hold of another node = %+v; want nil", got.Hold)
		}
		if err := s.ClearHold(ctx, nodeA); err != nil {
			t.Fatalf("ClearHold: %v", err)
		}
		if err := s.ClearHold(ctx, nodeB); err != nil {
			t.Errorf("ClearHold of an absent hold: %v; want nil", err)
		}
		if got := mustHistory(t, s, nodeA, "", t0); got.Hold != nil {
			t.Errorf("History.Hold after clear = %+v; want nil", got.Hold)
		}
	})

	t.Run("sweep cursor persists", func(t *testing.T) {
		s := newStore(t)
		if got, err := s.SweepCursor(ctx); err != nil || got != "" {
			t.Errorf("initial SweepCursor = %q, %v; want empty", got, err)
		}
		for _, want := range []string{"proj-a/us-central2-b/page-2", ""} {
			if err := s.SetSweepCursor(ctx, want); err != nil {
				t.Fatalf("SetSweepCursor: %v", err)
			}
			if got, err := s.SweepCursor(ctx); err != nil || got != want {
				t.Errorf("SweepCursor = %q, %v; want %q", got, err, want)
			}
		}
	})

	t.Run("of many concurrent claims exactly one wins", func(t *testing.T) {
		s := newStore(t)
		// Another node of the project is in flight; with MaxInFlight 2 there
		// is room for exactly one more.
		mustClaim(t, s, req(nodeB, "other", t0))
		var (
			wg              sync.WaitGroup
			mu              sync.Mutex
			wins, claimed   int
			unexpectedError []error
		)
		start := make(chan struct{})
		for i := 0; i < opts.Claimants; i++ {
			store := s
			if opts.NewClaimant != nil {
				store = opts.NewClaimant(t, s)
			}
			node := nodeA
			if i%2 == 1 {
				node = nodeC // half race for a second node: only one of A and C fits under the cap
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := store.Claim(ctx, req(node, fmt.Sprint("racer-", i), t0))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, remediate.ErrClaimed), errors.Is(err, remediate.ErrInFlightCap):
					claimed++
				default:
					unexpectedError = append(unexpectedError, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins != 1 || len(unexpectedError) != 0 {
			t.Errorf("%d concurrent claims: %d won, %d refused, errors %v; want exactly 1 winner and no other errors",
				opts.Claimants, wins, claimed, unexpectedError)
		}
		if got := len(mustUnfinished(t, s)); got != 2 {
			t.Errorf("unfinished recoveries after the race = %d; want 2 (node B and the winner)", got)
		}
	})
}

// finish claims node at now and walks it to done through a delete.
func finish(t *testing.T, s remediate.Store, node, holder string, now time.Time) remediate.Recovery {
	t.Helper()
	r := mustClaim(t, s, req(node, holder, now))
	for _, p := range []remediate.Phase{remediate.PhaseSaved, remediate.PhaseDeleting, remediate.PhaseDeleted, remediate.PhaseCreating, remediate.PhaseDone} {
		r.Phase = p
		r.Spec = Spec(node)
		r.UpdatedAt = now
		mustUpdate(t, s, r)
	}
	return r
}

func mustMark(t *testing.T, s remediate.Store, id string, exp time.Time) bool {
	t.Helper()
	first, err := s.MarkEvent(context.Background(), id, exp)
	if err != nil {
		t.Fatalf("MarkEvent(%q): %v", id, err)
	}
	return first
}

func mustHistory(t *testing.T, s remediate.Store, node, eventID string, now time.Time) remediate.History {
	t.Helper()
	p := project
	if node == nodeX {
		p = "proj-x"
	}
	h, err := s.History(context.Background(), node, p, eventID, now, 24*time.Hour)
	if err != nil {
		t.Fatalf("History(%s): %v", node, err)
	}
	return h
}

func mustClaim(t *testing.T, s remediate.Store, r remediate.ClaimRequest) remediate.Recovery {
	t.Helper()
	rec, err := s.Claim(context.Background(), r)
	if err != nil {
		t.Fatalf("Claim(%s by %s): %v", r.Node, r.Holder, err)
	}
	return rec
}

func mustUpdate(t *testing.T, s remediate.Store, r remediate.Recovery) {
	t.Helper()
	if err := s.Update(context.Background(), r); err != nil {
		t.Fatalf("Update(%s to %s): %v", r.Node, r.Phase, err)
	}
}

func mustDue(t *testing.T, s remediate.Store, now time.Time) []remediate.Deferral {
	t.Helper()
	ds, err := s.DueDeferrals(context.Background(), now)
	if err != nil {
		t.Fatalf("DueDeferrals: %v", err)
	}
	return ds
}

func mustUnfinished(t *testing.T, s remediate.Store) []remediate.Recovery {
	t.Helper()
	rs, err := s.Unfinished(context.Background())
	if err != nil {
		t.Fatalf("Unfinished: %v", err)
	}
	return rs
}
