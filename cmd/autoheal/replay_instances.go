package main

import (
	"time"

	"github.com/tpu-autoheal/autoheal/internal/computevm"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
	"github.com/tpu-autoheal/autoheal/internal/seal"
	"github.com/tpu-autoheal/autoheal/internal/vmpolicy"
)

// replayInstances builds the instance path replay feeds Compute Engine
// entries to: the function's computevm.Recovery (function.newInstances),
// with replay's ledger, recorder, clock, policy (dry run included) and
// sealer, its saved specs and evidence in memory for the run. nil when the
// target has no Compute Engine.
func replayInstances(tg *target, store remediate.Store, rec remediate.Recorder, cfg remediate.Config, now func() time.Time, sealer seal.Sealer) *computevm.Recovery {
	if tg.compute == nil {
		return nil
	}
	pc := vmpolicy.DefaultConfig()
	pc.StuckGrace = cfg.StuckGrace
	return &computevm.Recovery{
		Compute: tg.compute, Store: computevm.NewMemory(), Ledger: store, Recorder: rec,
		Config: cfg, Policy: pc, Holder: replayHolder, Now: now, Sealer: sealer,
	}
}
