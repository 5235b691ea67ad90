# tpu-autoheal: log sink -> Pub/Sub -> authenticated push -> Cloud Run
# function (gen2) that checks each TPU node and records it or recreates it,
# plus the sweep schedule, the Firestore ledger and the Cloud KMS key that
# seals its saved specs, least-privilege IAM derived from the code,
# log-based metrics, a dashboard and alerts. README.md explains the
# delivery design.
#
# project_id is meant to hold this deployment and nothing else: whoever can
# write its Firestore database, publish to its topic or act as its service
# accounts can steer the function (README.md, "The host project").
#
# Every name derives from var.name, so two instances live side by side in
# one project.
#
# The values the Go code owns come from go-contract.json, generated from the
# Go code; the Go tests in this directory check that file and the rest of the
# module against the Go constants and functions.

locals {
  # Values the Go code owns, generated from it into go-contract.json
  # (`go test ./terraform -update`): the sink filter (events.SinkFilter), the
  # sweep message (events.SweepMessage), the entry point (function.EntryPoint),
  # the custom roles' permissions (derived from the `// rest:` methods the
  # function's code calls, iam_test.go), the packages and embedded files the
  # function compiles (go list -deps), function.Config's variables and
  # defaults, and the processed-event collection and the expiry field its TTL
  # policy deletes by (ledger). A test fails when the file is stale.
  go_contract = jsondecode(file("${path.module}/go-contract.json"))

  sink_filter         = var.compute_instances ? local.go_contract.instance_sink_filter : local.go_contract.sink_filter
  sweep_message       = local.go_contract.sweep_message
  entry_point         = local.go_contract.entry_point
  tpu_permissions     = local.go_contract.tpu_permissions
  ledger_permissions  = local.go_contract.ledger_permissions
  records_permissions = local.go_contract.records_permissions
  mac_permissions     = local.go_contract.mac_permissions
  source_packages     = local.go_contract.source_packages
  source_embeds       = local.go_contract.source_embeds
  events_collection   = local.go_contract.events_collection
  events_expire_field = local.go_contract.events_expire_field
}

