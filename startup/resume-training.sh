#!/usr/bin/env bash
# resume-training.sh: tpu-autoheal's default startup-script for TPU VMs.
#
# Runs on every worker of a (re)created TPU VM at boot and keeps the training
# command alive: it reads its parameters from instance metadata, waits (bounded)
# until the TPU devices and Cloud Storage are reachable, finds the newest
# checkpoint under the checkpoint directory and runs the training command with
# AUTOHEAL_RESUME_FROM pointing at it, retrying failures with bounded exponential
# backoff up to an attempt cap, re-resolving the newest checkpoint before every
# attempt. A lock makes a second invocation (the runner started twice, a manual
# rerun) exit without starting a second training process.
#
# Metadata keys (instance attributes; see startup/README.md):
#   autoheal-train-cmd               required; run with bash -c
#   autoheal-checkpoint-dir          gs://bucket/path; unset = always a fresh start
#   autoheal-checkpoint-marker       object that marks a complete checkpoint,
#                                    e.g. commit_success.txt (Orbax on GCS)
#   autoheal-workdir                 created if missing; commands run there
#   autoheal-setup-cmd               run before the first attempt until it succeeds
#   autoheal-max-attempts            default 100; 0 = no cap
#   autoheal-backoff-seconds         first delay between attempts, default 10
#   autoheal-backoff-max-seconds     delay cap, default 300
#   autoheal-ready-timeout-seconds   readiness wait bound, default 300
#   agent-worker-number              set by the TPU platform
#
# Environment of the training and setup commands:
#   AUTOHEAL_RESUME_FROM     newest checkpoint URI, empty for a fresh start
#   AUTOHEAL_CHECKPOINT_DIR  the checkpoint directory (may be empty)
#   AUTOHEAL_WORKER          this host's worker number
#   AUTOHEAL_ATTEMPT         1 for the first attempt of this boot
#
# Exit status: 0 the training command succeeded, or another run holds the lock;
# 1 gave up after autoheal-max-attempts failed attempts; 2 cannot start
# (required key missing, invalid value, metadata server or tools unavailable).
#
# Overrides for tests and unusual hosts only (environment variables):
#   AUTOHEAL_METADATA_URL            default http://metadata.google.internal/computeMetadata/v1
#   AUTOHEAL_METADATA_RETRIES        tries per metadata read, default 30
#   AUTOHEAL_METADATA_RETRY_SECONDS  delay between tries, default 2
#   AUTOHEAL_LOCK_FILE               default /run/lock/tpu-autoheal-resume-training.lock
#   AUTOHEAL_TPU_DEVICES             space-separated globs of TPU device files,
#                                    default "/dev/accel* /dev/vfio/[0-9]*";
#                                    set but empty = do not wait for devices
set -euo pipefail

readonly TAG=tpu-autoheal
readonly METADATA_URL="${AUTOHEAL_METADATA_URL:-http://metadata.google.internal/computeMetadata/v1}"
readonly METADATA_RETRIES="${AUTOHEAL_METADATA_RETRIES:-30}"
readonly METADATA_RETRY_SECONDS="${AUTOHEAL_METADATA_RETRY_SECONDS:-2}"
readonly LOCK_FILE="${AUTOHEAL_LOCK_FILE:-/run/lock/tpu-autoheal-resume-training.lock}"
readonly TPU_DEVICES="${AUTOHEAL_TPU_DEVICES-/dev/accel* /dev/vfio/[0-9]*}"
# Bound on one storage listing, so a broken network cannot hang an attempt.
readonly LS_TIMEOUT_SECONDS=120
# How many of the newest candidates are checked for the completion marker.
readonly MARKER_SCAN_LIMIT=20
readonly READY_POLL_SECONDS=5

WORKER="?"      # this host's worker number, in every log line
WORK=""         # private temporary directory, removed on exit
MD_VALUE=""     # result of md_get
STORAGE_CLI=""  # gcloud or gsutil
RESUME_FROM=""  # result of resolve_checkpoint
CHILD=""        # process group of the running setup or training command

