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
# While training runs, a watcher waits on the metadata server for a maintenance
# notice (autoheal-maintenance, written by tpu-autoheal's prepare action, and
# the platform's instance/upcoming-maintenance where served). On a new notice
# it asks the training to checkpoint (autoheal-checkpoint-cmd, or the signal
# autoheal-checkpoint-signal to the training's process group), and once a
# checkpoint newer than the notice is complete it reports it in the guest
# attribute autoheal/checkpoint. Every start of the training command is
# reported in the guest attribute autoheal/resumed. See startup/README.md for
# the JSON shapes.
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
#   autoheal-checkpoint-cmd          run on a new maintenance notice
#   autoheal-checkpoint-signal       else sent to the training's process group
#                                    on a new notice (e.g. USR1); no default
#   autoheal-checkpoint-wait-seconds bound of the wait for the checkpoint asked
#                                    for by a notice, default 1800
#   autoheal-stop-grace-seconds      on SIGTERM, how long the training's process
#                                    group may take to exit, default 60
#   autoheal-maintenance             the notice (JSON), written by tpu-autoheal
#   agent-worker-number              set by the TPU platform (else see
#                                    find_worker: tpu-env, the instance name)
#
# Environment of the training and setup commands:
#   AUTOHEAL_RESUME_FROM     newest checkpoint URI, empty for a fresh start
#   AUTOHEAL_CHECKPOINT_DIR  the checkpoint directory (may be empty)
#   AUTOHEAL_WORKER          this host's worker number
#   AUTOHEAL_ATTEMPT         1 for the first attempt of this boot
# and the checkpoint command also:
#   AUTOHEAL_NOTICE          the notice, JSON as read
#   AUTOHEAL_TRAIN_PGID      the training command's process group
#
# Exit status: 0 the training command succeeded, or another run holds the lock;
# 1 gave up after autoheal-max-attempts failed attempts; 2 cannot start
# (required key missing, invalid value, metadata server or tools unavailable);
# after SIGTERM/SIGINT/SIGHUP, the training command's own status once its
# whole process group has exited (137 when it had to be killed after the
# grace), or 128 + the signal number when no command was running.
#
# Overrides for tests and unusual hosts only (environment variables):
#   AUTOHEAL_METADATA_URL            default http://metadata.google.internal/computeMetadata/v1
#   AUTOHEAL_METADATA_RETRIES        tries per metadata read, default 30
#   AUTOHEAL_METADATA_RETRY_SECONDS  delay between tries, default 2
#   AUTOHEAL_LOCK_FILE               default /run/lock/tpu-autoheal-resume-training.lock
#   AUTOHEAL_STATE_DIR               default /var/lib/tpu-autoheal (handled notices)
#   AUTOHEAL_WATCH_TIMEOUT_SECONDS   timeout_sec of one hanging GET, default 300
#   AUTOHEAL_CHECKPOINT_POLL_SECONDS checkpoint listing interval, default 30
#   AUTOHEAL_TPU_DEVICES             space-separated globs of TPU device files,
#                                    default "/dev/accel* /dev/vfio/[0-9]*";
#                                    set but empty = do not wait for devices
set -euo pipefail

readonly TAG=tpu-autoheal
readonly METADATA_URL="${AUTOHEAL_METADATA_URL:-http://metadata.google.internal/computeMetadata/v1}"
readonly METADATA_RETRIES="${AUTOHEAL_METADATA_RETRIES:-30}"
readonly METADATA_RETRY_SECONDS="${AUTOHEAL_METADATA_RETRY_SECONDS:-2}"
readonly LOCK_FILE="${AUTOHEAL_LOCK_FILE:-/run/lock/tpu-autoheal-resume-training.lock}"
readonly STATE_DIR="${AUTOHEAL_STATE_DIR:-/var/lib/tpu-autoheal}"
readonly WATCH_TIMEOUT_SECONDS="${AUTOHEAL_WATCH_TIMEOUT_SECONDS:-300}"
readonly CHECKPOINT_POLL_SECONDS="${AUTOHEAL_CHECKPOINT_POLL_SECONDS:-30}"
# Backoff cap of the watcher after metadata server errors.
readonly WATCH_BACKOFF_MAX_SECONDS=60
readonly TPU_DEVICES="${AUTOHEAL_TPU_DEVICES-/dev/accel* /dev/vfio/[0-9]*}"
# Bound on one storage listing, so a broken network cannot hang an attempt.
readonly LS_TIMEOUT_SECONDS=120
# How many of the newest candidates are checked for the completion marker.
readonly MARKER_SCAN_LIMIT=20
readonly READY_POLL_SECONDS=5
# Bound of the wait for a killed process group to be gone.
readonly KILL_WAIT_SECONDS=30
# Bound of the wait for a maintenance watcher to end after SIGTERM.
readonly WATCHER_STOP_SECONDS=5

