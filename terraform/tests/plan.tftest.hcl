# The module's plan, with mock providers: which resources exist at each sink
# scope, every IAM binding (who gets which role on what), the roles'
# permissions (go-contract.json, derived from the code by iam_test.go), the
# function's environment (function.Config's variables, from Go), the sink
# filter (events.SinkFilter) and the off switch.

mock_provider "google" {
  mock_data "google_project" {
    defaults = { number = "123456789" }
  }
}

mock_provider "archive" {}

override_resource {
  target = google_service_account.function
  values = { email = "tpu-autoheal-func@host-project.iam.gserviceaccount.com", name = "projects/host-project/serviceAccounts/tpu-autoheal-func@host-project.iam.gserviceaccount.com" }
}

override_resource {
  target = google_service_account.push
  values = { email = "tpu-autoheal-push@host-project.iam.gserviceaccount.com", name = "projects/host-project/serviceAccounts/tpu-autoheal-push@host-project.iam.gserviceaccount.com" }
}

override_resource {
  target = google_service_account.build
  values = { email = "tpu-autoheal-build@host-project.iam.gserviceaccount.com", id = "projects/host-project/serviceAccounts/tpu-autoheal-build@host-project.iam.gserviceaccount.com" }
}

override_resource {
  target = google_logging_project_sink.tpu
  values = { writer_identity = "serviceAccount:project-sink@logging.iam.gserviceaccount.com" }
}

override_resource {
  target = google_logging_folder_sink.tpu
  values = { writer_identity = "serviceAccount:folder-sink@logging.iam.gserviceaccount.com" }
}

override_resource {
  target = google_logging_organization_sink.tpu
  values = { writer_identity = "serviceAccount:org-sink@logging.iam.gserviceaccount.com" }
}

variables {
  project_id = "host-project"
  region     = "us-central1"
}

