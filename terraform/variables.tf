# Durations. Every duration variable is a Go duration (what
# time.ParseDuration reads, without a sign), checked against one pattern,
# go_duration. Those compared with function_timeout_seconds are summed in
# seconds part by part (duration_part, duration_unit). Locals that depend on
# no variable: a validation may use them without a cycle.
locals {
  go_duration   = "([0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h))+"
  duration_part = "([0-9]+(?:\\.[0-9]+)?)(ns|us|µs|ms|s|m|h)"
  duration_unit = { ns = 1e-9, us = 1e-6, "µs" = 1e-6, ms = 0.001, s = 1, m = 60, h = 3600 }
}

# Where it runs.

variable "project_id" {
  type        = string
  description = "Project that hosts the function, its topics, Firestore database, metrics and alert (AUTOHEAL_PROJECT)."

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a Google Cloud project id (6-30 lowercase letters, digits, hyphens)."
  }
}

variable "region" {
  type        = string
  description = "Region of the function, the Cloud Scheduler job and the source bucket, e.g. us-central1."

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Google Cloud region such as us-central1."
  }
}

variable "name" {
  type        = string
  description = "Name of this instance: every resource name, the ledger database (by default), the records' log and labels.app, the metrics and alerts derive from it, so two instances live side by side in one project (give them different projects or label_selector: two instances must never watch the same nodes)."
  default     = "tpu-autoheal"

  # The longest ids it feeds: the service accounts NAME-build (6-30
  # characters) and the source bucket PROJECT-NAME-source (at most 63); the
  # database NAME needs at least 4. Topics and buckets refuse goog prefixes
  # and names containing google.
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{2,22}[a-z0-9]$", var.name)) && !startswith(var.name, "goog") && !strcontains(var.name, "google")
    error_message = "name must be 4-24 lowercase letters, digits or hyphens, starting with a letter and ending with a letter or digit, neither starting with goog nor containing google: the service account NAME-build is at most 30 characters and the Firestore database NAME at least 4."
  }
}

variable "enable_apis" {
  type        = bool
  description = "Enable the Google APIs the module uses in project_id (never disabled on destroy)."
  default     = true
}

# What it watches.

