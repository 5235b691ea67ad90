package function

import (
	"log/slog"

	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// WithIncidents uses s as the incidents store (the resume watch, #11)
// instead of Firestore's incidents collection.
func WithIncidents(s remediate.IncidentStore) Option { return func(d *deps) { d.incidents = s } }

// wireResume turns on the resume watch (#11): the handler closes an
// incident with one resumed record once the node's guest reports training
// resumed on every worker (or AUTOHEAL_RESUME_WATCH runs out), and its
// records open and close the incidents. The guest attributes are read with
// the maintenance client (tpuapi.Maintenance, or WithMaintenanceTPU); with
// an injected TPU and no maintenance client there is none to read them, and
// the watch stays off. A handler built with an injected store and no
// incidents store keeps incidents in memory (tests, `autoheal serve` on a
// memory ledger). Call after newMaintainer, which settles d.maint.
func wireResume(h *remediate.Handler, d *deps, rc remediate.Config, diag *slog.Logger) {
	if d.maint == nil {
		return
	}
	if d.incidents == nil {
		d.incidents = ledger.NewMemoryIncidents()
	}
	w := &remediate.ResumeWatcher{Guest: d.maint, Store: d.incidents, Recorder: d.recorder, Config: rc, Now: d.now}
	h.Resume = w
	h.Recorder = w.Recording(d.recorder, func(err error) {
		diag.Warn("incident bookkeeping failed; the record was written", "error", err.Error())
	})
}
