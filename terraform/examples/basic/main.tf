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
  enabled    = var.enabled

  firestore_delete_protection = var.firestore_delete_protection

  tpu_service_accounts  = var.tpu_service_accounts
  notification_channels = var.notification_channels
}
