# tpu-autoheal: log sink -> Pub/Sub -> authenticated push -> Cloud Run
# function (gen2) that checks each TPU node and records it or recreates it,
# plus the sweep schedule, the Firestore ledger, least-privilege IAM,
# log-based metrics and an alert. README.md explains the delivery design.
#
# The values the Go code owns come from go-contract.json, generated from the
# Go code; the Go tests in this directory check that file and the rest of the
# module against the Go constants and functions.

locals {
  # Values the Go code owns, generated from it into go-contract.json
  # (`go test ./terraform -update`): the sink filter (events.SinkFilter), the
  # sweep message (events.SweepMessage), the entry point (function.EntryPoint),
  # the custom role's permissions (function.Permissions(): everything the
  # function calls, nothing more), the processed-event collection and the
  # expiry field its TTL policy deletes by (ledger), and the records' log name
  # and app label (record). A test fails when the file is stale.
  go_contract = jsondecode(file("${path.module}/go-contract.json"))

  sink_filter          = local.go_contract.sink_filter
  sweep_message        = local.go_contract.sweep_message
  entry_point          = local.go_contract.entry_point
  function_permissions = local.go_contract.permissions
  events_collection    = local.go_contract.events_collection
  events_expire_field  = local.go_contract.events_expire_field
  record_log_name      = local.go_contract.record_log_name
  record_app_label     = local.go_contract.record_app_label

  # The files the function's build needs, as globs relative to the repository
  # root (the Go source-file list in function/): the root package, go.mod,
  # go.sum and the packages it imports, without tests or their data.
  source_include = [
    "go.mod",
    "go.sum",
    "*.go",
    "function/**",
    "internal/**",
    "startup/**",
  ]
  source_exclude = [
    "**/*_test.go",
    "**/testdata/**",
  ]
  # Top-level directories that are never build inputs, skipped whole by the
  # archive (version control, CI, the CLI, scripts, this module, test data).
  source_skip_dirs = [".git", ".ci", ".github", "cmd", "docs", "scripts", "terraform", "testdata"]
}

locals {
  tpu_projects = length(var.projects) > 0 ? distinct(var.projects) : [var.project_id]

  # The custom role is created in the function's project (Firestore, records)
  # and in every watched project (TPU nodes).
  role_projects = toset(distinct(concat([var.project_id], local.tpu_projects)))

  labels             = merge(var.labels, { "managed-by" = "tpu-autoheal" })
  firestore_location = coalesce(var.firestore_location, var.region)
  role_id            = replace(var.name, "-", "_")
  pubsub_agent       = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
  record_log_filter  = "(logName=\"projects/${var.project_id}/logs/${local.record_log_name}\" OR logName=\"projects/${var.project_id}/logs/run.googleapis.com%2Fstdout\") AND labels.app=\"${local.record_app_label}\""

  source_root = coalesce(var.source_dir, abspath("${path.module}/.."))
  source_files = setsubtract(
    toset(flatten([for p in local.source_include : tolist(fileset(local.source_root, p))])),
    toset(flatten([for p in local.source_exclude : tolist(fileset(local.source_root, p))])),
  )

  apis = [
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudfunctions.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "cloudscheduler.googleapis.com",
    "firestore.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "storage.googleapis.com",
    "tpu.googleapis.com",
  ]

  # Every sink's writer identity, keyed by something known at plan time.
  sink_writers = merge(
    { for p, s in google_logging_project_sink.tpu : "project/${p}" => s.writer_identity },
    { for s in google_logging_folder_sink.tpu : "folder" => s.writer_identity },
    { for s in google_logging_organization_sink.tpu : "organization" => s.writer_identity },
  )
}

data "google_project" "this" {
  project_id = var.project_id

  depends_on = [google_project_service.apis]
}

resource "google_project_service" "apis" {
  for_each = var.enable_apis ? toset(local.apis) : toset([])

  project            = var.project_id
  service            = each.value
  disable_on_destroy = false
}

# Topics and delivery.

resource "google_pubsub_topic" "events" {
  project = var.project_id
  name    = var.name
  labels  = local.labels

  depends_on = [google_project_service.apis]
}

