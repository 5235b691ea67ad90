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
  description = "The function's custom roles: tpu (the TPU role in each watched project, keyed by project) and host (its ledger and records role in project_id)."
  value = {
    tpu  = { for p, r in google_project_iam_custom_role.tpu : p => r.id }
    host = google_project_iam_custom_role.host.id
  }
}

output "record_log" {
  description = "Log name of the decision records, for gcloud logging read."
  value       = "projects/${var.project_id}/logs/${local.record_log_name}"
}

output "metric_names" {
  description = "Log-based metrics: recoveries started, finished, failed; outcomes; time to recover; breaker trips; sweeps; rejects."
  value = {
    recoveries_started  = google_logging_metric.recoveries_started.name
    recoveries_finished = google_logging_metric.recoveries_finished.name
    recoveries_failed   = google_logging_metric.recoveries_failed.name
    outcomes            = google_logging_metric.outcomes.name
    time_to_recover     = google_logging_metric.time_to_recover.name
    breaker_trips       = google_logging_metric.breaker_trips.name
    sweeps              = google_logging_metric.sweeps.name
    rejects             = google_logging_metric.rejects.name
  }
}

output "alert_policy" {
  description = "Alert policy raised when a recovery fails or is abandoned."
  value       = google_monitoring_alert_policy.recovery_failed.name
}

output "alert_policies" {
  description = "Every alert policy, keyed recovery_failed, breaker_open, startup_error, dead_letter_backlog, sweeps_stopped."
  value = {
    recovery_failed     = google_monitoring_alert_policy.recovery_failed.name
    breaker_open        = google_monitoring_alert_policy.breaker_open.name
    startup_error       = google_monitoring_alert_policy.startup_error.name
    dead_letter_backlog = google_monitoring_alert_policy.dead_letter_backlog.name
    sweeps_stopped      = google_monitoring_alert_policy.sweeps_stopped.name
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
