output "sink_writer_identities" {
  description = "Writer identity of the organization sink."
  value       = module.tpu_autoheal.sink_writer_identities
}

output "function_service_account" {
  description = "Grant it read access to startup_script's bucket if that lives elsewhere."
  value       = module.tpu_autoheal.function_service_account
}

output "record_log" {
  description = "Log of the decision records."
  value       = module.tpu_autoheal.record_log
}

output "dry_run" {
  description = "Whether the function only decides and records (true) or also recreates nodes."
  value       = module.tpu_autoheal.dry_run
}

output "alert_policies" {
  description = "The alert policies (failed or abandoned recoveries, breaker, start-up error, dead letters, sweeps stopped)."
  value       = module.tpu_autoheal.alert_policies
}