# log LEVEL MESSAGE...: one timestamped line on stderr (the startup-script
# runner forwards it to the journal and the serial console) and, when logger
# is available, to syslog under the tag tpu-autoheal.
log() {
	local level=$1 prio msg
	shift
	# One record per line, even for a multi-line command or error text.
	msg=$*
	msg=${msg//$'\n'/ \\n }
	printf '%s %s worker=%s %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$TAG" "$WORKER" "$level" "$msg" >&2
	case $level in
	ERROR) prio=err ;;
	WARNING) prio=warning ;;
	*) prio=info ;;
	esac
	if command -v logger >/dev/null 2>&1; then
		logger -t "$TAG" -p "user.$prio" -- "worker=$WORKER $level: $msg" 2>/dev/null || true
	fi
}

die() {
	log ERROR "$*"
	exit 2
}

cleanup() {
	if [[ -n $WORK ]]; then
		rm -rf -- "$WORK"
	fi
}

# on_signal SIGNAL CODE: stop the running command's whole process group, so a
# shutdown gives the training a chance to save, then exit.
on_signal() {
	log WARNING "received SIG$1; stopping the running command"
	if [[ -n $CHILD ]]; then
		kill -TERM -- "-$CHILD" 2>/dev/null || kill -TERM "$CHILD" 2>/dev/null || true
		wait "$CHILD" 2>/dev/null || true
	fi
	exit "$2"
}

# md_get KEY: reads instance attribute KEY into MD_VALUE. Returns 0 when set,
# 1 when not set (HTTP 404 or empty), 2 when the metadata server cannot be
# read. Connection failures, 429 and 5xx are retried: at boot the metadata
# server may not answer yet.
md_get() {
	local key=$1 url try=1 code
	url="$METADATA_URL/instance/attributes/$key"
	MD_VALUE=""
	while :; do
		code=$(curl -sS -o "$WORK/md.out" -w '%{http_code}' -H 'Metadata-Flavor: Google' \
			--connect-timeout 2 --max-time 10 "$url" 2>"$WORK/md.err") || true
		case $code in
		200)
			MD_VALUE=$(<"$WORK/md.out")
			if [[ -n $MD_VALUE ]]; then
				return 0
			fi
			return 1
			;;
		404) return 1 ;;
		000 | 429 | 5??) ;;
		*)
			log ERROR "metadata server answered HTTP $code for $url"
			return 2
			;;
		esac
		if ((try >= METADATA_RETRIES)); then
			log ERROR "metadata server unreachable at $url after $try tries (last: HTTP $code $(head -c 300 "$WORK/md.err" | tr '\n' ' '))"
			return 2
		fi
		if ((try == 1)); then
			log INFO "metadata server not ready (HTTP $code for $key); retrying every ${METADATA_RETRY_SECONDS}s"
		fi
		try=$((try + 1))
		sleep "$METADATA_RETRY_SECONDS"
	done
}

# md_string KEY VAR: sets VAR to the value of KEY, empty when not set; exits
# when the metadata server cannot be read, because running with a guessed
# configuration is worse than not running.
md_string() {
	local rc=0
	md_get "$1" || rc=$?
	if ((rc == 2)); then
		die "cannot read metadata key $1"
	fi
	printf -v "$2" '%s' "$MD_VALUE"
}

# md_int KEY DEFAULT VAR: sets VAR to the non-negative integer in KEY, or
# DEFAULT when not set; exits naming the key and value when invalid.
md_int() {
	local key=$1 value
	md_string "$key" value
	value="${value//[[:space:]]/}"
	if [[ -z $value ]]; then
		value=$2
	fi
	if [[ ! $value =~ ^[0-9]{1,9}$ ]]; then
		die "metadata $key=\"$value\" is not a non-negative integer"
	fi
	printf -v "$3" '%d' "$((10#$value))"
}

# choose_storage_cli: gcloud storage when this gcloud has it, else gsutil.
choose_storage_cli() {
	if command -v gcloud >/dev/null 2>&1 &&
		timeout 60 gcloud storage ls --help >/dev/null 2>&1; then
		STORAGE_CLI=gcloud
	elif command -v gsutil >/dev/null 2>&1; then
		STORAGE_CLI=gsutil
	else
		return 1
	fi
}

