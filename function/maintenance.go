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

// newMaintainer builds the Maintainer the handler runs on READY nodes with
// upcoming maintenance (#10): the v2 and v2alpha1 clients on the same
// endpoint as the TPU client, the notices next to the ledger. A handler
// built with an injected store and no notice ledger keeps notices in memory
// (tests, `autoheal serve`). With WithTPU and no WithMaintenanceTPU it returns
// nil (maintenance not acted on) unless the injected TPU has the calls.
func newMaintainer(ctx context.Context, cfg Config, d *deps, rc remediate.Config) (*remediate.Maintainer, error) {
	if _, built := d.tpu.(tpuapi.Router); d.maint == nil && !built {
		// An injected TPU (WithTPU) without WithMaintenanceTPU: maintenance
		// is not acted on, unless it can do the maintenance calls too.
		m, ok := d.tpu.(remediate.MaintenanceTPU)
		if !ok {
			return nil, nil
		}
		d.maint = m
	}
	if d.maint == nil {
		epOpts, err := tpuapi.EndpointOptions(cfg.TPUEndpoint)
		if err != nil {
			return nil, fmt.Errorf("%s_TPU_ENDPOINT: %w", EnvPrefix, err)
		}
		m, err := tpuapi.NewMaintenanceFromOptions(ctx, epOpts...)
		if err != nil {
			return nil, err
		}
		d.maint = m
	}
	if d.notices == nil {
		d.notices = ledger.NewMemoryNotices()
	}
	return &remediate.Maintainer{TPU: d.maint, Notices: d.notices, Recorder: d.recorder, Config: rc, Now: d.now}, nil
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
			f.kickAfter(ctx, r) // kick.go: one kick follows them all
			break
		}
	}
	return nil
}
