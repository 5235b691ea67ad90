#!/usr/bin/env bats
# Which listing entry resume-training.sh treats as the newest checkpoint:
# newest_first, sourced from the script (sourcing defines, does not run).

setup() {
	# shellcheck source=startup/resume-training.sh disable=SC1091
	source "$BATS_TEST_DIRNAME/../resume-training.sh"
}

# newest BASE ENTRY...: the first candidate newest_first picks from a listing
# of BASE holding ENTRY... (full URLs, as gcloud storage ls prints them).
newest() {
	local base=$1
	shift
	printf '%s\n' "$@" | newest_first "$base" | head -n 1
}

@test "higher step wins over lexicographic order" {
	[ "$(newest gs://b/c/ gs://b/c/checkpoint_900/ gs://b/c/checkpoint_12000/ gs://b/c/checkpoint_3000/)" = gs://b/c/checkpoint_12000/ ]
}

@test "bare step directories compare as numbers" {
	[ "$(newest gs://b/c/ gs://b/c/99/ gs://b/c/100/ gs://b/c/0000101/)" = gs://b/c/0000101/ ]
}

@test "numbers compare left to right: epoch before step" {
	[ "$(newest gs://b/c/ gs://b/c/epoch2_step900/ gs://b/c/epoch3_step10/ gs://b/c/epoch1_step5000/)" = gs://b/c/epoch3_step10/ ]
}

@test "timestamps order by date, then time" {
	[ "$(newest gs://b/c/ gs://b/c/20240430-2359/ gs://b/c/20240501-0900/ gs://b/c/20240501-0800/)" = gs://b/c/20240501-0900/ ]
}

@test "checkpoint files order by the step in their name" {
	[ "$(newest gs://b/c/ gs://b/c/ckpt-500.pt gs://b/c/ckpt-1000.pt gs://b/c/ckpt-800.pt)" = gs://b/c/ckpt-1000.pt ]
}

@test "numbered names rank above names without numbers" {
	[ "$(newest gs://b/c/ gs://b/c/step_1/ gs://b/c/tokenizer/ gs://b/c/zzz.json)" = gs://b/c/step_1/ ]
}

@test "names without numbers fall back to lexicographic order" {
	[ "$(newest gs://b/c/ gs://b/c/alpha/ gs://b/c/latest/ gs://b/c/final/)" = gs://b/c/latest/ ]
}

@test "unfinished saves are never candidates" {
	[ "$(newest gs://b/c/ gs://b/c/100/ gs://b/c/200.orbax-checkpoint-tmp-1712345678/ gs://b/c/300.partial/ gs://b/c/400_INCOMPLETE/ gs://b/c/.500/)" = gs://b/c/100/ ]
}

@test "the directory's own placeholder and foreign lines are ignored" {
	[ "$(newest gs://b/c/ gs://b/c/ gs://b/c/5/ gs://b/other/900/ "" "gs://b/c/6/x/")" = gs://b/c/5/ ]
}

@test "an empty listing has no candidate" {
	[ -z "$(printf '' | newest_first gs://b/c/)" ]
}

@test "all candidates are listed newest first" {
	run newest_first gs://b/c/ < <(printf '%s\n' gs://b/c/10/ gs://b/c/30/ gs://b/c/20/ gs://b/c/notes.txt)
	[ "$status" -eq 0 ]
	[ "${lines[*]}" = "gs://b/c/30/ gs://b/c/20/ gs://b/c/10/ gs://b/c/notes.txt" ]
}
