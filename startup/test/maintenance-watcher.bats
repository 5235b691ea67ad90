#!/usr/bin/env bats
# The maintenance watcher of resume-training.sh: while the training runs it
# waits on the fake metadata server's hanging GETs for a notice, asks the
# training to checkpoint once per notice, and reports the checkpoint in the
# guest attribute autoheal/checkpoint. Metadata values below are shell code
# for the script to run, so they are single-quoted (SC2016); bats runs each
# test in its own subshell (SC2030/1).
# shellcheck disable=SC2016,SC2030,SC2031

load helpers

setup() {
	setup_fakes
	md_set autoheal-train-cmd 'fake-train --block'
	md_set autoheal-checkpoint-dir gs://ckpt-bucket/llm
	md_set autoheal-checkpoint-marker commit_success.txt
	# A complete checkpoint from before any notice.
	checkpoint gs://ckpt-bucket/llm/1000/commit_success.txt
	old gs://ckpt-bucket/llm/1000/commit_success.txt
	# What the checkpoint command does: record its call, write step 2000.
	md_set autoheal-checkpoint-cmd 'echo "$AUTOHEAL_NOTICE" >>"$FAKE_STATE/checkpoint-cmd.log"
mkdir -p "$FAKE_GCS_ROOT/ckpt-bucket/llm/2000"
touch "$FAKE_GCS_ROOT/ckpt-bucket/llm/2000/commit_success.txt"'
}

teardown() {
	teardown_fakes
}

finish_training() {
	touch "$FAKE_STATE/train-release"
	status=0
	wait "$BG_PID" || status=$?
	BG_PID=""
}

cmd_runs() {
	wc -l <"$FAKE_STATE/checkpoint-cmd.log" 2>/dev/null || echo 0
}

has_guest() {
	[[ -s $GUEST/$1 ]]
}

# requested PREFIX: whether the fake metadata server got a GET starting with
# /computeMetadata/v1PREFIX.
requested() {
	grep -qF -- "/computeMetadata/v1$1" "$MD_ROOT/_requests.log" 2>/dev/null
}