locals {
  tpu_projects = length(var.projects) > 0 ? distinct(var.projects) : [var.project_id]

  # Whether the function may change anything: enabled = false is dry-run
  # everywhere, whatever dry_run says; nothing is deleted by Terraform.
  dry_run = var.dry_run || !var.enabled

  labels             = merge(var.labels, { "managed-by" = "tpu-autoheal", "tpu-autoheal-instance" = var.name })
  firestore_location = coalesce(var.firestore_location, var.region)
  firestore_database = coalesce(var.firestore_database, var.name)
  role_id            = replace(var.name, "-", "_")

  # The records' log and app label are the instance's name
  # (AUTOHEAL_RECORD_LOG, AUTOHEAL_APP_LABEL): two instances in one project
  # never count, alert on or report each other's records.
  record_log_name   = var.name
  record_app_label  = var.name
  stockout_filter   = "${local.record_log_filter} AND jsonPayload.refusal.kind=\"stockout\""
  record_log_filter = "(logName=\"projects/${var.project_id}/logs/${local.record_log_name}\" OR logName=\"projects/${var.project_id}/logs/run.googleapis.com%2Fstdout\") AND labels.app=\"${local.record_app_label}\""

  # The Pub/Sub service agent, read through the wait that follows its
  # creation: every binding naming it waits until it exists.
  pubsub_agent = time_sleep.pubsub_agent.triggers["member"]

  # The ledger's database, for the IAM conditions that confine the ledger
  # role to it (Firestore checks datastore.* permissions on the database).
  ledger_database_condition = "resource.name == \"projects/${var.project_id}/databases/${local.firestore_database}\""

  # The files the function's build needs, relative to the repository root:
  # go.mod, go.sum, the non-test .go files of the packages the root package
  # imports (go-contract.json's source_packages, from `go list -deps`) and
  # the files they embed. Nothing else: no tests, testdata, fakes or .orig.
  source_root = abspath(coalesce(var.source_dir, "${path.module}/.."))
  source_files = toset(concat(
    ["go.mod", "go.sum"],
    flatten([for d in local.source_packages : [
      for f in fileset(local.source_root, d == "" ? "*.go" : "${d}/*.go") : f if !endswith(f, "_test.go")
    ]]),
    local.source_embeds,
  ))

  # The startup script's bucket and object (function/load.go's gcsRE), and
  # the generation the function reads (AUTOHEAL_STARTUP_SCRIPT_GENERATION):
  # the object's generation when Terraform read it. A later overwrite is
  # never what a recreated node boots with; the next plan shows the new
  # generation for review.
  startup_script_parts      = var.startup_script == "" ? [] : regex("^gs://([a-z0-9][a-z0-9._-]{1,220}[a-z0-9])/(.+)$", var.startup_script)
  startup_script_generation = length(data.google_storage_bucket_object.startup_script) > 0 ? tostring(data.google_storage_bucket_object.startup_script[0].generation) : "0"

  # Cloud Functions copies the source archive into this bucket, which it
  # creates at the first deploy, and the build reads it from there.
  functions_sources_bucket = "gcf-v2-sources-${data.google_project.this.number}-${var.region}"

  apis = [
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudfunctions.googleapis.com",
    "cloudkms.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "cloudscheduler.googleapis.com",
    "compute.googleapis.com",
    "firestore.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "storage.googleapis.com",
    "tpu.googleapis.com",
    "workloadidentity.googleapis.com",
  ]

  # Every sink's writer identity, keyed by something known at plan time.
  sink_writers = merge(
    { for p, s in google_logging_project_sink.tpu : "project/${p}" => s.writer_identity },
    { for s in google_logging_folder_sink.tpu : "folder" => s.writer_identity },
    { for s in google_logging_organization_sink.tpu : "organization" => s.writer_identity },
  )

  function_member = "serviceAccount:${google_service_account.function.email}"
  build_member    = "serviceAccount:${google_service_account.build.email}"

  # The only principals the events topic lets publish (its whole policy).
  events_publishers = concat(values(local.sink_writers), [local.function_member])
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

# A warning, not an error: the basic example is one project on purpose.
check "host_holds_nothing_else" {
  assert {
    condition     = !contains(local.tpu_projects, var.project_id)
    error_message = "project_id ${var.project_id} is also a watched project: whoever can write Firestore, publish to Pub/Sub or act as a service account there (every TPU user with roles/editor, say) can steer tpu-autoheal, forge its inputs or rewrite its ledger. For production, host it in a project that holds nothing else and list the training projects in projects (see examples/org-wide)."
  }
}

# The Pub/Sub service agent (service-PROJECT_NUMBER, Google-managed) mints the push
# tokens and forwards dead letters. Google creates it lazily, so a binding
# naming it can fail on a new project; the Workload Identity API's
# generateServiceAgents (GA, unlike google_project_service_identity) creates
# it now, and the wait after it covers its propagation. local.pubsub_agent is
# read from the wait, so every binding naming the agent comes after both.
resource "google_workload_identity_service_agent" "pubsub" {
  parent = "projects/${data.google_project.this.number}/locations/global/serviceProducers/pubsub.googleapis.com"

  depends_on = [google_project_service.apis]
}

resource "time_sleep" "pubsub_agent" {
  create_duration = "60s"

  triggers = {
    agent  = google_workload_identity_service_agent.pubsub.id
    member = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
  }
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
# principal allowed to invoke the function. Created only once the grants a
# delivery needs have had time to propagate (time_sleep.push_grants).
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

  depends_on = [time_sleep.push_grants]
}

# What a delivery needs before the first one is pushed: the invoker grant,
# the Pub/Sub service agent's token creator grant, and the function's own
# grants (a delivery refused for a grant still propagating would be recorded
# as a failure). IAM changes take about two minutes to propagate, sometimes
# seven or more; a delivery that still meets one is retried by Pub/Sub, and
# the sweep looks again at every node.
resource "time_sleep" "push_grants" {
  create_duration = var.iam_propagation_wait

  triggers = merge(
    {
      invoker       = google_cloud_run_service_iam_member.push_invoker.id
      token_creator = google_service_account_iam_member.pubsub_token_creator.id
      ledger        = google_project_iam_member.ledger["function"].id
      records       = google_project_iam_member.records.id
      mac           = google_kms_crypto_key_iam_member.function_mac.id
    },
    { for p, m in google_project_iam_member.tpu : "tpu/${p}" => m.id },
    { for sa, m in google_service_account_iam_member.tpu_service_account_user : "act-as/${sa}" => m.id },
    { for m in google_storage_bucket_iam_member.startup_script : "startup-script" => m.id },
  )
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
  description            = "TPU terminate/restart audit entries for tpu-autoheal (${var.name})."
  destination            = "pubsub.googleapis.com/${google_pubsub_topic.events.id}"
  filter                 = local.sink_filter
  unique_writer_identity = true
}

resource "google_logging_folder_sink" "tpu" {
  count = var.sink_scope == "folder" ? 1 : 0

  folder           = "folders/${var.folder_id}"
  name             = var.name
  description      = "TPU terminate/restart audit entries for tpu-autoheal (${var.name})."
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
  description      = "TPU terminate/restart audit entries for tpu-autoheal (${var.name})."
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

# Who may publish to the events topic, authoritatively (the topic's whole
# IAM policy): the sinks' writer identities, and the function itself, which
# publishes its follow kicks ({"autoheal":"follow"}, AUTOHEAL_KICK_TOPIC;
# pubsub.projects.topics.publish in function/kick.go). A grant added on the
# topic by hand is removed by the next apply. Project-level grants are not
# the topic's: the Cloud Scheduler service agent publishes the sweep with
# its project-wide roles/cloudscheduler.serviceAgent, and project owners
# and editors can publish; `autoheal preflight` lists them.
data "google_iam_policy" "events_topic" {
  binding {
    role    = "roles/pubsub.publisher"
    members = local.events_publishers
  }
}

resource "google_pubsub_topic_iam_policy" "events" {
  project     = var.project_id
  topic       = google_pubsub_topic.events.name
  policy_data = data.google_iam_policy.events_topic.policy_data
}

# The sweep: finishes interrupted recoveries, looks again at deferred nodes
# and, with zones set, catches nodes whose audit entry never arrived.
resource "google_cloud_scheduler_job" "sweep" {
  project     = var.project_id
  region      = var.region
  name        = "${var.name}-sweep"
  description = "Asks tpu-autoheal (${var.name}) to sweep."
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
  display_name = "tpu-autoheal function (${var.name})"
  description  = "Runs the tpu-autoheal function: reads and recreates opted-in TPU nodes, keeps the ledger, writes records."

  depends_on = [google_project_service.apis]
}

resource "google_service_account" "push" {
  project      = var.project_id
  account_id   = "${var.name}-push"
  display_name = "tpu-autoheal push invoker (${var.name})"
  description  = "Identity of the Pub/Sub push subscription; may only invoke the tpu-autoheal function."

  depends_on = [google_project_service.apis]
}

resource "google_service_account" "build" {
  project      = var.project_id
  account_id   = "${var.name}-build"
  display_name = "tpu-autoheal build (${var.name})"
  description  = "Builds the tpu-autoheal function's container from its source archive."

  depends_on = [google_project_service.apis]
}

# The build: what roles/run.builder grants (the role Google names for a
# function's build account), each permission on the narrowest resource that
# holds it, instead of project-wide. Writing build logs stays project-wide
# (Cloud Logging checks it on the project); reading the source archive is a
# project-level grant conditioned on the two buckets it is read from (this
# module's, and the one Cloud Functions copies it into, which does not exist
# before the first deploy, so no binding can be made on it); pushing and
# pulling the image, on this instance's repository alone. Cloud Source
# Repositories (source.repos.get) is not a source this module uses.
resource "google_artifact_registry_repository" "images" {
  project       = var.project_id
  location      = var.region
  repository_id = var.name
  format        = "DOCKER"
  description   = "Images of the tpu-autoheal function (${var.name})."
  labels        = local.labels

  # A deploy pushes one image; keep the recent ones for a rollback.
  cleanup_policy_dry_run = false
  cleanup_policies {
    id     = "keep-recent"
    action = "KEEP"
    most_recent_versions {
      keep_count = 5
    }
  }
  cleanup_policies {
    id     = "delete-older"
    action = "DELETE"
    condition {
      older_than = "2592000s"
    }
  }

  depends_on = [google_project_service.apis]
}

resource "google_project_iam_custom_role" "build_image" {
  project     = var.project_id
  role_id     = "${local.role_id}_build_image"
  title       = "tpu-autoheal build: image (${var.name})"
  description = "roles/run.builder's Artifact Registry permissions, granted on the function's one repository."
  permissions = [
    "artifactregistry.repositories.deleteArtifacts",
    "artifactregistry.repositories.downloadArtifacts",
    "artifactregistry.repositories.uploadArtifacts",
  ]
}

resource "google_artifact_registry_repository_iam_member" "build_image" {
  project    = var.project_id
  location   = google_artifact_registry_repository.images.location
  repository = google_artifact_registry_repository.images.repository_id
  role       = google_project_iam_custom_role.build_image.id
  member     = local.build_member
}

resource "google_project_iam_custom_role" "build_source" {
  project     = var.project_id
  role_id     = "${local.role_id}_build_source"
  title       = "tpu-autoheal build: source (${var.name})"
  description = "roles/run.builder's Cloud Storage permission, granted on the buckets the function's source is read from."
  permissions = ["storage.objects.get"]
}

resource "google_project_iam_member" "build_source" {
  project = var.project_id
  role    = google_project_iam_custom_role.build_source.id
  member  = local.build_member

  condition {
    title       = "tpu-autoheal source buckets"
    description = "The module's source bucket and the bucket Cloud Functions copies the archive into."
    expression  = "resource.name.startsWith(\"projects/_/buckets/${google_storage_bucket.source.name}/objects/\") || resource.name.startsWith(\"projects/_/buckets/${local.functions_sources_bucket}/objects/\")"
  }
}

# Build logs: the records role, logging.logEntries.create alone.
resource "google_project_iam_member" "build_logs" {
  project = var.project_id
  role    = google_project_iam_custom_role.records.id
  member  = local.build_member
}

# The build starts only once its grants have had time to propagate (about
# two minutes, sometimes seven or more): on a new project the first build
# otherwise fails for a permission granted seconds before. A build that
# still meets one fails the apply; applying again retries it (the wait does
# not run again).
resource "time_sleep" "build_grants" {
  create_duration = var.iam_propagation_wait

  triggers = {
    image  = google_artifact_registry_repository_iam_member.build_image.id
    source = google_project_iam_member.build_source.id
    logs   = google_project_iam_member.build_logs.id
  }
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

# The archive is built from the listed files' contents, never by walking a
# directory: it holds exactly local.source_files, wherever the root module
# and its .terraform (where the zip is written) sit.
data "archive_file" "source" {
  type        = "zip"
  output_path = "${path.root}/.terraform/tmp/${var.name}-source.zip"

  dynamic "source" {
    for_each = sort(local.source_files)
    content {
      filename = source.value
      content  = file("${local.source_root}/${source.value}")
    }
  }
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
    runtime           = var.runtime
    entry_point       = local.entry_point
    service_account   = google_service_account.build.id
    docker_repository = google_artifact_registry_repository.images.id

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
      AUTOHEAL_PROJECT                   = var.project_id
      AUTOHEAL_PROJECTS                  = join(",", local.tpu_projects)
      AUTOHEAL_ZONES                     = join(",", var.zones)
      AUTOHEAL_DRY_RUN                   = tostring(local.dry_run)
      AUTOHEAL_LABEL_SELECTOR            = var.label_selector
      AUTOHEAL_STARTUP_SCRIPT            = var.startup_script
      AUTOHEAL_STARTUP_SCRIPT_GENERATION = local.startup_script_generation
      AUTOHEAL_FIRESTORE_DATABASE        = google_firestore_database.ledger.name
      AUTOHEAL_TPU_ENDPOINT              = var.tpu_endpoint
      AUTOHEAL_COMPUTE_INSTANCES         = tostring(var.compute_instances)
      AUTOHEAL_COMPUTE_ENDPOINT          = var.compute_endpoint
      AUTOHEAL_REPORT_FAULTY_HOSTS       = var.report_faulty_hosts
      AUTOHEAL_RECORD_TO                 = var.record_to
      AUTOHEAL_RECORD_LOG                = local.record_log_name
      AUTOHEAL_APP_LABEL                 = local.record_app_label
      AUTOHEAL_MAX_EVENT_AGE             = var.max_event_age
      AUTOHEAL_UNHEALTHY_GRACE           = var.unhealthy_grace
      AUTOHEAL_STUCK_GRACE               = var.stuck_grace
      AUTOHEAL_RESTART_GRACE             = var.restart_grace
      AUTOHEAL_COOLDOWN                  = var.cooldown
      AUTOHEAL_WINDOW                    = var.window
      AUTOHEAL_MAX_RECREATES             = tostring(var.max_recreates)
      AUTOHEAL_MAX_IN_FLIGHT             = tostring(var.max_in_flight)
      AUTOHEAL_MAX_ATTEMPTS              = tostring(var.max_attempts)
      AUTOHEAL_LEASE                     = var.lease
      AUTOHEAL_EVENT_TTL                 = var.event_ttl
      AUTOHEAL_SWEEP_BUDGET              = var.sweep_budget
      AUTOHEAL_BREAKER                   = var.breaker
      AUTOHEAL_HOLD_TTL                  = var.hold_ttl
      AUTOHEAL_LOOK_AGAIN                = var.look_again
      AUTOHEAL_SWEEP_FOLLOW              = var.sweep_follow
      AUTOHEAL_KICK_TOPIC                = google_pubsub_topic.events.id
      AUTOHEAL_MAINTENANCE               = var.maintenance
      AUTOHEAL_CHECKPOINT_TIMEOUT        = var.checkpoint_timeout
      AUTOHEAL_MAINTENANCE_MAX           = var.maintenance_max
      AUTOHEAL_RESUME_WATCH              = var.resume_watch
      AUTOHEAL_ACTOR                     = google_service_account.function.email
      AUTOHEAL_EVIDENCE_WAIT             = var.evidence_wait
      AUTOHEAL_STOCKOUT_ZONE_AFTER       = tostring(var.stockout_zone_after)
      AUTOHEAL_MAX_REQUEUES              = tostring(var.max_requeues)
      AUTOHEAL_NODE_SERVICE_ACCOUNTS     = join(",", var.tpu_service_accounts)
      AUTOHEAL_MAC_KEY                   = google_kms_crypto_key_version.ledger_mac.name
      AUTOHEAL_TRUST_UNSEALED_SPECS      = tostring(var.trust_unsealed_specs)
      AUTOHEAL_SWEEP_MIN_INTERVAL        = var.sweep_min_interval
    }
  }

  depends_on = [
    google_project_service.apis,
    time_sleep.build_grants,
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

# Least privilege, derived from the code (terraform/iam_test.go): the REST
# methods the function calls, mapped to permissions, split by where they are
# needed. The TPU role is bound in every watched project; the ledger role on
# the ledger's database only (an IAM condition); the records role in
# project_id; the MAC role on the ledger's key only.

resource "google_project_iam_custom_role" "tpu" {
  for_each = toset(local.tpu_projects)

  project     = each.value
  role_id     = "${local.role_id}_tpu"
  title       = "tpu-autoheal TPU (${var.name})"
  description = "What the tpu-autoheal function calls on TPU nodes, queued resources and operations (and, with compute_instances, Compute Engine TPU VMs) in a watched project."
  # The Compute Engine permissions only when the instance path is on;
  # reportHostAsFaulty only when faulty-host reports are on too.
  permissions = [for p in local.tpu_permissions : p if var.compute_instances ? (p != "compute.instances.reportHostAsFaulty" || !contains(["", "false", "off"], var.report_faulty_hosts)) : !startswith(p, "compute.")]
}

resource "google_project_iam_member" "tpu" {
  for_each = toset(local.tpu_projects)

  project = each.value
  role    = google_project_iam_custom_role.tpu[each.key].id
  member  = local.function_member
}

resource "google_project_iam_custom_role" "ledger" {
  project     = var.project_id
  role_id     = "${local.role_id}_ledger"
  title       = "tpu-autoheal ledger (${var.name})"
  description = "What the tpu-autoheal function calls on its Firestore ledger (documents and transactions); granted on its database only."
  permissions = local.ledger_permissions
}

# The function and the operators, who pause and resume it (autoheal pause,
# resume, breaker reset write the ledger): the ledger role, on its database
# only. The operators get no KMS permission, so they cannot seal a spec the
# function would create.
resource "google_project_iam_member" "ledger" {
  for_each = merge({ function = local.function_member }, { for m in var.operators : "operator/${m}" => m })

  project = var.project_id
  role    = google_project_iam_custom_role.ledger.id
  member  = each.value

  condition {
    title       = "tpu-autoheal ledger ${local.firestore_database}"
    description = "Only the ledger's Firestore database."
    expression  = local.ledger_database_condition
  }
}

resource "google_project_iam_custom_role" "records" {
  project     = var.project_id
  role_id     = "${local.role_id}_records"
  title       = "tpu-autoheal records (${var.name})"
  description = "Writing log entries (the function's records, the build's logs); Cloud Logging checks it on the project."
  permissions = local.records_permissions
}

resource "google_project_iam_member" "records" {
  project = var.project_id
  role    = google_project_iam_custom_role.records.id
  member  = local.function_member
}

# Reading a gs:// startup script: that one object, nothing else in its bucket
# (an IAM condition on the object's name; the bucket needs uniform
# bucket-level access). With grant_startup_script_read = false the caller
# grants it.
resource "google_storage_bucket_iam_member" "startup_script" {
  count = length(local.startup_script_parts) > 0 && var.grant_startup_script_read ? 1 : 0

  bucket = local.startup_script_parts[0]
  role   = "roles/storage.objectViewer"
  member = local.function_member

  condition {
    title       = "tpu-autoheal startup script"
    description = "Only the object named by startup_script."
    expression  = "resource.name == \"projects/_/buckets/${local.startup_script_parts[0]}/objects/${local.startup_script_parts[1]}\""
  }
}

# The generation the function will read (the plan shows a change of it).
# Reading it needs storage.objects.get on the object for whoever applies.
data "google_storage_bucket_object" "startup_script" {
  count = length(local.startup_script_parts) > 0 ? 1 : 0

  bucket = local.startup_script_parts[0]
  name   = local.startup_script_parts[1]
}

# Recreating a node that runs as a service account needs actAs on it.
# A warning, not an error: nodes created without --service-account run as
# the Compute Engine default account.
check "no_default_compute_account" {
  assert {
    condition     = !anytrue([for sa in var.tpu_service_accounts : endswith(sa, "-compute@developer.gserviceaccount.com")])
    error_message = "tpu_service_accounts lists a Compute Engine default service account (NUMBER-compute@developer.gserviceaccount.com): the function can then act as it, and it often holds roles/editor on its project. Give the TPU nodes a service account of their own (gcloud compute tpus tpu-vm create ... --service-account) and list that one."
  }
}

resource "google_service_account_iam_member" "tpu_service_account_user" {
  for_each = toset(var.tpu_service_accounts)

  service_account_id = "projects/-/serviceAccounts/${each.value}"
  role               = "roles/iam.serviceAccountUser"
  member             = local.function_member
}

# State.

resource "google_firestore_database" "ledger" {
  project                 = var.project_id
  name                    = local.firestore_database
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

# The key that seals every saved spec (a MAC the function makes before the
# delete and checks before the delete and the create), so that whoever can
# write the ledger still cannot make the function create a node they
# rewrote. The function may only sign and verify with it; nobody the module
# grants anything (operators included) may. Cloud KMS never deletes a key
# ring or a key: destroy only destroys the key's versions (after
# destroy_scheduled_duration), and applying again with the same name must
# import both (README.md, Teardown).
resource "google_kms_key_ring" "ledger" {
  project  = var.project_id
  name     = var.name
  location = var.region

  depends_on = [google_project_service.apis]
}

resource "google_kms_crypto_key" "ledger_mac" {
  name     = "${var.name}-ledger-mac"
  key_ring = google_kms_key_ring.ledger.id
  purpose  = "MAC"
  labels   = local.labels

  # The version is google_kms_crypto_key_version.ledger_mac, whose name the
  # function signs with (signing names a version).
  skip_initial_version_creation = true

  version_template {
    algorithm        = "HMAC_SHA256"
    protection_level = var.mac_key_protection_level
  }
}

resource "google_kms_crypto_key_version" "ledger_mac" {
  crypto_key = google_kms_crypto_key.ledger_mac.id
}

resource "google_project_iam_custom_role" "mac" {
  project     = var.project_id
  role_id     = "${local.role_id}_mac"
  title       = "tpu-autoheal ledger MAC (${var.name})"
  description = "Sign and verify with the ledger's MAC key, nothing else (no key management, no other key); granted on that key only."
  permissions = local.mac_permissions
}

resource "google_kms_crypto_key_iam_member" "function_mac" {
  crypto_key_id = google_kms_crypto_key.ledger_mac.id
  role          = google_project_iam_custom_role.mac.id
  member        = local.function_member
}

# Observability: counters over the decision records, a dashboard, and
# alerts. Alerts on records are log-match policies: they read the log
# itself, so no alert waits for a new log-based metric to become visible to
# Cloud Monitoring (hashicorp/terraform-provider-google#11102). The alerts
# that need a metric (sweeps stopped, acquisition low) are PromQL conditions
# with metric validation off, which Monitoring accepts before the metric has
# a point.

locals {
  metric_prefix = "logging.googleapis.com/user/"
  # A record of a delivery, or the start-up failure, as Cloud Logging has it.
  startup_error_filter = "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=\"${var.name}\" AND severity>=ERROR AND jsonPayload.message=~\"^${local.startup_error_prefix}\""
  startup_error_prefix = "tpu-autoheal cannot start"
  # Three sweep intervals: the schedule's period when it is "* * * * *" or
  # "*/N * * * *" (N minutes), else sweep_alert_after must say.
  sweep_period_minutes = (
    trimspace(var.sweep_schedule) == "* * * * *" ? 1 :
    can(regex("^\\*/([0-9]+) \\* \\* \\* \\*$", trimspace(var.sweep_schedule))) ? tonumber(regex("^\\*/([0-9]+) \\* \\* \\* \\*$", trimspace(var.sweep_schedule))[0]) :
    null
  )
  sweep_alert_after_seconds = var.sweep_alert_after_seconds != null ? var.sweep_alert_after_seconds : (local.sweep_period_minutes == null ? null : 3 * 60 * local.sweep_period_minutes)
  # PromQL over a log-based metric, in Cloud Monitoring's UTF-8 form, on
  # both resource types records arrive with: absent on both. Each
  # absent_over_time keeps its monitored_resource label, so the two are
  # joined on no label ("and on()"), else they would never match.
  # A zone's stockouts over its create attempts in the last hour, per zone
  # and accelerator type: over 0.9 is an acquisition success under 10 %.
  acquisition_promql = join(" / ", [
    for m in ["stockouts", "create_attempts"] :
    "sum by (zone, accelerator_type) (increase({\"__name__\"=\"${local.metric_prefix}${var.name}/${m}\"}[1h]))"
  ])
  acquisition_low_promql = "(${local.acquisition_promql}) > 0.9"
  # The instance path's records name a Compute Engine resource in node
  # (projects/P/zones/Z/instances/I, .../instanceGroupManagers/M,
  # .../resourcePolicies/R); a TPU node's is projects/P/locations/Z/nodes/N.
  # recreate and maintain are words of both paths: this clause tells them
  # apart.
  instance_record_clause = "jsonPayload.node=~\"^projects/[^/]+/zones/\""
  sweeps_promql = join(" and on() ", [
    for rt in ["cloud_function", "cloud_run_revision"] :
    "absent_over_time({\"__name__\"=\"${local.metric_prefix}${var.name}/sweeps\",\"monitored_resource\"=\"${rt}\"}[${coalesce(local.sweep_alert_after_seconds, 180)}s])"
  ])
}

resource "google_logging_metric" "recoveries_started" {
  project     = var.project_id
  name        = "${var.name}/recoveries_started"
  description = "Recreates and queued-resource resets of TPU nodes tpu-autoheal started or resumed (dry run excluded; Compute Engine instances are in instance_actions)."
  filter      = "${local.record_log_filter} AND jsonPayload.action=(\"recreate\" OR \"reset\") AND NOT ${local.instance_record_clause} AND NOT jsonPayload.dryRun=true"

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
  description = "Recoveries that brought a TPU node back (outcome recovered)."
  filter      = "${local.record_log_filter} AND jsonPayload.action=(\"recreate\" OR \"reset\") AND NOT ${local.instance_record_clause} AND jsonPayload.outcome=\"recovered\""

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
  description = "Recovery attempts that failed (outcome failed: a later one retries) or were abandoned (outcome abandoned: a person must look)."
  filter      = "${local.record_log_filter} AND jsonPayload.outcome=(\"failed\" OR \"abandoned\")"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    labels {
      key         = "node"
      value_type  = "STRING"
      description = "Full resource name of the node."
    }
    labels {
      key         = "outcome"
      value_type  = "STRING"
      description = "failed or abandoned"
    }
  }

  label_extractors = {
    node    = "EXTRACT(jsonPayload.node)"
    outcome = "EXTRACT(jsonPayload.outcome)"
  }
}

# Every record that ended something, by outcome (recovered, closed,
# abandoned, failed, prepared, maintained, resumed) and action.
resource "google_logging_metric" "outcomes" {
  project     = var.project_id
  name        = "${var.name}/outcomes"
  description = "Records carrying an outcome, by outcome and action (dry run included, labelled)."
  filter      = "${local.record_log_filter} AND jsonPayload.outcome:*"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    labels {
      key         = "outcome"
      value_type  = "STRING"
      description = "recovered, closed, abandoned, failed, prepared, maintained or resumed"
    }
    labels {
      key         = "action"
      value_type  = "STRING"
      description = "The record's action."
    }
    labels {
      key         = "dry_run"
      value_type  = "STRING"
      description = "true on a dry run's records"
    }
  }

  label_extractors = {
    outcome = "EXTRACT(jsonPayload.outcome)"
    action  = "EXTRACT(jsonPayload.action)"
    dry_run = "EXTRACT(jsonPayload.dryRun)"
  }
}

# Time to recover: the recovered record's timeToRecoverSeconds (from the
# incident's first event to the node READY again).
resource "google_logging_metric" "time_to_recover" {
  project         = var.project_id
  name            = "${var.name}/time_to_recover"
  description     = "Seconds from an incident's first event to the node recovered (jsonPayload.timeToRecoverSeconds of outcome recovered)."
  filter          = "${local.record_log_filter} AND jsonPayload.outcome=\"recovered\" AND jsonPayload.timeToRecoverSeconds>0"
  value_extractor = "EXTRACT(jsonPayload.timeToRecoverSeconds)"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "s"
  }

  # 30 s to about 34 h, doubling.
  bucket_options {
    exponential_buckets {
      num_finite_buckets = 12
      growth_factor      = 2
      scale              = 30
    }
  }
}

# Acquisition: records of a recovery that sent a create (a steps entry
# named create), and records of a create refused for capacity (refusal
# kind stockout), per zone and accelerator type. A zone's acquisition
# success rate is 1 - stockouts / create attempts.
resource "google_logging_metric" "create_attempts" {
  project     = var.project_id
  name        = "${var.name}/create_attempts"
  description = "Records of a recovery that sent a create (jsonPayload.steps.name create), by zone and accelerator type."
  filter      = "${local.record_log_filter} AND jsonPayload.steps.name=\"create\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    labels {
      key         = "zone"
      value_type  = "STRING"
      description = "Zone the node is created in."
    }
    labels {
      key         = "accelerator_type"
      value_type  = "STRING"
      description = "The node's accelerator type, e.g. v4-128."
    }
  }

  label_extractors = {
    zone             = "EXTRACT(jsonPayload.zone)"
    accelerator_type = "EXTRACT(jsonPayload.acceleratorType)"
  }
}

