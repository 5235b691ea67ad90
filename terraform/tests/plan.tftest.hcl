# The module's plan, with mock providers: which resources exist at each sink
# scope, every IAM binding (who gets which role on what, with its
# condition), the roles' permissions (go-contract.json, derived from the
# code by iam_test.go), the function's environment (function.Config's
# variables, from Go), the sink filter (events.SinkFilter), the events
# topic's publishers, the MAC key, the warnings and the off switch.

mock_provider "google" {
  mock_data "google_project" {
    defaults = { number = "123456789" }
  }
  # The provider parses policy_data: a mock's random string would not be
  # JSON. The bindings themselves are the data source's blocks, asserted
  # below.
  mock_data "google_iam_policy" {
    defaults = { policy_data = "{\"bindings\":[]}" }
  }
}

mock_provider "archive" {}

mock_provider "time" {}

override_resource {
  target = google_service_account.function
  values = { email = "tpu-autoheal-func@host-project.iam.gserviceaccount.com", name = "projects/host-project/serviceAccounts/tpu-autoheal-func@host-project.iam.gserviceaccount.com" }
}

override_resource {
  target = google_service_account.push
  values = { email = "tpu-autoheal-push@host-project.iam.gserviceaccount.com", name = "projects/host-project/serviceAccounts/tpu-autoheal-push@host-project.iam.gserviceaccount.com" }
}

override_resource {
  target = google_service_account.build
  values = { email = "tpu-autoheal-build@host-project.iam.gserviceaccount.com", id = "projects/host-project/serviceAccounts/tpu-autoheal-build@host-project.iam.gserviceaccount.com" }
}

override_resource {
  target = google_logging_project_sink.tpu
  values = { writer_identity = "serviceAccount:project-sink@logging.iam.gserviceaccount.com" }
}

override_resource {
  target = google_logging_folder_sink.tpu
  values = { writer_identity = "serviceAccount:folder-sink@logging.iam.gserviceaccount.com" }
}

override_resource {
  target = google_logging_organization_sink.tpu
  values = { writer_identity = "serviceAccount:org-sink@logging.iam.gserviceaccount.com" }
}

override_resource {
  target = google_kms_crypto_key.ledger_mac
  values = { id = "projects/host-project/locations/us-central1/keyRings/tpu-autoheal/cryptoKeys/tpu-autoheal-ledger-mac" }
}

override_resource {
  target = google_kms_crypto_key_version.ledger_mac
  values = { name = "projects/host-project/locations/us-central1/keyRings/tpu-autoheal/cryptoKeys/tpu-autoheal-ledger-mac/cryptoKeyVersions/1" }
}

override_resource {
  target = google_artifact_registry_repository.images
  values = { id = "projects/host-project/locations/us-central1/repositories/tpu-autoheal" }
}

override_data {
  target = data.google_storage_bucket_object.startup_script
  values = { generation = 1732000000000001 }
}

variables {
  project_id           = "host-project"
  region               = "us-central1"
  projects             = ["train-a"]
  tpu_service_accounts = ["trainer@train-a.iam.gserviceaccount.com"]
}

