// Package tpuapi adapts the TPU v2 REST client (google.golang.org/api/tpu/v2)
// to remediate.TPU. It only translates calls; it never decides anything.
package tpuapi

// Permissions are the IAM permissions the calls in this package need, one per
// call (see the method that uses each). Terraform's custom role is checked
// against the union of these lists (function.Permissions).
var Permissions = []string{
	"tpu.nodes.get",           // GetNode
	"tpu.nodes.list",          // ListNodes (sweep)
	"tpu.nodes.create",        // CreateNode
	"tpu.nodes.delete",        // DeleteNode
	"tpu.operations.get",      // WaitOperation
	"tpu.queuedresources.get", // GetQueuedResource
	"tpu.nodes.reset",         // ResetQueuedResource (the API checks tpu.nodes.reset)
}