# One project: it hosts the function and is the only one watched.
run "project_scope_single_project" {
  command = apply

  assert {
    condition     = keys(google_logging_project_sink.tpu) == ["host-project"] && length(google_logging_folder_sink.tpu) == 0 && length(google_logging_organization_sink.tpu) == 0
    error_message = "project scope with no projects: want one project sink, in project_id, and no aggregated sink"
  }
  assert {
    condition     = keys(google_project_iam_custom_role.tpu) == ["host-project"] && google_project_iam_custom_role.host.project == "host-project"
    error_message = "the TPU role must exist in the (only) watched project, the host role in project_id"
  }
  assert {
    condition = toset(concat(
      [for k, m in google_project_iam_member.tpu : "project ${m.project} ${m.role == google_project_iam_custom_role.tpu[k].id && google_project_iam_custom_role.tpu[k].project == m.project ? "TPU-ROLE" : m.role} ${m.member}"],
      ["project ${google_project_iam_member.host.project} ${google_project_iam_member.host.role == google_project_iam_custom_role.host.id ? "HOST-ROLE" : google_project_iam_member.host.role} ${google_project_iam_member.host.member}"],
      ["project ${google_project_iam_member.build.project} ${google_project_iam_member.build.role} ${google_project_iam_member.build.member}"],
      [for m in google_storage_bucket_iam_member.startup_script : "bucket ${m.bucket} ${m.role} ${m.member}"],
      [for m in google_service_account_iam_member.tpu_service_account_user : "sa ${m.service_account_id} ${m.role} ${m.member}"],
      ["sa ${google_service_account_iam_member.pubsub_token_creator.service_account_id} ${google_service_account_iam_member.pubsub_token_creator.role} ${google_service_account_iam_member.pubsub_token_creator.member}"],
      ["run ${google_cloud_run_service_iam_member.push_invoker.project}/${google_cloud_run_service_iam_member.push_invoker.location}/${google_cloud_run_service_iam_member.push_invoker.service} ${google_cloud_run_service_iam_member.push_invoker.role} ${google_cloud_run_service_iam_member.push_invoker.member}"],
      ["topic ${google_pubsub_topic_iam_member.dead_letter_publisher.project}/${google_pubsub_topic_iam_member.dead_letter_publisher.topic} ${google_pubsub_topic_iam_member.dead_letter_publisher.role} ${google_pubsub_topic_iam_member.dead_letter_publisher.member}"],
      [for m in google_pubsub_topic_iam_member.sink_publisher : "topic ${m.project}/${m.topic} ${m.role} ${m.member}"],
      ["subscription ${google_pubsub_subscription_iam_member.push_subscriber.project}/${google_pubsub_subscription_iam_member.push_subscriber.subscription} ${google_pubsub_subscription_iam_member.push_subscriber.role} ${google_pubsub_subscription_iam_member.push_subscriber.member}"],
      ["topic ${google_pubsub_topic_iam_member.function_kick_publisher.project}/${google_pubsub_topic_iam_member.function_kick_publisher.topic} ${google_pubsub_topic_iam_member.function_kick_publisher.role} ${google_pubsub_topic_iam_member.function_kick_publisher.member}"],
      )) == toset([
      "project host-project TPU-ROLE serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
      "project host-project HOST-ROLE serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
      "project host-project roles/run.builder serviceAccount:tpu-autoheal-build@host-project.iam.gserviceaccount.com",
      "sa projects/host-project/serviceAccounts/tpu-autoheal-push@host-project.iam.gserviceaccount.com roles/iam.serviceAccountTokenCreator serviceAccount:service-123456789@gcp-sa-pubsub.iam.gserviceaccount.com",
      "run host-project/us-central1/tpu-autoheal roles/run.invoker serviceAccount:tpu-autoheal-push@host-project.iam.gserviceaccount.com",
      "topic host-project/tpu-autoheal-dead-letter roles/pubsub.publisher serviceAccount:service-123456789@gcp-sa-pubsub.iam.gserviceaccount.com",
      "topic host-project/tpu-autoheal roles/pubsub.publisher serviceAccount:project-sink@logging.iam.gserviceaccount.com",
      "subscription host-project/tpu-autoheal-push roles/pubsub.subscriber serviceAccount:service-123456789@gcp-sa-pubsub.iam.gserviceaccount.com",
      "topic host-project/tpu-autoheal roles/pubsub.publisher serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
    ])
    error_message = "the IAM bindings differ from the expected set (who gets which role on what)"
  }
  assert {
    condition     = length(google_storage_bucket_iam_member.startup_script) == 0 && length(google_service_account_iam_member.tpu_service_account_user) == 0
    error_message = "no startup script and no TPU service accounts: no storage or actAs grant"
  }
  assert {
    condition     = sort(google_project_iam_custom_role.tpu["host-project"].permissions) == sort(jsondecode(file("${path.module}/go-contract.json")).tpu_permissions)
    error_message = "the TPU role does not hold exactly the TPU permissions derived from the code (go-contract.json tpu_permissions)"
  }
  assert {
    condition     = sort(google_project_iam_custom_role.host.permissions) == sort(jsondecode(file("${path.module}/go-contract.json")).host_permissions)
    error_message = "the host role does not hold exactly the ledger and record permissions derived from the code (go-contract.json host_permissions)"
  }
  assert {
    condition     = contains(google_project_iam_custom_role.host.permissions, "datastore.databases.get") && !anytrue([for p in google_project_iam_custom_role.host.permissions : startswith(p, "tpu.") || startswith(p, "storage.")])
    error_message = "the host role needs datastore.databases.get (transactions) and no TPU or Storage permission"
  }
  assert {
    condition     = !anytrue([for p in google_project_iam_custom_role.tpu["host-project"].permissions : !startswith(p, "tpu.")])
    error_message = "the TPU role holds a permission that is not tpu.*"
  }
  assert {
    condition     = google_logging_project_sink.tpu["host-project"].filter == jsondecode(file("${path.module}/go-contract.json")).sink_filter
    error_message = "the sink filter differs from events.SinkFilter"
  }
  assert {
    condition     = sort(keys(google_cloudfunctions2_function.autoheal.service_config[0].environment_variables)) == sort(keys(jsondecode(file("${path.module}/go-contract.json")).config_env))
    error_message = "the function's environment variables differ from function.Config's"
  }
  # Every variable left at its default passes function.Config's default,
  # except the ones the module sets: the project(s), the database it
  # created, dry run (true on a first deploy) and the kick topic (its own
  # events topic).
  assert {
    condition = alltrue([
      for k, v in jsondecode(file("${path.module}/go-contract.json")).config_env :
      google_cloudfunctions2_function.autoheal.service_config[0].environment_variables[k] == v
      if !contains(["AUTOHEAL_PROJECT", "AUTOHEAL_PROJECTS", "AUTOHEAL_DRY_RUN", "AUTOHEAL_KICK_TOPIC"], k)
    ])
    error_message = "a default of the module differs from function.Config's default"
  }
  assert {
    condition     = google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_KICK_TOPIC"] == google_pubsub_topic.events.id
    error_message = "follow kicks must go to the module's own events topic (AUTOHEAL_KICK_TOPIC)"
  }
  assert {
    condition = (
      google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_PROJECT"] == "host-project" &&
      google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_PROJECTS"] == "host-project" &&
      google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_DRY_RUN"] == "true"
    )
    error_message = "AUTOHEAL_PROJECT(S) must be project_id and a first deploy must dry-run"
  }
  assert {
    condition     = google_cloud_scheduler_job.sweep.schedule == "* * * * *" && base64decode(google_cloud_scheduler_job.sweep.pubsub_target[0].data) == jsondecode(file("${path.module}/go-contract.json")).sweep_message
    error_message = "the sweep runs every minute by default and publishes events.SweepMessage"
  }
  assert {
    condition     = google_cloudfunctions2_function.autoheal.service_config[0].ingress_settings == "ALLOW_INTERNAL_ONLY" && google_cloudfunctions2_function.autoheal.build_config[0].entry_point == jsondecode(file("${path.module}/go-contract.json")).entry_point
    error_message = "the function must be internal-only with function.EntryPoint"
  }
  assert {
    condition = alltrue([for m in concat(
      [google_cloud_run_service_iam_member.push_invoker.member, google_project_iam_member.host.member, google_project_iam_member.build.member, google_service_account_iam_member.pubsub_token_creator.member, google_pubsub_topic_iam_member.dead_letter_publisher.member, google_pubsub_subscription_iam_member.push_subscriber.member, google_pubsub_topic_iam_member.function_kick_publisher.member],
      [for x in google_project_iam_member.tpu : x.member],
      [for x in google_pubsub_topic_iam_member.sink_publisher : x.member],
    ) : !contains(["allUsers", "allAuthenticatedUsers"], m)])
    error_message = "a public principal is granted something"
  }
}