resource "google_logging_metric" "stockouts" {
  project     = var.project_id
  name        = "${var.name}/stockouts"
  description = "Creates refused for capacity (jsonPayload.refusal.kind stockout), by zone and accelerator type."
  filter      = local.stockout_filter

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    labels {
      key         = "zone"
      value_type  = "STRING"
      description = "Zone that refused the create."
    }
    labels {
      key         = "accelerator_type"
      value_type  = "STRING"
      description = "The node's accelerator type, e.g. v4-128."
    }
  }

  label_extractors = {
    zone             = "EXTRACT(jsonPayload.refusal.zone)"
    accelerator_type = "EXTRACT(jsonPayload.acceleratorType)"
  }
}

# One ERROR record per breaker trip (reason "breaker open ...").
resource "google_logging_metric" "breaker_trips" {
  project     = var.project_id
  name        = "${var.name}/breaker_trips"
  description = "Storm breaker trips: ERROR records whose reason starts with \"breaker open\"."
  filter      = local.breaker_filter

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    labels {
      key         = "zone"
      value_type  = "STRING"
      description = "Zone whose breaker opened."
    }
  }

  label_extractors = {
    zone = "EXTRACT(jsonPayload.zone)"
  }
}

# One diagnostic line per sweep (jsonPayload.event "sweep", written by the
# function to its stderr whatever the sweep found: function.SweepEvent).
resource "google_logging_metric" "sweeps" {
  project     = var.project_id
  name        = "${var.name}/sweeps"
  description = "Sweeps that ran (one line with jsonPayload.event sweep each)."
  filter      = "logName=\"projects/${var.project_id}/logs/run.googleapis.com%2Fstderr\" AND labels.app=\"${local.record_app_label}\" AND jsonPayload.event=\"sweep\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
  }
}

