package tpulegacy

// Permissions are the IAM permissions the calls in this package need. The
// v1 API checks the same names as the v2 API (tpu.nodes.*,
// tpu.operations.get), so they are a subset of tpuapi.Permissions.
var Permissions = []string{
	"tpu.nodes.get",      // GetNode
	"tpu.nodes.list",     // ListNodes
	"tpu.nodes.create",   // CreateNode
	"tpu.nodes.delete",   // DeleteNode
	"tpu.operations.get", // WaitOperation
}