resource "google_pubsub_topic" "dead_letter" {
  project = var.project_id
  name    = "${var.name}-dead-letter"
  labels  = local.labels

  depends_on = [google_project_service.apis]
}

# Keeps what could not be delivered after max_delivery_attempts, for a person
# (or `autoheal replay`) to look at; nothing consumes it automatically.
resource "google_pubsub_subscription" "dead_letter" {
  project                    = var.project_id
  name                       = "${var.name}-dead-letter"
  topic                      = google_pubsub_topic.dead_letter.id
  labels                     = local.labels
  ack_deadline_seconds       = 60
  message_retention_duration = var.dead_letter_retention
  retain_acked_messages      = false

  expiration_policy {
    ttl = ""
  }
}

# Authenticated push to the function's URL. The path names the topic so that
# the Functions Framework turns the push body into a messagePublished
# CloudEvent; the OIDC token is minted for the invoker account, the only
# principal allowed to invoke the function.
resource "google_pubsub_subscription" "push" {
  project                    = var.project_id
  name                       = "${var.name}-push"
  topic                      = google_pubsub_topic.events.id
  labels                     = local.labels
  ack_deadline_seconds       = var.function_timeout_seconds
  message_retention_duration = "604800s"

  expiration_policy {
    ttl = ""
  }

  retry_policy {
    minimum_backoff = var.retry_minimum_backoff
    maximum_backoff = var.retry_maximum_backoff
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = var.max_delivery_attempts
  }

  push_config {
    push_endpoint = "${google_cloudfunctions2_function.autoheal.service_config[0].uri}/${google_pubsub_topic.events.id}"

    oidc_token {
      service_account_email = google_service_account.push.email
      audience              = google_cloudfunctions2_function.autoheal.service_config[0].uri
    }
  }

  depends_on = [
    google_cloud_run_service_iam_member.push_invoker,
    google_service_account_iam_member.pubsub_token_creator,
  ]
}

# The Pub/Sub service agent forwards undeliverable messages: it needs to
# publish to the dead-letter topic and to acknowledge on the subscription.
resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  project = var.project_id
  topic   = google_pubsub_topic.dead_letter.name
  role    = "roles/pubsub.publisher"
  member  = local.pubsub_agent
}

resource "google_pubsub_subscription_iam_member" "push_subscriber" {
  project      = var.project_id
  subscription = google_pubsub_subscription.push.name
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent
}

# Sinks: one per watched project, or one aggregated sink over a folder or
# the organization. Each writes with its own identity, which may publish to
# the topic and nothing else.

resource "google_logging_project_sink" "tpu" {
  for_each = var.sink_scope == "project" ? toset(local.tpu_projects) : toset([])

  project                = each.value
  name                   = var.name
  description            = "TPU terminate/restart audit entries for tpu-autoheal."
  destination            = "pubsub.googleapis.com/${google_pubsub_topic.events.id}"
  filter                 = local.sink_filter
  unique_writer_identity = true
}

resource "google_logging_folder_sink" "tpu" {
  count = var.sink_scope == "folder" ? 1 : 0

  folder           = "folders/${var.folder_id}"
  name             = var.name
  description      = "TPU terminate/restart audit entries for tpu-autoheal."
  destination      = "pubsub.googleapis.com/${google_pubsub_topic.events.id}"
  filter           = local.sink_filter
  include_children = true

  lifecycle {
    precondition {
      condition     = var.folder_id != null
      error_message = "sink_scope = \"folder\" needs folder_id."
    }
  }
}

resource "google_logging_organization_sink" "tpu" {
  count = var.sink_scope == "organization" ? 1 : 0

  org_id           = var.org_id
  name             = var.name
  description      = "TPU terminate/restart audit entries for tpu-autoheal."
  destination      = "pubsub.googleapis.com/${google_pubsub_topic.events.id}"
  filter           = local.sink_filter
  include_children = true

  lifecycle {
    precondition {
      condition     = var.org_id != null
      error_message = "sink_scope = \"organization\" needs org_id."
    }
  }
}