WORKER="?"      # this host's worker number, in every log line
WORK=""         # private temporary directory, removed on exit
MD_VALUE=""     # result of md_get
STORAGE_CLI=""  # gcloud or gsutil
RESUME_FROM=""  # result of resolve_checkpoint
SPAWNING=""     # set while run_command forks the command (on_signal reads $! then)
CHILD=""        # process group of the running setup or training command
CHILD_RC=0      # result of wait_group
LOCK_FD=""      # the lock, inherited by the commands, closed in the watcher
QUIET=no        # yes: resolve_checkpoint does not log its INFO lines
CKPT_TIME=""    # result of checkpoint_time
WATCHERS=()     # process groups of the maintenance watchers
CHECKPOINT_CMD=""
CHECKPOINT_SIGNAL=""
CHECKPOINT_DIR=""
CHECKPOINT_MARKER=""
STOP_GRACE=60

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

# info MESSAGE...: log INFO, unless QUIET (the watcher's repeated listings).
info() {
	if [[ $QUIET != yes ]]; then
		log INFO "$@"
	fi
}

cleanup() {
	if [[ -n $WORK ]]; then
		rm -rf -- "$WORK"
	fi
}

# on_signal SIGNAL CODE: passes SIGTERM to the running command's whole process
# group, so a shutdown gives the training a chance to save, waits (at most
# autoheal-stop-grace-seconds) until every process of that group has exited,
# not only the command's shell, and exits with the command's status; CODE
# when no command was running.
on_signal() {
	local pgid=$CHILD
	if [[ -z $pgid && -n $SPAWNING ]]; then
		pgid=$!
	fi
	trap '' TERM INT HUP
	set +m # the signal may have come while start_watchers had it on
	# Builtins only until the signal is passed on and the grace is enforced
	# by a process of its own. When the signal interrupts the script's wait
	# while a child (a watcher) ends, bash can lose that child's exit status,
	# and any later command this shell forks and waits for (a $(date) in log,
	# logger, ps, sleep) may then block until the script has no child left:
	# with the training not yet signalled, until it ended by itself (seen
	# under load: SIGTERM answered after 66 s with the training's own status
	# 0, and no kill after the grace).
	local pid watchdog=""
	if [[ -n $pgid ]]; then
		kill -TERM -- "-$pgid" 2>/dev/null || kill -TERM "$pgid" 2>/dev/null || true
	fi
	for pid in "${WATCHERS[@]}"; do
		kill -TERM -- "-$pid" 2>/dev/null || true
	done
	if [[ -n $pgid ]]; then
		(
			trap - TERM INT HUP EXIT
			wait_group "$pgid" "$STOP_GRACE" watchdog
		) &
		watchdog=$!
	fi
	log WARNING "received SIG$1; stopping the running command (grace ${STOP_GRACE}s)"
	stop_watchers
	if [[ -z $pgid ]]; then
		exit "$2"
	fi
	wait_group "$pgid" "$((STOP_GRACE + KILL_WAIT_SECONDS))"
	kill -TERM "$watchdog" 2>/dev/null || true
	log WARNING "the running command exited with status $CHILD_RC after SIG$1"
	exit "$CHILD_RC"
}

# group_alive PGID: whether a live (not zombie) process is in group PGID.
group_alive() {
	local pgid=$1 listing group state
	if ! listing=$(ps -e -o pgid= -o stat= 2>/dev/null); then
		kill -0 -- "-$pgid" 2>/dev/null
		return
	fi
	while read -r group state; do
		if [[ $group == "$pgid" && $state != Z* ]]; then
			return 0
		fi
	done <<<"$listing"
	return 1
}

# wait_group PGID GRACE [watchdog]: waits until no process of group PGID is
# left (the command's shell, a child of this script, and whatever it
# started), at most GRACE seconds, then kills what is left. Sets CHILD_RC to
# the shell's status (137 when it had to be killed). With "watchdog" (run in
# a child of the signal handler, which enforces the grace even if the
# handler is held up) it only waits and kills.
wait_group() {
	local pgid=$1 grace=$2 deadline rc=0
	deadline=$((SECONDS + grace))
	while group_alive "$pgid" && ((SECONDS < deadline)); do
		sleep 0.2
	done
	if group_alive "$pgid"; then
		log WARNING "processes of the command (process group $pgid) still running after ${grace}s; killing them"
		kill_group "$pgid"
	fi
	if [[ ${3:-} == watchdog ]]; then
		return 0
	fi
	wait "$pgid" 2>/dev/null || rc=$?
	CHILD_RC=$rc
}

