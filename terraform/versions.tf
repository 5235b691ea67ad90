terraform {
  # 1.9: variable validations that refer to other variables.
  required_version = ">= 1.9, < 2.0"

  required_providers {
    # 7.x: condition_prometheus_query_language.disable_metric_validation and
    # condition_matched_log; 7.28: google_workload_identity_service_agent
    # (creates the Pub/Sub service agent before it is bound). Tested with
    # 7.45.0.
    google = {
      source  = "hashicorp/google"
      version = ">= 7.28, < 8.0"
    }
    # The archive's excludes are exact paths and directory names, which match
    # the same way before and after 2.5.0 made excludes globs.
    archive = {
      source  = "hashicorp/archive"
      version = ">= 2.5.0, < 3.0.0"
    }
    # time_sleep: the waits for IAM propagation. Tested with 0.14.0.
    time = {
      source  = "hashicorp/time"
      version = ">= 0.9, < 1.0"
    }
  }

  provider_meta "google" {
    module_name = "tpu-autoheal/terraform"
  }
}
