# One project: the function and the TPU nodes it watches live together.
# dry_run stays true for the first week: read the records, then set it false.
#
# The plan warns (check host_holds_nothing_else) that the host is also a
# watched project: everyone who can write Firestore or publish to Pub/Sub in
# it (every TPU user with roles/editor, say) can steer tpu-autoheal. That is
# fine to try it out; for production host it in a project of its own
# (examples/org-wide, or the module's projects input).

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
  operators             = var.operators
  notification_channels = var.notification_channels
}
