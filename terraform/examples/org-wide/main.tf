# A central tools project runs tpu-autoheal for TPU nodes in several training
# projects, fed by one aggregated sink over the whole organization. The
# caller needs roles/logging.configWriter on the organization and may create
# custom roles in every training project. dry_run stays true for the first
# week.

provider "google" {
  project = var.project_id
  region  = var.region
}

module "tpu_autoheal" {
  source = "../.."

  project_id = var.project_id
  region     = var.region
  projects   = var.training_projects
  zones      = var.zones
  dry_run    = var.dry_run

  sink_scope = "organization"
  org_id     = var.org_id

  tpu_service_accounts  = var.tpu_service_accounts
  notification_channels = var.notification_channels
  startup_script        = var.startup_script
}

variable "project_id" {
  type        = string
  description = "Tools project hosting tpu-autoheal."
}

variable "region" {
  type        = string
  description = "Region of the function, e.g. us-central1."
  default     = "us-central1"
}

variable "org_id" {
  type        = string
  description = "Organization number the aggregated sink covers."
}

variable "training_projects" {
  type        = list(string)
  description = "Projects whose TPU nodes tpu-autoheal may recreate; entries from other projects are rejected."
}

variable "zones" {
  type        = list(string)
  description = "Zones the sweep lists TPU nodes in, in every training project."
  default     = ["us-central2-b", "us-east5-a"]
}

variable "dry_run" {
  type        = bool
  description = "Decide and record only; set false once a week of records looks right."
  default     = true
}

variable "tpu_service_accounts" {
  type        = list(string)
  description = "Service accounts the TPU nodes run as, across the training projects."
  default     = []
}

variable "notification_channels" {
  type        = list(string)
  description = "Notification channels of the failed-recovery alert."
  default     = []
}

variable "startup_script" {
  type        = string
  description = "gs:// URI of the training-resume script; empty uses the embedded default."
  default     = ""
}

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