# storage_ls URL: lists URL into $WORK/ls.out. Returns 0 when listed, 1 when
# URL matched no objects (a missing or empty directory), 2 when the listing
# failed (network, permission, missing bucket, timeout): then nobody knows
# whether checkpoints exist, and a fresh start could throw progress away.
storage_ls() {
	local url=$1 rc=0
	if [[ $STORAGE_CLI == gcloud ]]; then
		timeout "$LS_TIMEOUT_SECONDS" gcloud storage ls "$url" >"$WORK/ls.out" 2>"$WORK/ls.err" || rc=$?
	else
		timeout "$LS_TIMEOUT_SECONDS" gsutil ls "$url" >"$WORK/ls.out" 2>"$WORK/ls.err" || rc=$?
	fi
	if ((rc == 0)); then
		return 0
	fi
	if grep -q 'matched no objects' "$WORK/ls.err"; then
		return 1
	fi
	log WARNING "$STORAGE_CLI ls $url failed with status $rc: $(head -c 500 "$WORK/ls.err" | tr '\n' ' ')"
	return 2
}

# newest_first BASE: reads a listing of BASE (which ends in /) on stdin and
# prints the checkpoint candidates, newest first. A candidate is an entry
# directly under BASE whose name does not start with "." and does not contain
# tmp, partial or incomplete (in-progress saves, e.g. Orbax's
# 1000.orbax-checkpoint-tmp-1712/). Newest: the numbers in the name, read left
# to right and compared as numbers (checkpoint_12000 > checkpoint_900,
# epoch3_step10 > epoch2_step90, 20240501-0900 > 20240430-2359); names with
# numbers rank above names without; ties go to the lexicographically greater
# name.
newest_first() {
	local tab=$'\t'
	LC_ALL=C awk -v base="$1" '
		index($0, base) != 1 { next }
		{ name = substr($0, length(base) + 1); sub(/\/$/, "", name) }
		name == "" || name ~ /\// || name ~ /^\./ { next }
		tolower(name) ~ /tmp|partial|incomplete/ { next }
		{
			key = ""; rest = name
			while (match(rest, /[0-9]+/)) {
				num = substr(rest, RSTART, RLENGTH)
				rest = substr(rest, RSTART + RLENGTH)
				sub(/^0+/, "", num)
				key = key sprintf("%30s", num) "."
			}
			printf "%s\t%s\n", key, $0
		}' | LC_ALL=C sort -r -t "$tab" -k1,1 -k2,2 | cut -f2-
}

# resolve_checkpoint: sets RESUME_FROM to the newest (complete, when a marker
# is configured) checkpoint under CHECKPOINT_DIR, without a trailing slash, or
# to "" for a fresh start. Returns 1 when that cannot be known.
resolve_checkpoint() {
	local base rc=0 candidate checked=0
	local -a candidates=()
	RESUME_FROM=""
	if [[ -z $CHECKPOINT_DIR ]]; then
		return 0
	fi
	base="${CHECKPOINT_DIR%/}/"
	storage_ls "$base" || rc=$?
	case $rc in
	0) ;;
	1)
		log INFO "no checkpoint under $base: fresh start"
		return 0
		;;
	*) return 1 ;;
	esac
	mapfile -t candidates < <(newest_first "$base" <"$WORK/ls.out")
	if ((${#candidates[@]} == 0)); then
		log INFO "no checkpoint under $base: fresh start"
		return 0
	fi
	if [[ -z $CHECKPOINT_MARKER ]]; then
		RESUME_FROM="${candidates[0]%/}"
		return 0
	fi
	for candidate in "${candidates[@]}"; do
		if ((checked >= MARKER_SCAN_LIMIT)); then
			break
		fi
		checked=$((checked + 1))
		rc=0
		storage_ls "${candidate%/}/$CHECKPOINT_MARKER" || rc=$?
		case $rc in
		0)
			RESUME_FROM="${candidate%/}"
			return 0
			;;
		1) log INFO "skipping ${candidate%/}: no $CHECKPOINT_MARKER (incomplete)" ;;
		*) return 1 ;;
		esac
	done
	log WARNING "none of the newest $checked checkpoints under $base has $CHECKPOINT_MARKER: fresh start"
	return 0
}

tpu_devices_present() {
	local -a patterns=()
	local pattern
	read -r -a patterns <<<"$TPU_DEVICES"
	for pattern in "${patterns[@]}"; do
		if compgen -G "$pattern" >/dev/null; then
			return 0
		fi
	done
	return 1
}

