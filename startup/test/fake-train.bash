#!/usr/bin/env bash
# Fake training command for the startup script's tests. Appends one line per
# run to FAKE_STATE/train.log with what the startup script handed it, then:
#   --save URL   creates checkpoint URL in the fake bucket (as a run that
#                checkpointed before failing would)
#   --block      writes its process group to FAKE_STATE/train-pgid, signals
#                FAKE_STATE/train-started and waits (at most 60s) for
#                FAKE_STATE/train-release; a SIGTERM is noted in
#                FAKE_STATE/train-terminated
#   --checkpoint-on SIG URL
#                on signal SIG, appends "SIG PID" to FAKE_STATE/signals and
#                writes checkpoint URL (a directory holding
#                commit_success.txt), then goes on (put it before --block)
#   --save-on-term SECONDS CODE
#                on SIGTERM, "saves" for SECONDS, writes FAKE_STATE/saved and
#                exits CODE (put it before --block)
# and exits with the next status listed in FAKE_STATE/exit-codes (one per
# line, consumed in order; 0 once the list is used up).
set -euo pipefail

printf 'attempt=%s worker=%s resume=%s dir=%s pwd=%s\n' \
	"${AUTOHEAL_ATTEMPT-unset}" "${AUTOHEAL_WORKER-unset}" "${AUTOHEAL_RESUME_FROM-unset}" \
	"${AUTOHEAL_CHECKPOINT_DIR-unset}" "$PWD" >>"$FAKE_STATE/train.log"

while (($# > 0)); do
	case $1 in
	--save)
		rest=${2#gs://}
		mkdir -p -- "$FAKE_GCS_ROOT/$rest"
		shift 2
		;;
	--checkpoint-on)
		# shellcheck disable=SC2064 # expanded now, on purpose
		trap "echo '$2' \$\$ >>'$FAKE_STATE/signals'; mkdir -p '$FAKE_GCS_ROOT/${3#gs://}'; : >'$FAKE_GCS_ROOT/${3#gs://}/commit_success.txt'" "$2"
		shift 3
		;;
	--save-on-term)
		save_seconds=$2 save_code=$3
		shift 3
		;;
	--block)
		if [[ -n ${save_seconds:-} ]]; then
			trap 'touch "$FAKE_STATE/train-terminated"; /bin/sleep "$save_seconds"; touch "$FAKE_STATE/saved"; exit "$save_code"' TERM
		else
			trap 'touch "$FAKE_STATE/train-terminated"; exit 143' TERM
		fi
		# The process group, for tests that check nothing of it is left.
		ps -o pgid= -p "$$" | tr -d ' ' >"$FAKE_STATE/train-pgid"
		touch "$FAKE_STATE/train-started"
		for _ in $(seq 600); do
			if [[ -e $FAKE_STATE/train-release ]]; then
				break
			fi
			/bin/sleep 0.1 || true # a signal to the group may cut it short
		done
		shift
		;;
	*)
		echo "fake-train: unknown argument $1" >&2
		exit 2
		;;
	esac
done

code=0
if [[ -s $FAKE_STATE/exit-codes ]]; then
	code=$(head -n 1 "$FAKE_STATE/exit-codes")
	tail -n +2 "$FAKE_STATE/exit-codes" >"$FAKE_STATE/exit-codes.next"
	mv "$FAKE_STATE/exit-codes.next" "$FAKE_STATE/exit-codes"
fi
exit "$code"