resource "google_pubsub_topic_iam_member" "sink_publisher" {
  for_each = local.sink_writers

  project = var.project_id
  topic   = google_pubsub_topic.events.name
  role    = "roles/pubsub.publisher"
  member  = each.value
}

# The sweep: finishes interrupted recoveries, looks again at deferred nodes
# and, with zones set, catches nodes whose audit entry never arrived.
resource "google_cloud_scheduler_job" "sweep" {
  project     = var.project_id
  region      = var.region
  name        = "${var.name}-sweep"
  description = "Asks tpu-autoheal to sweep."
  schedule    = var.sweep_schedule
  time_zone   = var.sweep_time_zone

  pubsub_target {
    topic_name = google_pubsub_topic.events.id
    data       = base64encode(local.sweep_message)
  }

  depends_on = [google_project_service.apis]
}

# The function.

resource "google_service_account" "function" {
  project      = var.project_id
  account_id   = "${var.name}-func"
  display_name = "tpu-autoheal function"
  description  = "Runs the tpu-autoheal function: reads and recreates opted-in TPU nodes, keeps the ledger, writes records."

  depends_on = [google_project_service.apis]
}

resource "google_service_account" "push" {
  project      = var.project_id
  account_id   = "${var.name}-push"
  display_name = "tpu-autoheal push invoker"
  description  = "Identity of the Pub/Sub push subscription; may only invoke the tpu-autoheal function."

  depends_on = [google_project_service.apis]
}

resource "google_service_account" "build" {
  project      = var.project_id
  account_id   = "${var.name}-build"
  display_name = "tpu-autoheal build"
  description  = "Builds the tpu-autoheal function's container from its source archive."

  depends_on = [google_project_service.apis]
}

# What a function build needs (Cloud Run functions' build service account
# documentation): write its logs, push the image, and Storage Object Admin to
# fetch the source from the function's source buckets.
resource "google_project_iam_member" "build" {
  for_each = toset(["roles/artifactregistry.writer", "roles/logging.logWriter", "roles/storage.objectAdmin"])

  project = var.project_id
  role    = each.value
  member  = "serviceAccount:${google_service_account.build.email}"
}

resource "google_storage_bucket" "source" {
  project                     = var.project_id
  name                        = "${var.project_id}-${var.name}-source"
  location                    = var.region
  labels                      = local.labels
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = true

  depends_on = [google_project_service.apis]
}

data "archive_file" "source" {
  type        = "zip"
  source_dir  = local.source_root
  output_path = "${path.root}/.terraform/tmp/${var.name}-source.zip"
  # Everything under the root that is not a build input, as exact paths;
  # the directories never built are skipped whole.
  excludes = setunion(
    setsubtract(fileset(local.source_root, "**"), local.source_files),
    local.source_skip_dirs,
  )
}

resource "google_storage_bucket_object" "source" {
  name   = "${var.name}-${data.archive_file.source.output_md5}.zip"
  bucket = google_storage_bucket.source.name
  source = data.archive_file.source.output_path
}

