#!/usr/bin/env bats
# End-to-end behaviour of resume-training.sh against a fake metadata server,
# fake gcloud/gsutil over a local bucket tree and a fake training command.
# Metadata values below are shell code for the script to run, so they are
# single-quoted (SC2016); bats runs each test in its own subshell (SC2030/1).
# shellcheck disable=SC2016,SC2030,SC2031

load helpers

setup() {
	setup_fakes
	md_set autoheal-train-cmd fake-train
	md_set autoheal-checkpoint-dir gs://ckpt-bucket/llm
	mkdir -p "$FAKE_GCS_ROOT/ckpt-bucket"
}

teardown() {
	teardown_fakes
}

@test "resumes from the checkpoint with the highest step, not the lexicographically last" {
	checkpoint gs://ckpt-bucket/llm/checkpoint_900/ gs://ckpt-bucket/llm/checkpoint_12000/ \
		gs://ckpt-bucket/llm/checkpoint_3000/ gs://ckpt-bucket/llm/config.json \
		gs://ckpt-bucket/llm/checkpoint_13000.orbax-checkpoint-tmp-1712345678/

	run_script

	[ "$status" -eq 0 ]
	[ "$(train_runs)" = "attempt=1 worker=3 resume=gs://ckpt-bucket/llm/checkpoint_12000 dir=gs://ckpt-bucket/llm pwd=$PWD" ]
	[[ $output == *"resuming from gs://ckpt-bucket/llm/checkpoint_12000"* ]]
	[[ $output == *"training command finished successfully on attempt 1"* ]]
}

@test "resumes from plain step directories as Orbax writes them" {
	checkpoint gs://ckpt-bucket/llm/100/ gs://ckpt-bucket/llm/2000/ gs://ckpt-bucket/llm/300/
	md_set autoheal-checkpoint-dir gs://ckpt-bucket/llm/

	run_script

	[ "$status" -eq 0 ]
	[[ $(train_runs) == *" resume=gs://ckpt-bucket/llm/2000 "* ]]
}

@test "skips checkpoints without the completion marker" {
	checkpoint gs://ckpt-bucket/llm/1000/commit_success.txt gs://ckpt-bucket/llm/2000/commit_success.txt \
		gs://ckpt-bucket/llm/3000/
	md_set autoheal-checkpoint-marker commit_success.txt

	run_script

	[ "$status" -eq 0 ]
	[[ $(train_runs) == *" resume=gs://ckpt-bucket/llm/2000 "* ]]
	[[ $output == *"skipping gs://ckpt-bucket/llm/3000: no commit_success.txt"* ]]
}

@test "starts fresh when the checkpoint directory does not exist yet" {
	run_script

	[ "$status" -eq 0 ]
	[[ $(train_runs) == *" resume= dir=gs://ckpt-bucket/llm "* ]]
	[[ $output == *"no checkpoint under gs://ckpt-bucket/llm/: fresh start"* ]]
}

@test "starts fresh when the checkpoint directory holds only an unfinished save" {
	checkpoint gs://ckpt-bucket/llm/100.orbax-checkpoint-tmp-1712345678/

	run_script

	[ "$status" -eq 0 ]
	[[ $(train_runs) == *" resume= "* ]]
}

@test "starts fresh with an empty checkpoint directory when none is configured" {
	md_unset autoheal-checkpoint-dir

	run_script

	[ "$status" -eq 0 ]
	[[ $(train_runs) == *" resume= dir= "* ]]
	[ ! -e "$FAKE_STATE/gcs.log" ]
}

@test "never starts fresh while the checkpoint directory cannot be listed" {
	checkpoint gs://ckpt-bucket/llm/checkpoint_500/
	md_set autoheal-ready-timeout-seconds 0
	md_set autoheal-max-attempts 5
	# One failure for the readiness check, one for the first attempt.
	echo 2 >"$FAKE_STATE/gcs-fail"

	run_script

	[ "$status" -eq 0 ]
	[[ $output == *"attempt 1/5 failed: cannot list gs://ckpt-bucket/llm"* ]]
	[ "$(train_runs)" = "attempt=2 worker=3 resume=gs://ckpt-bucket/llm/checkpoint_500 dir=gs://ckpt-bucket/llm pwd=$PWD" ]
}

