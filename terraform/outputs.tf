output "function_name" {
  description = "Name of the Cloud Run function (and of the Cloud Run service behind it)."
  value       = google_cloudfunctions2_function.autoheal.name
}

output "function_uri" {
  description = "URL of the function; internal ingress only, reachable by the push subscription."
  value       = google_cloudfunctions2_function.autoheal.service_config[0].uri
}

output "function_service_account" {
  description = "Email of the service account the function runs as."
  value       = google_service_account.function.email
}

output "push_service_account" {
  description = "Email of the service account whose OIDC token authenticates each push; the only invoker."
  value       = google_service_account.push.email
}

output "topic" {
  description = "Topic the sink and the scheduler publish to (projects/P/topics/T); `autoheal publish` sends here."
  value       = google_pubsub_topic.events.id
}

output "push_subscription" {
  description = "Push subscription delivering the topic to the function."
  value       = google_pubsub_subscription.push.id
}

output "dead_letter_topic" {
  description = "Topic that receives messages not delivered after max_delivery_attempts."
  value       = google_pubsub_topic.dead_letter.id
}

output "dead_letter_subscription" {
  description = "Pull subscription keeping undeliverable messages for inspection."
  value       = google_pubsub_subscription.dead_letter.id
}

output "sink_writer_identities" {
  description = "Writer identity of each log sink, keyed project/P, folder or organization."
  value       = local.sink_writers
}

output "sink_filter" {
  description = "The sinks' filter (events.SinkFilter); `autoheal replay --from-logging` uses the same."
  value       = local.sink_filter
}

output "scheduler_job" {
  description = "Cloud Scheduler job that publishes the sweep message."
  value       = google_cloud_scheduler_job.sweep.id
}

output "firestore_database" {
  description = "Name of the Firestore database holding the ledger."
  value       = google_firestore_database.ledger.name
}

output "custom_role_ids" {
  description = "The module's custom roles: tpu (the function's TPU role in each watched project, keyed by project), ledger (on the ledger's database: the function and the operators), records (writing log entries: the function and the build), mac (on the ledger's key: the function), build_image and build_source (the build)."
  value = {
    tpu          = { for p, r in google_project_iam_custom_role.tpu : p => r.id }
    ledger       = google_project_iam_custom_role.ledger.id
    records      = google_project_iam_custom_role.records.id
    mac          = google_project_iam_custom_role.mac.id
    build_image  = google_project_iam_custom_role.build_image.id
    build_source = google_project_iam_custom_role.build_source.id
  }
}

output "mac_key_version" {
  description = "The Cloud KMS key version (purpose MAC, HMAC_SHA256) that seals the ledger's saved specs (AUTOHEAL_MAC_KEY)."
  value       = google_kms_crypto_key_version.ledger_mac.name
}

output "artifact_repository" {
  description = "The Artifact Registry repository the function's image is built into (the build may push and pull there only)."
  value       = google_artifact_registry_repository.images.id
}

output "trusted_principals" {
  description = "Who the module lets steer the function, for autoheal preflight: ledger_writers (the function and the operators, on the ledger's database), topic_publishers (the sinks' writer identities and the function, the events topic's whole policy) and function (its account). Anyone else who can write the ledger, publish to the topic or act as the function's account in project_id is unexpected."
  value = {
    ledger_writers   = concat([local.function_member], var.operators)
    topic_publishers = local.events_publishers
    function         = local.function_member
    operators        = var.operators
  }
}

output "record_log" {
  description = "Log name of the decision records, for gcloud logging read."
  value       = "projects/${var.project_id}/logs/${local.record_log_name}"
}