@test "a new notice runs the checkpoint command once and reports the new checkpoint" {
	start_background
	# No notice yet: the watcher hangs on the attributes until one changes.
	wait_for requested "/instance/attributes/?wait_for_change=true&timeout_sec=20&last_etag="
	local n
	n=$(notice 2026-12-08T02:00:00Z)
	md_set autoheal-maintenance "$n"

	wait_for has_guest checkpoint

	run guest checkpoint
	[[ $output =~ ^\{\"notice\":\"2026-12-08T02:00:00Z\",\"checkpoint\":\"gs://ckpt-bucket/llm/2000\",\"time\":\"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\"\}$ ]]
	[ "$(cmd_runs)" -eq 1 ]
	[ "$(cat "$FAKE_STATE/checkpoint-cmd.log")" = "$n" ]
	[ "$(guest_puts checkpoint)" -eq 1 ]
	[[ $(guest notice) == '{"notice":"2026-12-08T02:00:00Z","time":"'*'","action":"cmd"}' ]]
	# Then it waits for the next change of the notice, bounded.
	wait_for requested "/instance/attributes/autoheal-maintenance?wait_for_change=true&timeout_sec=20&last_etag="

	finish_training
	[ "$status" -eq 0 ]
	[ "$(cmd_runs)" -eq 1 ]
}

@test "a notice already set at start is acted on at once" {
	md_set autoheal-maintenance "$(notice 2026-12-08T02:00:00Z)"

	start_background
	wait_for has_guest checkpoint

	[[ $(guest checkpoint) == '{"notice":"2026-12-08T02:00:00Z","checkpoint":"gs://ckpt-bucket/llm/2000",'* ]]
	[ "$(cmd_runs)" -eq 1 ]
	finish_training
	[ "$status" -eq 0 ]
}

@test "the same notice seen again, and after a restart, runs the checkpoint command once" {
	md_set autoheal-maintenance "$(notice 2026-12-08T02:00:00Z 2026-12-01T00:00:00Z)"
	md_set autoheal-checkpoint-wait-seconds 999999999
	start_background
	wait_for has_guest checkpoint

	# The function rewrites the notice (another sweep): same notice id.
	md_set autoheal-maintenance "$(notice 2026-12-08T02:00:00Z)"
	wait_for log_has "maintenance notice 2026-12-08T02:00:00Z (function) already handled"
	finish_training
	[ "$status" -eq 0 ]

	# A later boot with the notice still in metadata.
	rm -f "$FAKE_STATE/train-started" "$FAKE_STATE/train-release"
	: >"$FAKE_STATE/background.out"
	start_background
	wait_for log_has "already handled"
	finish_training

	[ "$(cmd_runs)" -eq 1 ]
	[ "$(guest_puts checkpoint)" -eq 1 ]
}

@test "a new notice after a handled one is acted on again" {
	md_set autoheal-maintenance "$(notice 2026-12-08T02:00:00Z)"
	start_background
	wait_for has_guest checkpoint
	rm -rf "$FAKE_GCS_ROOT/ckpt-bucket/llm/2000"

	md_set autoheal-maintenance "$(notice 2026-12-15T02:00:00Z)"

	wait_for grep -q '"notice":"2026-12-15T02:00:00Z"' "$GUEST/checkpoint"
	[ "$(cmd_runs)" -eq 2 ]
	finish_training
	[ "$status" -eq 0 ]
}

@test "an older checkpoint does not count for the notice" {
	# The command asks for a checkpoint that never comes.
	md_set autoheal-checkpoint-cmd 'echo asked >>"$FAKE_STATE/checkpoint-cmd.log"'
	md_set autoheal-checkpoint-wait-seconds 5
	start_background
	md_set autoheal-maintenance "$(notice 2026-12-08T02:00:00Z)"

	wait_for log_has "no checkpoint newer than maintenance notice 2026-12-08T02:00:00Z within 5s"

	[ "$(cmd_runs)" -eq 1 ]
	[ ! -e "$GUEST/checkpoint" ]
	finish_training
	[ "$status" -eq 0 ]
}

@test "the checkpoint signal reaches every process of the training's group, and the training goes on" {
	md_unset autoheal-checkpoint-cmd
	md_set autoheal-checkpoint-signal SIGUSR1
	# Two lines: the trainer is a child of the command's shell, not the shell.
	md_set autoheal-train-cmd 'echo starting >>"$FAKE_STATE/shell.log"
fake-train --checkpoint-on USR1 gs://ckpt-bucket/llm/2000 --block
echo "after training: $?" >>"$FAKE_STATE/shell.log"'
	start_background

	md_set autoheal-maintenance "$(notice 2026-12-08T02:00:00Z)"
	wait_for has_guest checkpoint

	[ "$(wc -l <"$FAKE_STATE/signals")" -eq 1 ]
	[[ $(cat "$FAKE_STATE/signals") == "USR1 "* ]]
	[[ $(guest checkpoint) == '{"notice":"2026-12-08T02:00:00Z","checkpoint":"gs://ckpt-bucket/llm/2000",'* ]]
	[[ $(guest notice) == *'"action":"signal"}' ]]
	[ ! -e "$FAKE_STATE/train-terminated" ]
	kill -0 "$BG_PID"
	log_has "sent SIGUSR1 to the training's process group"

	finish_training
	[ "$status" -eq 0 ]
	# The shell around the trainer survived the signal and ran on.
	[ "$(cat "$FAKE_STATE/shell.log")" = $'starting\nafter training: 0' ]
	[ "$(train_runs | wc -l)" -eq 1 ]
}

@test "with neither a checkpoint command nor a signal it asks nothing and reports the next checkpoint" {
	md_unset autoheal-checkpoint-cmd
	md_set autoheal-train-cmd 'fake-train --checkpoint-on USR1 gs://ckpt-bucket/llm/9999 --block'
	start_background

	md_set autoheal-maintenance "$(notice 2026-12-08T02:00:00Z)"
	wait_for log_has "neither autoheal-checkpoint-cmd nor autoheal-checkpoint-signal is set"
	wait_for has_guest notice
	[[ $(guest notice) == *'"action":"none"}' ]]
	[ ! -e "$GUEST/checkpoint" ]

	# The training's own routine checkpoint, after the notice.
	checkpoint gs://ckpt-bucket/llm/3000/commit_success.txt
	wait_for has_guest checkpoint

	[[ $(guest checkpoint) == '{"notice":"2026-12-08T02:00:00Z","checkpoint":"gs://ckpt-bucket/llm/3000",'* ]]
	[ ! -e "$FAKE_STATE/signals" ]
	[ ! -e "$FAKE_STATE/checkpoint-cmd.log" ]
	finish_training
	[ "$status" -eq 0 ]
}

@test "a notice from the platform's upcoming-maintenance is acted on too" {
	md_set_platform '{ "can_reschedule": "true", "maintenance_status": "PENDING", "type": "SCHEDULED", "window_end_time": "2099-12-08T06:00:00Z", "window_start_time": "2026-12-08T02:00:00.000Z" }'

	start_background
	wait_for has_guest checkpoint

	[[ $(guest checkpoint) == '{"notice":"2026-12-08T02:00:00.000Z","checkpoint":"gs://ckpt-bucket/llm/2000",'* ]]
	wait_for requested "/instance/upcoming-maintenance?alt=json&wait_for_change=true&timeout_sec=20&last_etag="

	# tpu-autoheal's notice for the same window is the same notice.
	md_set autoheal-maintenance "$(notice 2026-12-08T02:00:00Z)"
	wait_for log_has "maintenance notice 2026-12-08T02:00:00Z (function) already handled"
	[ "$(cmd_runs)" -eq 1 ]
	finish_training
	[ "$status" -eq 0 ]
}

@test "where upcoming-maintenance is not served, the watcher says so and keeps watching autoheal-maintenance" {
	start_background
	wait_for log_has "instance/upcoming-maintenance is not served here"

	md_set autoheal-maintenance "$(notice 2026-12-08T02:00:00Z)"
	wait_for has_guest checkpoint
	finish_training
	[ "$status" -eq 0 ]
}

@test "a value that is not a notice is logged and ignored" {
	start_background
	md_set autoheal-maintenance 'soon'

	wait_for log_has 'metadata autoheal-maintenance is not a notice (no "notice" field): soon'
	[ ! -e "$FAKE_STATE/checkpoint-cmd.log" ]
	finish_training
	[ "$status" -eq 0 ]
}

@test "the watcher backs off while the metadata server fails, then acts on the notice" {
	start_background
	wait_for requested "/instance/attributes/?wait_for_change=true"
	echo 3 >"$MD_ROOT/_unavailable"
	md_set autoheal-maintenance "$(notice 2026-12-08T02:00:00Z)"

	wait_for has_guest checkpoint

	log_has "maintenance watcher: HTTP 503 for instance/attributes/autoheal-maintenance"
	[[ $(guest checkpoint) == '{"notice":"2026-12-08T02:00:00Z",'* ]]
	[ "$(cmd_runs)" -eq 1 ]
	finish_training
	[ "$status" -eq 0 ]
}

@test "the watcher stops when the training ends" {
	start_background
	wait_for requested "/instance/attributes/?wait_for_change=true"

	finish_training

	[ "$status" -eq 0 ]
	# No watcher is left hanging on the metadata server.
	run pgrep -f -- "$AUTOHEAL_METADATA_URL/instance/"
	[ "$status" -eq 1 ]
}

@test "an invalid checkpoint signal stops the script with a clear message" {
	md_set autoheal-checkpoint-signal USR9

	run_script

	[ "$status" -eq 2 ]
	[[ $output == *'metadata autoheal-checkpoint-signal="USR9" is not a signal name'* ]]
	[ -z "$(train_runs)" ]
}
