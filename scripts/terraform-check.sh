#!/usr/bin/env bash
# The Terraform checks: `terraform init -backend=false`, `validate` and
# `fmt -check` on the module and on every example, then `terraform test`
# (terraform/tests/*.tftest.hcl, mock providers) on the module.
# Providers come from the filesystem mirror in TF_PROVIDER_MIRROR (default
# <repo>/../shared/terraform-providers), unpacked once into a cache keyed by
# the mirror's checksum; with no mirror, `terraform init` uses the registry.
# With no terraform binary it says so loudly and succeeds, except under
# CI=true, where that fails.
# Usage: scripts/terraform-check.sh   (scripts/test.sh runs it)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '%s terraform-check: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }

if ! command -v terraform >/dev/null 2>&1; then
	if [[ "${CI:-}" == "true" ]]; then
		log "FAIL: no terraform binary on the PATH (CI=true): the module cannot be validated"
		exit 1
	fi
	log "##### SKIPPED: no terraform binary on the PATH; the Terraform module was NOT validated or tested #####"
	exit 0
fi

start=$(date +%s)
mirror=${TF_PROVIDER_MIRROR:-../shared/terraform-providers}
if [[ -f "$mirror/providers.tar.gz" && -x "$mirror/use-mirror.sh" ]]; then
	sum=$(sha256sum "$mirror/providers.tar.gz" | cut -c1-16)
	cache="${XDG_CACHE_HOME:-$HOME/.cache}/tpu-autoheal/terraform-providers-$sum"
	if [[ ! -f "$cache/terraformrc" ]]; then
		log "unpacking the provider mirror into $cache"
		rm -rf "$cache.tmp"
		"$mirror/use-mirror.sh" "$cache.tmp" >/dev/null
		# use-mirror.sh writes absolute paths; rewrite them for the final place.
		sed -i "s|$cache.tmp|$cache|g" "$cache.tmp/terraformrc"
		rm -rf "$cache"
		mv "$cache.tmp" "$cache"
	fi
	export TF_CLI_CONFIG_FILE="$cache/terraformrc"
else
	log "no provider mirror at $mirror: terraform init uses the registry"
	if [[ -n "${TF_CLI_CONFIG_FILE:-}" && ! -f "$TF_CLI_CONFIG_FILE" ]]; then
		unset TF_CLI_CONFIG_FILE
	fi
fi
export TF_IN_AUTOMATION=1 CHECKPOINT_DISABLE=1
# One plugin cache for the module and the examples: each init links, not copies.
export TF_PLUGIN_CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/tpu-autoheal/terraform-plugin-cache"
mkdir -p "$TF_PLUGIN_CACHE_DIR"

tf() { terraform "$@" -no-color; }

for dir in terraform terraform/examples/*/; do
	dir=${dir%/}
	log "init, validate, fmt -check: $dir"
	tf -chdir="$dir" init -backend=false -input=false >/dev/null
	tf -chdir="$dir" validate
	if ! terraform -chdir="$dir" fmt -check -diff -recursive=false; then
		log "FAIL: terraform fmt would change files in $dir (run terraform fmt)"
		exit 1
	fi
done
if ! terraform -chdir=terraform fmt -check -diff tests; then
	log "FAIL: terraform fmt would change terraform/tests (run terraform fmt terraform/tests)"
	exit 1
fi

log "terraform test (terraform/tests, mock providers)"
tf -chdir=terraform test

log "terraform checks passed in $(($(date +%s) - start)) s"