# A host project watching two training projects, with a gs:// startup script
# and a TPU service account.
run "project_scope_two_training_projects" {
  command = apply

  variables {
    projects             = ["train-a", "train-b"]
    tpu_service_accounts = ["tpu-vm@train-a.iam.gserviceaccount.com"]
    startup_script       = "gs://scripts-bkt/autoheal/resume.sh"
  }

  assert {
    condition     = keys(google_logging_project_sink.tpu) == ["train-a", "train-b"] && length(google_logging_folder_sink.tpu) == 0 && length(google_logging_organization_sink.tpu) == 0
    error_message = "project scope: one sink per watched project, none in the (unwatched) host"
  }
  assert {
    condition     = keys(google_project_iam_custom_role.tpu) == ["train-a", "train-b"] && alltrue([for p, r in google_project_iam_custom_role.tpu : r.project == p])
    error_message = "the TPU role must exist in each watched project and not in the unwatched host project"
  }
  assert {
    condition = toset(concat(
      [for k, m in google_project_iam_member.tpu : "project ${m.project} ${m.role == google_project_iam_custom_role.tpu[k].id && google_project_iam_custom_role.tpu[k].project == m.project ? "TPU-ROLE" : m.role} ${m.member}"],
      ["project ${google_project_iam_member.host.project} ${google_project_iam_member.host.role == google_project_iam_custom_role.host.id ? "HOST-ROLE" : google_project_iam_member.host.role} ${google_project_iam_member.host.member}"],
      ["project ${google_project_iam_member.build.project} ${google_project_iam_member.build.role} ${google_project_iam_member.build.member}"],
      [for m in google_storage_bucket_iam_member.startup_script : "bucket ${m.bucket} ${m.role} ${m.member} if ${m.condition[0].expression}"],
      [for m in google_service_account_iam_member.tpu_service_account_user : "sa ${m.service_account_id} ${m.role} ${m.member}"],
      ["sa ${google_service_account_iam_member.pubsub_token_creator.service_account_id} ${google_service_account_iam_member.pubsub_token_creator.role} ${google_service_account_iam_member.pubsub_token_creator.member}"],
      ["run ${google_cloud_run_service_iam_member.push_invoker.project}/${google_cloud_run_service_iam_member.push_invoker.location}/${google_cloud_run_service_iam_member.push_invoker.service} ${google_cloud_run_service_iam_member.push_invoker.role} ${google_cloud_run_service_iam_member.push_invoker.member}"],
      ["topic ${google_pubsub_topic_iam_member.dead_letter_publisher.project}/${google_pubsub_topic_iam_member.dead_letter_publisher.topic} ${google_pubsub_topic_iam_member.dead_letter_publisher.role} ${google_pubsub_topic_iam_member.dead_letter_publisher.member}"],
      [for k, m in google_pubsub_topic_iam_member.sink_publisher : "topic ${m.project}/${m.topic} ${m.role} ${m.member} (${k})"],
      ["subscription ${google_pubsub_subscription_iam_member.push_subscriber.project}/${google_pubsub_subscription_iam_member.push_subscriber.subscription} ${google_pubsub_subscription_iam_member.push_subscriber.role} ${google_pubsub_subscription_iam_member.push_subscriber.member}"],
      ["topic ${google_pubsub_topic_iam_member.function_kick_publisher.project}/${google_pubsub_topic_iam_member.function_kick_publisher.topic} ${google_pubsub_topic_iam_member.function_kick_publisher.role} ${google_pubsub_topic_iam_member.function_kick_publisher.member}"],
      )) == toset([
      "project train-a TPU-ROLE serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
      "project train-b TPU-ROLE serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
      "project host-project HOST-ROLE serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
      "project host-project roles/run.builder serviceAccount:tpu-autoheal-build@host-project.iam.gserviceaccount.com",
      "bucket scripts-bkt roles/storage.objectViewer serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com if resource.name == \"projects/_/buckets/scripts-bkt/objects/autoheal/resume.sh\"",
      "sa projects/-/serviceAccounts/tpu-vm@train-a.iam.gserviceaccount.com roles/iam.serviceAccountUser serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
      "sa projects/host-project/serviceAccounts/tpu-autoheal-push@host-project.iam.gserviceaccount.com roles/iam.serviceAccountTokenCreator serviceAccount:service-123456789@gcp-sa-pubsub.iam.gserviceaccount.com",
      "run host-project/us-central1/tpu-autoheal roles/run.invoker serviceAccount:tpu-autoheal-push@host-project.iam.gserviceaccount.com",
      "topic host-project/tpu-autoheal-dead-letter roles/pubsub.publisher serviceAccount:service-123456789@gcp-sa-pubsub.iam.gserviceaccount.com",
      "topic host-project/tpu-autoheal roles/pubsub.publisher serviceAccount:project-sink@logging.iam.gserviceaccount.com (project/train-a)",
      "topic host-project/tpu-autoheal roles/pubsub.publisher serviceAccount:project-sink@logging.iam.gserviceaccount.com (project/train-b)",
      "subscription host-project/tpu-autoheal-push roles/pubsub.subscriber serviceAccount:service-123456789@gcp-sa-pubsub.iam.gserviceaccount.com",
      "topic host-project/tpu-autoheal roles/pubsub.publisher serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
    ])
    error_message = "the IAM bindings differ from the expected set (who gets which role on what)"
  }
  assert {
    condition     = alltrue([for r in google_project_iam_custom_role.tpu : sort(r.permissions) == sort(jsondecode(file("${path.module}/go-contract.json")).tpu_permissions)])
    error_message = "a watched project's TPU role does not hold exactly the derived TPU permissions"
  }
  assert {
    condition     = google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_PROJECTS"] == "train-a,train-b" && google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_STARTUP_SCRIPT"] == "gs://scripts-bkt/autoheal/resume.sh"
    error_message = "AUTOHEAL_PROJECTS must list the watched projects and AUTOHEAL_STARTUP_SCRIPT the script"
  }
  assert {
    condition     = alltrue([for s in google_logging_project_sink.tpu : s.filter == jsondecode(file("${path.module}/go-contract.json")).sink_filter && s.unique_writer_identity])
    error_message = "every project sink must use events.SinkFilter and its own writer identity"
  }
}

