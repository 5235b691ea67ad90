// Package terraform holds the Terraform module that deploys tpu-autoheal
// (main.tf, variables.tf, outputs.tf, versions.tf, examples/) and the Go
// tests that keep it honest without running Terraform: every file parses and
// is formatted as terraform fmt would, every reference resolves, and every
// value the Go code must agree with (the sink filter, the entry point, the
// AUTOHEAL_* variables, the custom role's permissions, the sweep message, the
// deployed source files, the TTL field, the records' log) is checked against
// the Go constant it mirrors.
//
// The package has no Go API and must never gain one: nothing imports it.
package terraform
