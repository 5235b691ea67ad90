package function

import (
	"github.com/tpu-autoheal/autoheal/internal/ledger"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// WithIncidents uses s as the incidents store (the resume watch, #11)
// instead of Firestore's incidents collection.
func WithIncidents(s remediate.IncidentStore) Option { return func(d *deps) { d.incidents = s } }

// wireResume turns on the resume watch (#11): the engine closes an
// incident with one resumed record once the node's guest reports training
// resumed on every worker (or AUTOHEAL_RESUME_WATCH runs out), and its
// records open and close the incidents (remediate.New wires that). The
// guest attributes are read with the maintenance client (tpuapi.Maintenance,
// or WithMaintenanceTPU); with an injected TPU and no maintenance client
// there is none to read them, and the watch stays off. A function built
// with an injected store and no incidents store keeps incidents in memory
// (tests, `autoheal serve` on a memory ledger). Call after
// wireMaintenance, which settles d.maint.
func wireResume(d *deps, rd *remediate.Deps) {
	if d.maint == nil {
		return
	}
	if d.incidents == nil {
		d.incidents = ledger.NewMemoryIncidents()
	}
	rd.Guest, rd.Incidents = d.maint, d.incidents
}