run "startup_script_grant_off" {
  command = plan

  variables {
    startup_script            = "gs://scripts-bkt/resume.sh"
    grant_startup_script_read = false
  }

  assert {
    condition     = length(google_storage_bucket_iam_member.startup_script) == 0
    error_message = "grant_startup_script_read = false must grant nothing on the script's bucket"
  }
}

run "folder_scope" {
  command = apply

  variables {
    sink_scope = "folder"
    folder_id  = "4242"
    projects   = ["train-a"]
  }

  assert {
    condition     = length(google_logging_project_sink.tpu) == 0 && length(google_logging_folder_sink.tpu) == 1 && length(google_logging_organization_sink.tpu) == 0
    error_message = "folder scope: want exactly one folder sink"
  }
  assert {
    condition     = google_logging_folder_sink.tpu[0].folder == "folders/4242" && google_logging_folder_sink.tpu[0].include_children && google_logging_folder_sink.tpu[0].filter == jsondecode(file("${path.module}/go-contract.json")).sink_filter
    error_message = "the folder sink must cover folders/4242 with children and events.SinkFilter"
  }
  assert {
    condition     = keys(google_pubsub_topic_iam_member.sink_publisher) == ["folder"] && google_pubsub_topic_iam_member.sink_publisher["folder"].member == "serviceAccount:folder-sink@logging.iam.gserviceaccount.com"
    error_message = "only the folder sink's writer may publish"
  }
  assert {
    condition     = keys(google_project_iam_custom_role.tpu) == ["train-a"] && keys(google_project_iam_member.tpu) == ["train-a"]
    error_message = "the TPU role goes to the watched projects only"
  }
}