resource "google_cloudfunctions2_function" "autoheal" {
  project     = var.project_id
  location    = var.region
  name        = var.name
  description = "Recreates TPU nodes that did not come back from maintenance (tpu-autoheal)."
  labels      = local.labels

  build_config {
    runtime         = var.runtime
    entry_point     = local.entry_point
    service_account = google_service_account.build.id

    source {
      storage_source {
        bucket = google_storage_bucket.source.name
        object = google_storage_bucket_object.source.name
      }
    }
  }

  service_config {
    available_memory               = var.function_memory
    timeout_seconds                = var.function_timeout_seconds
    min_instance_count             = 0
    max_instance_count             = var.max_instances
    ingress_settings               = "ALLOW_INTERNAL_ONLY"
    all_traffic_on_latest_revision = true
    service_account_email          = google_service_account.function.email

    environment_variables = {
      AUTOHEAL_PROJECT            = var.project_id
      AUTOHEAL_PROJECTS           = join(",", local.tpu_projects)
      AUTOHEAL_ZONES              = join(",", var.zones)
      AUTOHEAL_DRY_RUN            = tostring(var.dry_run)
      AUTOHEAL_LABEL_SELECTOR     = var.label_selector
      AUTOHEAL_STARTUP_SCRIPT     = var.startup_script
      AUTOHEAL_FIRESTORE_DATABASE = google_firestore_database.ledger.name
      AUTOHEAL_TPU_ENDPOINT       = var.tpu_endpoint
      AUTOHEAL_RECORD_TO          = var.record_to
      AUTOHEAL_MAX_EVENT_AGE      = var.max_event_age
      AUTOHEAL_UNHEALTHY_GRACE    = var.unhealthy_grace
      AUTOHEAL_STUCK_GRACE        = var.stuck_grace
      AUTOHEAL_COOLDOWN           = var.cooldown
      AUTOHEAL_WINDOW             = var.window
      AUTOHEAL_MAX_RECREATES      = tostring(var.max_recreates)
      AUTOHEAL_MAX_IN_FLIGHT      = tostring(var.max_in_flight)
      AUTOHEAL_MAX_ATTEMPTS       = tostring(var.max_attempts)
      AUTOHEAL_LEASE              = var.lease
      AUTOHEAL_EVENT_TTL          = var.event_ttl
      AUTOHEAL_SWEEP_BUDGET       = var.sweep_budget
      AUTOHEAL_BREAKER            = var.breaker
      AUTOHEAL_HOLD_TTL           = var.hold_ttl
      AUTOHEAL_MAINTENANCE        = var.maintenance
      AUTOHEAL_CHECKPOINT_TIMEOUT = var.checkpoint_timeout
      AUTOHEAL_RESUME_WATCH       = var.resume_watch
    }
  }

  depends_on = [
    google_project_service.apis,
    google_project_iam_member.build,
    google_project_iam_member.function,
  ]
}

# Only the push subscription's identity may invoke the function; no public
# principal ever may. A gen2 function is served by the Cloud Run
# service of the same name, which checks run.invoker.
resource "google_cloud_run_service_iam_member" "push_invoker" {
  project  = var.project_id
  location = var.region
  service  = google_cloudfunctions2_function.autoheal.name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.push.email}"
}

# Pub/Sub mints the push OIDC token as the invoker account.
resource "google_service_account_iam_member" "pubsub_token_creator" {
  service_account_id = google_service_account.push.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_agent
}

# Least privilege: a custom role with exactly function.Permissions(), in the
# function's project and in every watched project.

resource "google_project_iam_custom_role" "function" {
  for_each = local.role_projects

  project     = each.value
  role_id     = local.role_id
  title       = "tpu-autoheal function"
  description = "What the tpu-autoheal function calls: TPU nodes and operations, its Firestore ledger, its records, a gs:// startup script."
  permissions = local.function_permissions
}

resource "google_project_iam_member" "function" {
  for_each = local.role_projects

  project = each.value
  role    = google_project_iam_custom_role.function[each.key].id
  member  = "serviceAccount:${google_service_account.function.email}"
}

# Recreating a node that runs as a service account needs actAs on it.
resource "google_service_account_iam_member" "tpu_service_account_user" {
  for_each = toset(var.tpu_service_accounts)

  service_account_id = "projects/-/serviceAccounts/${each.value}"
  role               = "roles/iam.serviceAccountUser"
  member             = "serviceAccount:${google_service_account.function.email}"
}

# State.

resource "google_firestore_database" "ledger" {
  project                 = var.project_id
  name                    = var.firestore_database
  location_id             = local.firestore_location
  type                    = "FIRESTORE_NATIVE"
  delete_protection_state = var.firestore_delete_protection ? "DELETE_PROTECTION_ENABLED" : "DELETE_PROTECTION_DISABLED"
  deletion_policy         = "DELETE"

  depends_on = [google_project_service.apis]
}

# Processed event ids are only needed for deduplication: Firestore deletes
# each once its expiry (now + event_ttl, set by the ledger) has passed.
resource "google_firestore_field" "events_ttl" {
  project    = var.project_id
  database   = google_firestore_database.ledger.name
  collection = local.events_collection
  field      = local.events_expire_field

  ttl_config {}

  # A TTL timestamp needs no single-field index.
  index_config {}
}

