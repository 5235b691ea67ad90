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
  enabled    = var.enabled

  firestore_delete_protection = var.firestore_delete_protection

  sink_scope = "organization"
  org_id     = var.org_id

  tpu_service_accounts  = var.tpu_service_accounts
  operators             = var.operators
  notification_channels = var.notification_channels
  startup_script        = var.startup_script
}
