# shellcheck shell=bash
# Test harness for resume-training.sh: a fake metadata server on a free
# loopback port, fake gcloud/gsutil over a local bucket tree, a fake training
# command and a fake logger on PATH, and a private lock file and TPU device.
# Everything lives in BATS_TEST_TMPDIR; teardown_fakes stops what setup_fakes
# started, by process id.

STARTUP_DIR=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
SCRIPT=$STARTUP_DIR/resume-training.sh
MD_PID=""
BG_PID=""

setup_fakes() {
	export FAKE_STATE=$BATS_TEST_TMPDIR/state
	export FAKE_GCS_ROOT=$BATS_TEST_TMPDIR/gcs
	MD_ROOT=$BATS_TEST_TMPDIR/md
	MD_ATTR=$MD_ROOT/computeMetadata/v1/instance/attributes
	local bin=$BATS_TEST_TMPDIR/bin
	mkdir -p "$FAKE_STATE" "$FAKE_GCS_ROOT" "$MD_ATTR" "$bin" "$BATS_TEST_TMPDIR/dev"

	ln -s "$BATS_TEST_DIRNAME/fake-gcs.bash" "$bin/gcloud"
	ln -s "$BATS_TEST_DIRNAME/fake-gcs.bash" "$bin/gsutil"
	ln -s "$BATS_TEST_DIRNAME/fake-train.bash" "$bin/fake-train"
	cat >"$bin/logger" <<-'STUB'
		#!/usr/bin/env bash
		printf '%s\n' "$*" >>"$FAKE_STATE/logger.log"
	STUB
	chmod +x "$bin/logger"
	export PATH=$bin:$PATH

	python3 "$BATS_TEST_DIRNAME/fake_metadata.py" "$MD_ROOT" "$BATS_TEST_TMPDIR/md.port" 3>&- &
	MD_PID=$!
	local _
	for _ in $(seq 100); do
		if [[ -s $BATS_TEST_TMPDIR/md.port ]]; then
			break
		fi
		sleep 0.1
	done
	[[ -s $BATS_TEST_TMPDIR/md.port ]] || {
		echo "fake metadata server did not start" >&2
		return 1
	}
	AUTOHEAL_METADATA_URL="http://127.0.0.1:$(<"$BATS_TEST_TMPDIR/md.port")/computeMetadata/v1"
	export AUTOHEAL_METADATA_URL
	export AUTOHEAL_METADATA_RETRIES=3
	export AUTOHEAL_METADATA_RETRY_SECONDS=0
	export AUTOHEAL_LOCK_FILE=$BATS_TEST_TMPDIR/run/lock/resume-training.lock
	export AUTOHEAL_STATE_DIR=$BATS_TEST_TMPDIR/var/lib/tpu-autoheal
	export AUTOHEAL_WATCH_TIMEOUT_SECONDS=20
	export AUTOHEAL_CHECKPOINT_POLL_SECONDS=0.2
	GUEST=$MD_ROOT/computeMetadata/v1/instance/guest-attributes/autoheal
	export AUTOHEAL_TPU_DEVICES="$BATS_TEST_TMPDIR/dev/accel*"
	touch "$BATS_TEST_TMPDIR/dev/accel0"

	# A Cloud TPU VM's worker: the TPU platform sets agent-worker-number and
	# names the worker's VM t1v-n-<id>-w-<worker>.
	md_set agent-worker-number 3
	md_instance name t1v-n-0f2c9a1e-w-3
	md_set autoheal-backoff-seconds 0
	md_set autoheal-backoff-max-seconds 0
	md_set autoheal-ready-timeout-seconds 5
}

teardown_fakes() {
	if [[ -n $BG_PID ]]; then
		touch "$FAKE_STATE/train-release"
		kill "$BG_PID" 2>/dev/null || true
		wait "$BG_PID" 2>/dev/null || true
	fi
	if [[ -n $MD_PID ]]; then
		kill "$MD_PID" 2>/dev/null || true
		wait "$MD_PID" 2>/dev/null || true
	fi
}

# md_set KEY VALUE: sets instance attribute KEY (atomically, as a hanging GET
# may read it at any moment).
md_set() {
	printf '%s' "$2" >"$MD_ATTR/_tmp.$1"
	mv -f -- "$MD_ATTR/_tmp.$1" "$MD_ATTR/$1"
}

# md_instance KEY VALUE: sets instance/KEY (name, hostname, machine-type, ...).
md_instance() {
	printf '%s' "$2" >"$MD_ROOT/computeMetadata/v1/instance/_tmp.$1"
	mv -f -- "$MD_ROOT/computeMetadata/v1/instance/_tmp.$1" "$MD_ROOT/computeMetadata/v1/instance/$1"
}

