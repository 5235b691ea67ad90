package remediate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/seal"
)

// Deps are what an engine (a Handler) is built from: the backend, the
// ledger, the recorder, and every optional capability as an explicit field
// (nil = off). Nothing is discovered by type assertion: a store that has a
// follower lease but is not given as Lease follows without one, visibly in
// the wiring, not silently by a missing method.
type Deps struct {
	// TPU is the backend the interpreter observes and acts through
	// (docs/architecture.md, "The backend"): tpuapi.Router over the v2
	// client and the legacy v1 client, a simulator, a test's fake.
	TPU TPU
	// Store is the ledger (required).
	Store Store
	// Recorder receives every record (required). With Guest set it is
	// wrapped once, by New, in the resume watch's Recording.
	Recorder Recorder

	// Lease is the follower lease and the kick claim (follower.go): at
	// most one run follows at a time, and a wave of deliveries publishes one
	// kick. nil = every run follows and every delivery that wants a kick
	// kicks, as before kicks existed.
	Lease FollowerLease
	// Histories is the ledger's batched read for a sweep's listed pages
	// (sweep.go); nil = each node's history is read on its own.
	Histories HistoriesReader
	// Kicker publishes a follow kick (KickAfter, KickChain); nil = no kicks.
	Kicker Kicker

	// Maintenance is the TPU API's maintenance part (#10): notices of
	// upcoming maintenance are acted on (prepare, maintain) with it; nil =
	// off. Notices is then required.
	Maintenance MaintenanceTPU
	Notices     NoticeStore
	// Guest reads the guest attributes that say training resumed (#11):
	// with it the resume watch is on and its incidents, in Incidents
	// (then required), open and close from the records; nil = off.
	Guest     GuestAttributes
	Incidents IncidentStore
	// OnIncidentError is told a failed incident bookkeeping (the record
	// itself was written); nil = logged on Log.
	OnIncidentError func(error)

	// Sealer, TrustUnsealedSpecs and Accounts: Handler's fields of those
	// names (specseal.go).
	Sealer             seal.Sealer
	TrustUnsealedSpecs bool
	Accounts           *AccountGuard

	// Clock is the engine's clock (nil = time.Now); every part New builds
	// shares it.
	Clock func() time.Time
	// Holder names this instance in claims ("" = hostname and pid).
	Holder string
	// Log receives the engine's diagnostics (nil = JSON on stderr in Cloud
	// Logging's shape). The function passes its own, so that every
	// diagnostic goes where WithDiagnostics says.
	Log *slog.Logger
	// CallTimeout bounds each TPU call (0 = DefaultCallTimeout).
	CallTimeout time.Duration
	// Workers bounds concurrent recoveries and nodes (0 = DefaultWorkers).
	Workers int
}

// HistoriesReader is the batched read a ledger may offer (Firestore: one
// get of one summary document per node per call, not four reads per node),
// given as Deps.Histories.
type HistoriesReader interface {
	Histories(ctx context.Context, nodes []string, project string, now time.Time, window time.Duration) (map[string]History, error)
}

// Ledger is a Store with every optional capability of a ledger: both
// ledger stores (ledger.Memory, ledger.Firestore) are one. LedgerDeps fills
// Deps from it.
type Ledger interface {
	Store
	FollowerLease
	HistoriesReader
}

// WithLedger returns d with l as its Store, Lease and Histories.
func (d Deps) WithLedger(l Ledger) Deps {
	d.Store, d.Lease, d.Histories = l, l, l
	return d
}

// New builds the engine: it fills every default once and wires the parts
// (the maintainer, the resume watch and its recorder, the kicker, the
// follower lease, the logger, the holder, the clock), so that every entry
// point (the function, replay, sweep, the demo) builds the same engine the
// same way.
func New(d Deps, cfg Config) (*Handler, error) {
	if d.TPU == nil || d.Store == nil || d.Recorder == nil {
		return nil, errors.New("remediate.New: TPU, Store and Recorder are required")
	}
	if d.Maintenance != nil && d.Notices == nil {
		return nil, errors.New("remediate.New: Maintenance needs Notices")
	}
	if d.Guest != nil && d.Incidents == nil {
		return nil, errors.New("remediate.New: Guest needs Incidents")
	}
	h := &Handler{
		TPU: d.TPU, Store: d.Store, Recorder: d.Recorder, Config: cfg,
		Now: d.Clock, Holder: d.Holder, Log: d.Log, CallTimeout: d.CallTimeout, Workers: d.Workers,
		Lease: d.Lease, Histories: d.Histories, Kicker: d.Kicker,
		Sealer: d.Sealer, TrustUnsealedSpecs: d.TrustUnsealedSpecs, Accounts: d.Accounts,
	}
	h.setDefaults()
	d.Clock, d.Log = h.Now, h.Log
	if d.Maintenance != nil {
		// The Maintainer's Recorder serves Maintainer.Handle; the engine
		// records what Observe returns itself.
		h.Maintenance = &Maintainer{TPU: d.Maintenance, Notices: d.Notices, Recorder: d.Recorder, Config: cfg, Now: d.Clock, Accounts: d.Accounts}
	}
	if d.Guest != nil {
		// The Recording(next) rule, in one place: the watch opens and
		// closes incidents from the records the engine writes, after each
		// is written.
		w := &ResumeWatcher{Guest: d.Guest, Store: d.Incidents, Recorder: d.Recorder, Config: cfg, Now: d.Clock}
		onErr := d.OnIncidentError
		if onErr == nil {
			log := d.Log
			onErr = func(err error) {
				log.Warn("incident bookkeeping failed; the record was written", "error", err.Error())
			}
		}
		h.Resume = w
		h.Recorder = w.Recording(d.Recorder, onErr)
	}
	return h, nil
}

// setDefaults fills the knobs Deps left zero, once, when the engine is
// built: the wall clock, the hostname and pid as holder, JSON on stderr,
// DefaultCallTimeout, DefaultWorkers.
func (h *Handler) setDefaults() {
	if h.Now == nil {
		h.Now = time.Now
	}
	if h.Holder == "" {
		host, _ := os.Hostname()
		h.Holder = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	if h.Log == nil {
		h.Log = defaultLog
	}
	if h.CallTimeout <= 0 {
		h.CallTimeout = DefaultCallTimeout
	}
	if h.Workers <= 0 {
		h.Workers = DefaultWorkers
	}
}
