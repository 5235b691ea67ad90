// Package terraform holds the Terraform module that deploys tpu-autoheal
// (main.tf, variables.tf, outputs.tf, versions.tf, examples/, and its
// terraform tests in tests/) and the Go tests that keep it honest: the
// custom roles are derived from the `// rest:` methods the function's code
// calls and checked against Google's IAM data (iam_test.go); the archive's
// files, evaluated by terraform console, equal what go list -deps compiles;
// and every value the Go code must agree with (the sink filter, the entry
// point, the AUTOHEAL_* variables, the sweep message, the TTL field, the
// records' log, the alerts' words) is checked against the Go code.
//
// The package has no Go API and must never gain one: nothing imports it.
package terraform