# kill_group PGID: SIGKILL to every process of group PGID, then waits until
# none is alive: SIGKILL is delivered at once but a process exits when the
# kernel gets to it (a loaded host, a process in uninterruptible I/O), and
# nothing of the old training may still hold the TPU when this script exits
# or starts the next attempt. Bounded by KILL_WAIT_SECONDS.
kill_group() {
	local pgid=$1 deadline
	kill -KILL -- "-$pgid" 2>/dev/null || true
	deadline=$((SECONDS + KILL_WAIT_SECONDS))
	while group_alive "$pgid" && ((SECONDS < deadline)); do
		sleep 0.1
	done
	if group_alive "$pgid"; then
		log WARNING "processes of process group $pgid still alive ${KILL_WAIT_SECONDS}s after SIGKILL"
	fi
}

# reap_leftovers PGID: after a failed attempt, stops what the command left
# running in its process group (a trainer whose shell died still holds the
# TPU), so that two trainings never run at once.
reap_leftovers() {
	local pgid=$1 deadline
	if ! group_alive "$pgid"; then
		return 0
	fi
	log WARNING "the command exited but processes of its group $pgid still run; stopping them (grace ${STOP_GRACE}s)"
	kill -TERM -- "-$pgid" 2>/dev/null || true
	deadline=$((SECONDS + STOP_GRACE))
	while group_alive "$pgid" && ((SECONDS < deadline)); do
		sleep 0.2
	done
	if group_alive "$pgid"; then
		kill_group "$pgid"
	fi
}

# md_get KEY: reads instance attribute KEY into MD_VALUE. Returns 0 when set,
# 1 when not set (HTTP 404 or empty), 2 when the metadata server cannot be
# read. Connection failures, 429 and 5xx are retried: at boot the metadata
# server may not answer yet.
md_get() {
	md_read "instance/attributes/$1"
}