# md_compute_engine NAME: makes the fake metadata server look like a TPU VM
# created through Compute Engine (TPU7x): no agent-worker-number, the
# instance's own name, hostname, zone and TPU machine type.
md_compute_engine() {
	md_unset agent-worker-number
	md_instance name "$1"
	md_instance hostname "$1.us-central1-c.c.acme-ml.internal"
	md_instance id 4520861339827441234
	md_instance zone projects/123456789012/zones/us-central1-c
	md_instance machine-type projects/123456789012/machineTypes/tpu7x-standard-4t
}

# md_set_platform JSON: sets instance/upcoming-maintenance, the platform's
# notice (absent, the fake answers 404 as a VM without it does).
md_set_platform() {
	printf '%s' "$1" >"$MD_ROOT/computeMetadata/v1/instance/_tmp.upcoming"
	mv -f -- "$MD_ROOT/computeMetadata/v1/instance/_tmp.upcoming" "$MD_ROOT/computeMetadata/v1/instance/upcoming-maintenance"
}

# notice WINDOW_START [SENT_AT]: a notice as tpu-autoheal's prepare writes it
# into autoheal-maintenance; SENT_AT defaults to now.
notice() {
	printf '{"notice":"%s","sentAt":"%s","status":"PENDING","type":"SCHEDULED","windowStart":"%s","windowEnd":"%s","canReschedule":true}' \
		"$1" "${2:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}" "$1" "2099-01-01T04:00:00Z"
}

# guest KEY: the guest attribute autoheal/KEY as last written, empty if never.
guest() {
	cat "$GUEST/$1" 2>/dev/null || true
}

# guest_puts KEY: how many times autoheal/KEY was written.
guest_puts() {
	grep -c "^PUT /computeMetadata/v1/instance/guest-attributes/autoheal/$1 " "$MD_ROOT/_puts.log" 2>/dev/null || true
}

# wait_for COMMAND...: polls COMMAND every 0.1s until it succeeds, at most
# 60s (generous: the machine may be loaded); fails saying what it waited for.
wait_for() {
	local _
	for _ in $(seq 600); do
		if "$@"; then
			return 0
		fi
		/bin/sleep 0.1
	done
	echo "timed out waiting for: $*" >&2
	return 1
}

# group_live PGID: whether a live (not zombie) process is in process group
# PGID, printing those that are.
group_live() {
	ps -eo pgid=,pid=,stat=,args= | awk -v g="$1" '$1 == g && $3 !~ /^Z/ { print; found = 1 } END { exit !found }'
}

# log_has TEXT: whether the background run's output contains TEXT.
log_has() {
	grep -qF -- "$1" "$FAKE_STATE/background.out" 2>/dev/null
}

# old FILE...: makes local fake-bucket objects look written long ago.
old() {
	local f
	for f in "$@"; do
		touch -d 2020-01-01T00:00:00Z -- "$FAKE_GCS_ROOT/${f#gs://}"
	done
}

md_unset() {
	rm -f -- "$MD_ATTR/$1"
}

# checkpoint gs://BUCKET/PATH[/FILE]...: creates checkpoint directories (URLs
# ending in /) or objects in the fake bucket.
checkpoint() {
	local url rest
	for url in "$@"; do
		rest=${url#gs://}
		if [[ $url == */ ]]; then
			mkdir -p -- "$FAKE_GCS_ROOT/$rest"
		else
			mkdir -p -- "$(dirname -- "$FAKE_GCS_ROOT/$rest")"
			: >"$FAKE_GCS_ROOT/$rest"
		fi
	done
}

# exit_codes CODE...: the statuses of the next training runs, in order.
exit_codes() {
	printf '%s\n' "$@" >"$FAKE_STATE/exit-codes"
}

run_script() {
	run timeout 60 "$SCRIPT"
}

# start_background: runs the script in the background (output in
# FAKE_STATE/background.out) and waits until its training command started.
start_background() {
	"$SCRIPT" >"$FAKE_STATE/background.out" 2>&1 3>&- &
	BG_PID=$!
	wait_for_file "$FAKE_STATE/train-started"
}

wait_for_file() {
	wait_for test -e "$1"
}

# train_runs: prints FAKE_STATE/train.log, one line per training run.
train_runs() {
	cat "$FAKE_STATE/train.log" 2>/dev/null || true
}

# use_instant_sleep: replaces sleep with a stub that records its argument in
# FAKE_STATE/sleeps and returns at once, to check backoff delays exactly.
# Only whole seconds are recorded: the script's sub-second sleeps are polls
# (is the stopped watcher gone yet?), whose number depends on the machine.
use_instant_sleep() {
	local bin=$BATS_TEST_TMPDIR/instant
	mkdir -p "$bin"
	cat >"$bin/sleep" <<-'STUB'
		#!/usr/bin/env bash
		if [[ $1 =~ ^[0-9]+$ ]]; then
			printf '%s\n' "$1" >>"$FAKE_STATE/sleeps"
		fi
	STUB
	chmod +x "$bin/sleep"
	export PATH=$bin:$PATH
}