# A host project watching one training project: every IAM binding, as a set
# of "what, role, member, condition" (any binding added, removed or changed
# fails), and what each custom role holds.
run "one_training_project" {
  command = apply

  assert {
    condition     = keys(google_logging_project_sink.tpu) == ["train-a"] && length(google_logging_folder_sink.tpu) == 0 && length(google_logging_organization_sink.tpu) == 0
    error_message = "project scope: one project sink, in the watched project, and no aggregated sink"
  }
  assert {
    condition = toset(concat(
      [for k, m in google_project_iam_member.tpu : "project ${m.project} ${m.role == google_project_iam_custom_role.tpu[k].id && google_project_iam_custom_role.tpu[k].project == m.project ? "TPU-ROLE" : m.role} ${m.member}"],
      [for m in concat([google_project_iam_member.records, google_project_iam_member.build_source, google_project_iam_member.build_logs], values(google_project_iam_member.ledger)) :
      "project ${m.project} ${lookup({ (google_project_iam_custom_role.ledger.id) = "LEDGER-ROLE", (google_project_iam_custom_role.records.id) = "RECORDS-ROLE", (google_project_iam_custom_role.build_source.id) = "BUILD-SOURCE-ROLE" }, m.role, m.role)} ${m.member}${length(m.condition) > 0 ? " if ${m.condition[0].expression}" : ""}"],
      ["repo ${google_artifact_registry_repository_iam_member.build_image.project}/${google_artifact_registry_repository_iam_member.build_image.location}/${google_artifact_registry_repository_iam_member.build_image.repository} ${google_artifact_registry_repository_iam_member.build_image.role == google_project_iam_custom_role.build_image.id ? "BUILD-IMAGE-ROLE" : google_artifact_registry_repository_iam_member.build_image.role} ${google_artifact_registry_repository_iam_member.build_image.member}"],
      [for m in google_storage_bucket_iam_member.startup_script : "bucket ${m.bucket} ${m.role} ${m.member} if ${m.condition[0].expression}"],
      [for m in google_service_account_iam_member.tpu_service_account_user : "sa ${m.service_account_id} ${m.role} ${m.member}"],
      ["sa ${google_service_account_iam_member.pubsub_token_creator.service_account_id} ${google_service_account_iam_member.pubsub_token_creator.role} ${google_service_account_iam_member.pubsub_token_creator.member}"],
      ["run ${google_cloud_run_service_iam_member.push_invoker.project}/${google_cloud_run_service_iam_member.push_invoker.location}/${google_cloud_run_service_iam_member.push_invoker.service} ${google_cloud_run_service_iam_member.push_invoker.role} ${google_cloud_run_service_iam_member.push_invoker.member}"],
      ["topic ${google_pubsub_topic_iam_member.dead_letter_publisher.project}/${google_pubsub_topic_iam_member.dead_letter_publisher.topic} ${google_pubsub_topic_iam_member.dead_letter_publisher.role} ${google_pubsub_topic_iam_member.dead_letter_publisher.member}"],
      flatten([for b in data.google_iam_policy.events_topic.binding : [for mem in b.members : "topic policy ${google_pubsub_topic_iam_policy.events.project}/${google_pubsub_topic_iam_policy.events.topic} ${b.role} ${mem}"]]),
      ["subscription ${google_pubsub_subscription_iam_member.push_subscriber.project}/${google_pubsub_subscription_iam_member.push_subscriber.subscription} ${google_pubsub_subscription_iam_member.push_subscriber.role} ${google_pubsub_subscription_iam_member.push_subscriber.member}"],
      ["key ${google_kms_crypto_key_iam_member.function_mac.crypto_key_id} ${google_kms_crypto_key_iam_member.function_mac.role == google_project_iam_custom_role.mac.id ? "MAC-ROLE" : google_kms_crypto_key_iam_member.function_mac.role} ${google_kms_crypto_key_iam_member.function_mac.member}"],
      )) == toset([
      "project train-a TPU-ROLE serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
      "project host-project LEDGER-ROLE serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com if resource.name == \"projects/host-project/databases/tpu-autoheal\"",
      "project host-project RECORDS-ROLE serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
      "project host-project BUILD-SOURCE-ROLE serviceAccount:tpu-autoheal-build@host-project.iam.gserviceaccount.com if resource.name.startsWith(\"projects/_/buckets/host-project-tpu-autoheal-source/objects/\") || resource.name.startsWith(\"projects/_/buckets/gcf-v2-sources-123456789-us-central1/objects/\")",
      "project host-project RECORDS-ROLE serviceAccount:tpu-autoheal-build@host-project.iam.gserviceaccount.com",
      "repo host-project/us-central1/tpu-autoheal BUILD-IMAGE-ROLE serviceAccount:tpu-autoheal-build@host-project.iam.gserviceaccount.com",
      "sa projects/-/serviceAccounts/trainer@train-a.iam.gserviceaccount.com roles/iam.serviceAccountUser serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
      "sa projects/host-project/serviceAccounts/tpu-autoheal-push@host-project.iam.gserviceaccount.com roles/iam.serviceAccountTokenCreator serviceAccount:service-123456789@gcp-sa-pubsub.iam.gserviceaccount.com",
      "run host-project/us-central1/tpu-autoheal roles/run.invoker serviceAccount:tpu-autoheal-push@host-project.iam.gserviceaccount.com",
      "topic host-project/tpu-autoheal-dead-letter roles/pubsub.publisher serviceAccount:service-123456789@gcp-sa-pubsub.iam.gserviceaccount.com",
      "topic policy host-project/tpu-autoheal roles/pubsub.publisher serviceAccount:project-sink@logging.iam.gserviceaccount.com",
      "topic policy host-project/tpu-autoheal roles/pubsub.publisher serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
      "subscription host-project/tpu-autoheal-push roles/pubsub.subscriber serviceAccount:service-123456789@gcp-sa-pubsub.iam.gserviceaccount.com",
      "key projects/host-project/locations/us-central1/keyRings/tpu-autoheal/cryptoKeys/tpu-autoheal-ledger-mac MAC-ROLE serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
    ])
    error_message = "the IAM bindings differ from the expected set (who gets which role on what, under which condition)"
  }
  # The events topic: its whole IAM policy is that one binding, so nobody
  # else may publish on the topic itself.
  assert {
    condition     = google_pubsub_topic_iam_policy.events.policy_data == data.google_iam_policy.events_topic.policy_data && length(data.google_iam_policy.events_topic.binding) == 1 && length(data.google_iam_policy.events_topic.audit_config) == 0
    error_message = "the events topic's policy must be exactly the publisher binding of the sinks' writers and the function"
  }
  assert {
    condition     = sort(flatten([for b in data.google_iam_policy.events_topic.binding : tolist(b.members)])) == sort(concat(values(output.sink_writer_identities), [output.trusted_principals.function])) && sort(output.trusted_principals.topic_publishers) == sort(flatten([for b in data.google_iam_policy.events_topic.binding : tolist(b.members)]))
    error_message = "only the sinks' writer identities and the function may publish to the events topic, and trusted_principals must say so"
  }
  assert {
    condition     = length(google_storage_bucket_iam_member.startup_script) == 0 && length(data.google_storage_bucket_object.startup_script) == 0 && google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_STARTUP_SCRIPT_GENERATION"] == "0"
    error_message = "no startup script: no storage grant, no object read, no generation"
  }
  assert {
    condition     = sort(google_project_iam_custom_role.tpu["train-a"].permissions) == sort([for p in jsondecode(file("${path.module}/go-contract.json")).tpu_permissions : p if !startswith(p, "compute.")]) && !anytrue([for p in google_project_iam_custom_role.tpu["train-a"].permissions : !startswith(p, "tpu.")])
    error_message = "the TPU role does not hold exactly the TPU permissions derived from the code (go-contract.json tpu_permissions)"
  }
  assert {
    condition     = sort(google_project_iam_custom_role.ledger.permissions) == sort(jsondecode(file("${path.module}/go-contract.json")).ledger_permissions) && contains(google_project_iam_custom_role.ledger.permissions, "datastore.databases.get") && alltrue([for p in google_project_iam_custom_role.ledger.permissions : startswith(p, "datastore.")])
    error_message = "the ledger role must hold exactly the derived Firestore permissions (datastore.databases.get for transactions included) and nothing else"
  }
  assert {
    condition     = google_project_iam_custom_role.records.permissions == toset(["logging.logEntries.create"]) && sort(google_project_iam_custom_role.records.permissions) == sort(jsondecode(file("${path.module}/go-contract.json")).records_permissions)
    error_message = "the records role must hold logging.logEntries.create alone"
  }
  assert {
    condition     = google_project_iam_custom_role.mac.permissions == toset(["cloudkms.cryptoKeyVersions.useToSign", "cloudkms.cryptoKeyVersions.useToVerify"]) && sort(google_project_iam_custom_role.mac.permissions) == sort(jsondecode(file("${path.module}/go-contract.json")).mac_permissions)
    error_message = "the MAC role must hold exactly useToSign and useToVerify"
  }
  assert {
    condition     = google_project_iam_custom_role.build_image.permissions == toset(["artifactregistry.repositories.deleteArtifacts", "artifactregistry.repositories.downloadArtifacts", "artifactregistry.repositories.uploadArtifacts"]) && google_project_iam_custom_role.build_source.permissions == toset(["storage.objects.get"])
    error_message = "the build roles must hold roles/run.builder's registry permissions (on the repository) and storage.objects.get (on the source buckets)"
  }
  # The MAC key: purpose MAC, HMAC-SHA256, its one version passed to the
  # function, the key ring named after the instance.
  assert {
    condition     = google_kms_crypto_key.ledger_mac.purpose == "MAC" && google_kms_crypto_key.ledger_mac.version_template[0].algorithm == "HMAC_SHA256" && google_kms_crypto_key.ledger_mac.version_template[0].protection_level == "SOFTWARE" && google_kms_crypto_key.ledger_mac.key_ring == google_kms_key_ring.ledger.id && google_kms_key_ring.ledger.name == "tpu-autoheal" && google_kms_crypto_key_version.ledger_mac.crypto_key == google_kms_crypto_key.ledger_mac.id
    error_message = "the ledger's key must be an HMAC_SHA256 MAC key in the instance's key ring, with the module's version"
  }
  assert {
    condition     = google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_MAC_KEY"] == "projects/host-project/locations/us-central1/keyRings/tpu-autoheal/cryptoKeys/tpu-autoheal-ledger-mac/cryptoKeyVersions/1" && output.mac_key_version == google_kms_crypto_key_version.ledger_mac.name
    error_message = "AUTOHEAL_MAC_KEY must be the module's key version"
  }
  assert {
    condition     = google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_NODE_SERVICE_ACCOUNTS"] == "trainer@train-a.iam.gserviceaccount.com"
    error_message = "AUTOHEAL_NODE_SERVICE_ACCOUNTS must list tpu_service_accounts, the accounts the function may act as"
  }
  assert {
    condition     = google_cloudfunctions2_function.autoheal.build_config[0].docker_repository == google_artifact_registry_repository.images.id && google_cloudfunctions2_function.autoheal.build_config[0].service_account == google_service_account.build.id && google_artifact_registry_repository.images.repository_id == "tpu-autoheal" && google_artifact_registry_repository.images.format == "DOCKER"
    error_message = "the build must run as the build account and push to the instance's own repository"
  }
  assert {
    condition     = google_workload_identity_service_agent.pubsub.parent == "projects/123456789/locations/global/serviceProducers/pubsub.googleapis.com" && time_sleep.pubsub_agent.triggers["agent"] == google_workload_identity_service_agent.pubsub.id
    error_message = "the Pub/Sub service agent must be created (generateServiceAgents) before the wait its bindings read it from"
  }
  assert {
    condition     = sort(keys(time_sleep.build_grants.triggers)) == tolist(["image", "logs", "source"]) && time_sleep.build_grants.create_duration == "120s" && time_sleep.push_grants.create_duration == "120s"
    error_message = "the build must wait for its three grants, and both waits default to 120s"
  }
  assert {
    condition     = toset(values(time_sleep.push_grants.triggers)) == toset(concat([google_cloud_run_service_iam_member.push_invoker.id, google_service_account_iam_member.pubsub_token_creator.id, google_project_iam_member.ledger["function"].id, google_project_iam_member.records.id, google_kms_crypto_key_iam_member.function_mac.id], [for m in google_project_iam_member.tpu : m.id], [for m in google_service_account_iam_member.tpu_service_account_user : m.id]))
    error_message = "the push subscription's wait must follow every grant a delivery needs"
  }
  assert {
    condition     = google_logging_project_sink.tpu["train-a"].filter == jsondecode(file("${path.module}/go-contract.json")).sink_filter && google_logging_project_sink.tpu["train-a"].unique_writer_identity
    error_message = "the sink filter differs from events.SinkFilter, or the sink shares a writer identity"
  }
  assert {
    condition     = sort(keys(google_cloudfunctions2_function.autoheal.service_config[0].environment_variables)) == sort(keys(jsondecode(file("${path.module}/go-contract.json")).config_env))
    error_message = "the function's environment variables differ from function.Config's"
  }
  # Every variable left at its default passes function.Config's default,
  # except the ones the module sets: the project(s), dry run (true on a
  # first deploy), the kick topic (its own events topic), the accounts
  # nodes run as and the MAC key.
  assert {
    condition = alltrue([
      for k, v in jsondecode(file("${path.module}/go-contract.json")).config_env :
      google_cloudfunctions2_function.autoheal.service_config[0].environment_variables[k] == v
      if !contains(["AUTOHEAL_PROJECT", "AUTOHEAL_PROJECTS", "AUTOHEAL_DRY_RUN", "AUTOHEAL_KICK_TOPIC", "AUTOHEAL_NODE_SERVICE_ACCOUNTS", "AUTOHEAL_MAC_KEY", "AUTOHEAL_ACTOR"], k)
    ])
    error_message = "a default of the module differs from function.Config's default (the default name must give the Go defaults of the database, log and app label)"
  }
  assert {
    condition     = google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_KICK_TOPIC"] == google_pubsub_topic.events.id
    error_message = "follow kicks must go to the module's own events topic (AUTOHEAL_KICK_TOPIC)"
  }
  assert {
    condition = (
      google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_PROJECT"] == "host-project" &&
      google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_PROJECTS"] == "train-a" &&
      google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_DRY_RUN"] == "true"
    )
    error_message = "AUTOHEAL_PROJECT must be project_id, AUTOHEAL_PROJECTS the watched projects, and a first deploy must dry-run"
  }
  assert {
    condition     = google_cloud_scheduler_job.sweep.schedule == "* * * * *" && base64decode(google_cloud_scheduler_job.sweep.pubsub_target[0].data) == jsondecode(file("${path.module}/go-contract.json")).sweep_message
    error_message = "the sweep runs every minute by default and publishes events.SweepMessage"
  }
  assert {
    condition     = google_cloudfunctions2_function.autoheal.service_config[0].ingress_settings == "ALLOW_INTERNAL_ONLY" && google_cloudfunctions2_function.autoheal.build_config[0].entry_point == jsondecode(file("${path.module}/go-contract.json")).entry_point
    error_message = "the function must be internal-only with function.EntryPoint"
  }
  assert {
    condition = alltrue([for m in concat(
      [google_cloud_run_service_iam_member.push_invoker.member, google_project_iam_member.ledger["function"].member, google_project_iam_member.records.member, google_project_iam_member.build_source.member, google_project_iam_member.build_logs.member, google_artifact_registry_repository_iam_member.build_image.member, google_service_account_iam_member.pubsub_token_creator.member, google_pubsub_topic_iam_member.dead_letter_publisher.member, google_pubsub_subscription_iam_member.push_subscriber.member, google_kms_crypto_key_iam_member.function_mac.member],
      [for x in google_project_iam_member.tpu : x.member],
      flatten([for b in data.google_iam_policy.events_topic.binding : tolist(b.members)]),
    ) : !contains(["allUsers", "allAuthenticatedUsers"], m)])
    error_message = "a public principal is granted something"
  }
}