variable "projects" {
  type        = list(string)
  description = "Projects whose TPU nodes may be handled (AUTOHEAL_PROJECTS); entries about any other project are rejected. Empty means [project_id]. With sink_scope = \"project\" a sink is created in each."
  default     = []

  validation {
    condition     = alltrue([for p in var.projects : can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", p))])
    error_message = "Every entry of projects must be a Google Cloud project id."
  }
}

variable "zones" {
  type        = list(string)
  description = "Zones the periodic sweep lists TPU nodes in (AUTOHEAL_ZONES), e.g. [\"us-central2-b\"]. Empty: the sweep only finishes unfinished recoveries and due deferrals."
  default     = []

  validation {
    condition     = alltrue([for z in var.zones : can(regex("^[a-z]+-[a-z]+[0-9]+-[a-z]$", z))])
    error_message = "Every entry of zones must be a zone such as us-central2-b."
  }
}

variable "sink_scope" {
  type        = string
  description = "Where the log sink lives: \"project\" (a sink in each watched project), \"folder\" (one aggregated sink over folder_id) or \"organization\" (one aggregated sink over org_id)."
  default     = "project"

  validation {
    condition     = contains(["project", "folder", "organization"], var.sink_scope)
    error_message = "sink_scope must be \"project\", \"folder\" or \"organization\"."
  }
}

variable "folder_id" {
  type        = string
  description = "Folder whose projects' TPU entries the aggregated sink collects, as digits; required when sink_scope = \"folder\"."
  default     = null

  validation {
    condition     = var.folder_id == null || can(regex("^[0-9]+$", var.folder_id))
    error_message = "folder_id must be the folder's number, without \"folders/\"."
  }
}

variable "org_id" {
  type        = string
  description = "Organization whose projects' TPU entries the aggregated sink collects, as digits; required when sink_scope = \"organization\"."
  default     = null

  validation {
    condition     = var.org_id == null || can(regex("^[0-9]+$", var.org_id))
    error_message = "org_id must be the organization's number, without \"organizations/\"."
  }
}

variable "tpu_service_accounts" {
  type        = list(string)
  description = "Service accounts the TPU nodes run as (AUTOHEAL_NODE_SERVICE_ACCOUNTS): the function gets roles/iam.serviceAccountUser on each, which creating or patching a node that runs as it needs, and creates no node running as any other. Find a node's with: gcloud compute tpus tpu-vm describe NODE --zone ZONE --format='value(serviceAccount.email)'."

  validation {
    condition     = length(var.tpu_service_accounts) > 0
    error_message = "tpu_service_accounts must list the service accounts your TPU nodes run as (recreating a node needs actAs on its account; a node running as an unlisted one is never recreated). Find a node's with: gcloud compute tpus tpu-vm describe NODE --zone ZONE --format='value(serviceAccount.email)'."
  }

  validation {
    condition     = alltrue([for sa in var.tpu_service_accounts : can(regex("^[^@\\s]+@[a-z0-9.-]+\\.gserviceaccount\\.com$", sa))])
    error_message = "Every entry of tpu_service_accounts must be a service account email, NAME@PROJECT.iam.gserviceaccount.com (gcloud compute tpus tpu-vm describe NODE --zone ZONE --format='value(serviceAccount.email)' prints a node's)."
  }
}

variable "operators" {
  type        = list(string)
  description = "Principals who pause and resume tpu-autoheal (autoheal pause, resume and breaker reset write the ledger), e.g. [\"group:tpu-oncall@example.com\"]: they get the ledger role on its database only, and no KMS permission. autoheal preflight counts them as expected ledger writers."
  default     = []

  validation {
    condition     = alltrue([for m in var.operators : can(regex("^(group|user|serviceAccount):[^@\\s:]+@[^@\\s]+$", m))])
    error_message = "Every entry of operators must be an IAM principal with its type: group:EMAIL, user:EMAIL or serviceAccount:EMAIL."
  }
}

# What it does (the function's AUTOHEAL_* settings).

variable "enabled" {
  type        = bool
  description = "Off switch: false makes the function dry-run everywhere (AUTOHEAL_DRY_RUN=true whatever dry_run says) while every resource, the ledger included, stays; true lets dry_run decide."
  default     = true
}

variable "dry_run" {
  type        = bool
  description = "Decide and record everything but mutate nothing (AUTOHEAL_DRY_RUN). Defaults to true: read a week of records, then set false."
  default     = true
}

variable "label_selector" {
  type        = string
  description = "Opt-in label, key=value (AUTOHEAL_LABEL_SELECTOR); only nodes carrying it are ever recreated."
  default     = "tpu-autoheal=enabled"

  validation {
    condition     = can(regex("^[a-z][a-z0-9_-]{0,62}=[a-z0-9_-]{0,63}$", var.label_selector))
    error_message = "label_selector must be key=value with a valid label key and value."
  }
}

variable "startup_script" {
  type        = string
  description = "gs:// URI of the script set as a recreated node's startup-script (AUTOHEAL_STARTUP_SCRIPT); empty means the script embedded in the function (startup/resume-training.sh)."
  default     = ""

  # The same expression as function/load.go's gcsRE (a Go test checks).
  validation {
    condition     = var.startup_script == "" || can(regex("^gs://([a-z0-9][a-z0-9._-]{1,220}[a-z0-9])/(.+)$", var.startup_script))
    error_message = "startup_script must be empty or a gs://BUCKET/OBJECT URI with a valid bucket name (3-222 characters, starting and ending with a letter or digit)."
  }
}

variable "grant_startup_script_read" {
  type        = bool
  description = "With a gs:// startup_script, grant the function roles/storage.objectViewer on that object only (an IAM condition; the bucket needs uniform bucket-level access). false: grant read access yourself."
  default     = true
}

variable "compute_instances" {
  type        = bool
  description = "Watch and recover Compute Engine TPU VMs (TPU7x and later, opted in by the same label) beside the TPU API's nodes (AUTOHEAL_COMPUTE_INSTANCES); grants the TPU role the Compute Engine permissions it needs and routes the instance entries of every VM of the watched projects (events.InstanceSinkFilter)."
  default     = false
}

variable "report_faulty_hosts" {
  type        = string
  description = "With compute_instances, report the host of a RUNNING reservation-bound Compute Engine TPU VM faulty (instances.reportHostAsFaulty) after COUNT host errors within WINDOW, such as 3/7d (AUTOHEAL_REPORT_FAULTY_HOSTS); empty: never. Set, the TPU role also gets compute.instances.reportHostAsFaulty."
  default     = ""
  validation {
    condition     = can(regex("^(|true|false|on|off|[1-9][0-9]*/([1-9][0-9]*d|[0-9.]+(h|m|s)))$", var.report_faulty_hosts))
    error_message = "report_faulty_hosts must be empty, true, false, or COUNT/WINDOW such as 3/7d or 3/72h."
  }
}

variable "compute_endpoint" {
  type        = string
  description = "Compute Engine endpoint override (AUTOHEAL_COMPUTE_ENDPOINT); requests go to URL/compute/v1/projects/...; empty means the public endpoint."
  default     = ""

  validation {
    condition     = var.compute_endpoint == "" || can(regex("^https://", var.compute_endpoint))
    error_message = "compute_endpoint must be empty or an https:// URL."
  }
}

variable "tpu_endpoint" {
  type        = string
  description = "TPU API endpoint override (AUTOHEAL_TPU_ENDPOINT), e.g. a Private Service Connect endpoint; empty means the public endpoint."
  default     = ""

  validation {
    condition     = var.tpu_endpoint == "" || can(regex("^https://", var.tpu_endpoint))
    error_message = "tpu_endpoint must be empty or an https:// URL."
  }
}

variable "record_to" {
  type        = string
  description = "Where decision records go (AUTOHEAL_RECORD_TO): \"logging\" (the tpu-autoheal log, which the metrics and alert read) or \"stdout\"."
  default     = "logging"

  validation {
    condition     = contains(["logging", "stdout"], var.record_to)
    error_message = "record_to must be \"logging\" or \"stdout\"."
  }
}

variable "max_event_age" {
  type        = string
  description = "Entries older than this are dropped with a record (AUTOHEAL_MAX_EVENT_AGE), a Go duration."
  default     = "24h"

  validation {
    condition     = can(regex("^${local.go_duration}$", var.max_event_age))
    error_message = "max_event_age must be a Go duration such as 24h."
  }
}

variable "unhealthy_grace" {
  type        = string
  description = "How long a READY node may stay unhealthy before it is recreated (AUTOHEAL_UNHEALTHY_GRACE), a Go duration."
  default     = "10m"

  validation {
    condition     = can(regex("^${local.go_duration}$", var.unhealthy_grace))
    error_message = "unhealthy_grace must be a Go duration such as 10m."
  }
}

variable "stuck_grace" {
  type        = string
  description = "How long a node may stay in a transitional state (RESTARTING, REPAIRING, ...) before it is recreated (AUTOHEAL_STUCK_GRACE), a Go duration."
  default     = "30m"

  validation {
    condition     = can(regex("^${local.go_duration}$", var.stuck_grace))
    error_message = "stuck_grace must be a Go duration such as 30m."
  }
}

variable "restart_grace" {
  type        = string
  description = "With compute_instances: how long after a host error a TERMINATED Compute Engine TPU VM with automaticRestart is left to Compute Engine before the function starts it (AUTOHEAL_RESTART_GRACE), a Go duration."
  default     = "5m"

  validation {
    condition     = can(regex("^${local.go_duration}$", var.restart_grace))
    error_message = "restart_grace must be a Go duration such as 5m."
  }
}

variable "cooldown" {
  type        = string
  description = "Minimum time between two recreates of one node (AUTOHEAL_COOLDOWN), a Go duration."
  default     = "30m"

  validation {
    condition     = can(regex("^${local.go_duration}$", var.cooldown))
    error_message = "cooldown must be a Go duration such as 30m."
  }
}

variable "window" {
  type        = string
  description = "Window over which max_recreates is counted (AUTOHEAL_WINDOW), a Go duration."
  default     = "24h"

  validation {
    condition     = can(regex("^${local.go_duration}$", var.window))
    error_message = "window must be a Go duration such as 24h."
  }
}

variable "max_recreates" {
  type        = number
  description = "Most recreates of one node within window (AUTOHEAL_MAX_RECREATES); past it the node is left alone and the record says why."
  default     = 3

  validation {
    condition     = var.max_recreates >= 1 && floor(var.max_recreates) == var.max_recreates
    error_message = "max_recreates must be a whole number of at least 1."
  }
}

variable "max_in_flight" {
  type        = number
  description = "Most unfinished recoveries per project at once (AUTOHEAL_MAX_IN_FLIGHT): a safety rail above the storm breaker's 48 per zone, so a wave of 32 pods is recreated at once."
  default     = 64

  validation {
    condition     = var.max_in_flight >= 1 && floor(var.max_in_flight) == var.max_in_flight
    error_message = "max_in_flight must be a whole number of at least 1."
  }
}

variable "max_attempts" {
  type        = number
  description = "Attempts before a recovery failing with an error other than a stockout or quota is abandoned for a person (AUTOHEAL_MAX_ATTEMPTS)."
  default     = 5

  validation {
    condition     = var.max_attempts >= 1 && floor(var.max_attempts) == var.max_attempts
    error_message = "max_attempts must be a whole number of at least 1."
  }
}

variable "lease" {
  type        = string
  description = "How long a recovery claim lives without renewal before another delivery may take it over (AUTOHEAL_LEASE), a Go duration."
  default     = "15m"

  validation {
    condition     = can(regex("^${local.go_duration}$", var.lease))
    error_message = "lease must be a Go duration such as 15m."
  }

  # A claim must outlive the delivery holding it, else a redelivery takes
  # over a recovery still running.
  validation {
    condition     = sum(concat([0], [for m in regexall(local.duration_part, var.lease) : tonumber(m[0]) * local.duration_unit[m[1]]])) > var.function_timeout_seconds
    error_message = "lease must be longer than function_timeout_seconds."
  }
}

variable "event_ttl" {
  type        = string
  description = "How long processed event ids are remembered for deduplication (AUTOHEAL_EVENT_TTL), a Go duration; Firestore's TTL policy deletes them afterwards."
  default     = "168h"

  validation {
    condition     = can(regex("^${local.go_duration}$", var.event_ttl))
    error_message = "event_ttl must be a Go duration such as 168h."
  }
}

variable "sweep_budget" {
  type        = string
  description = "Longest one sweep runs (AUTOHEAL_SWEEP_BUDGET), a Go duration; the next sweep resumes where it stopped. Keep it under function_timeout_seconds."
  default     = "4m"

  validation {
    condition     = can(regex("^${local.go_duration}$", var.sweep_budget))
    error_message = "sweep_budget must be a Go duration such as 4m."
  }

  # The sweep must stop before the function is cut off.
  validation {
    condition     = sum(concat([0], [for m in regexall(local.duration_part, var.sweep_budget) : tonumber(m[0]) * local.duration_unit[m[1]]])) < var.function_timeout_seconds
    error_message = "sweep_budget must be shorter than function_timeout_seconds."
  }
}

variable "sweep_schedule" {
  type        = string
  description = "Cron schedule of the sweep Cloud Scheduler publishes (unix-cron, in sweep_time_zone)."
  default     = "* * * * *"

  validation {
    condition     = length(regexall("[^ ]+", trimspace(var.sweep_schedule))) == 5
    error_message = "sweep_schedule must be a five-field unix-cron expression such as \"* * * * *\"."
  }
}

variable "sweep_alert_after_seconds" {
  type        = number
  description = "The sweeps-stopped alert fires after this long without a sweep record; null means three intervals of sweep_schedule (which must then be \"* * * * *\" or \"*/N * * * *\")."
  default     = null

  validation {
    condition     = var.sweep_alert_after_seconds == null || try(var.sweep_alert_after_seconds >= 120 && floor(var.sweep_alert_after_seconds) == var.sweep_alert_after_seconds, false)
    error_message = "sweep_alert_after_seconds must be null or whole seconds, at least 120."
  }
}

variable "sweep_time_zone" {
  type        = string
  description = "Time zone of sweep_schedule (tz database name)."
  default     = "Etc/UTC"
}

# The function.

variable "iam_propagation_wait" {
  type        = string
  description = "How long the first build waits after its grants, and the push subscription after the grants a delivery needs, for IAM to propagate (Google: about two minutes, sometimes seven or more), whole seconds with an s suffix. Waited once, when the grants are made."
  default     = "120s"

  validation {
    condition     = can(regex("^[0-9]+s$", var.iam_propagation_wait)) && try(tonumber(trimsuffix(var.iam_propagation_wait, "s")) <= 900, false)
    error_message = "iam_propagation_wait must be whole seconds with an s suffix, at most 900s, e.g. 120s."
  }
}

variable "mac_key_protection_level" {
  type        = string
  description = "Protection level of the ledger's MAC key (HMAC_SHA256): SOFTWARE, or HSM (a dearer key version, see README.md, What it costs)."
  default     = "SOFTWARE"

  validation {
    condition     = contains(["SOFTWARE", "HSM"], var.mac_key_protection_level)
    error_message = "mac_key_protection_level must be SOFTWARE or HSM."
  }
}

variable "runtime" {
  type        = string
  description = "Cloud Run functions Go runtime; must be at least the go directive of go.mod (1.26), else the build fails."
  default     = "go126"

  validation {
    condition     = can(regex("^go[0-9]+$", var.runtime))
    error_message = "runtime must be a Go runtime id such as go126."
  }
}

variable "source_dir" {
  type        = string
  description = "Repository root the function is built from; null means the directory above this module."
  default     = null
}

variable "function_memory" {
  type        = string
  description = "Memory of each function instance (Cloud Run format, e.g. 256Mi)."
  default     = "256Mi"

  validation {
    condition     = can(regex("^[0-9]+(Mi|Gi)$", var.function_memory))
    error_message = "function_memory must look like 256Mi or 1Gi."
  }
}

variable "function_timeout_seconds" {
  type        = number
  description = "Longest one delivery may run (a recreate waits for the delete and create operations). At most 600: Pub/Sub push waits no longer."
  default     = 540

  validation {
    condition     = var.function_timeout_seconds >= 60 && var.function_timeout_seconds <= 600 && floor(var.function_timeout_seconds) == var.function_timeout_seconds
    error_message = "function_timeout_seconds must be whole seconds between 60 and 600."
  }
}

variable "max_instances" {
  type        = number
  description = "Most function instances at once; deliveries beyond it are retried by Pub/Sub."
  default     = 10

  validation {
    condition     = var.max_instances >= 1 && var.max_instances <= 1000
    error_message = "max_instances must be between 1 and 1000."
  }
}

variable "labels" {
  type        = map(string)
  description = "Labels set on every resource that takes labels."
  default     = {}
}

# Delivery.

variable "max_delivery_attempts" {
  type        = number
  description = "Deliveries of one message before Pub/Sub moves it to the dead-letter topic (5-100)."
  default     = 10

  validation {
    condition     = var.max_delivery_attempts >= 5 && var.max_delivery_attempts <= 100 && floor(var.max_delivery_attempts) == var.max_delivery_attempts
    error_message = "max_delivery_attempts must be between 5 and 100 (Pub/Sub's limits)."
  }
}

variable "retry_minimum_backoff" {
  type        = string
  description = "Shortest wait before Pub/Sub redelivers a failed message, seconds with an s suffix (0s-600s)."
  default     = "10s"

  validation {
    condition     = can(regex("^[0-9]+(\\.[0-9]+)?s$", var.retry_minimum_backoff)) && try(tonumber(trimsuffix(var.retry_minimum_backoff, "s")) <= 600, false)
    error_message = "retry_minimum_backoff must be seconds with an s suffix between 0s and 600s, e.g. 10s."
  }
}

variable "retry_maximum_backoff" {
  type        = string
  description = "Longest wait before Pub/Sub redelivers a failed message, seconds with an s suffix (0s-600s)."
  default     = "600s"

  validation {
    condition     = can(regex("^[0-9]+(\\.[0-9]+)?s$", var.retry_maximum_backoff)) && try(tonumber(trimsuffix(var.retry_maximum_backoff, "s")) <= 600, false)
    error_message = "retry_maximum_backoff must be seconds with an s suffix between 0s and 600s, e.g. 600s."
  }

  validation {
    condition     = try(tonumber(trimsuffix(var.retry_maximum_backoff, "s")) >= tonumber(trimsuffix(var.retry_minimum_backoff, "s")), false)
    error_message = "retry_maximum_backoff must not be shorter than retry_minimum_backoff."
  }
}

variable "dead_letter_retention" {
  type        = string
  description = "How long the dead-letter subscription keeps undeliverable messages, whole seconds with an s suffix between 600s (10 minutes) and 2678400s (31 days), Pub/Sub's limits."
  default     = "604800s"

  validation {
    condition     = can(regex("^[0-9]+s$", var.dead_letter_retention)) && try(tonumber(trimsuffix(var.dead_letter_retention, "s")) >= 600 && tonumber(trimsuffix(var.dead_letter_retention, "s")) <= 2678400, false)
    error_message = "dead_letter_retention must be whole seconds with an s suffix between 600s and 2678400s (31 days), e.g. 604800s."
  }
}

# State.

variable "firestore_database" {
  type        = string
  description = "Name of the Firestore (native mode) database holding the ledger (AUTOHEAL_FIRESTORE_DATABASE); created by the module. null means name."
  default     = null

  validation {
    condition     = var.firestore_database == null || (can(regex("^[a-z][a-z0-9-]{2,61}[a-z0-9]$", coalesce(var.firestore_database, "x"))) && var.firestore_database != "(default)")
    error_message = "firestore_database must be null (the instance's name) or 4-63 lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "firestore_location" {
  type        = string
  description = "Firestore location (a region such as us-central1, or a multi-region such as nam5); null means region."
  default     = null
}

variable "firestore_delete_protection" {
  type        = bool
  description = "Protect the ledger database from deletion; set false, apply, then destroy to tear it down."
  default     = true
}

# Alerting.

variable "notification_channels" {
  type        = list(string)
  description = "Monitoring notification channel ids (projects/P/notificationChannels/N) the failed-recovery alert notifies; empty still creates the alert, visible in the console."
  default     = []

  validation {
    condition     = alltrue([for c in var.notification_channels : can(regex("^projects/[^/]+/notificationChannels/[^/]+$", c))])
    error_message = "Every notification channel must be projects/PROJECT/notificationChannels/ID."
  }
}

variable "breaker" {
  type        = string
  description = "Storm breaker (AUTOHEAL_BREAKER), LIMIT/WINDOW: at most LIMIT recreates and resets start in one zone within WINDOW; further ones are skipped and one ERROR record pages a person."
  default     = "48/1h"

  validation {
    condition     = can(regex("^[1-9][0-9]*/${local.go_duration}$", var.breaker))
    error_message = "breaker must be LIMIT/WINDOW such as 48/1h."
  }
}

variable "hold_ttl" {
  type        = string
  description = "How long a hold set by a user's termination lasts (AUTOHEAL_HOLD_TTL), a Go duration."
  default     = "168h"

  validation {
    condition     = can(regex("^${local.go_duration}$", var.hold_ttl))
    error_message = "hold_ttl must be a Go duration such as 168h."
  }
}

variable "maintenance" {
  type        = string
  description = "What an upcoming-maintenance notice does (AUTOHEAL_MAINTENANCE): off, prepare (ask the workload to checkpoint) or early (then start the maintenance once every worker checkpointed)."
  default     = "prepare"

  validation {
    condition     = contains(["off", "prepare", "early"], var.maintenance)
    error_message = "maintenance must be off, prepare or early."
  }
}

variable "checkpoint_timeout" {
  type        = string
  description = "With early maintenance, how long after the notice the checkpoint may take (AUTOHEAL_CHECKPOINT_TIMEOUT), a Go duration."
  default     = "30m"

  validation {
    condition     = can(regex("^${local.go_duration}$", var.checkpoint_timeout))
    error_message = "checkpoint_timeout must be a Go duration such as 30m."
  }
}

variable "stockout_zone_after" {
  type        = number
  description = "Stockouts after which a node asking autoheal-stockout=zones:Z1,Z2 is created in its next zone (AUTOHEAL_STOCKOUT_ZONE_AFTER)."
  default     = 3

  validation {
    condition     = var.stockout_zone_after >= 1 && floor(var.stockout_zone_after) == var.stockout_zone_after
    error_message = "stockout_zone_after must be a whole number of at least 1."
  }
}

variable "max_requeues" {
  type        = number
  description = "Times a node asking autoheal-stockout=queue is queued again after its queued resource FAILED or was SUSPENDED, before it is abandoned (AUTOHEAL_MAX_REQUEUES)."
  default     = 2

  validation {
    condition     = var.max_requeues >= 0 && floor(var.max_requeues) == var.max_requeues
    error_message = "max_requeues must be a whole number of 0 or more."
  }
}

variable "maintenance_max" {
  type        = string
  description = "How long after a maintenance started (its window start, or tpu-autoheal's own performMaintenance when earlier) a node in it stops being exempt from the unhealthy grace (AUTOHEAL_MAINTENANCE_MAX), a Go duration."
  default     = "4h"

  validation {
    condition     = can(regex("^${local.go_duration}$", var.maintenance_max))
    error_message = "maintenance_max must be a Go duration such as 4h."
  }
}

variable "resume_watch" {
  type        = string
  description = "How long the guest's training-resumed report is waited for after an incident (AUTOHEAL_RESUME_WATCH), a Go duration."
  default     = "2h"

  validation {
    condition     = can(regex("^${local.go_duration}$", var.resume_watch))
    error_message = "resume_watch must be a Go duration such as 2h."
  }
}

variable "evidence_wait" {
  type        = string
  description = "After a delete whose outcome a recovery could not see, how long it waits for a person's audit entry before it creates (AUTOHEAL_EVIDENCE_WAIT), a Go duration."
  default     = "90s"

  validation {
    condition     = can(regex("^${local.go_duration}$", var.evidence_wait))
    error_message = "evidence_wait must be a Go duration such as 90s."
  }
}

variable "sweep_min_interval" {
  type        = string
  description = "A sweep message started less than this after the start of the last completed sweep (or of one still running) is acknowledged and counted, never acted on, unless it is a redelivery of one that never completed (AUTOHEAL_SWEEP_MIN_INTERVAL), a Go duration; 0s = off. Bounds what a flood of sweep messages from anyone who may publish to the topic costs in TPU API quota."
  default     = "30s"

  validation {
    condition     = can(regex("^${local.go_duration}$", var.sweep_min_interval))
    error_message = "sweep_min_interval must be a Go duration such as 30s (0s turns the gate off)."
  }
}

variable "trust_unsealed_specs" {
  type        = bool
  description = "Accept a saved spec with no seal (one saved by a version before seals) at its next check, and seal it then (AUTOHEAL_TRUST_UNSEALED_SPECS). Off: such a recovery is abandoned with an ERROR record, as a tampered one. Set it only for the upgrade's apply when unfinished recoveries predate it, then unset it (docs/security.md)."
  default     = false
}

variable "look_again" {
  type        = string
  description = "How long after starting a TPU operation a recovery looks at it again (AUTOHEAL_LOOK_AGAIN), a Go duration. Each look is one operation poll and one ledger write, only while a recovery is in progress."
  default     = "5s"

  validation {
    condition     = can(regex("^${local.go_duration}$", var.look_again))
    error_message = "look_again must be a Go duration such as 5s."
  }
}

variable "sweep_follow" {
  type        = string
  description = "How long a sweep stays to take the next steps of unfinished recoveries as they fall due (AUTOHEAL_SWEEP_FOLLOW), a Go duration; a sweep with nothing unfinished returns at once. Keep it under the sweep interval and function_timeout_seconds."
  default     = "50s"

  validation {
    condition     = can(regex("^${local.go_duration}$", var.sweep_follow))
    error_message = "sweep_follow must be a Go duration such as 50s."
  }
}