run "organization_scope" {
  command = apply

  variables {
    sink_scope = "organization"
    org_id     = "987654321"
    projects   = ["train-a", "host-project"]
  }

  assert {
    condition     = length(google_logging_project_sink.tpu) == 0 && length(google_logging_folder_sink.tpu) == 0 && length(google_logging_organization_sink.tpu) == 1
    error_message = "organization scope: want exactly one organization sink"
  }
  assert {
    condition     = google_logging_organization_sink.tpu[0].org_id == "987654321" && google_logging_organization_sink.tpu[0].include_children
    error_message = "the organization sink must cover the organization with children"
  }
  assert {
    condition     = keys(google_pubsub_topic_iam_member.sink_publisher) == ["organization"] && google_pubsub_topic_iam_member.sink_publisher["organization"].member == "serviceAccount:org-sink@logging.iam.gserviceaccount.com"
    error_message = "only the organization sink's writer may publish"
  }
  assert {
    condition     = keys(google_project_iam_custom_role.tpu) == ["host-project", "train-a"]
    error_message = "a watched host project gets the TPU role too"
  }
}

run "folder_scope_needs_folder_id" {
  command = plan

  variables {
    sink_scope = "folder"
  }

  expect_failures = [google_logging_folder_sink.tpu]
}

run "organization_scope_needs_org_id" {
  command = plan

  variables {
    sink_scope = "organization"
  }

  expect_failures = [google_logging_organization_sink.tpu]
}