@test "a missing bucket is a failure, not a fresh start" {
	md_set autoheal-checkpoint-dir gs://no-such-bucket/llm
	md_set autoheal-ready-timeout-seconds 0
	md_set autoheal-max-attempts 2

	run_script

	[ "$status" -eq 1 ]
	[ -z "$(train_runs)" ]
	[[ $output == *"gs://no-such-bucket not found: 404"* ]]
	[[ $output == *"giving up after 2 attempts"* ]]
}

@test "retries a failing training command until it succeeds" {
	exit_codes 1 42 0

	run_script

	[ "$status" -eq 0 ]
	[ "$(train_runs | wc -l)" -eq 3 ]
	[[ $output == *"attempt 1/100 failed: training command exited with status 1"* ]]
	[[ $output == *"attempt 2/100 failed: training command exited with status 42"* ]]
	[[ $output == *"training command finished successfully on attempt 3"* ]]
}

@test "re-resolves the newest checkpoint before every attempt" {
	checkpoint gs://ckpt-bucket/llm/checkpoint_100/
	md_set autoheal-train-cmd 'fake-train --save "gs://ckpt-bucket/llm/checkpoint_$((AUTOHEAL_ATTEMPT * 1000))/"'
	exit_codes 1 1 0

	run_script

	[ "$status" -eq 0 ]
	run train_runs
	[[ ${lines[0]} == *" resume=gs://ckpt-bucket/llm/checkpoint_100 "* ]]
	[[ ${lines[1]} == *" resume=gs://ckpt-bucket/llm/checkpoint_1000 "* ]]
	[[ ${lines[2]} == *" resume=gs://ckpt-bucket/llm/checkpoint_2000 "* ]]
}

@test "stops at the attempt cap with a non-zero exit and says why" {
	md_set autoheal-max-attempts 3
	exit_codes 7 7 7 7 7

	run_script

	[ "$status" -eq 1 ]
	[ "$(train_runs | wc -l)" -eq 3 ]
	[[ $output == *"ERROR: giving up after 3 attempts (autoheal-max-attempts=3); last failure: training command exited with status 7"* ]]
}

@test "backs off exponentially up to the cap" {
	use_instant_sleep
	md_set autoheal-backoff-seconds 1
	md_set autoheal-backoff-max-seconds 4
	md_set autoheal-max-attempts 5
	exit_codes 1 1 1 1 1

	run_script

	[ "$status" -eq 1 ]
	[ "$(tr '\n' ' ' <"$FAKE_STATE/sleeps")" = "1 2 4 4 " ]
}

@test "a failure after a long run starts the backoff over" {
	use_instant_sleep
	md_set autoheal-backoff-seconds 1
	md_set autoheal-backoff-max-seconds 5
	md_set autoheal-max-attempts 4
	# Attempts 1 and 2 fail at once, attempt 3 runs longer than the cap. The
	# cap is 5 s, not 2: the script counts whole seconds ($SECONDS), so an
	# attempt that fails "at once" on a loaded machine (1.1 s across two
	# second boundaries) read as a 2 s "long run" (found by STRESS=1).
	md_set autoheal-train-cmd 'if [ "$AUTOHEAL_ATTEMPT" = 3 ]; then /bin/sleep 6; fi; fake-train'
	exit_codes 1 1 1 1

	run_script

	[ "$status" -eq 1 ]
	[ "$(tr '\n' ' ' <"$FAKE_STATE/sleeps")" = "1 2 1 " ]
}

@test "a second run while training runs exits 0 without starting another training" {
	md_set autoheal-train-cmd 'fake-train --block'
	start_background

	run_script

	[ "$status" -eq 0 ]
	[[ $output == *"already running here; exiting"* ]]
	[ "$(train_runs | wc -l)" -eq 1 ]

	touch "$FAKE_STATE/train-release"
	wait "$BG_PID"
	BG_PID=""
	[ "$(train_runs | wc -l)" -eq 1 ]
}