# The calls the instance path makes (vmpolicy's actions that change an
# instance), one per record: a slice's four starts are one record. A call
# that failed is counted too (its record carries jsonPayload.error).
# acceleratorType holds the machine type on an instance's record.
resource "google_logging_metric" "instance_actions" {
  project     = var.project_id
  name        = "${var.name}/instance_actions"
  description = "Calls tpu-autoheal made on Compute Engine TPU VMs (start, recreate, recreateInstances, prepare, maintain, reportHostAsFaulty), one per record, by action, zone and machine type (dry run excluded)."
  filter      = "${local.record_log_filter} AND ${local.instance_record_clause} AND jsonPayload.action=(\"start\" OR \"recreate\" OR \"recreateInstances\" OR \"prepare\" OR \"maintain\" OR \"reportHostAsFaulty\") AND NOT jsonPayload.dryRun=true"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    labels {
      key         = "action"
      value_type  = "STRING"
      description = "start, recreate, recreateInstances, prepare, maintain or reportHostAsFaulty"
    }
    labels {
      key         = "zone"
      value_type  = "STRING"
      description = "Zone of the instance or slice."
    }
    labels {
      key         = "machine_type"
      value_type  = "STRING"
      description = "The instance's machine type, e.g. tpu7x-standard-4t."
    }
  }

  label_extractors = {
    action       = "EXTRACT(jsonPayload.action)"
    zone         = "EXTRACT(jsonPayload.zone)"
    machine_type = "EXTRACT(jsonPayload.acceleratorType)"
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

locals {
  recovery_failed_filter = "${local.record_log_filter} AND jsonPayload.outcome=(\"failed\" OR \"abandoned\")"
  breaker_filter         = "${local.record_log_filter} AND severity>=ERROR AND jsonPayload.reason=~\"^breaker open\""
}

# A recovery failed (a later attempt retries) or was abandoned (a person
# must look): one notification per node and hour at most.
resource "google_monitoring_alert_policy" "recovery_failed" {
  project               = var.project_id
  display_name          = "${var.name}: TPU node recovery failed or abandoned"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = var.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "A record with outcome failed or abandoned"

    condition_matched_log {
      filter = local.recovery_failed_filter
      label_extractors = {
        node    = "EXTRACT(jsonPayload.node)"
        outcome = "EXTRACT(jsonPayload.outcome)"
      }
    }
  }

  alert_strategy {
    auto_close = "86400s"

    notification_rate_limit {
      period = "3600s"
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "tpu-autoheal could not recover TPU node $${log.extracted_label.node} (outcome $${log.extracted_label.outcome}). Read its records: `gcloud logging read 'logName=\"projects/${var.project_id}/logs/${local.record_log_name}\" AND jsonPayload.outcome=(\"failed\" OR \"abandoned\")' --project ${var.project_id} --freshness 1h`. A failed attempt is retried by the next delivery or sweep; an abandoned recovery (after max_attempts) needs a person: its ERROR record carries the saved spec."
  }
}

# A zone whose creates are nearly all refused for capacity for an hour,
# while a recovery waits there: stockout records are only written while a
# recovery waits, so the ratio exists only then.
resource "google_monitoring_alert_policy" "acquisition_low" {
  project               = var.project_id
  display_name          = "${var.name}: TPU acquisition success under 10 % for an hour"
  combiner              = "OR"
  severity              = "WARNING"
  notification_channels = var.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "Stockouts over 90 % of create attempts in a zone, over an hour"

    condition_prometheus_query_language {
      query                     = local.acquisition_low_promql
      duration                  = "0s"
      evaluation_interval       = "300s"
      disable_metric_validation = true
    }
  }

  alert_strategy {
    auto_close = "86400s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "For an hour, more than 90 % of tpu-autoheal's creates in a zone were refused for capacity (stockout) while a recovery waited there. Read the refusals: `gcloud logging read '${replace(local.stockout_filter, "'", "")}' --project ${var.project_id} --freshness 1h`. Options: a reservation, a queued resource, another zone of the region (metadata autoheal-stockout; see docs/capacity.md), or wait."
  }
}

