// Package ledger holds tpu-autoheal's durable state: processed event ids,
// recovery claims with their saved node specs, recreate history and
// deferrals. It implements remediate.Store in memory (replay, unit tests) and
// on Firestore (the function). It never talks to the TPU API.
package ledger

// Permissions are the IAM permissions the Firestore store needs
// (documents get/create/update/delete, queries, transactions).
var Permissions = []string{
	"datastore.databases.getMetadata",
	"datastore.entities.get",
	"datastore.entities.list",
	"datastore.entities.create",
	"datastore.entities.update",
	"datastore.entities.delete",
}
