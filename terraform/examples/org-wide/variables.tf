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
  description = "Service accounts the TPU nodes run as, across the training projects (required): gcloud compute tpus tpu-vm describe NODE --zone ZONE --format='value(serviceAccount.email)' prints a node's."
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

variable "startup_script" {
  type        = string
  description = "gs:// URI of the training-resume script; empty uses the embedded default."
  default     = ""
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