# wait_until_ready: waits at most READY_TIMEOUT seconds for the TPU devices
# and for the checkpoint directory to be listable (network, DNS, credentials).
# On timeout it logs what is missing and carries on: the attempts then fail
# and are retried with backoff, which is better than never trying.
wait_until_ready() {
	local deadline=$((SECONDS + READY_TIMEOUT)) devices=no storage=no rc remaining
	if [[ -z $TPU_DEVICES ]]; then
		devices=unchecked
	fi
	if [[ -z $CHECKPOINT_DIR ]]; then
		storage=unchecked
	fi
	while :; do
		if [[ $devices == no ]] && tpu_devices_present; then
			devices=yes
		fi
		if [[ $storage == no ]]; then
			rc=0
			storage_ls "${CHECKPOINT_DIR%/}/" || rc=$?
			if ((rc < 2)); then
				storage=yes
			fi
		fi
		if [[ $devices != no && $storage != no ]]; then
			log INFO "ready (TPU devices: $devices, checkpoint storage: $storage)"
			return 0
		fi
		remaining=$((deadline - SECONDS))
		if ((remaining <= 0)); then
			log WARNING "not ready after ${READY_TIMEOUT}s (TPU devices: $devices, checkpoint storage: $storage); starting anyway, failed attempts are retried"
			return 0
		fi
		pause "$((remaining < READY_POLL_SECONDS ? remaining : READY_POLL_SECONDS))"
	done
}

# pause SECONDS: sleeps in the background so a signal is handled at once.
pause() {
	sleep "$1" &
	wait "$!" || true
}

# run_command COMMAND: runs COMMAND with bash -c in its own process group (so
# a signal reaches all of it) and returns its exit status. The command
# inherits the lock: it stays held while the command runs, even if this
# script dies.
run_command() {
	local rc=0
	setsid bash -c "$1" &
	CHILD=$!
	wait "$CHILD" || rc=$?
	CHILD=""
	return "$rc"
}