resource "google_monitoring_alert_policy" "breaker_open" {
  project               = var.project_id
  display_name          = "${var.name}: storm breaker open"
  combiner              = "OR"
  severity              = "CRITICAL"
  notification_channels = var.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "An ERROR record whose reason starts with \"breaker open\""

    condition_matched_log {
      filter = local.breaker_filter
      label_extractors = {
        zone = "EXTRACT(jsonPayload.zone)"
      }
    }
  }

  alert_strategy {
    auto_close = "86400s"

    notification_rate_limit {
      period = "3600s"
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "More recreates and resets started in zone $${log.extracted_label.zone} than the breaker (${var.breaker}) allows; further ones are skipped until the window passes. Look at what is happening in that zone, then `autoheal breaker reset --zone ZONE` if recovering should go on."
  }
}

resource "google_monitoring_alert_policy" "startup_error" {
  project               = var.project_id
  display_name          = "${var.name}: the function cannot start"
  combiner              = "OR"
  severity              = "CRITICAL"
  notification_channels = var.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "The function's start-up error record"

    condition_matched_log {
      filter = local.startup_error_filter
    }
  }

  alert_strategy {
    auto_close = "86400s"

    notification_rate_limit {
      period = "3600s"
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "The tpu-autoheal function refuses to start (bad AUTOHEAL_* configuration, or the startup script cannot be read); every event is being retried and then dead-lettered. `gcloud logging read '${local.startup_error_filter}' --project ${var.project_id} --freshness 1h` says why."
  }
}

