terraform {
  required_version = ">= 1.5"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 8.0"
    }
    # The archive's excludes are exact paths and directory names, which match
    # the same way before and after 2.5.0 made excludes globs.
    archive = {
      source  = "hashicorp/archive"
      version = ">= 2.5.0"
    }
    # time_sleep: lets a new log-based metric reach Cloud Monitoring before
    # the alert policy that reads it is created.
    time = {
      source  = "hashicorp/time"
      version = ">= 0.9.0"
    }
  }
}