main() {
	local lock_fd attempt=0 delay rc started failure cap tool
	local setup_done=no

	if [[ -z ${HOME:-} ]]; then
		HOME=$(getent passwd "$(id -u)" | cut -d: -f6) || true
		export HOME="${HOME:-/root}"
	fi
	# gcloud lives in /snap/bin on some TPU VM images; systemd's PATH lacks it.
	if [[ -d /snap/bin && ":$PATH:" != *:/snap/bin:* ]]; then
		PATH="$PATH:/snap/bin"
	fi
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpu-autoheal.XXXXXX") || {
		log ERROR "cannot create a temporary directory"
		exit 2
	}
	trap cleanup EXIT
	trap 'on_signal TERM 143' TERM
	trap 'on_signal INT 130' INT
	trap 'on_signal HUP 129' HUP

	for tool in curl flock setsid timeout; do
		if ! command -v "$tool" >/dev/null 2>&1; then
			die "required command $tool not found"
		fi
	done

	rc=0
	md_get agent-worker-number || rc=$?
	case $rc in
	0) WORKER="${MD_VALUE//[[:space:]]/}" ;;
	1)
		WORKER=0
		log WARNING "metadata agent-worker-number not set; assuming a single host, worker 0"
		;;
	*) die "cannot read metadata key agent-worker-number" ;;
	esac

	mkdir -p -- "$(dirname -- "$LOCK_FILE")" || die "cannot create the directory of $LOCK_FILE"
	exec {lock_fd}>>"$LOCK_FILE" || die "cannot open lock file $LOCK_FILE"
	if ! flock -n "$lock_fd"; then
		log INFO "another resume-training run holds $LOCK_FILE: training is already running here; exiting"
		exit 0
	fi

	md_string autoheal-train-cmd TRAIN_CMD
	if [[ -z $TRAIN_CMD ]]; then
		die "metadata key autoheal-train-cmd is not set: nothing to run (set it with gcloud compute tpus tpu-vm create ... --metadata=autoheal-train-cmd=...)"
	fi
	md_string autoheal-checkpoint-dir CHECKPOINT_DIR
	CHECKPOINT_DIR="${CHECKPOINT_DIR//[[:space:]]/}"
	md_string autoheal-checkpoint-marker CHECKPOINT_MARKER
	CHECKPOINT_MARKER="${CHECKPOINT_MARKER#/}"
	md_string autoheal-workdir WORKDIR
	md_string autoheal-setup-cmd SETUP_CMD
	md_int autoheal-max-attempts 100 MAX_ATTEMPTS
	md_int autoheal-backoff-seconds 10 BACKOFF_SECONDS
	md_int autoheal-backoff-max-seconds 300 BACKOFF_MAX_SECONDS
	md_int autoheal-ready-timeout-seconds 300 READY_TIMEOUT
	if ((BACKOFF_SECONDS > BACKOFF_MAX_SECONDS)); then
		BACKOFF_SECONDS=$BACKOFF_MAX_SECONDS
	fi

	if [[ -n $CHECKPOINT_DIR ]]; then
		if [[ $CHECKPOINT_DIR != gs://?* ]]; then
			die "metadata autoheal-checkpoint-dir=\"$CHECKPOINT_DIR\" is not a gs:// URI"
		fi
		choose_storage_cli || die "neither gcloud storage nor gsutil is available to list $CHECKPOINT_DIR"
	fi
	if [[ -n $WORKDIR ]]; then
		mkdir -p -- "$WORKDIR" || die "cannot create autoheal-workdir $WORKDIR"
		cd -- "$WORKDIR" || die "cannot enter autoheal-workdir $WORKDIR"
	fi
	cap=$MAX_ATTEMPTS
	if ((cap == 0)); then
		cap=unlimited
	fi
	log INFO "starting: train command: $TRAIN_CMD; checkpoint dir: ${CHECKPOINT_DIR:-none}${CHECKPOINT_MARKER:+ (marker $CHECKPOINT_MARKER)}; workdir: $PWD; max attempts: $cap; backoff ${BACKOFF_SECONDS}s..${BACKOFF_MAX_SECONDS}s; storage: ${STORAGE_CLI:-none}"

	wait_until_ready

	export AUTOHEAL_WORKER="$WORKER" AUTOHEAL_CHECKPOINT_DIR="$CHECKPOINT_DIR"
	delay=$BACKOFF_SECONDS
	while :; do
		attempt=$((attempt + 1))
		started=$SECONDS
		export AUTOHEAL_ATTEMPT="$attempt"
		failure=""
		if [[ $setup_done == no && -n $SETUP_CMD ]]; then
			log INFO "attempt $attempt/$cap: running setup command: $SETUP_CMD"
			rc=0
			run_command "$SETUP_CMD" || rc=$?
			if ((rc == 0)); then
				setup_done=yes
			else
				failure="setup command exited with status $rc"
			fi
		fi
		if [[ -z $failure ]] && ! resolve_checkpoint; then
			failure="cannot list $CHECKPOINT_DIR to find the newest checkpoint (not starting fresh over it)"
		fi
		if [[ -z $failure ]]; then
			export AUTOHEAL_RESUME_FROM="$RESUME_FROM"
			if [[ -n $RESUME_FROM ]]; then
				log INFO "attempt $attempt/$cap: starting training, resuming from $RESUME_FROM"
			else
				log INFO "attempt $attempt/$cap: starting training, fresh start"
			fi
			rc=0
			run_command "$TRAIN_CMD" || rc=$?
			if ((rc == 0)); then
				log INFO "training command finished successfully on attempt $attempt"
				exit 0
			fi
			failure="training command exited with status $rc"
		fi
		if ((MAX_ATTEMPTS > 0 && attempt >= MAX_ATTEMPTS)); then
			log ERROR "giving up after $attempt attempts (autoheal-max-attempts=$MAX_ATTEMPTS); last failure: $failure"
			exit 1
		fi
		# A failure after a long healthy run starts the backoff over.
		if ((SECONDS - started >= BACKOFF_MAX_SECONDS)); then
			delay=$BACKOFF_SECONDS
		fi
		log WARNING "attempt $attempt/$cap failed: $failure; retrying in ${delay}s"
		pause "$delay"
		delay=$((delay * 2))
		if ((delay > BACKOFF_MAX_SECONDS)); then
			delay=$BACKOFF_MAX_SECONDS
		fi
	done
}

# Sourcing the script (as the tests do) defines the functions without running.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	main "$@"
fi