# md_read PATH: md_get of any metadata path (instance/name, ...).
md_read() {
	local key=$1 url try=1 code
	url="$METADATA_URL/$key"
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

# find_worker: sets WORKER, this host's worker number, from the first of
#   - metadata agent-worker-number, set by the Cloud TPU platform on every
#     worker of a TPU VM it created;
#   - WORKER_ID in metadata tpu-env (the TPU runtime's environment, as JAX
#     reads it on Compute Engine), where served;
#   - the instance name (instance/name), for TPU VMs created through Compute
#     Engine, which may have neither: a name ending in -w-N, as Cloud TPU
#     names its workers' VMs. Not any trailing number: a single-host VM is
#     often named for its machine (llm-v5p-8), and a MIG names its VMs
#     BASE-XXXX, four random letters or digits; neither is a worker;
#   - else 0, with a warning: a single host is assumed.
# Exits when the metadata server cannot be read.
find_worker() {
	local rc=0 name
	md_get agent-worker-number || rc=$?
	case $rc in
	0)
		WORKER="${MD_VALUE//[[:space:]]/}"
		return 0
		;;
	1) ;;
	*) die "cannot read metadata key agent-worker-number" ;;
	esac
	rc=0
	md_get tpu-env || rc=$?
	if ((rc == 2)); then
		die "cannot read metadata key tpu-env"
	fi
	if ((rc == 0)) && [[ $MD_VALUE =~ (^|$'\n')WORKER_ID:[[:space:]]*\'?([0-9]+)\'? ]]; then
		WORKER=${BASH_REMATCH[2]}
		log INFO "metadata agent-worker-number not set; worker $WORKER from WORKER_ID in metadata tpu-env"
		return 0
	fi
	rc=0
	md_read instance/name || rc=$?
	if ((rc == 2)); then
		die "cannot read metadata instance/name"
	fi
	name=${MD_VALUE//[[:space:]]/}
	if [[ $name =~ -w-([0-9]{1,6})$ ]]; then
		WORKER=$((10#${BASH_REMATCH[1]}))
		log INFO "metadata agent-worker-number not set; worker $WORKER from the instance name $name"
		return 0
	fi
	WORKER=0
	log WARNING "metadata agent-worker-number not set and the instance name ${name:-(none)} does not end in -w-N; assuming a single host, worker 0"
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

# storage_ls URL [-l]: lists URL into $WORK/ls.out (with -l: size, update
# time and URL of each object). Returns 0 when listed, 1 when URL matched no
# objects (a missing or empty directory), 2 when the listing failed (network,
# permission, missing bucket, timeout): then nobody knows whether checkpoints
# exist, and a fresh start could throw progress away.
storage_ls() {
	local url=$1 rc=0
	local -a flags=()
	if [[ ${2:-} == -l ]]; then
		flags=(-l)
	fi
	if [[ $STORAGE_CLI == gcloud ]]; then
		timeout "$LS_TIMEOUT_SECONDS" gcloud storage ls "${flags[@]}" "$url" >"$WORK/ls.out" 2>"$WORK/ls.err" || rc=$?
	else
		timeout "$LS_TIMEOUT_SECONDS" gsutil ls "${flags[@]}" "$url" >"$WORK/ls.out" 2>"$WORK/ls.err" || rc=$?
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
		info "no checkpoint under $base: fresh start"
		return 0
		;;
	*) return 1 ;;
	esac
	mapfile -t candidates < <(newest_first "$base" <"$WORK/ls.out")
	if ((${#candidates[@]} == 0)); then
		info "no checkpoint under $base: fresh start"
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
		1) info "skipping ${candidate%/}: no $CHECKPOINT_MARKER (incomplete)" ;;
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

# command_shell COMMAND: COMMAND prefixed with the traps of its shell. On
# SIGTERM the shell finishes the running command (which gets the signal too,
# as the whole group does) and then exits with its status, instead of dying at
# once or running the next line. The checkpoint signal is caught, so that it
# reaches the training without killing the shell around it. A trap is reset,
# not inherited, in the shell's children, so their own handlers decide.
command_shell() {
	local prefix
	prefix="trap 'exit \$?' TERM"
	if [[ -n $CHECKPOINT_SIGNAL && $CHECKPOINT_SIGNAL != TERM ]]; then
		prefix+="; trap : $CHECKPOINT_SIGNAL"
	fi
	printf '%s\n%s' "$prefix" "$1"
}

# run_command COMMAND [watch]: runs COMMAND with bash -c in its own process
# group (so a signal reaches all of it) and returns its exit status; with
# "watch", the maintenance watchers run alongside it. The command inherits the
# lock: it stays held while the command runs, even if this script dies.
run_command() {
	local rc=0 pgid
	# SPAWNING: a signal that arrives right after the fork and before
	# CHILD is set (the trap runs between the two) still finds the group
	# through $!.
	SPAWNING=yes
	setsid bash -c "$(command_shell "$1")" &
	CHILD=$!
	SPAWNING=""
	pgid=$CHILD
	if [[ ${2:-} == watch ]]; then
		start_watchers "$pgid"
	fi
	wait "$pgid" || rc=$?
	CHILD=""
	stop_watchers
	if ((rc != 0)); then
		reap_leftovers "$pgid"
	fi
	return "$rc"
}

# now_rfc3339: the current time, RFC 3339 in UTC.
now_rfc3339() {
	date -u +%Y-%m-%dT%H:%M:%SZ
}

# json_escape STRING: STRING as the inside of a JSON string.
json_escape() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\n'/\\n}
	s=${s//$'\r'/\\r}
	s=${s//$'\t'/\\t}
	printf '%s' "$s"
}

# json_get JSON KEY: prints the value of KEY in the flat JSON object JSON (a
# string's content, or a literal such as true or 12); 1 when absent. Enough
# for the notices, whose values are timestamps, enums and booleans.
json_get() {
	local re_string="\"$2\"[[:space:]]*:[[:space:]]*\"([^\"\\\\]*)\""
	local re_literal="\"$2\"[[:space:]]*:[[:space:]]*([A-Za-z0-9.+-]+)"
	if [[ $1 =~ $re_string || $1 =~ $re_literal ]]; then
		printf '%s' "${BASH_REMATCH[1]}"
		return 0
	fi
	return 1
}

# json_number VALUE: VALUE as a JSON number when it is one, else a string.
json_number() {
	if [[ $1 =~ ^[0-9]+$ ]]; then
		printf '%s' "$1"
	else
		printf '"%s"' "$(json_escape "$1")"
	fi
}

# guest_put KEY JSON: writes guest attribute autoheal/KEY, where tpu-autoheal
# reads it with nodes.getGuestAttributes. Retried briefly; a failure is
# logged (guest attributes may be disabled) and returns 1, never stops the
# training.
guest_put() {
	local key=$1 body=$2 url try code
	url="$METADATA_URL/instance/guest-attributes/autoheal/$key"
	for try in 1 2 3; do
		code=$(curl -sS -o "$WORK/put.out" -w '%{http_code}' -X PUT -H 'Metadata-Flavor: Google' \
			--connect-timeout 2 --max-time 10 --data-binary "$body" "$url" 2>"$WORK/put.err") || true
		case $code in
		200) return 0 ;;
		000 | 429 | 5??) ;;
		*) break ;;
		esac
		if ((try < 3)); then
			sleep 1
		fi
	done
	log WARNING "cannot write guest attribute autoheal/$key (HTTP $code: $(cat "$WORK/put.out" "$WORK/put.err" 2>/dev/null | head -c 300 | tr '\n' ' ')); guest attributes may be disabled on this VM (metadata enable-guest-attributes=TRUE)"
	return 1
}

# checkpoint_time URI: sets CKPT_TIME to the update time (RFC 3339) of the
# checkpoint at URI: its completion marker's when autoheal-checkpoint-marker
# is set, else the newest object directly in it (or in it at any depth when
# it holds only directories), or the object itself. Returns 1 when unknown.
checkpoint_time() {
	local uri=${1%/} rc=0 pattern
	CKPT_TIME=""
	local -a urls=()
	if [[ -n $CHECKPOINT_MARKER ]]; then
		urls=("$uri/$CHECKPOINT_MARKER")
	else
		urls=("$uri/" "$uri/**" "$uri")
	fi
	for pattern in "${urls[@]}"; do
		rc=0
		storage_ls "$pattern" -l || rc=$?
		if ((rc == 2)); then
			return 1
		fi
		if ((rc == 0)); then
			CKPT_TIME=$(awk '$2 ~ /^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9:.]+Z$/ && $3 ~ /^gs:\/\// { t = substr($2, 1, 19) "Z"; if (t > max) max = t } END { print max }' "$WORK/ls.out")
			if [[ -n $CKPT_TIME ]]; then
				return 0
			fi
		fi
	done
	return 1
}

# report_resumed ATTEMPT: the guest attribute autoheal/resumed and the same
# line in the log, as the training command starts.
report_resumed() {
	local attempt=$1 body
	CKPT_TIME=""
	if [[ -n $RESUME_FROM ]] && ! checkpoint_time "$RESUME_FROM"; then
		log WARNING "cannot tell when $RESUME_FROM was written; reporting it without a time"
	fi
	body=$(printf '{"time":"%s","checkpoint":"%s","checkpointTime":"%s","attempt":%s,"worker":%s}' \
		"$(now_rfc3339)" "$(json_escape "$RESUME_FROM")" "$CKPT_TIME" "$attempt" "$(json_number "$WORKER")")
	log INFO "resumed: $body"
	guest_put resumed "$body" || true
}

# to_epoch TIME: seconds since the epoch of the RFC 3339 TIME; 1 when invalid.
to_epoch() {
	[[ -n $1 ]] && date -u -d "$1" +%s 2>/dev/null
}

# notice_claim ID SENT_EPOCH WATCHER_PID: decides, under a lock shared by the watchers,
# what to do with notice ID. Prints "new" (first sight: recorded as asked),
# "resume" (asked earlier, by a run that ended before its checkpoint
# appeared, and still within the wait) or "seen" (nothing to do). The state
# file, STATE_DIR/maintenance-notice, holds one line: ID PHASE SENT_EPOCH PID.
notice_claim() {
	local id=$1 sent=$2 me=$3 fd old_id="" phase="" old_sent="" pid="" verdict
	local file="$STATE_DIR/maintenance-notice"
	exec {fd}>>"$file.lock"
	flock "$fd"
	if [[ -s $file ]]; then
		read -r old_id phase old_sent pid <"$file" || true
	fi
	if [[ $old_id != "$id" ]]; then
		verdict=new
		printf '%s asked %s %s\n' "$id" "$sent" "$me" >"$file.tmp" && mv -f -- "$file.tmp" "$file"
	elif [[ $phase == asked ]] && ! kill -0 "${pid:-0}" 2>/dev/null &&
		((EPOCHSECONDS < ${old_sent:-0} + CHECKPOINT_WAIT)); then
		verdict=resume
		printf '%s asked %s %s\n' "$id" "$old_sent" "$me" >"$file.tmp" && mv -f -- "$file.tmp" "$file"
	else
		verdict=seen
	fi
	exec {fd}>&-
	printf '%s' "$verdict"
}

# notice_done ID PHASE: records the end of notice ID (reported, expired).
notice_done() {
	local file="$STATE_DIR/maintenance-notice" fd
	exec {fd}>>"$file.lock"
	flock "$fd"
	printf '%s %s 0 0\n' "$1" "$2" >"$file.tmp" && mv -f -- "$file.tmp" "$file"
	exec {fd}>&-
}

# ask_checkpoint NOTICE_JSON PGID: asks the training to checkpoint now.
# Prints what it did: cmd, signal or none.
ask_checkpoint() {
	local notice=$1 pgid=$2 rc=0
	if [[ -n $CHECKPOINT_CMD ]]; then
		log INFO "running autoheal-checkpoint-cmd: $CHECKPOINT_CMD"
		AUTOHEAL_NOTICE="$notice" AUTOHEAL_TRAIN_PGID="$pgid" \
			timeout "$CHECKPOINT_WAIT" bash -c "$CHECKPOINT_CMD" </dev/null >&2 || rc=$?
		if ((rc == 0)); then
			log INFO "autoheal-checkpoint-cmd finished"
		else
			log WARNING "autoheal-checkpoint-cmd exited with status $rc; still waiting for a checkpoint"
		fi
		printf cmd
	elif [[ -n $CHECKPOINT_SIGNAL ]]; then
		if kill -s "$CHECKPOINT_SIGNAL" -- "-$pgid" 2>/dev/null; then
			log INFO "sent SIG$CHECKPOINT_SIGNAL to the training's process group $pgid"
		else
			log WARNING "cannot send SIG$CHECKPOINT_SIGNAL to process group $pgid (training gone?)"
		fi
		printf signal
	else
		log WARNING "neither autoheal-checkpoint-cmd nor autoheal-checkpoint-signal is set: not asking the training to checkpoint; reporting the next checkpoint it writes"
		printf none
	fi
}

# wait_checkpoint NOTICE SENT_EPOCH: waits, until SENT_EPOCH +
# autoheal-checkpoint-wait-seconds, for a complete checkpoint written at or
# after SENT_EPOCH, and reports it in the guest attribute autoheal/checkpoint.
wait_checkpoint() {
	local notice=$1 sent=$2 deadline epoch body
	deadline=$((sent + CHECKPOINT_WAIT))
	if [[ -z $CHECKPOINT_DIR ]]; then
		log WARNING "no autoheal-checkpoint-dir: cannot see the checkpoint for notice $notice"
		return 1
	fi
	while ((EPOCHSECONDS < deadline)); do
		if resolve_checkpoint && [[ -n $RESUME_FROM ]] && checkpoint_time "$RESUME_FROM" &&
			epoch=$(to_epoch "$CKPT_TIME") && ((epoch >= sent)); then
			body=$(printf '{"notice":"%s","checkpoint":"%s","time":"%s"}' \
				"$(json_escape "$notice")" "$(json_escape "$RESUME_FROM")" "$CKPT_TIME")
			log INFO "checkpoint for maintenance notice $notice: $body"
			guest_put checkpoint "$body" || true
			return 0
		fi
		pause "$CHECKPOINT_POLL_SECONDS"
	done
	log WARNING "no checkpoint newer than maintenance notice $notice within ${CHECKPOINT_WAIT}s"
	return 1
}

# handle_notice NOTICE SENT_AT SOURCE JSON PGID: acts on a notice once.
handle_notice() {
	local notice=$1 sent_at=$2 source=$3 json=$4 pgid=$5 id sent verdict action
	id=$(date -u -d "$notice" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null) || id=$notice
	id=${id//[[:space:]]/_}
	if ! sent=$(to_epoch "$sent_at"); then
		sent=$EPOCHSECONDS
	fi
	verdict=$(notice_claim "$id" "$sent" "$BASHPID")
	case $verdict in
	seen)
		log INFO "maintenance notice $notice ($source) already handled"
		return 0
		;;
	resume)
		log INFO "maintenance notice $notice ($source): waiting again for its checkpoint"
		;;
	new)
		if ((EPOCHSECONDS >= sent + CHECKPOINT_WAIT)); then
			log INFO "maintenance notice $notice ($source) was sent more than ${CHECKPOINT_WAIT}s ago; ignoring it"
			notice_done "$id" expired
			return 0
		fi
		log WARNING "maintenance notice $notice ($source): $json"
		action=$(ask_checkpoint "$json" "$pgid")
		guest_put notice "$(printf '{"notice":"%s","time":"%s","action":"%s"}' \
			"$(json_escape "$notice")" "$(now_rfc3339)" "$action")" || true
		;;
	esac
	if wait_checkpoint "$notice" "$sent"; then
		notice_done "$id" reported
	else
		notice_done "$id" expired
	fi
}

# md_watch PATH QUERY OUT: one GET of the metadata server into OUT, bounded
# (a hanging GET returns after timeout_sec at the latest). Sets MD_CODE and
# MD_ETAG.
md_watch() {
	local path=$1 query=$2 out=$3
	MD_CODE=$(curl -sS -o "$out" -D "$out.headers" -w '%{http_code}' -H 'Metadata-Flavor: Google' \
		--connect-timeout 2 --max-time "$((WATCH_TIMEOUT_SECONDS + 30))" \
		"$METADATA_URL/$path${query:+?$query}" 2>"$out.err") || true
	MD_CODE=${MD_CODE:-000}
	MD_ETAG=$(awk 'tolower($1) == "etag:" { print $2 }' "$out.headers" 2>/dev/null | tr -d '\r' | tail -n 1) || MD_ETAG=""
}

# watch_source SOURCE PGID: the loop of one watcher. SOURCE "function" waits
# on the attribute autoheal-maintenance, "platform" on
# instance/upcoming-maintenance (given up on a 404: not served here). Each
# answer is followed by a hanging GET (wait_for_change, last_etag) that
# returns when the value changes; errors back off up to a minute.
watch_source() {
	local source=$1 pgid=$2 path query etag="" value last="" delay=1 notice sent status failing=no read=no
	local out dir_etag="" dir_read=no
	if [[ $source == function ]]; then
		path=instance/attributes/autoheal-maintenance
	else
		path=instance/upcoming-maintenance
	fi
	out="$WORK/$source.out"
	# The script stops the watchers when the training ends; this only ends a
	# watcher whose script died. (Not group_alive: right after the start the
	# command may not have made its own process group yet.)
	while kill -0 "$$" 2>/dev/null && kill -0 "$pgid" 2>/dev/null; do
		query=""
		if [[ $source == platform ]]; then
			query="alt=json"
		fi
		# After the first read, hang until the value changes (from last_etag
		# when the server sent one, else from its value now).
		if [[ $read == yes ]]; then
			query+="${query:+&}wait_for_change=true&timeout_sec=$WATCH_TIMEOUT_SECONDS${etag:+&last_etag=$etag}"
		fi
		md_watch "$path" "$query" "$out"
		case $MD_CODE in
		200)
			failing=no
			delay=1
			read=yes
			etag=$MD_ETAG
			value=$(<"$out")
			if [[ $value == "$last" ]]; then
				continue
			fi
			last=$value
			if [[ $source == function ]]; then
				if [[ -z ${value//[[:space:]]/} ]]; then
					continue
				fi
				if ! notice=$(json_get "$value" notice); then
					log WARNING "metadata autoheal-maintenance is not a notice (no \"notice\" field): $value"
					continue
				fi
				sent=$(json_get "$value" sentAt) || sent=""
			else
				notice=$(json_get "$value" window_start_time) || continue
				status=$(json_get "$value" maintenance_status) || status=""
				if [[ $status == COMPLETE ]]; then
					continue
				fi
				sent=""
			fi
			handle_notice "$notice" "$sent" "$source" "$value" "$pgid"
			;;
		404)
			if [[ $source == platform ]]; then
				log INFO "instance/upcoming-maintenance is not served here; watching autoheal-maintenance only"
				return 0
			fi
			# No notice: wait for any attribute to change, then read again.
			read=no
			etag=""
			last=""
			query=""
			if [[ $dir_read == yes ]]; then
				query="wait_for_change=true&timeout_sec=$WATCH_TIMEOUT_SECONDS${dir_etag:+&last_etag=$dir_etag}"
			fi
			md_watch instance/attributes/ "$query" "$out.dir"
			if [[ $MD_CODE == 200 ]]; then
				dir_read=yes
				dir_etag=$MD_ETAG
			else
				dir_read=no
				dir_etag=""
				pause "$delay"
			fi
			;;
		*)
			if [[ $failing == no ]]; then
				log WARNING "maintenance watcher: HTTP $MD_CODE for $path ($(head -c 300 "$out.err" | tr '\n' ' ')); retrying with backoff"
				failing=yes
			fi
			read=no
			etag=""
			pause "$delay"
			delay=$((delay * 2 > WATCH_BACKOFF_MAX_SECONDS ? WATCH_BACKOFF_MAX_SECONDS : delay * 2))
			;;
		esac
	done
}

# start_watchers PGID: starts the maintenance watchers for the training
# running as process group PGID, each in its own process group (so that
# stop_watchers ends its hanging GET and listings too).
start_watchers() {
	local pgid=$1 source
	WATCHERS=()
	for source in function platform; do
		set -m
		(
			set +m
			trap - TERM INT HUP EXIT
			exec {LOCK_FD}>&-
			QUIET=yes
			WORK=$(mktemp -d "$WORK/watch.XXXXXX") || exit 0
			watch_source "$source" "$pgid" || true
		) &
		WATCHERS+=("$!")
		set +m
	done
}

# stop_watchers: ends the watchers, with what they run. A signal may arrive
# between starting a watcher and recording it, so it also ends any child of
# this script that leads its own process group, other than the command.
#
# It never calls wait on a watcher: it asks ps whether the watcher is still
# alive, for at most WATCHER_STOP_SECONDS, then kills what is left (bash
# reaps them by itself). A watcher can end at the moment a SIGTERM
# interrupts the script's wait on the training; bash then loses that
# watcher's exit status, and a "wait PID" for it in the signal handler
# blocked in waitpid until the script had no child left: until the training,
# which had not been sent its SIGTERM yet, ended by itself (seen under load:
# SIGTERM answered 66 s late with the training's own status 0, no kill after
# the grace).
stop_watchers() {
	local pid pgid deadline
	local -a pids=("${WATCHERS[@]}")
	while read -r pid pgid; do
		if [[ $pid == "$pgid" && $pid != "${CHILD:-}" ]]; then
			pids+=("$pid")
		fi
	done < <(ps -o pid= -o pgid= --ppid "$$" 2>/dev/null || true)
	for pid in "${pids[@]}"; do
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
	done
	deadline=$((SECONDS + WATCHER_STOP_SECONDS))
	for pid in "${pids[@]}"; do
		while process_alive "$pid" && ((SECONDS < deadline)); do
			sleep 0.1
		done
		if process_alive "$pid"; then
			log WARNING "maintenance watcher $pid still running ${WATCHER_STOP_SECONDS}s after SIGTERM; killing it"
			kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
		fi
	done
	WATCHERS=()
}

# process_alive PID: whether process PID exists and is not a zombie.
process_alive() {
	local state
	state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[[ -n $state && $state != Z* ]]
}

main() {
	local attempt=0 delay rc started failure cap tool on_notice
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

	find_worker

	mkdir -p -- "$(dirname -- "$LOCK_FILE")" || die "cannot create the directory of $LOCK_FILE"
	exec {LOCK_FD}>>"$LOCK_FILE" || die "cannot open lock file $LOCK_FILE"
	if ! flock -n "$LOCK_FD"; then
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
	md_string autoheal-checkpoint-cmd CHECKPOINT_CMD
	md_string autoheal-checkpoint-signal CHECKPOINT_SIGNAL
	md_int autoheal-checkpoint-wait-seconds 1800 CHECKPOINT_WAIT
	md_int autoheal-stop-grace-seconds 60 STOP_GRACE
	CHECKPOINT_SIGNAL="${CHECKPOINT_SIGNAL//[[:space:]]/}"
	CHECKPOINT_SIGNAL="${CHECKPOINT_SIGNAL#SIG}"
	if [[ -n $CHECKPOINT_SIGNAL ]]; then
		if [[ $CHECKPOINT_SIGNAL =~ ^[0-9]+$ ]] || ! kill -l "$CHECKPOINT_SIGNAL" >/dev/null 2>&1; then
			die "metadata autoheal-checkpoint-signal=\"$CHECKPOINT_SIGNAL\" is not a signal name (USR1, USR2, INT, ...)"
		fi
		CHECKPOINT_SIGNAL="${CHECKPOINT_SIGNAL^^}"
		case $CHECKPOINT_SIGNAL in
		KILL | STOP | CONT)
			die "metadata autoheal-checkpoint-signal=$CHECKPOINT_SIGNAL cannot be handled by the training; use USR1 or USR2"
			;;
		esac
	fi
	if ! mkdir -p -- "$STATE_DIR"; then
		die "cannot create the state directory $STATE_DIR"
	fi
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
	on_notice="report the next checkpoint"
	if [[ -n $CHECKPOINT_CMD ]]; then
		on_notice="run $CHECKPOINT_CMD"
	elif [[ -n $CHECKPOINT_SIGNAL ]]; then
		on_notice="send SIG$CHECKPOINT_SIGNAL to the training"
	fi
	cap=$MAX_ATTEMPTS
	if ((cap == 0)); then
		cap=unlimited
	fi
	log INFO "starting: train command: $TRAIN_CMD; checkpoint dir: ${CHECKPOINT_DIR:-none}${CHECKPOINT_MARKER:+ (marker $CHECKPOINT_MARKER)}; workdir: $PWD; max attempts: $cap; backoff ${BACKOFF_SECONDS}s..${BACKOFF_MAX_SECONDS}s; storage: ${STORAGE_CLI:-none}; on a maintenance notice: $on_notice"

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
			report_resumed "$attempt"
			rc=0
			run_command "$TRAIN_CMD" watch || rc=$?
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