# One project holding the function and the nodes (the basic example): it
# works, and the plan warns that the host should hold nothing else.
run "host_is_also_watched" {
  command = plan

  variables {
    projects = []
  }

  expect_failures = [check.host_holds_nothing_else]

  assert {
    condition     = keys(google_logging_project_sink.tpu) == ["host-project"] && keys(google_project_iam_custom_role.tpu) == ["host-project"] && google_project_iam_custom_role.ledger.project == "host-project"
    error_message = "project scope with no projects: the sink and the TPU role in project_id"
  }
  assert {
    condition     = google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_PROJECTS"] == "host-project"
    error_message = "AUTOHEAL_PROJECTS with no projects must be project_id"
  }
}

# A host project watching two training projects, with a gs:// startup
# script, two node accounts and an operators group.
run "two_training_projects" {
  command = apply

  variables {
    projects             = ["train-a", "train-b"]
    tpu_service_accounts = ["trainer@train-a.iam.gserviceaccount.com", "trainer@train-b.iam.gserviceaccount.com"]
    startup_script       = "gs://scripts-bkt/autoheal/resume.sh"
    operators            = ["group:tpu-oncall@example.com"]
  }

  assert {
    condition     = keys(google_logging_project_sink.tpu) == ["train-a", "train-b"] && length(google_logging_folder_sink.tpu) == 0 && length(google_logging_organization_sink.tpu) == 0
    error_message = "project scope: one sink per watched project, none in the (unwatched) host"
  }
  assert {
    condition     = keys(google_project_iam_custom_role.tpu) == ["train-a", "train-b"] && alltrue([for p, r in google_project_iam_custom_role.tpu : r.project == p])
    error_message = "the TPU role must exist in each watched project and not in the unwatched host project"
  }
  assert {
    condition = toset(concat(
      [for k, m in google_project_iam_member.tpu : "project ${m.project} ${m.role == google_project_iam_custom_role.tpu[k].id && google_project_iam_custom_role.tpu[k].project == m.project ? "TPU-ROLE" : m.role} ${m.member}"],
      [for m in concat([google_project_iam_member.records, google_project_iam_member.build_source, google_project_iam_member.build_logs], values(google_project_iam_member.ledger)) :
      "project ${m.project} ${lookup({ (google_project_iam_custom_role.ledger.id) = "LEDGER-ROLE", (google_project_iam_custom_role.records.id) = "RECORDS-ROLE", (google_project_iam_custom_role.build_source.id) = "BUILD-SOURCE-ROLE" }, m.role, m.role)} ${m.member}${length(m.condition) > 0 ? " if ${m.condition[0].expression}" : ""}"],
      [for m in google_storage_bucket_iam_member.startup_script : "bucket ${m.bucket} ${m.role} ${m.member} if ${m.condition[0].expression}"],
      [for m in google_service_account_iam_member.tpu_service_account_user : "sa ${m.service_account_id} ${m.role} ${m.member}"],
      flatten([for b in data.google_iam_policy.events_topic.binding : [for mem in b.members : "topic policy ${google_pubsub_topic_iam_policy.events.topic} ${b.role} ${mem}"]]),
      )) == toset([
      "project train-a TPU-ROLE serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
      "project train-b TPU-ROLE serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
      "project host-project LEDGER-ROLE serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com if resource.name == \"projects/host-project/databases/tpu-autoheal\"",
      "project host-project LEDGER-ROLE group:tpu-oncall@example.com if resource.name == \"projects/host-project/databases/tpu-autoheal\"",
      "project host-project RECORDS-ROLE serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
      "project host-project BUILD-SOURCE-ROLE serviceAccount:tpu-autoheal-build@host-project.iam.gserviceaccount.com if resource.name.startsWith(\"projects/_/buckets/host-project-tpu-autoheal-source/objects/\") || resource.name.startsWith(\"projects/_/buckets/gcf-v2-sources-123456789-us-central1/objects/\")",
      "project host-project RECORDS-ROLE serviceAccount:tpu-autoheal-build@host-project.iam.gserviceaccount.com",
      "bucket scripts-bkt roles/storage.objectViewer serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com if resource.name == \"projects/_/buckets/scripts-bkt/objects/autoheal/resume.sh\"",
      "sa projects/-/serviceAccounts/trainer@train-a.iam.gserviceaccount.com roles/iam.serviceAccountUser serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
      "sa projects/-/serviceAccounts/trainer@train-b.iam.gserviceaccount.com roles/iam.serviceAccountUser serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
      "topic policy tpu-autoheal roles/pubsub.publisher serviceAccount:project-sink@logging.iam.gserviceaccount.com",
      "topic policy tpu-autoheal roles/pubsub.publisher serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com",
    ])
    error_message = "the IAM bindings differ from the expected set (who gets which role on what, under which condition)"
  }
  # The operators may write the ledger, never use the MAC key.
  assert {
    condition     = google_kms_crypto_key_iam_member.function_mac.member == "serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com" && sort(output.trusted_principals.ledger_writers) == sort(["serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com", "group:tpu-oncall@example.com"])
    error_message = "the operators must be ledger writers and nothing else"
  }
  assert {
    condition     = alltrue([for r in google_project_iam_custom_role.tpu : sort(r.permissions) == sort([for p in jsondecode(file("${path.module}/go-contract.json")).tpu_permissions : p if !startswith(p, "compute.")])])
    error_message = "a watched project's TPU role does not hold exactly the derived TPU permissions"
  }
  # The script is read at the generation Terraform saw, and the push waits
  # for its read grant too.
  assert {
    condition     = google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_STARTUP_SCRIPT"] == "gs://scripts-bkt/autoheal/resume.sh" && google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_STARTUP_SCRIPT_GENERATION"] == "1732000000000001" && data.google_storage_bucket_object.startup_script[0].bucket == "scripts-bkt" && data.google_storage_bucket_object.startup_script[0].name == "autoheal/resume.sh"
    error_message = "AUTOHEAL_STARTUP_SCRIPT must name the script and AUTOHEAL_STARTUP_SCRIPT_GENERATION the generation read at plan time"
  }
  assert {
    condition     = time_sleep.push_grants.triggers["startup-script"] == google_storage_bucket_iam_member.startup_script[0].id && time_sleep.push_grants.triggers["act-as/trainer@train-b.iam.gserviceaccount.com"] == google_service_account_iam_member.tpu_service_account_user["trainer@train-b.iam.gserviceaccount.com"].id
    error_message = "the push subscription must wait for the script's read grant and every actAs grant"
  }
  assert {
    condition     = google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_PROJECTS"] == "train-a,train-b" && google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_NODE_SERVICE_ACCOUNTS"] == "trainer@train-a.iam.gserviceaccount.com,trainer@train-b.iam.gserviceaccount.com"
    error_message = "AUTOHEAL_PROJECTS must list the watched projects and AUTOHEAL_NODE_SERVICE_ACCOUNTS both node accounts"
  }
  assert {
    condition     = alltrue([for s in google_logging_project_sink.tpu : s.filter == jsondecode(file("${path.module}/go-contract.json")).sink_filter && s.unique_writer_identity])
    error_message = "every project sink must use events.SinkFilter and its own writer identity"
  }
}