@test "the lock is free again once the first run finished" {
	run_script
	[ "$status" -eq 0 ]

	run_script

	[ "$status" -eq 0 ]
	[ "$(train_runs | wc -l)" -eq 2 ]
}

@test "SIGTERM stops the training command and the script" {
	md_set autoheal-train-cmd 'fake-train --block; touch "$FAKE_STATE/next-command-ran"'
	start_background

	kill -TERM "$BG_PID"
	status=0
	wait "$BG_PID" || status=$?
	BG_PID=""

	# The script waited for the trainer, so its trap has run by now.
	[ "$status" -eq 143 ]
	[ -e "$FAKE_STATE/train-terminated" ]
	grep -q "received SIGTERM" "$FAKE_STATE/background.out"
	[ ! -e "$FAKE_STATE/next-command-ran" ]
}

@test "SIGTERM lets a multi-line training command finish its save and exits with its status" {
	md_set autoheal-train-cmd 'echo "training starts"
fake-train --save-on-term 2 42 --block
touch "$FAKE_STATE/next-command-ran"'
	start_background

	kill -TERM "$BG_PID"
	status=0
	wait "$BG_PID" || status=$?
	BG_PID=""

	[ -e "$FAKE_STATE/saved" ]
	[ "$status" -eq 42 ]
	[ ! -e "$FAKE_STATE/next-command-ran" ]
	grep -q "the running command exited with status 42 after SIGTERM" "$FAKE_STATE/background.out"
}

@test "SIGTERM waits for the whole process group, not only the command's shell" {
	# The shell waits in the background: SIGTERM ends its wait at once, while
	# the trainer still saves.
	md_set autoheal-train-cmd 'fake-train --save-on-term 2 0 --block &
wait'
	start_background

	kill -TERM "$BG_PID"
	status=0
	wait "$BG_PID" || status=$?
	BG_PID=""

	[ -e "$FAKE_STATE/saved" ]
	[ "$status" -eq 143 ]
}

@test "SIGTERM kills what is left of the group after the grace" {
	md_set autoheal-stop-grace-seconds 1
	md_set autoheal-train-cmd 'trap "" TERM; fake-train --save-on-term 30 0 --block'
	start_background

	kill -TERM "$BG_PID"
	status=0
	wait "$BG_PID" || status=$?
	BG_PID=""

	[ "$status" -eq 137 ]
	[ ! -e "$FAKE_STATE/saved" ]
	grep -q "still running after 1s; killing them" "$FAKE_STATE/background.out"
	# Nothing of this test's training group is alive once the script has
	# exited. By group, not by name: a pgrep -f of the command line also
	# sees every other run of this suite on the machine (it failed whenever
	# two ran at once). Alive, not listed: killed processes the script does
	# not parent stay zombies until init reaps them.
	run group_live "$(<"$FAKE_STATE/train-pgid")"
	[ "$status" -eq 1 ]
}