resource "google_monitoring_alert_policy" "dead_letter_backlog" {
  project               = var.project_id
  display_name          = "${var.name}: undeliverable events waiting"
  combiner              = "OR"
  severity              = "WARNING"
  notification_channels = var.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "Messages in the dead-letter subscription"

    condition_threshold {
      filter          = "metric.type=\"pubsub.googleapis.com/subscription/num_undelivered_messages\" AND resource.type=\"pubsub_subscription\" AND resource.label.subscription_id=\"${google_pubsub_subscription.dead_letter.name}\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "300s"

      aggregations {
        alignment_period   = "300s"
        per_series_aligner = "ALIGN_MAX"
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
    content   = "Pub/Sub gave up delivering some events to tpu-autoheal after ${var.max_delivery_attempts} attempts; they wait in ${google_pubsub_subscription.dead_letter.id}. Pull them (`gcloud pubsub subscriptions pull ${google_pubsub_subscription.dead_letter.id} --limit 10`), fix the cause, and feed them to `autoheal replay`."
  }
}

resource "google_monitoring_alert_policy" "sweeps_stopped" {
  project               = var.project_id
  display_name          = "${var.name}: sweeps stopped"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = var.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "No sweep record for three sweep intervals"

    condition_prometheus_query_language {
      query                     = local.sweeps_promql
      duration                  = "0s"
      evaluation_interval       = "60s"
      disable_metric_validation = true
    }
  }

  alert_strategy {
    auto_close = "86400s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "No sweep line (jsonPayload.event sweep) in the last ${coalesce(local.sweep_alert_after_seconds, 180)} s: the Cloud Scheduler job ${google_cloud_scheduler_job.sweep.id} may be paused or failing, or the function cannot run the sweep. Unfinished recoveries only advance when a sweep runs."
  }

  lifecycle {
    precondition {
      condition     = local.sweep_alert_after_seconds != null
      error_message = "sweep_schedule is not \"* * * * *\" or \"*/N * * * *\": set sweep_alert_after_seconds to three of its intervals."
    }
  }
}

