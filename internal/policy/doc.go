// Package policy decides what to do about a TPU node: whether to recreate,
// reset, defer or skip it (Decide), how a recovery moves from one saved
// phase to the next and which one effect each phase asks for (Advance), the
// guards and the storm breaker (Guard, ParseBreaker), the maintenance
// notices (DecideMaintenance), the evidence rule (evidence.go) and the
// types these take and return.
//
// It must stay pure: no network, no files, no context, no clients, no
// clock (every function takes now), no randomness (the stockout jitter is a
// hash of a seed). purity_test.go checks the imports and the calls. The
// interpreter in internal/remediate reads the world, calls this package and
// performs the effect it returns.
//
// Nodes are the TPU API's generated structs (tpu.Node and
// tpu.QueuedResource of google.golang.org/api/tpu/v2), used as pure data:
// no method of the client is ever called here, only fields are read and
// written. Domain types of the package's own were considered and not
// chosen: the saved spec (Recovery.Spec) is a tpu.Node's JSON in every
// ledger already, so a resource type of our own would need a migration of
// stored documents and a conversion at every adapter, a risk with no
// second user to pay for it. The Compute Engine backend decides over its
// own table (internal/vmpolicy) and does not share these rows. Errors
// reach Advance classified by the adapters (an *Error carrying its Kind);
// one no adapter classified is read as transient (KindOf). The mapping of
// an API's errors lives with the adapters, never here.
package policy
