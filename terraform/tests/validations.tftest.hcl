# One run per variable validation: a value each refuses must fail that
# variable's validation (expect_failures). The runs plan tests/variables,
# which is the module's variables.tf alone (a symbolic link), so each takes
# milliseconds instead of a plan of every resource. A Go
# test (module_test.go) checks that every validation has a run here.

variables {
  project_id           = "host-project"
  region               = "us-central1"
  tpu_service_accounts = ["trainer@train-a.iam.gserviceaccount.com"]
}

run "project_id" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    project_id = "Bad_Project"
  }

  expect_failures = [var.project_id]
}

run "region" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    region = "uscentral"
  }

  expect_failures = [var.region]
}

run "name" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    name = "X"
  }

  expect_failures = [var.name]
}

# 25 characters: its service account tpu-autoheal-builder-xyz1-build would
# be 31, one over the limit.
run "name_too_long_for_a_service_account" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    name = "tpu-autoheal-builder-xyz1"
  }

  expect_failures = [var.name]
}

# Three characters: the Firestore database named after it needs four.
run "name_too_short_for_a_database" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    name = "abc"
  }

  expect_failures = [var.name]
}

# Topics cannot start with goog, buckets cannot contain google.
run "name_with_google" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    name = "my-google-heal"
  }

  expect_failures = [var.name]
}

run "projects" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    projects = ["BAD"]
  }

  expect_failures = [var.projects]
}

run "zones" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    zones = ["us-central2"]
  }

  expect_failures = [var.zones]
}

run "sink_scope" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    sink_scope = "billing"
  }

  expect_failures = [var.sink_scope]
}

run "folder_id" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    folder_id = "folders/1"
  }

  expect_failures = [var.folder_id]
}

run "org_id" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    org_id = "organizations/1"
  }

  expect_failures = [var.org_id]
}

run "tpu_service_accounts" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    tpu_service_accounts = ["not-an-email"]
  }

  expect_failures = [var.tpu_service_accounts]
}

# Required, and not empty: recreating a node needs actAs on its account.
run "tpu_service_accounts_empty" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    tpu_service_accounts = []
  }

  expect_failures = [var.tpu_service_accounts]
}

run "operators" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    operators = ["tpu-oncall@example.com"]
  }

  expect_failures = [var.operators]
}

run "iam_propagation_wait" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    iam_propagation_wait = "2m"
  }

  expect_failures = [var.iam_propagation_wait]
}

run "mac_key_protection_level" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    mac_key_protection_level = "EXTERNAL"
  }

  expect_failures = [var.mac_key_protection_level]
}

run "label_selector" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    label_selector = "no-equals"
  }

  expect_failures = [var.label_selector]
}

run "startup_script_short_bucket" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    startup_script = "gs://ab/x"
  }

  expect_failures = [var.startup_script]
}

run "tpu_endpoint" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    tpu_endpoint = "http://x"
  }

  expect_failures = [var.tpu_endpoint]
}

run "compute_endpoint" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    compute_endpoint = "http://x"
  }

  expect_failures = [var.compute_endpoint]
}

run "record_to" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    record_to = "stderr"
  }

  expect_failures = [var.record_to]
}

run "max_event_age" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    max_event_age = "1d"
  }

  expect_failures = [var.max_event_age]
}

run "unhealthy_grace" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    unhealthy_grace = "10"
  }

  expect_failures = [var.unhealthy_grace]
}

run "stuck_grace" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    stuck_grace = "30 m"
  }

  expect_failures = [var.stuck_grace]
}

run "restart_grace" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    restart_grace = "5"
  }

  expect_failures = [var.restart_grace]
}

run "cooldown" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    cooldown = "soon"
  }

  expect_failures = [var.cooldown]
}

run "window" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    window = "1w"
  }

  expect_failures = [var.window]
}

run "max_recreates" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    max_recreates = 0
  }

  expect_failures = [var.max_recreates]
}

run "max_in_flight" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    max_in_flight = 1.5
  }

  expect_failures = [var.max_in_flight]
}

run "max_attempts" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    max_attempts = 0
  }

  expect_failures = [var.max_attempts]
}

run "lease_not_a_duration" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    lease = "15 minutes"
  }

  expect_failures = [var.lease]
}

run "lease_shorter_than_timeout" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    lease = "5m"
  }

  expect_failures = [var.lease]
}

run "event_ttl" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    event_ttl = "7d"
  }

  expect_failures = [var.event_ttl]
}

run "sweep_budget_not_a_duration" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    sweep_budget = "4 m"
  }

  expect_failures = [var.sweep_budget]
}