# Observability: counters over the decision records, and an alert when a
# recovery fails.

resource "google_logging_metric" "recoveries_started" {
  project     = var.project_id
  name        = "${var.name}/recoveries_started"
  description = "Recreates and queued-resource resets tpu-autoheal started or resumed (dry run excluded)."
  filter      = "${local.record_log_filter} AND jsonPayload.action=(\"recreate\" OR \"reset\") AND NOT jsonPayload.dryRun=true"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    labels {
      key         = "action"
      value_type  = "STRING"
      description = "recreate or reset"
    }
  }

  label_extractors = {
    action = "EXTRACT(jsonPayload.action)"
  }
}

resource "google_logging_metric" "recoveries_finished" {
  project     = var.project_id
  name        = "${var.name}/recoveries_finished"
  description = "Recoveries that brought the node back (phase done)."
  filter      = "${local.record_log_filter} AND jsonPayload.action=(\"recreate\" OR \"reset\") AND jsonPayload.phase=\"done\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    labels {
      key         = "action"
      value_type  = "STRING"
      description = "recreate or reset"
    }
  }

  label_extractors = {
    action = "EXTRACT(jsonPayload.action)"
  }
}

resource "google_logging_metric" "recoveries_failed" {
  project     = var.project_id
  name        = "${var.name}/recoveries_failed"
  description = "Recovery attempts that failed (phase failed, or an error carrying them out); the next delivery or sweep retries them."
  filter      = "${local.record_log_filter} AND jsonPayload.action=(\"recreate\" OR \"reset\") AND (jsonPayload.phase=\"failed\" OR severity>=ERROR)"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    labels {
      key         = "node"
      value_type  = "STRING"
      description = "Full resource name of the node."
    }
  }

  label_extractors = {
    node = "EXTRACT(jsonPayload.node)"
  }
}

resource "google_logging_metric" "rejects" {
  project     = var.project_id
  name        = "${var.name}/rejects"
  description = "Inputs rejected as malformed or foreign (acknowledged, never retried)."
  filter      = "${local.record_log_filter} AND jsonPayload.action=\"reject\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
  }
}

# A new log-based metric takes minutes to become visible to Cloud Monitoring;
# an alert policy created right after it fails with "Cannot find metric(s)"
# (hashicorp/terraform-provider-google#11102). Wait once, on creation.
resource "time_sleep" "metric_propagation" {
  create_duration = "120s"

  triggers = {
    metric = google_logging_metric.recoveries_failed.id
  }
}

# Monitoring requires a resource.type restriction in a threshold filter.
# A log-based metric's series carry the monitored resource of the entry:
# records written through the Cloud Logging API from a gen2 function are
# cloud_function entries (the Go client detects FUNCTION_TARGET and
# FUNCTION_SIGNATURE_TYPE first), records on stdout (record_to = "stdout",
# or the fallback when Logging refuses one) are cloud_run_revision entries.
# One condition per resource type, either opens an incident.
resource "google_monitoring_alert_policy" "recovery_failed" {
  project               = var.project_id
  display_name          = "tpu-autoheal: TPU node recovery failed"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "A recovery failed in the last 5 minutes (records via Cloud Logging)"

    condition_threshold {
      filter          = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.recoveries_failed.name}\" AND resource.type=\"cloud_function\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.node"]
      }

      trigger {
        count = 1
      }
    }
  }

  conditions {
    display_name = "A recovery failed in the last 5 minutes (records on stdout)"

    condition_threshold {
      filter          = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.recoveries_failed.name}\" AND resource.type=\"cloud_run_revision\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.node"]
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "86400s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "tpu-autoheal could not recover a TPU node (label `node`). Read its records: `gcloud logging read 'logName=\"projects/${var.project_id}/logs/${local.record_log_name}\" AND (jsonPayload.phase=(\"failed\" OR \"abandoned\") OR severity>=ERROR)' --project ${var.project_id} --freshness 1h`. The next delivery or sweep retries; past max_recreates the node is left alone, and a recovery abandoned after max_attempts needs a person."
  }

  depends_on = [time_sleep.metric_propagation]
}