# The off switch: enabled = false dry-runs whatever dry_run says, and
# removes nothing.
run "enabled_false_dry_runs" {
  command = plan

  variables {
    enabled = false
    dry_run = false
  }

  assert {
    condition     = google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_DRY_RUN"] == "true" && output.dry_run
    error_message = "enabled = false must set AUTOHEAL_DRY_RUN=true"
  }
  assert {
    condition     = google_firestore_database.ledger.name == "tpu-autoheal" && length(google_project_iam_member.tpu) == 1 && google_cloud_scheduler_job.sweep.name == "tpu-autoheal-sweep"
    error_message = "enabled = false must keep every resource (ledger, grants, sweep)"
  }
}

run "enabled_and_not_dry_run_acts" {
  command = plan

  variables {
    dry_run = false
  }

  assert {
    condition     = google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_DRY_RUN"] == "false"
    error_message = "dry_run = false with enabled must set AUTOHEAL_DRY_RUN=false"
  }
}

# A schedule the sweeps-stopped alert cannot read needs its own period.
run "odd_schedule_needs_sweep_alert_after" {
  command = plan

  variables {
    sweep_schedule = "0 * * * *"
  }

  expect_failures = [google_monitoring_alert_policy.sweeps_stopped]
}

run "limits_plan" {
  command = plan

  variables {
    function_timeout_seconds = 600
    lease                    = "10m1s"
    sweep_budget             = "9m59s"
    dead_letter_retention    = "2678400s"
  }

  assert {
    condition     = google_pubsub_subscription.dead_letter.message_retention_duration == "2678400s" && google_pubsub_subscription.push.ack_deadline_seconds == 600
    error_message = "values at the limits must plan and reach the subscriptions"
  }
}

