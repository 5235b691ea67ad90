#!/usr/bin/env bash
# Fake gcloud and gsutil for the startup script's tests: installed on PATH
# under both names, it answers `gcloud storage ls URL` and `gsutil ls URL`
# from a local tree, FAKE_GCS_ROOT/BUCKET/OBJECT, with the real tools' output
# shape (prefixes end in /) and their error messages. Test knobs, files in
# FAKE_STATE:
#   gcs-fail       a number N: the next N listings fail as a network error would
#   gcloud-legacy  present: gcloud has no `storage` group (falls back to gsutil)
# Every call is appended to FAKE_STATE/gcs.log.
set -euo pipefail

tool=$(basename -- "$0")
printf '%s %s\n' "$tool" "$*" >>"$FAKE_STATE/gcs.log"

no_match() {
	if [[ $tool == gcloud ]]; then
		echo "ERROR: (gcloud.storage.ls) One or more URLs matched no objects." >&2
	else
		echo "CommandException: One or more URLs matched no objects." >&2
	fi
	exit 1
}

if [[ $tool == gcloud ]]; then
	if [[ ${1:-} != storage || -e $FAKE_STATE/gcloud-legacy ]]; then
		echo "ERROR: (gcloud) Invalid choice: '${1:-}'." >&2
		exit 2
	fi
	shift
fi
if [[ ${1:-} != ls ]]; then
	echo "fake $tool: unsupported command: $*" >&2
	exit 2
fi
shift
if [[ ${1:-} == --help ]]; then
	echo "Usage: $tool ls URL"
	exit 0
fi
url=${1:?URL}

if [[ -e $FAKE_STATE/gcs-fail ]]; then
	left=$(<"$FAKE_STATE/gcs-fail")
	if ((left > 0)); then
		echo $((left - 1)) >"$FAKE_STATE/gcs-fail"
		echo "ERROR: (gcloud.storage.ls) There was a problem refreshing your current auth tokens: Could not connect" >&2
		exit 1
	fi
fi

rest=${url#gs://}
bucket=${rest%%/*}
object=${rest#"$bucket"}
object=${object#/}
if [[ ! -d $FAKE_GCS_ROOT/$bucket ]]; then
	if [[ $tool == gcloud ]]; then
		echo "ERROR: (gcloud.storage.ls) gs://$bucket not found: 404." >&2
	else
		echo "BucketNotFoundException: 404 gs://$bucket bucket does not exist." >&2
	fi
	exit 1
fi
path=$FAKE_GCS_ROOT/$bucket/$object
if [[ $url != */ && -f $path ]]; then
	echo "$url"
	exit 0
fi
if [[ ! -d $path ]]; then
	no_match
fi
prefix=gs://$bucket/${object%/}/
if [[ -z ${object%/} ]]; then
	prefix=gs://$bucket/
fi
found=no
shopt -s nullglob dotglob
for entry in "$path"/*; do
	found=yes
	if [[ -d $entry ]]; then
		echo "$prefix$(basename -- "$entry")/"
	else
		echo "$prefix$(basename -- "$entry")"
	fi
done
if [[ $found == no ]]; then
	no_match
fi
