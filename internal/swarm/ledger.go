package swarm

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// Ledger faults: a write that fails and did nothing (Firestore's ABORTED
// transaction), or one that took effect and whose answer was lost on the
// way back (UNAVAILABLE after the commit). Each names the write, the node
// and the nth such write of that node, so that recoveries of several nodes
// running at once meet the same faults in every run.

// Ledger writes a fault can hit.
var ledgerOps = []string{"claim", "update", "set-deferral", "clear-deferral", "set-hold"}

// LedgerFault fails the Nth write Op of Node.
type LedgerFault struct {
	Op   string
	Node string
	Nth  int
	Lost bool // the write took effect; else it did nothing
}

func (l LedgerFault) kind() Kind {
	if l.Lost {
		return LedgerLostCommit
	}
	return LedgerAbort
}

func (l LedgerFault) String() string {
	what := "aborted, did nothing"
	if l.Lost {
		what = "took effect, answer lost"
	}
	return fmt.Sprintf("ledger %s %s nth=%d: %s", l.Op, short(l.Node), l.Nth, what)
}

// injector counts each node's writes and fails those the faults name.
type injector struct {
	mu     sync.Mutex
	faults []LedgerFault
	seen   map[[2]string]int
	hits   int
}

func newInjector(faults []LedgerFault) *injector {
	return &injector{faults: faults, seen: map[[2]string]int{}}
}

// do runs write (the inner store's) under the faults of op on node.
func (in *injector) do(op, node string, write func() error) error {
	in.mu.Lock()
	key := [2]string{op, node}
	in.seen[key]++
	n := in.seen[key]
	var hit *LedgerFault
	for i, f := range in.faults {
		if f.Op == op && f.Node == node && f.Nth == n {
			hit = &in.faults[i]
			in.hits++
			break
		}
	}
	in.mu.Unlock()
	if hit == nil {
		return write()
	}
	if !hit.Lost {
		return status.Errorf(codes.Aborted, "swarm: %s of %s: transaction aborted (injected)", op, node)
	}
	if err := write(); err != nil {
		return err
	}
	return status.Errorf(codes.Unavailable, "swarm: %s of %s: commit answer lost (injected)", op, node)
}

func claim(in *injector, s remediate.Store, ctx context.Context, req remediate.ClaimRequest) (remediate.Recovery, error) {
	var rec remediate.Recovery
	err := in.do("claim", req.Node, func() (err error) { rec, err = s.Claim(ctx, req); return err })
	if err != nil {
		return remediate.Recovery{}, err
	}
	return rec, nil
}

// faultyMemory is the in-memory ledger with faults: every other method
// (pauses, breakers, batched reads) is the ledger's own.
type faultyMemory struct {
	*ledger.Memory
	in *injector
}

func (s faultyMemory) Claim(ctx context.Context, req remediate.ClaimRequest) (remediate.Recovery, error) {
	return claim(s.in, s.Memory, ctx, req)
}
func (s faultyMemory) Update(ctx context.Context, rec remediate.Recovery) error {
	return s.in.do("update", rec.Node, func() error { return s.Memory.Update(ctx, rec) })
}
func (s faultyMemory) SetDeferral(ctx context.Context, d remediate.Deferral) error {
	return s.in.do("set-deferral", d.Node, func() error { return s.Memory.SetDeferral(ctx, d) })
}
func (s faultyMemory) ClearDeferral(ctx context.Context, node string) error {
	return s.in.do("clear-deferral", node, func() error { return s.Memory.ClearDeferral(ctx, node) })
}
func (s faultyMemory) SetHold(ctx context.Context, h remediate.Hold) error {
	return s.in.do("set-hold", h.Node, func() error { return s.Memory.SetHold(ctx, h) })
}

// faultyFirestore is faultyMemory for the Firestore ledger.
type faultyFirestore struct {
	*ledger.Firestore
	in *injector
}

func (s faultyFirestore) Claim(ctx context.Context, req remediate.ClaimRequest) (remediate.Recovery, error) {
	return claim(s.in, s.Firestore, ctx, req)
}
func (s faultyFirestore) Update(ctx context.Context, rec remediate.Recovery) error {
	return s.in.do("update", rec.Node, func() error { return s.Firestore.Update(ctx, rec) })
}
func (s faultyFirestore) SetDeferral(ctx context.Context, d remediate.Deferral) error {
	return s.in.do("set-deferral", d.Node, func() error { return s.Firestore.SetDeferral(ctx, d) })
}
func (s faultyFirestore) ClearDeferral(ctx context.Context, node string) error {
	return s.in.do("clear-deferral", node, func() error { return s.Firestore.ClearDeferral(ctx, node) })
}
func (s faultyFirestore) SetHold(ctx context.Context, h remediate.Hold) error {
	return s.in.do("set-hold", h.Node, func() error { return s.Firestore.SetHold(ctx, h) })
}
