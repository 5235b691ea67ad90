// Package record writes remediate.Records: to Cloud Logging through
// cloud.google.com/go/logging, or to stdout as structured JSON that Cloud
// Logging ingests. A record that cannot be written to Cloud Logging goes to
// stdout: a decision is never lost for want of a record.
package record

// LogName is the one log every decision record is written to. Terraform's
// log-based metrics and the README's queries use it.
const LogName = "tpu-autoheal"

// Permissions are the IAM permissions writing records needs.
var Permissions = []string{
	"logging.logEntries.create",
}
