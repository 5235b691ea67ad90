package function

import (
	"context"
	"fmt"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/tpuapi"
)

// WithMaintenanceTPU uses t for the maintenance calls (metadata patch, guest
// attributes, performMaintenance) instead of the TPU API clients.
func WithMaintenanceTPU(t remediate.MaintenanceTPU) Option {
	return func(d *deps) { d.maint = t }
}

// WithNotices uses n as the notice ledger instead of Firestore's notices.
func WithNotices(n remediate.NoticeStore) Option { return func(d *deps) { d.notices = n } }

// wireMaintenance turns on the maintenance handling of READY nodes with
// upcoming maintenance (#10): the v2 and v2alpha1 clients on the same
// endpoint as the TPU client, the notices next to the ledger. A function
// built with an injected store and no notice ledger keeps notices in
// memory (tests, `autoheal serve`). With WithTPU and no WithMaintenanceTPU
// maintenance is not acted on: an injected TPU brings its maintenance
// client explicitly or none.
func wireMaintenance(ctx context.Context, cfg Config, d *deps, rd *remediate.Deps) error {
	if d.maint == nil && d.tpuBuilt {
		epOpts, err := tpuapi.EndpointOptions(cfg.TPUEndpoint)
		if err != nil {
			return fmt.Errorf("%s_TPU_ENDPOINT: %w", EnvPrefix, err)
		}
		m, err := tpuapi.NewMaintenanceFromOptions(ctx, epOpts...)
		if err != nil {
			return err
		}
		d.maint = m
	}
	if d.maint == nil {
		return nil
	}
	if d.notices == nil {
		d.notices = ledger.NewMemoryNotices()
	}
	rd.Maintenance, rd.Notices = d.maint, d.notices
	return nil
}

// handleZoneHint handles a compute.instances.* entry about a TPU worker VM:
// a bounded look at the opted-in nodes of its project and zone. Route to it
// from HandleCloudEvent once events marks such entries (events.KindZoneHint):
//
//	if ev.Kind == events.KindZoneHint { return f.handleZoneHint(ctx, ev) }
func (f *Function) handleZoneHint(ctx context.Context, ev events.Event) error {
	res, err := f.handler.HandleZoneHint(ctx, ev)
	if err != nil {
		return fmt.Errorf("zone hint %s for %s/%s: %w", ev.InsertID, ev.Node.Project, ev.Node.Zone, err)
	}
	for _, r := range res.Records {
		if remediate.LeftForLater(r) {
			f.handler.KickAfter(ctx, r) // one kick follows them all
			break
		}
	}
	return nil
}