# Nodes that run as the Compute Engine default account: the plan warns.
run "default_compute_account_warns" {
  command = plan

  variables {
    tpu_service_accounts = ["123456789-compute@developer.gserviceaccount.com"]
  }

  expect_failures = [check.no_default_compute_account]
}

run "startup_script_grant_off" {
  command = plan

  variables {
    startup_script            = "gs://scripts-bkt/resume.sh"
    grant_startup_script_read = false
  }

  assert {
    condition     = length(google_storage_bucket_iam_member.startup_script) == 0
    error_message = "grant_startup_script_read = false must grant nothing on the script's bucket"
  }
}

run "folder_scope" {
  command = apply

  variables {
    sink_scope = "folder"
    folder_id  = "4242"
    projects   = ["train-a"]
  }

  assert {
    condition     = length(google_logging_project_sink.tpu) == 0 && length(google_logging_folder_sink.tpu) == 1 && length(google_logging_organization_sink.tpu) == 0
    error_message = "folder scope: want exactly one folder sink"
  }
  assert {
    condition     = google_logging_folder_sink.tpu[0].folder == "folders/4242" && google_logging_folder_sink.tpu[0].include_children && google_logging_folder_sink.tpu[0].filter == jsondecode(file("${path.module}/go-contract.json")).sink_filter
    error_message = "the folder sink must cover folders/4242 with children and events.SinkFilter"
  }
  assert {
    condition     = sort(flatten([for b in data.google_iam_policy.events_topic.binding : tolist(b.members)])) == sort(["serviceAccount:folder-sink@logging.iam.gserviceaccount.com", "serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com"])
    error_message = "only the folder sink's writer and the function may publish"
  }
  assert {
    condition     = keys(google_project_iam_custom_role.tpu) == ["train-a"] && keys(google_project_iam_member.tpu) == ["train-a"]
    error_message = "the TPU role goes to the watched projects only"
  }
}

