# One project: the function and the TPU nodes it watches live together.
# dry_run stays true for the first week: read the records, then set it false.

provider "google" {
  project = var.project_id
  region  = var.region
}

module "tpu_autoheal" {
  source = "../.."

  project_id = var.project_id
  region     = var.region
  zones      = var.zones
  dry_run    = var.dry_run

  tpu_service_accounts  = var.tpu_service_accounts
  notification_channels = var.notification_channels
}

variable "project_id" {
  type        = string
  description = "Project hosting both tpu-autoheal and the TPU nodes."
}

variable "region" {
  type        = string
  description = "Region of the function, e.g. us-central1."
  default     = "us-central1"
}

variable "zones" {
  type        = list(string)
  description = "Zones the sweep lists TPU nodes in."
  default     = ["us-central2-b"]
}

variable "dry_run" {
  type        = bool
  description = "Decide and record only; set false once a week of records looks right."
  default     = true
}

variable "tpu_service_accounts" {
  type        = list(string)
  description = "Service accounts the TPU nodes run as."
  default     = []
}

variable "notification_channels" {
  type        = list(string)
  description = "Notification channels of the failed-recovery alert."
  default     = []
}

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
