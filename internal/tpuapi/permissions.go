// Package tpuapi adapts the TPU v2 REST client (google.golang.org/api/tpu/v2)
// to remediate.TPU. It only translates calls; it never decides anything.
package tpuapi

// Permissions are the IAM permissions the calls in this package need (see the
// method that uses each). Terraform's custom role is checked against the
// union of these lists (function.Permissions).
//
// Queued resources have no permissions of their own: the TPU roles list no
// tpu.queuedresources.* permission, and the API reference has
// queuedResources.reset checked as tpu.nodes.reset and getMaintenanceInfo as
// tpu.nodes.get, so queuedResources.get is taken to be tpu.nodes.get too. A
// custom role naming an unknown permission cannot be created; a wrong guess
// here only denies reading a queued resource.
var Permissions = []string{
	"tpu.nodes.get",      // GetNode, and GetQueuedResource (see below)
	"tpu.nodes.list",     // ListNodes (sweep)
	"tpu.nodes.create",   // CreateNode
	"tpu.nodes.delete",   // DeleteNode
	"tpu.operations.get", // WaitOperation
	"tpu.nodes.reset",    // ResetQueuedResource (the API checks tpu.nodes.reset)
	// CreateQueuedResource and DeleteQueuedResource (the queue fallback)
	// are taken to be checked as tpu.nodes.create and tpu.nodes.delete,
	// listed above, by the same reasoning.
}