run "organization_scope" {
  command = apply

  variables {
    sink_scope = "organization"
    org_id     = "987654321"
    projects   = ["train-a", "host-project"]
  }

  expect_failures = [check.host_holds_nothing_else]

  assert {
    condition     = length(google_logging_project_sink.tpu) == 0 && length(google_logging_folder_sink.tpu) == 0 && length(google_logging_organization_sink.tpu) == 1
    error_message = "organization scope: want exactly one organization sink"
  }
  assert {
    condition     = google_logging_organization_sink.tpu[0].org_id == "987654321" && google_logging_organization_sink.tpu[0].include_children
    error_message = "the organization sink must cover the organization with children"
  }
  assert {
    condition     = sort(flatten([for b in data.google_iam_policy.events_topic.binding : tolist(b.members)])) == sort(["serviceAccount:org-sink@logging.iam.gserviceaccount.com", "serviceAccount:tpu-autoheal-func@host-project.iam.gserviceaccount.com"])
    error_message = "only the organization sink's writer and the function may publish"
  }
  assert {
    condition     = keys(google_project_iam_custom_role.tpu) == ["host-project", "train-a"]
    error_message = "a watched host project gets the TPU role too"
  }
}

run "folder_scope_needs_folder_id" {
  command = plan

  variables {
    sink_scope = "folder"
  }

  expect_failures = [google_logging_folder_sink.tpu]
}