# The dashboard and the alerts read the records the code writes.
run "dashboard_and_alerts" {
  command = plan

  assert {
    condition = toset([for t in jsondecode(google_monitoring_dashboard.autoheal.dashboard_json).mosaicLayout.tiles : t.widget.title]) == toset([
      "Recoveries by outcome", "Time to recover (p95, seconds)", "Maintenance notices prepared", "Breaker trips by zone",
    ])
    error_message = "the dashboard must chart recoveries by outcome, time to recover, notices prepared and breaker trips"
  }
  assert {
    condition = alltrue([for t in jsondecode(google_monitoring_dashboard.autoheal.dashboard_json).mosaicLayout.tiles :
      anytrue([for m in [google_logging_metric.outcomes.name, google_logging_metric.time_to_recover.name, google_logging_metric.breaker_trips.name] :
    strcontains(t.widget.xyChart.dataSets[0].timeSeriesQuery.timeSeriesFilter.filter, "metric.type=\"logging.googleapis.com/user/${m}\"")])])
    error_message = "every dashboard chart must read one of the module's log-based metrics"
  }
  assert {
    condition     = google_logging_metric.time_to_recover.metric_descriptor[0].value_type == "DISTRIBUTION" && google_logging_metric.time_to_recover.value_extractor == "EXTRACT(jsonPayload.timeToRecoverSeconds)"
    error_message = "time to recover must be a distribution of jsonPayload.timeToRecoverSeconds"
  }
  assert {
    condition     = strcontains(google_monitoring_alert_policy.recovery_failed.conditions[0].condition_matched_log[0].filter, "jsonPayload.outcome=(\"failed\" OR \"abandoned\")")
    error_message = "the recovery alert must match failed and abandoned outcomes"
  }
  assert {
    condition     = strcontains(google_monitoring_alert_policy.breaker_open.conditions[0].condition_matched_log[0].filter, "severity>=ERROR AND jsonPayload.reason=~\"^breaker open\"")
    error_message = "the breaker alert must match ERROR records whose reason starts with breaker open"
  }
  assert {
    condition     = strcontains(google_monitoring_alert_policy.startup_error.conditions[0].condition_matched_log[0].filter, "jsonPayload.message=~\"^tpu-autoheal cannot start\"") && strcontains(google_monitoring_alert_policy.startup_error.conditions[0].condition_matched_log[0].filter, "resource.labels.service_name=\"tpu-autoheal\"")
    error_message = "the start-up alert must match the function's start-up error line"
  }
  assert {
    condition     = strcontains(google_monitoring_alert_policy.dead_letter_backlog.conditions[0].condition_threshold[0].filter, "resource.label.subscription_id=\"tpu-autoheal-dead-letter\"") && google_monitoring_alert_policy.dead_letter_backlog.conditions[0].condition_threshold[0].threshold_value == 0
    error_message = "the dead-letter alert must watch the dead-letter subscription's undelivered messages"
  }
  # Every minute by default: three intervals are 180 s.
  assert {
    condition     = strcontains(google_monitoring_alert_policy.sweeps_stopped.conditions[0].condition_prometheus_query_language[0].query, "${google_logging_metric.sweeps.name}\",\"monitored_resource\"=\"cloud_function\"}[180s]") && google_monitoring_alert_policy.sweeps_stopped.conditions[0].condition_prometheus_query_language[0].disable_metric_validation
    error_message = "the sweeps-stopped alert must look for no sweep record over three one-minute intervals, without metric validation"
  }
  assert {
    condition     = length([for p in [google_monitoring_alert_policy.recovery_failed, google_monitoring_alert_policy.breaker_open, google_monitoring_alert_policy.startup_error, google_monitoring_alert_policy.dead_letter_backlog, google_monitoring_alert_policy.sweeps_stopped] : p if p.notification_channels == null || length(coalesce(p.notification_channels, [])) == 0]) == 5
    error_message = "with no notification_channels every alert still exists"
  }
}

run "sweep_every_five_minutes" {
  command = plan

  variables {
    sweep_schedule        = "*/5 * * * *"
    notification_channels = ["projects/host-project/notificationChannels/42"]
  }

  assert {
    condition     = strcontains(google_monitoring_alert_policy.sweeps_stopped.conditions[0].condition_prometheus_query_language[0].query, "[900s]")
    error_message = "*/5 sweeps: the alert waits 900 s (three intervals)"
  }
  assert {
    condition     = alltrue([for p in [google_monitoring_alert_policy.recovery_failed, google_monitoring_alert_policy.breaker_open, google_monitoring_alert_policy.startup_error, google_monitoring_alert_policy.dead_letter_backlog, google_monitoring_alert_policy.sweeps_stopped] : p.notification_channels == tolist(["projects/host-project/notificationChannels/42"])])
    error_message = "every alert notifies notification_channels"
  }
}

run "sweeps_stopped_needs_both_resource_types_absent" {
  command = plan

  assert {
    condition     = google_monitoring_alert_policy.sweeps_stopped.conditions[0].condition_prometheus_query_language[0].query == "absent_over_time({\"__name__\"=\"logging.googleapis.com/user/tpu-autoheal/sweeps\",\"monitored_resource\"=\"cloud_function\"}[180s]) and on() absent_over_time({\"__name__\"=\"logging.googleapis.com/user/tpu-autoheal/sweeps\",\"monitored_resource\"=\"cloud_run_revision\"}[180s])"
    error_message = "the sweeps-stopped query must require no sweep record on either resource type, joined on no label"
  }
}