@test "reports every start of the training in the guest attribute autoheal/resumed and the log" {
	checkpoint gs://ckpt-bucket/llm/1000/commit_success.txt
	touch -d 2026-11-30T04:05:06Z "$FAKE_GCS_ROOT/ckpt-bucket/llm/1000/commit_success.txt"
	md_set autoheal-checkpoint-marker commit_success.txt
	exit_codes 1 0

	run_script

	[ "$status" -eq 0 ]
	[ "$(grep -c 'INFO: resumed: {"time":"[^"]*","checkpoint":"gs://ckpt-bucket/llm/1000","checkpointTime":"2026-11-30T04:05:06Z","attempt":[12],"worker":3}$' <<<"$output")" -eq 2 ]
	local times='"time":"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z"'
	run grep "^PUT /computeMetadata/v1/instance/guest-attributes/autoheal/resumed " "$MD_ROOT/_puts.log"
	[ "${#lines[@]}" -eq 2 ]
	[[ ${lines[0]} =~ \ \{${times},\"checkpoint\":\"gs://ckpt-bucket/llm/1000\",\"checkpointTime\":\"2026-11-30T04:05:06Z\",\"attempt\":1,\"worker\":3\}$ ]]
	[[ ${lines[1]} =~ \ \{${times},\"checkpoint\":\"gs://ckpt-bucket/llm/1000\",\"checkpointTime\":\"2026-11-30T04:05:06Z\",\"attempt\":2,\"worker\":3\}$ ]]
	[[ $(guest resumed) == *'"attempt":2,"worker":3}' ]]
}

@test "a fresh start reports an empty checkpoint and time" {
	run_script

	[ "$status" -eq 0 ]
	[[ $output == *'INFO: resumed: {"time":"'*'","checkpoint":"","checkpointTime":"","attempt":1,"worker":3}'* ]]
	[[ $(guest resumed) == '{"time":"'*'","checkpoint":"","checkpointTime":"","attempt":1,"worker":3}' ]]
}

@test "a checkpoint without a marker is timed by its newest object" {
	checkpoint gs://ckpt-bucket/llm/step_7/params/a gs://ckpt-bucket/llm/step_7/params/b
	touch -d 2026-11-29T01:00:00Z "$FAKE_GCS_ROOT/ckpt-bucket/llm/step_7/params/a"
	touch -d 2026-11-29T02:00:00Z "$FAKE_GCS_ROOT/ckpt-bucket/llm/step_7/params/b"

	run_script

	[ "$status" -eq 0 ]
	[[ $(guest resumed) == *'"checkpoint":"gs://ckpt-bucket/llm/step_7","checkpointTime":"2026-11-29T02:00:00Z",'* ]]
}

@test "training goes on when guest attributes cannot be written" {
	touch "$MD_ROOT/_guest_attributes_disabled"

	run_script

	[ "$status" -eq 0 ]
	[[ $output == *"cannot write guest attribute autoheal/resumed (HTTP 403: Guest attributes endpoint access is disabled."* ]]
	[ "$(train_runs | wc -l)" -eq 1 ]
}

@test "fails with a clear message when the training command is not set" {
	md_unset autoheal-train-cmd

	run_script

	[ "$status" -eq 2 ]
	[[ $output == *"worker=3 ERROR: metadata key autoheal-train-cmd is not set"* ]]
	[ -z "$(train_runs)" ]
}

@test "rejects an invalid number naming the key and the value" {
	md_set autoheal-max-attempts ten

	run_script

	[ "$status" -eq 2 ]
	[[ $output == *'ERROR: metadata autoheal-max-attempts="ten" is not a non-negative integer'* ]]
	[ -z "$(train_runs)" ]
}

@test "rejects a checkpoint directory that is not on Cloud Storage" {
	md_set autoheal-checkpoint-dir /mnt/ckpt

	run_script

	[ "$status" -eq 2 ]
	[[ $output == *'autoheal-checkpoint-dir="/mnt/ckpt" is not a gs:// URI'* ]]
}

@test "every log line carries the timestamp and worker number, also in syslog" {
	md_set agent-worker-number 17
	md_set autoheal-train-cmd $'true\nfake-train'
	exit_codes 1 0

	run_script

	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -ge 5 ]
	local line
	for line in "${lines[@]}"; do
		[[ $line =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\ tpu-autoheal\ worker=17\ (INFO|WARNING|ERROR):\  ]]
	done
	[[ $(train_runs) == *" worker=17 "* ]]
	grep -q -- "-t tpu-autoheal -p user.warning -- worker=17 WARNING: attempt 1/100 failed" "$FAKE_STATE/logger.log"
}

@test "a Cloud TPU VM's worker number is agent-worker-number" {
	md_instance name t1v-n-0f2c9a1e-w-7

	run_script

	[ "$status" -eq 0 ]
	[[ $(train_runs) == *" worker=3 "* ]]
	[[ $output != *"assuming a single host"* ]]
}

@test "a Compute Engine TPU VM named NAME-w-N is worker N" {
	md_compute_engine llm-tpu7x-w-2

	run_script

	[ "$status" -eq 0 ]
	[[ $(train_runs) == *" worker=2 "* ]]
	[[ $output == *"worker=2 INFO: metadata agent-worker-number not set; worker 2 from the instance name llm-tpu7x-w-2"* ]]
	[[ $(guest resumed) == *'"worker":2}' ]]
}

@test "a Compute Engine TPU VM takes its worker from WORKER_ID in tpu-env" {
	md_compute_engine llm-slice-x7k2
	md_set tpu-env "ACCELERATOR_TYPE: 'tpu7x-16'
TOPOLOGY: '2x2x4'
WORKER_ID: '1'
ZONE: 'us-central1-c'"

	run_script

	[ "$status" -eq 0 ]
	[[ $(train_runs) == *" worker=1 "* ]]
	[[ $output == *"worker 1 from WORKER_ID in metadata tpu-env"* ]]
}

@test "a Compute Engine TPU VM whose name holds no worker is worker 0, with a warning" {
	local name
	# Named for its machine type, and named by a MIG (four random characters).
	for name in llm-v5p-8 llm-slice-4821; do
		md_compute_engine "$name"
		rm -f "$FAKE_STATE/train.log"

		run_script

		[ "$status" -eq 0 ]
		[[ $(train_runs) == *" worker=0 "* ]]
		[[ $output == *"WARNING: metadata agent-worker-number not set and the instance name $name does not end in -w-N; assuming a single host, worker 0"* ]]
	done
}

@test "waits for a metadata server that is still booting" {
	echo 2 >"$MD_ROOT/_unavailable"

	run_script

	[ "$status" -eq 0 ]
	[[ $output == *"metadata server not ready (HTTP 503"* ]]
	[ "$(train_runs | wc -l)" -eq 1 ]
	# Every request carried the header the real server insists on.
	run grep -c -v "flavor=Google$" "$MD_ROOT/_requests.log"
	[ "$output" = 0 ]
}

@test "gives up with a clear message when the metadata server never answers" {
	export AUTOHEAL_METADATA_URL=http://127.0.0.1:1/computeMetadata/v1

	run_script

	[ "$status" -eq 2 ]
	[[ $output == *"metadata server unreachable at http://127.0.0.1:1/computeMetadata/v1/instance/attributes/agent-worker-number after 3 tries"* ]]
	[ -z "$(train_runs)" ]
}

@test "uses gsutil when gcloud has no storage command" {
	touch "$FAKE_STATE/gcloud-legacy"
	checkpoint gs://ckpt-bucket/llm/step_20/ gs://ckpt-bucket/llm/step_100/

	run_script

	[ "$status" -eq 0 ]
	[[ $(train_runs) == *" resume=gs://ckpt-bucket/llm/step_100 "* ]]
	grep -q "^gsutil ls gs://ckpt-bucket/llm/$" "$FAKE_STATE/gcs.log"
}

@test "runs the setup command once, in the work directory, until it succeeds" {
	local workdir=$BATS_TEST_TMPDIR/work/llm
	md_set autoheal-workdir "$workdir"
	md_set autoheal-setup-cmd 'echo setup >>"$FAKE_STATE/setup.log"; [ "$(wc -l <"$FAKE_STATE/setup.log")" -ge 2 ]'
	exit_codes 1 0

	run_script

	[ "$status" -eq 0 ]
	[ "$(wc -l <"$FAKE_STATE/setup.log")" -eq 2 ]
	[[ $output == *"attempt 1/100 failed: setup command exited with status 1"* ]]
	run train_runs
	[ "${#lines[@]}" -eq 2 ]
	[[ ${lines[0]} == "attempt=2 "*" pwd=$workdir" ]]
	[[ ${lines[1]} == "attempt=3 "*" pwd=$workdir" ]]
}

@test "waits a bounded time for TPU devices, then starts anyway" {
	rm "$BATS_TEST_TMPDIR/dev/accel0"
	md_set autoheal-ready-timeout-seconds 1

	run_script

	[ "$status" -eq 0 ]
	[[ $output == *"not ready after 1s (TPU devices: no, checkpoint storage: yes)"* ]]
	[ "$(train_runs | wc -l)" -eq 1 ]
}

@test "reports ready once TPU devices and storage are there" {
	run_script

	[ "$status" -eq 0 ]
	[[ $output == *"ready (TPU devices: yes, checkpoint storage: yes)"* ]]
}