run "organization_scope_needs_org_id" {
  command = plan

  variables {
    sink_scope = "organization"
  }

  expect_failures = [google_logging_organization_sink.tpu]
}

# The off switch: enabled = false dry-runs whatever dry_run says, and
# removes nothing.
run "enabled_false_dry_runs" {
  command = plan

  variables {
    enabled = false
    dry_run = false
  }

  assert {
    condition     = google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_DRY_RUN"] == "true" && output.dry_run
    error_message = "enabled = false must set AUTOHEAL_DRY_RUN=true"
  }
  assert {
    condition     = google_firestore_database.ledger.name == "tpu-autoheal" && length(google_project_iam_member.tpu) == 1 && google_cloud_scheduler_job.sweep.name == "tpu-autoheal-sweep"
    error_message = "enabled = false must keep every resource (ledger, grants, sweep)"
  }
}

run "enabled_and_not_dry_run_acts" {
  command = plan

  variables {
    dry_run = false
  }

  assert {
    condition     = google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_DRY_RUN"] == "false"
    error_message = "dry_run = false with enabled must set AUTOHEAL_DRY_RUN=false"
  }
}

# A schedule the sweeps-stopped alert cannot read needs its own period.
run "odd_schedule_needs_sweep_alert_after" {
  command = plan

  variables {
    sweep_schedule = "0 * * * *"
  }

  expect_failures = [google_monitoring_alert_policy.sweeps_stopped]
}

# The longest name and the longest project id still give ids within
# Google's limits: service accounts 6-30, buckets 3-63, custom role ids 64,
# Firestore databases 4-63, Artifact Registry repositories and key rings 63.
run "limits_plan" {
  command = plan

  variables {
    project_id               = "a-thirty-character-project-id0"
    name                     = "tpu-autoheal-builder-xyz"
    function_timeout_seconds = 600
    lease                    = "10m1s"
    sweep_budget             = "9m59s"
    dead_letter_retention    = "2678400s"
  }

  assert {
    condition     = google_pubsub_subscription.dead_letter.message_retention_duration == "2678400s" && google_pubsub_subscription.push.ack_deadline_seconds == 600
    error_message = "values at the limits must plan and reach the subscriptions"
  }
  assert {
    condition     = alltrue([for sa in [google_service_account.function, google_service_account.push, google_service_account.build] : length(sa.account_id) >= 6 && length(sa.account_id) <= 30]) && length(google_service_account.build.account_id) == 30
    error_message = "a service account id of the longest name is outside 6-30 characters"
  }
  assert {
    condition     = length(google_storage_bucket.source.name) <= 63 && length(google_firestore_database.ledger.name) <= 63 && length(google_artifact_registry_repository.images.repository_id) <= 63 && length(google_kms_key_ring.ledger.name) <= 63 && length(google_kms_crypto_key.ledger_mac.name) <= 63
    error_message = "a bucket, database, repository, key ring or key name of the longest name is over 63 characters"
  }
  assert {
    condition     = alltrue([for r in concat(values(google_project_iam_custom_role.tpu), [google_project_iam_custom_role.ledger, google_project_iam_custom_role.records, google_project_iam_custom_role.mac, google_project_iam_custom_role.build_image, google_project_iam_custom_role.build_source]) : length(r.role_id) <= 64 && can(regex("^[a-zA-Z0-9_.]+$", r.role_id))])
    error_message = "a custom role id of the longest name is over 64 characters or has a character role ids refuse"
  }
}