run "sweep_budget_longer_than_timeout" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    sweep_budget = "9m30s"
  }

  expect_failures = [var.sweep_budget]
}

run "sweep_schedule" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    sweep_schedule = "*/5 * * *"
  }

  expect_failures = [var.sweep_schedule]
}

run "sweep_alert_after_seconds" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    sweep_alert_after_seconds = 60
  }

  expect_failures = [var.sweep_alert_after_seconds]
}

run "runtime" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    runtime = "golang"
  }

  expect_failures = [var.runtime]
}

run "function_memory" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    function_memory = "256MB"
  }

  expect_failures = [var.function_memory]
}

run "function_timeout_seconds" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    function_timeout_seconds = 601
  }

  expect_failures = [var.function_timeout_seconds]
}

run "max_instances" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    max_instances = 0
  }

  expect_failures = [var.max_instances]
}

run "max_delivery_attempts" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    max_delivery_attempts = 4
  }

  expect_failures = [var.max_delivery_attempts]
}

run "retry_minimum_backoff" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    retry_minimum_backoff = "601s"
  }

  expect_failures = [var.retry_minimum_backoff]
}

run "retry_maximum_backoff_over_600s" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    retry_maximum_backoff = "700s"
  }

  expect_failures = [var.retry_maximum_backoff]
}

run "dead_letter_retention_under_10_minutes" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    dead_letter_retention = "300s"
  }

  expect_failures = [var.dead_letter_retention]
}

run "dead_letter_retention_over_31_days" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    dead_letter_retention = "2678401s"
  }

  expect_failures = [var.dead_letter_retention]
}

run "firestore_database" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    firestore_database = "(default)"
  }

  expect_failures = [var.firestore_database]
}

run "notification_channels" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    notification_channels = ["channel-1"]
  }

  expect_failures = [var.notification_channels]
}

run "breaker" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    breaker = "48"
  }

  expect_failures = [var.breaker]
}

run "hold_ttl" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    hold_ttl = "1 week"
  }

  expect_failures = [var.hold_ttl]
}

run "maintenance" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    maintenance = "later"
  }

  expect_failures = [var.maintenance]
}

run "checkpoint_timeout" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    checkpoint_timeout = "30"
  }

  expect_failures = [var.checkpoint_timeout]
}

run "maintenance_max" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    maintenance_max = "4"
  }

  expect_failures = [var.maintenance_max]
}

run "sweep_min_interval" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    sweep_min_interval = "30 s"
  }

  expect_failures = [var.sweep_min_interval]
}

run "stockout_zone_after" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    stockout_zone_after = 0
  }

  expect_failures = [var.stockout_zone_after]
}

run "max_requeues" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    max_requeues = -1
  }

  expect_failures = [var.max_requeues]
}

run "resume_watch" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    resume_watch = "2 h"
  }

  expect_failures = [var.resume_watch]
}

run "evidence_wait" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    evidence_wait = "90"
  }

  expect_failures = [var.evidence_wait]
}

run "retry_maximum_backoff_shorter_than_minimum" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    retry_minimum_backoff = "60s"
    retry_maximum_backoff = "30s"
  }

  expect_failures = [var.retry_maximum_backoff]
}

# A value at every limit is accepted.
run "limits_accepted" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    function_timeout_seconds  = 600
    lease                     = "10m1s"
    sweep_budget              = "9m59s"
    retry_minimum_backoff     = "600s"
    retry_maximum_backoff     = "600s"
    dead_letter_retention     = "2678400s"
    startup_script            = "gs://abc/x"
    max_delivery_attempts     = 100
    sweep_alert_after_seconds = 120
    name                      = "tpu-autoheal-builder-xyz"
    iam_propagation_wait      = "900s"
    mac_key_protection_level  = "HSM"
    operators                 = ["group:tpu-oncall@example.com", "user:alice@example.com", "serviceAccount:ops@acme-ops.iam.gserviceaccount.com"]
    firestore_database        = "abcd"
  }
}

# The shortest name: its database has the four characters Firestore needs.
run "name_shortest_accepted" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    name = "abcd"
  }
}

run "look_again" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    look_again = "soon"
  }

  expect_failures = [var.look_again]
}

run "sweep_follow" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    sweep_follow = "a while"
  }

  expect_failures = [var.sweep_follow]
}

run "report_faulty_hosts" {
  command = plan

  module {
    source = "./tests/variables"
  }

  variables {
    report_faulty_hosts = "3/week"
  }

  expect_failures = [var.report_faulty_hosts]
}
