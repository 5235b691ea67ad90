package main

import (
	"context"
	"time"

	compute "google.golang.org/api/compute/v1"

	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/seal"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// instancePath builds the instance path that replay feeds Compute Engine
// entries to and sweep lists instances with: the function's
// computevm.Recovery (function.newInstances) on c, with the run's ledger,
// recorder, clock, policy (dry run included) and sealer, its saved specs and
// evidence in vms (in memory for the run). nil when c is nil (the target
// has no Compute Engine).
func instancePath(c computevm.Instances, vms computevm.Store, store remediate.Store, rec remediate.Recorder, cfg remediate.Config, now func() time.Time, sealer seal.Sealer, holder string) *computevm.Recovery {
	if c == nil {
		return nil
	}
	pc := vmpolicy.DefaultConfig()
	pc.StuckGrace = cfg.StuckGrace
	return &computevm.Recovery{
		Compute: c, Store: vms, Ledger: store, Recorder: rec,
		Config: cfg, Policy: pc, Holder: holder, Now: now, Sealer: sealer,
	}
}

// listingCompute remembers what ListOptedIn returned, so that sweep can say
// what each zone held, as listingTPU does for nodes.
type listingCompute struct {
	computevm.Instances
	listings // by P/Z
}

func (l *listingCompute) ListOptedIn(ctx context.Context, project, zone string) ([]*compute.Instance, error) {
	ins, err := l.Instances.ListOptedIn(ctx, project, zone)
	l.note(project+"/"+zone, len(ins), err, true) // Sweep does not list it again
	return ins, err
}

// summary is "acme-ml/us-central1-c 11 opted-in TPU instances, acme-ml/x-1a
// not found".
func (l *listingCompute) summary() string {
	return l.listings.summary(func(s string) string { return s }, "opted-in TPU instance", "opted-in TPU instances")
}