# An instance named autoheal-b: its records, metrics, alerts and dashboard
# are its own (log autoheal-b, labels.app autoheal-b), and nothing it names
# is the default instance's.
run "compute_instances_role" {
  command = plan

  variables {
    compute_instances = true
  }

  assert {
    condition     = sort(google_project_iam_custom_role.tpu["train-a"].permissions) == sort([for p in jsondecode(file("${path.module}/go-contract.json")).tpu_permissions : p if p != "compute.instances.reportHostAsFaulty"]) && anytrue([for p in google_project_iam_custom_role.tpu["train-a"].permissions : startswith(p, "compute.instances.")])
    error_message = "with compute_instances the TPU role holds every permission derived from the code, the Compute Engine instance calls' included, but reportHostAsFaulty (report_faulty_hosts unset)"
  }
  assert {
    condition     = google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_COMPUTE_INSTANCES"] == "true"
    error_message = "compute_instances must turn the function's instance path on"
  }
}

run "report_faulty_hosts_role" {
  command = plan

  variables {
    compute_instances   = true
    report_faulty_hosts = "3/7d"
  }

  assert {
    condition     = sort(google_project_iam_custom_role.tpu["train-a"].permissions) == sort(jsondecode(file("${path.module}/go-contract.json")).tpu_permissions) && contains(google_project_iam_custom_role.tpu["train-a"].permissions, "compute.instances.reportHostAsFaulty")
    error_message = "with report_faulty_hosts the TPU role holds compute.instances.reportHostAsFaulty too"
  }
  assert {
    condition     = google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_REPORT_FAULTY_HOSTS"] == "3/7d"
    error_message = "report_faulty_hosts must reach the function as AUTOHEAL_REPORT_FAULTY_HOSTS"
  }
}

run "named_instance" {
  command = plan

  variables {
    name = "autoheal-b"
  }

  assert {
    condition     = google_firestore_database.ledger.name == "autoheal-b" && google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_FIRESTORE_DATABASE"] == "autoheal-b"
    error_message = "the ledger database must default to the instance's name"
  }
  assert {
    condition     = google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_RECORD_LOG"] == "autoheal-b" && google_cloudfunctions2_function.autoheal.service_config[0].environment_variables["AUTOHEAL_APP_LABEL"] == "autoheal-b" && output.record_log == "projects/host-project/logs/autoheal-b"
    error_message = "the records' log and app label must be the instance's name"
  }
  assert {
    condition = alltrue([for f in concat(
      [for m in [google_logging_metric.recoveries_started, google_logging_metric.recoveries_finished, google_logging_metric.recoveries_failed, google_logging_metric.outcomes, google_logging_metric.time_to_recover, google_logging_metric.breaker_trips, google_logging_metric.rejects, google_logging_metric.instance_actions] : m.filter],
      [for p in [google_monitoring_alert_policy.recovery_failed, google_monitoring_alert_policy.breaker_open] : p.conditions[0].condition_matched_log[0].filter],
    ) : strcontains(f, "logName=\"projects/host-project/logs/autoheal-b\"") && strcontains(f, "labels.app=\"autoheal-b\"") && !strcontains(f, "tpu-autoheal")])
    error_message = "every records metric and alert must read the instance's own log and app label, and no other instance's"
  }
  assert {
    condition     = strcontains(google_logging_metric.sweeps.filter, "labels.app=\"autoheal-b\"") && !strcontains(google_logging_metric.sweeps.filter, "tpu-autoheal") && strcontains(google_monitoring_alert_policy.sweeps_stopped.conditions[0].condition_prometheus_query_language[0].query, "logging.googleapis.com/user/autoheal-b/sweeps") && strcontains(google_monitoring_alert_policy.startup_error.conditions[0].condition_matched_log[0].filter, "resource.labels.service_name=\"autoheal-b\"")
    error_message = "the sweeps metric and alert and the start-up alert must read the instance's own lines"
  }
  assert {
    condition     = alltrue([for p in [google_monitoring_alert_policy.recovery_failed, google_monitoring_alert_policy.breaker_open, google_monitoring_alert_policy.startup_error, google_monitoring_alert_policy.dead_letter_backlog, google_monitoring_alert_policy.sweeps_stopped] : startswith(p.display_name, "autoheal-b: ")]) && jsondecode(google_monitoring_dashboard.autoheal.dashboard_json).displayName == "autoheal-b"
    error_message = "the alerts and the dashboard must say which instance they are"
  }
  assert {
    condition     = google_project_iam_member.ledger["function"].condition[0].expression == "resource.name == \"projects/host-project/databases/autoheal-b\""
    error_message = "the ledger role must be confined to the instance's own database"
  }
}

