package function

import (
	"context"
	"fmt"

	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// The instance path: Compute Engine TPU VMs (TPU7x and later; v6e and v5p
// created through Compute Engine), beside the TPU API's nodes. Entries about
// instances that are not Cloud TPU workers (events.KindInstance) go to
// computevm.Recovery, and every sweep also lists the opted-in TPU instances
// of AUTOHEAL_ZONES (saving their specs). It shares the ledger, the
// recorder, dry run and the guards' configuration with the node path.

// WithCompute turns the instance path on with c instead of the Compute
// Engine client, and s (nil: in memory) as its store.
func WithCompute(c computevm.Instances, s computevm.Store) Option {
	return func(d *deps) { d.compute, d.vmStore = c, s }
}

// newInstances builds the instance path; its saved specs are sealed with
// the node path's Sealer (h's, from wireTrust).
func newInstances(ctx context.Context, cfg Config, d *deps, rc remediate.Config, h *remediate.Handler) (*computevm.Recovery, error) {
	if !cfg.ComputeInstances && d.compute == nil {
		return nil, nil // off: instance entries are recorded and dropped
	}
	if d.compute == nil {
		opts, err := computevm.EndpointOptions(cfg.ComputeEndpoint)
		if err != nil {
			return nil, fmt.Errorf("%s_COMPUTE_ENDPOINT: %w", EnvPrefix, err)
		}
		c, err := computevm.NewFromOptions(ctx, opts...)
		if err != nil {
			return nil, err
		}
		d.compute = c
	}
	if d.vmStore == nil {
		// A store given with WithStore (tests, `autoheal serve`) is not
		// Firestore: the instance path keeps its specs in memory beside it.
		d.vmStore = computevm.NewMemory()
	}
	pc := vmpolicy.DefaultConfig()
	pc.StuckGrace, pc.RestartGrace = cfg.StuckGrace, cfg.RestartGrace
	pc.CheckpointTimeout = cfg.CheckpointTimeout
	pc.FaultyHosts, _ = vmpolicy.ParseFaultyHosts(cfg.ReportFaultyHosts) // validated by Validate
	return &computevm.Recovery{
		Compute: d.compute, Store: d.vmStore, Ledger: d.store, Recorder: d.recorder,
		Config: rc, Policy: pc, Holder: "function-instances", Now: d.now,
		Sealer: h.Sealer, TrustUnsealedSpecs: h.TrustUnsealedSpecs,
	}, nil
}

// handleInstance handles an entry about a Compute Engine instance that is
// not a Cloud TPU worker (events.KindInstance). Only a transient failure is
// returned (Pub/Sub redelivers the entry).
func (f *Function) handleInstance(ctx context.Context, ev events.Event) error {
	if f.instances == nil {
		f.handler.Skip(ctx, ev, "instance entry: the instance path is off ("+EnvPrefix+"_COMPUTE_INSTANCES=false)")
		return nil
	}
	if _, err := f.instances.HandleEvent(ctx, ev); err != nil {
		return fmt.Errorf("handle instance entry %s about %s: %w", ev.InsertID, ev.Instance, err)
	}
	return nil
}

// sweepInstances runs the instance path's sweep after the nodes'. Its
// failures are logged, not returned: the node sweep is done, and the next
// sweep lists the instances again.
func (f *Function) sweepInstances(ctx context.Context) {
	if f.instances == nil {
		return
	}
	res, err := f.instances.Sweep(ctx, f.cfg.Projects, f.cfg.Zones)
	if err != nil {
		f.diag.Error("instance sweep failed", "event", SweepEvent, "records", len(res.Records), "error", err.Error())
		return
	}
	f.diag.Info(fmt.Sprintf("instance sweep: %d opted-in TPU instances looked at, %d records", res.Instances, len(res.Records)),
		"event", SweepEvent, "instances", res.Instances, "records", len(res.Records), "unlisted", len(res.Errors))
}
