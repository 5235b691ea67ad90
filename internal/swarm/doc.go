// Package swarm is the seeded, randomized simulation of tpu-autoheal under
// the faults a real cloud produces (as FoundationDB's simulation and Jepsen
// do): each seed draws a fault mix and a schedule — ambiguous outcomes of
// every mutating TPU call, read lag, people acting between and right after
// the function's calls (with or without their audit entry reaching it),
// paging anomalies, ledger writes aborted or whose answer was lost, forged
// entries — and drives terminate entries, audit entries and sweeps through
// the function (function.New, exactly as deployed but for its clients) on a
// virtual clock shared with the simulated TPU API (internal/tpufake) and
// the ledger, until nothing is left to do. Then it checks the invariants:
// no node lost, at most one successful create per recovery, every call
// bounded, nothing acted on from an inauthentic entry (check.go).
//
// A seed's run is deterministic: the plan comes from the seed alone
// (math/rand/v2's PCG), every fault names the call of one node it applies
// to, and the clock moves only between deliveries. A failing seed prints
// its plan and the command that replays it.
//
// It is for tests only: the function and the CLI never import it.
package swarm