# The dashboard and the alerts read the records the code writes.
run "dashboard_and_alerts" {
  command = plan

  assert {
    condition = toset([for t in jsondecode(google_monitoring_dashboard.autoheal.dashboard_json).mosaicLayout.tiles : t.widget.title]) == toset([
      "Recoveries by outcome", "Time to recover (p95, seconds)", "Maintenance notices prepared", "Breaker trips by zone",
      "Create attempts by zone and accelerator type", "Stockouts by zone and accelerator type",
      "Instance actions by action", "Instance actions by zone and machine type",
    ])
    error_message = "the dashboard must chart recoveries by outcome, time to recover, notices prepared, breaker trips, create attempts, stockouts and instance actions"
  }
  assert {
    condition = alltrue([for t in jsondecode(google_monitoring_dashboard.autoheal.dashboard_json).mosaicLayout.tiles :
      anytrue([for m in [google_logging_metric.outcomes.name, google_logging_metric.time_to_recover.name, google_logging_metric.breaker_trips.name, google_logging_metric.create_attempts.name, google_logging_metric.stockouts.name, google_logging_metric.instance_actions.name] :
    strcontains(t.widget.xyChart.dataSets[0].timeSeriesQuery.timeSeriesFilter.filter, "metric.type=\"logging.googleapis.com/user/${m}\"")])])
    error_message = "every dashboard chart must read one of the module's log-based metrics"
  }
  assert {
    condition     = google_logging_metric.time_to_recover.metric_descriptor[0].value_type == "DISTRIBUTION" && google_logging_metric.time_to_recover.value_extractor == "EXTRACT(jsonPayload.timeToRecoverSeconds)"
    error_message = "time to recover must be a distribution of jsonPayload.timeToRecoverSeconds"
  }
  assert {
    condition     = strcontains(google_monitoring_alert_policy.recovery_failed.conditions[0].condition_matched_log[0].filter, "jsonPayload.outcome=(\"failed\" OR \"abandoned\")")
    error_message = "the recovery alert must match failed and abandoned outcomes"
  }
  assert {
    condition     = strcontains(google_monitoring_alert_policy.breaker_open.conditions[0].condition_matched_log[0].filter, "severity>=ERROR AND jsonPayload.reason=~\"^breaker open\"")
    error_message = "the breaker alert must match ERROR records whose reason starts with breaker open"
  }
  assert {
    condition     = strcontains(google_monitoring_alert_policy.startup_error.conditions[0].condition_matched_log[0].filter, "jsonPayload.message=~\"^tpu-autoheal cannot start\"") && strcontains(google_monitoring_alert_policy.startup_error.conditions[0].condition_matched_log[0].filter, "resource.labels.service_name=\"tpu-autoheal\"")
    error_message = "the start-up alert must match the function's start-up error line"
  }
  assert {
    condition     = strcontains(google_monitoring_alert_policy.dead_letter_backlog.conditions[0].condition_threshold[0].filter, "resource.label.subscription_id=\"tpu-autoheal-dead-letter\"") && google_monitoring_alert_policy.dead_letter_backlog.conditions[0].condition_threshold[0].threshold_value == 0
    error_message = "the dead-letter alert must watch the dead-letter subscription's undelivered messages"
  }
  # Every minute by default: three intervals are 180 s.
  assert {
    condition     = strcontains(google_monitoring_alert_policy.sweeps_stopped.conditions[0].condition_prometheus_query_language[0].query, "${google_logging_metric.sweeps.name}\",\"monitored_resource\"=\"cloud_function\"}[180s]") && google_monitoring_alert_policy.sweeps_stopped.conditions[0].condition_prometheus_query_language[0].disable_metric_validation
    error_message = "the sweeps-stopped alert must look for no sweep record over three one-minute intervals, without metric validation"
  }
  assert {
    condition     = strcontains(google_logging_metric.stockouts.filter, "jsonPayload.refusal.kind=\"stockout\"") && google_logging_metric.stockouts.label_extractors["zone"] == "EXTRACT(jsonPayload.refusal.zone)" && strcontains(google_logging_metric.create_attempts.filter, "jsonPayload.steps.name=\"create\"")
    error_message = "stockouts must count records refused for capacity by the refusing zone; create attempts the records that sent a create"
  }
  assert {
    condition     = strcontains(google_monitoring_alert_policy.acquisition_low.conditions[0].condition_prometheus_query_language[0].query, "${google_logging_metric.stockouts.name}\"}[1h])) / sum by (zone, accelerator_type) (increase({\"__name__\"=\"logging.googleapis.com/user/${google_logging_metric.create_attempts.name}\"}[1h]))) > 0.9") && google_monitoring_alert_policy.acquisition_low.conditions[0].condition_prometheus_query_language[0].disable_metric_validation
    error_message = "the acquisition alert must fire when stockouts exceed 90 % of create attempts over an hour, per zone and accelerator type, without metric validation"
  }
  assert {
    condition     = length([for p in [google_monitoring_alert_policy.recovery_failed, google_monitoring_alert_policy.breaker_open, google_monitoring_alert_policy.startup_error, google_monitoring_alert_policy.dead_letter_backlog, google_monitoring_alert_policy.sweeps_stopped, google_monitoring_alert_policy.acquisition_low] : p if p.notification_channels == null || length(coalesce(p.notification_channels, [])) == 0]) == 6
    error_message = "with no notification_channels every alert still exists"
  }
}

run "sweep_every_five_minutes" {
  command = plan

  variables {
    sweep_schedule        = "*/5 * * * *"
    notification_channels = ["projects/host-project/notificationChannels/42"]
  }

  assert {
    condition     = strcontains(google_monitoring_alert_policy.sweeps_stopped.conditions[0].condition_prometheus_query_language[0].query, "[900s]")
    error_message = "*/5 sweeps: the alert waits 900 s (three intervals)"
  }
  assert {
    condition     = alltrue([for p in [google_monitoring_alert_policy.recovery_failed, google_monitoring_alert_policy.breaker_open, google_monitoring_alert_policy.startup_error, google_monitoring_alert_policy.dead_letter_backlog, google_monitoring_alert_policy.sweeps_stopped] : p.notification_channels == tolist(["projects/host-project/notificationChannels/42"])])
    error_message = "every alert notifies notification_channels"
  }
}

run "sweeps_stopped_needs_both_resource_types_absent" {
  command = plan

  assert {
    condition     = google_monitoring_alert_policy.sweeps_stopped.conditions[0].condition_prometheus_query_language[0].query == "absent_over_time({\"__name__\"=\"logging.googleapis.com/user/tpu-autoheal/sweeps\",\"monitored_resource\"=\"cloud_function\"}[180s]) and on() absent_over_time({\"__name__\"=\"logging.googleapis.com/user/tpu-autoheal/sweeps\",\"monitored_resource\"=\"cloud_run_revision\"}[180s])"
    error_message = "the sweeps-stopped query must require no sweep record on either resource type, joined on no label"
  }
}
