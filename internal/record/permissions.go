// Package record writes remediate.Records: to Cloud Logging through
// cloud.google.com/go/logging, or to stdout as structured JSON that Cloud
// Logging ingests. A record that cannot be written to Cloud Logging goes to
// stdout: a decision is never lost for want of a record.
package record

// LogName is the log decision records are written to by default. A
// deployed instance writes to its own log (WithLogName: Terraform sets
// AUTOHEAL_RECORD_LOG to the instance's name, and its log-based metrics and
// alerts read that log); the default instance's name is this one.
const LogName = "tpu-autoheal"

// Permissions are the IAM permissions writing records needs.
var Permissions = []string{
	"logging.logEntries.create",
}