output "metric_names" {
  description = "Log-based metrics: recoveries started, finished, failed; outcomes; time to recover; breaker trips; sweeps; rejects; create attempts and stockouts."
  value = {
    recoveries_started  = google_logging_metric.recoveries_started.name
    recoveries_finished = google_logging_metric.recoveries_finished.name
    recoveries_failed   = google_logging_metric.recoveries_failed.name
    outcomes            = google_logging_metric.outcomes.name
    time_to_recover     = google_logging_metric.time_to_recover.name
    breaker_trips       = google_logging_metric.breaker_trips.name
    sweeps              = google_logging_metric.sweeps.name
    rejects             = google_logging_metric.rejects.name
    create_attempts     = google_logging_metric.create_attempts.name
    stockouts           = google_logging_metric.stockouts.name
  }
}

output "alert_policy" {
  description = "Alert policy raised when a recovery fails or is abandoned."
  value       = google_monitoring_alert_policy.recovery_failed.name
}

output "alert_policies" {
  description = "Every alert policy, keyed recovery_failed, breaker_open, startup_error, dead_letter_backlog, sweeps_stopped, acquisition_low."
  value = {
    recovery_failed     = google_monitoring_alert_policy.recovery_failed.name
    breaker_open        = google_monitoring_alert_policy.breaker_open.name
    startup_error       = google_monitoring_alert_policy.startup_error.name
    dead_letter_backlog = google_monitoring_alert_policy.dead_letter_backlog.name
    sweeps_stopped      = google_monitoring_alert_policy.sweeps_stopped.name
    acquisition_low     = google_monitoring_alert_policy.acquisition_low.name
  }
}

output "dashboard" {
  description = "The Cloud Monitoring dashboard over the records' metrics."
  value       = google_monitoring_dashboard.autoheal.id
}

output "dry_run" {
  description = "Whether the function only decides and records (true: dry_run set or enabled = false) or also recreates nodes (false)."
  value       = local.dry_run
}

output "resource_names" {
  description = "Every name this instance takes, by kind, all derived from name: what two instances in one project (or watching one project) must not share."
  value = {
    function            = [google_cloudfunctions2_function.autoheal.name]
    service_accounts    = [google_service_account.function.account_id, google_service_account.push.account_id, google_service_account.build.account_id]
    topics              = [google_pubsub_topic.events.name, google_pubsub_topic.dead_letter.name]
    subscriptions       = [google_pubsub_subscription.push.name, google_pubsub_subscription.dead_letter.name]
    scheduler_job       = [google_cloud_scheduler_job.sweep.name]
    source_bucket       = [google_storage_bucket.source.name]
    artifact_repository = [google_artifact_registry_repository.images.repository_id]
    firestore_database  = [google_firestore_database.ledger.name]
    kms_key_ring        = [google_kms_key_ring.ledger.name]
    custom_roles        = concat([for r in google_project_iam_custom_role.tpu : "${r.project}/${r.role_id}"], [for r in [google_project_iam_custom_role.ledger, google_project_iam_custom_role.records, google_project_iam_custom_role.mac, google_project_iam_custom_role.build_image, google_project_iam_custom_role.build_source] : "${r.project}/${r.role_id}"])
    sinks               = concat([for s in google_logging_project_sink.tpu : "${s.project}/${s.name}"], [for s in google_logging_folder_sink.tpu : "${s.folder}/${s.name}"], [for s in google_logging_organization_sink.tpu : "organizations/${s.org_id}/${s.name}"])
    metrics             = [for m in [google_logging_metric.recoveries_started, google_logging_metric.recoveries_finished, google_logging_metric.recoveries_failed, google_logging_metric.outcomes, google_logging_metric.time_to_recover, google_logging_metric.breaker_trips, google_logging_metric.sweeps, google_logging_metric.rejects] : m.name]
    record_log          = [local.record_log_name]
    app_label           = [local.record_app_label]
    alert_policies      = [for p in [google_monitoring_alert_policy.recovery_failed, google_monitoring_alert_policy.breaker_open, google_monitoring_alert_policy.startup_error, google_monitoring_alert_policy.dead_letter_backlog, google_monitoring_alert_policy.sweeps_stopped] : p.display_name]
    dashboard           = [jsondecode(google_monitoring_dashboard.autoheal.dashboard_json).displayName]
    source_archive      = [data.archive_file.source.output_path]
  }
}
