# Two instances in one project (tests/two-instances: module blocks a, the
# defaults, and b, named autoheal-b) plan side by side: no name of one is a
# name of the other, so neither create fails on the other's database, role,
# bucket or key ring, and neither counts or alerts on the other's records.

mock_provider "google" {
  mock_data "google_project" {
    defaults = { number = "123456789" }
  }
  mock_data "google_iam_policy" {
    defaults = { policy_data = "{\"bindings\":[]}" }
  }
}

mock_provider "archive" {}

mock_provider "time" {}

run "two_instances_in_one_project" {
  command = plan

  module {
    source = "./tests/two-instances"
  }

  assert {
    condition     = keys(output.a) == keys(output.b) && length(keys(output.a)) >= 15
    error_message = "both instances must list the same kinds of names"
  }
  assert {
    condition     = alltrue([for kind, names in output.a : length(setintersection(toset(names), toset(output.b[kind]))) == 0])
    error_message = "the two instances share a name: ${jsonencode({ for kind, names in output.a : kind => setintersection(toset(names), toset(output.b[kind])) if length(setintersection(toset(names), toset(output.b[kind]))) > 0 })}"
  }
  assert {
    condition     = output.a.firestore_database[0] == "tpu-autoheal" && output.b.firestore_database[0] == "autoheal-b" && output.b.record_log[0] == "autoheal-b" && output.b.app_label[0] == "autoheal-b"
    error_message = "each instance's database, log and app label must be its name"
  }
}
