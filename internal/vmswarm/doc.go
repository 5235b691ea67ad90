// Package vmswarm is the seeded, randomized simulation of the Compute
// Engine backend (internal/computevm), the twin of internal/swarm for TPU
// nodes: each seed draws a schedule — the platform breaking TPU VMs (host
// errors, Spot preemption with STOP or DELETE, terminate on host
// maintenance), people stopping, deleting, starting and relabelling them,
// MIGs that repair late or are stuck — and a fault on every remote call
// (error codes, calls that fail and take effect now or later, answers lost
// after the call took effect, operations that end in error with or without
// their effect, capacity errors, read lag, paging anomalies) from
// internal/computefake, plus crashes between two saved steps (the process
// dies; a new Recovery goes on over the same store and ledger). It drives
// the audit entries and sweeps through computevm.Recovery on a virtual
// clock shared with the simulated Compute Engine, until nothing is left to
// do. Then it checks the invariants against the fake's own record of what
// changed and who changed it (computefake.Effects), never against the
// records of the code under test (check.go).
//
// A seed's run is deterministic: the plan comes from the seed alone
// (math/rand/v2's PCG), the fake draws its faults from the seed in the
// order the calls arrive, the Recovery makes its calls one at a time, and
// the clock moves only between deliveries. A failing seed prints its plan
// and the command that replays it.
//
// It is for tests only: the function and the CLI never import it.
package vmswarm