resource "google_monitoring_dashboard" "autoheal" {
  project = var.project_id
  dashboard_json = jsonencode({
    displayName = var.name
    mosaicLayout = {
      columns = 12
      tiles = [
        for i, w in [
          {
            title  = "Recoveries by outcome"
            metric = google_logging_metric.outcomes.name
            filter = "metric.label.outcome!=\"prepared\""
            group  = ["metric.label.outcome"]
            plot   = "STACKED_BAR"
            align  = "ALIGN_SUM"
          },
          {
            title  = "Time to recover (p95, seconds)"
            metric = google_logging_metric.time_to_recover.name
            filter = ""
            group  = []
            plot   = "LINE"
            align  = "ALIGN_DELTA"
          },
          {
            title  = "Maintenance notices prepared"
            metric = google_logging_metric.outcomes.name
            filter = "metric.label.outcome=\"prepared\""
            group  = []
            plot   = "STACKED_BAR"
            align  = "ALIGN_SUM"
          },
          {
            title  = "Create attempts by zone and accelerator type"
            metric = google_logging_metric.create_attempts.name
            filter = ""
            group  = ["metric.label.zone", "metric.label.accelerator_type"]
            plot   = "STACKED_BAR"
            align  = "ALIGN_SUM"
          },
          {
            title  = "Stockouts by zone and accelerator type"
            metric = google_logging_metric.stockouts.name
            filter = ""
            group  = ["metric.label.zone", "metric.label.accelerator_type"]
            plot   = "STACKED_BAR"
            align  = "ALIGN_SUM"
          },
          {
            title  = "Breaker trips by zone"
            metric = google_logging_metric.breaker_trips.name
            filter = ""
            group  = ["metric.label.zone"]
            plot   = "STACKED_BAR"
            align  = "ALIGN_SUM"
          },
          {
            title  = "Instance actions by action"
            metric = google_logging_metric.instance_actions.name
            filter = ""
            group  = ["metric.label.action"]
            plot   = "STACKED_BAR"
            align  = "ALIGN_SUM"
          },
          {
            title  = "Instance actions by zone and machine type"
            metric = google_logging_metric.instance_actions.name
            filter = ""
            group  = ["metric.label.zone", "metric.label.machine_type"]
            plot   = "STACKED_BAR"
            align  = "ALIGN_SUM"
          },
          ] : {
          xPos   = (i % 2) * 6
          yPos   = floor(i / 2) * 4
          width  = 6
          height = 4
          widget = {
            title = w.title
            xyChart = {
              dataSets = [{
                plotType = w.plot
                timeSeriesQuery = {
                  timeSeriesFilter = {
                    filter = join(" AND ", compact(["metric.type=\"${local.metric_prefix}${w.metric}\"", w.filter]))
                    aggregation = {
                      alignmentPeriod    = "3600s"
                      perSeriesAligner   = w.align
                      crossSeriesReducer = w.align == "ALIGN_DELTA" ? "REDUCE_PERCENTILE_95" : "REDUCE_SUM"
                      groupByFields      = w.group
                    }
                  }
                }
              }]
            }
          }
        }
      ]
    }
  })
}
