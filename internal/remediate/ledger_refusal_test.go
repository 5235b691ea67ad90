package remediate_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/ledger/ledgertest"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// wantLedgerRefusalsClassified checks permanentLedgerError against the
// errors store really returns: its refusal of a spec over its limit is
// permanent (the delivery is acknowledged, not redelivered forever); a
// lost lease, a cancelled call and a raw gRPC code no ledger classified are
// not.
func wantLedgerRefusalsClassified(t *testing.T, s remediate.Store) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	const node = "projects/acme-ml/locations/us-central2-b/nodes/refused"
	rec, err := s.Claim(ctx, remediate.ClaimRequest{Node: node, Project: "acme-ml", Zone: "us-central2-b", Holder: "h", Now: now,
		Action: remediate.ActionRecreate, EventID: "e1", Cause: events.CauseMaintenance, Config: remediate.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	rec.Phase, rec.Spec = remediate.PhaseSaved, ledgertest.OversizeSpec(node)
	refusal := s.Update(ctx, rec)
	if refusal == nil {
		t.Fatal("the ledger saved a spec over its limit")
	}
	if !remediate.PermanentLedgerError(fmt.Errorf("save phase saved: %w", refusal)) {
		t.Errorf("ledger's refusal %v: not permanent", refusal)
	}
	rec.Spec, rec.Holder = nil, "someone-else"
	lost := s.Update(ctx, rec)
	if !errors.Is(lost, remediate.ErrLeaseLost) {
		t.Fatalf("update by another holder: %v, want ErrLeaseLost", lost)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	for _, err := range []error{lost, cctx.Err(), status.Error(codes.Unavailable, "try again")} {
		if remediate.PermanentLedgerError(err) {
			t.Errorf("%v: permanent, want transient", err)
		}
	}
}

func TestMemoryLedgerRefusalIsPermanent(t *testing.T) {
	wantLedgerRefusalsClassified(t, ledger.NewMemory())
}
