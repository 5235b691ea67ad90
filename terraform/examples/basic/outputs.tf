output "topic" {
  description = "Topic the sink publishes to (for autoheal publish)."
  value       = module.tpu_autoheal.topic
}

output "record_log" {
  description = "Log of the decision records."
  value       = module.tpu_autoheal.record_log
}

output "dead_letter_subscription" {
  description = "Where undeliverable messages wait."
  value       = module.tpu_autoheal.dead_letter_subscription
}

output "dry_run" {
  description = "Whether the function only decides and records (true) or also recreates nodes."
  value       = module.tpu_autoheal.dry_run
}

output "alert_policies" {
  description = "The alert policies (failed or abandoned recoveries, breaker, start-up error, dead letters, sweeps stopped)."
  value       = module.tpu_autoheal.alert_policies
}
