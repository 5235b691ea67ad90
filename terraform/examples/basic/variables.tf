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
  description = "Service accounts the TPU nodes run as (required): gcloud compute tpus tpu-vm describe NODE --zone ZONE --format='value(serviceAccount.email)' prints a node's."
}

variable "operators" {
  type        = list(string)
  description = "Principals who pause and resume tpu-autoheal, e.g. [\"group:tpu-oncall@example.com\"]."
  default     = []
}

variable "notification_channels" {
  type        = list(string)
  description = "Notification channels of the failed-recovery alert."
  default     = []
}

variable "enabled" {
  type        = bool
  description = "Off switch: false makes the function dry-run everywhere and keeps every resource."
  default     = true
}

variable "firestore_delete_protection" {
  type        = bool
  description = "Protect the ledger database from deletion; set false and apply before terraform destroy."
  default     = true
}
