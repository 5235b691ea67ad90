#!/usr/bin/env bash
# Fake gcloud and gsutil for the startup script's tests: installed on PATH
# under both names, it answers `gcloud storage ls URL` and `gsutil ls URL`
# from a local tree, FAKE_GCS_ROOT/BUCKET/OBJECT, with the real tools' output
# shape (prefixes end in /; with -l, "SIZE  UPDATED  URL" per object, blank
# size and time for a prefix, and a TOTAL line; a trailing ** lists every
# object below, flat) and their error messages. Times are the local files'
# modification times. Test knobs, files in
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
	echo "Usage: $tool ls [-l] URL"
	exit 0
fi
long=no
if [[ ${1:-} == -l ]]; then
	long=yes
	shift
fi
url=${1:?URL}
objects=0
bytes=0

# entry URL FILE: prints one listing line for FILE (a directory: a prefix).
entry() {
	local size
	if [[ $long == no ]]; then
		echo "$1"
	elif [[ -d $2 ]]; then
		printf '%33s%s\n' "" "$1"
	else
		size=$(stat -c %s -- "$2")
		objects=$((objects + 1))
		bytes=$((bytes + size))
		printf '%10d  %s  %s\n' "$size" "$(date -u -r "$2" +%Y-%m-%dT%H:%M:%SZ)" "$1"
	fi
}

total() {
	if [[ $long == yes ]]; then
		echo "TOTAL: $objects objects, $bytes bytes ($bytes B)"
	fi
}

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
if [[ $object == */\*\* || $object == \*\* ]]; then
	object=${object%\*\*}
	dir=$FAKE_GCS_ROOT/$bucket/$object
	found=no
	if [[ -d $dir ]]; then
		while IFS= read -r file; do
			found=yes
			entry "gs://$bucket/${file#"$FAKE_GCS_ROOT/$bucket/"}" "$file"
		done < <(find "$dir" -type f | LC_ALL=C sort)
	fi
	if [[ $found == no ]]; then
		no_match
	fi
	total
	exit 0
fi
path=$FAKE_GCS_ROOT/$bucket/$object
if [[ $url != */ && -f $path ]]; then
	entry "$url" "$path"
	total
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
for file in "$path"/*; do
	found=yes
	if [[ -d $file ]]; then
		entry "$prefix$(basename -- "$file")/" "$file"
	else
		entry "$prefix$(basename -- "$file")" "$file"
	fi
done
if [[ $found == no ]]; then
	no_match
fi
total
