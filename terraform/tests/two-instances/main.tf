# Two instances of the module in one host project, watching the same
# training project (with different opt-in labels: two instances must never
# act on the same nodes). tests/instances.tftest.hcl plans it and checks
# that no name of one is a name of the other.

module "a" {
  source = "../.."

  project_id           = "host-project"
  region               = "us-central1"
  projects             = ["train-a"]
  tpu_service_accounts = ["trainer@train-a.iam.gserviceaccount.com"]
}

module "b" {
  source = "../.."

  name                 = "autoheal-b"
  project_id           = "host-project"
  region               = "us-central1"
  projects             = ["train-a"]
  label_selector       = "autoheal-b=enabled"
  tpu_service_accounts = ["trainer@train-a.iam.gserviceaccount.com"]
}

output "a" {
  description = "Every name instance a takes."
  value       = module.a.resource_names
}

output "b" {
  description = "Every name instance b takes."
  value       = module.b.resource_names
}

terraform {
  required_providers {
    google = {
      source = "hashicorp/google"
    }
    archive = {
      source = "hashicorp/archive"
    }
    time = {
      source = "hashicorp/time"
    }
  }
}
