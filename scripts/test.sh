#!/usr/bin/env bash
# Runs every test tpu-autoheal has: formatting and vet, unit tests, the
# emulator suites (Firestore and Pub/Sub emulators started by the Go test
# harness in their own process groups), fixed-time fuzz runs of the parsers,
# then the shell linter and the bats tests of the startup script.
# Usage: scripts/test.sh            (from anywhere inside the repository)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '%s test.sh: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }

# Debian packages the shell tests need; installed when missing (root only).
need_pkgs=()
command -v shellcheck >/dev/null 2>&1 || need_pkgs+=(shellcheck)
command -v bats >/dev/null 2>&1 || need_pkgs+=(bats)
# The report's HTML page is checked in a real browser (go test -tags browser).
command -v chromium >/dev/null 2>&1 || need_pkgs+=(chromium)
if ((${#need_pkgs[@]} > 0)); then
	if [[ $(id -u) -ne 0 ]]; then
		log "missing ${need_pkgs[*]}: install them (apt-get install ${need_pkgs[*]}) and rerun"
		exit 1
	fi
	log "installing ${need_pkgs[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

# STRESS=1: instead of the suites, loop the tests whose outcome could depend
# on timing (real sleeps, deadlines, signals, concurrent servers) while a busy
# loop runs on every core, STRESS_LOOPS times (default 5), stopping at the
# first failure. A test that passes here does not wait on the machine being
# idle. The busy loops run in their own process group and are ended, by
# that group, when this script exits however it exits.
#
# The timing-sensitive Go tests, as "package regexp" (keep this list in step
# with docs/testing.md): the kick and follower tests (real operation delays
# and look-again intervals, a kick topic), the local server's push burst and
# graceful stop, the simulator served to another client, the hung
# startup-script read, the stdin-like reader, the fake TPU API's injected
# delays and concurrent use.
stress_go_tests=(
	"./function ^(TestDeliveryKicksAFollower|TestFailedKickIsLoggedAndTheDeliverySucceeds|TestFollowMessageIsAlwaysAcknowledged|TestFollowMessageFinishesTheRecoveryTheDeliveryStarted|TestKickTopicReceivesTheFollowMessage|TestNewGivesUpOnAHungStartupScriptRead|TestRecreatedNodeKeepsItsSpecAndGetsTheStartupScript)\$"
	"./internal/remediate ^(TestFollowerEndingAsADeliveryStartsARecoveryChains|TestFollow|TestKickWanted|TestSweepDoesNotFollowWhileAnotherFollowerHoldsTheLease|TestFollowTakesEachRecoveryWhenItsLookComesDue|TestOneKickIsPendingAtATime|TestPendingKicksRunFollowsTheDeliveryThatDidNotKick)\$"
	"./cmd/autoheal ^(TestServeNeverWedgesUnderAPushBurst|TestServeAnswersPushAndStopsGracefully|TestSimulateServesTheFleetToAnotherClient)\$"
	"./internal/events ^TestReaderStreamsLikeStdin\$"
	"./internal/tpufake ^(TestFailRuleDelay|TestConcurrentUse)\$"
)
if [[ ${STRESS:-} == 1 ]]; then
	loops=${STRESS_LOOPS:-5}
	if [[ ! $loops =~ ^[1-9][0-9]*$ ]]; then
		log "STRESS_LOOPS=\"$loops\" is not a positive number"
		exit 2
	fi
	cores=$(nproc)
	busy_pgids=()
	# shellcheck disable=SC2317 # called by the EXIT trap
	stop_busy() {
		local pgid
		for pgid in "${busy_pgids[@]}"; do
			kill -TERM -- "-$pgid" 2>/dev/null || true
		done
	}
	trap stop_busy EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	set -m
	for ((i = 0; i < cores; i++)); do
		(while :; do :; done) &
		busy_pgids+=("$!")
	done
	set +m
	log "STRESS: $loops loops of the bats suite and ${#stress_go_tests[@]} packages' timing-sensitive Go tests, $cores busy loops (process groups ${busy_pgids[*]})"
	for ((loop = 1; loop <= loops; loop++)); do
		log "STRESS loop $loop/$loops: bats"
		bats startup/test
		for entry in "${stress_go_tests[@]}"; do
			pkg=${entry%% *}
			log "STRESS loop $loop/$loops: go test $pkg"
			if ! out=$(go test -count=1 -run "${entry#* }" "$pkg" 2>&1); then
				printf '%s\n' "$out" >&2
				log "STRESS loop $loop/$loops: go test $pkg failed"
				exit 1
			fi
			if grep -q 'no tests to run' <<<"$out"; then
				log "STRESS: \"${entry#* }\" matches no test in $pkg: the list above is stale"
				exit 1
			fi
		done
	done
	log "STRESS: $loops loops passed under load"
	exit 0
fi

# Preflight: every suite that cannot run here is named with the reason, and
# under CI (CI=true) a missing tool fails the run instead of skipping.
skipped=()
skip() { skipped+=("$1: $2"); log "SKIPPING $1: $2"; }
gcloud_root=""
if command -v gcloud >/dev/null 2>&1; then
	gcloud_root=$(gcloud info --format='value(installation.sdk_root)' 2>/dev/null || true)
fi
if [[ -z "$gcloud_root" ]]; then
	skip "emulator suites (Firestore, Pub/Sub, end to end)" "gcloud CLI not installed"
else
	for c in cloud-firestore-emulator pubsub-emulator; do
		[[ -d "$gcloud_root/platform/$c" ]] || skip "emulator suites" "gcloud component $c not installed (gcloud components install $c)"
	done
	command -v java >/dev/null 2>&1 || skip "emulator suites" "no java on the PATH (the emulators are Java programs)"
fi
if ((${#skipped[@]} > 0)) && [[ "${CI:-}" == "true" ]]; then
	log "CI=true and ${#skipped[@]} suite(s) would be skipped for a missing tool:"
	printf '  %s\n' "${skipped[@]}" >&2
	exit 1
fi

log "gofmt"
unformatted=$(gofmt -l .)
if [[ -n "$unformatted" ]]; then
	log "gofmt would change:"
	printf '%s\n' "$unformatted" >&2
	exit 1
fi

log "go vet"
go vet ./...
go vet -tags emulator ./...

log "unit tests"
go test -count=1 ./...

# The unit tests ran seeds 1-1000 of the randomized simulation; 2000 more.
log "randomized simulation (internal/swarm): seeds 1001-3000"
go test -count=1 -timeout 30m ./internal/swarm -run 'TestSwarm$' -seeds 2000 -seeds-from 1001

log "browser test of the report's HTML page (headless chromium)"
CI=true go test -count=1 -tags browser ./internal/report/...

log "emulator suites (Firestore, Pub/Sub emulators; end to end)"
go test -count=1 -tags emulator -timeout 30m ./...

# Fuzzing: a fixed number of executions per target (about 10-30 s here); any
# panic or broken invariant fails. A count, not a duration: on Go 1.26 a
# duration-based -fuzztime can end in a spurious "context deadline exceeded"
# (a race in the fuzz coordinator, go.dev/issue/75804, fixed in Go 1.27).
fuzz() {
	log "fuzz $1 in $2"
	go test -run '^$' -fuzz "^$1\$" -fuzztime "${FUZZTIME:-300000x}" "$2"
}
fuzz FuzzParse ./internal/events
fuzz FuzzReader ./internal/events
fuzz FuzzFastParse ./internal/events
fuzz FuzzDecode ./internal/events
fuzz FuzzReader ./internal/report
FUZZTIME=${FUZZTIME:-30000x} fuzz FuzzDecideMaintenance ./internal/policy

log "shellcheck"
shellcheck scripts/*.sh .ci/run startup/*.sh startup/test/*.bash bench/*.sh
shellcheck -s bats startup/test/*.bats

log "bats"
bats startup/test

# --- Terraform (tf lane): init/validate/fmt of the module and examples,
# terraform test with mock providers. Skips loudly without a terraform
# binary, and fails then under CI=true.
log "terraform"
scripts/terraform-check.sh
# --- end Terraform

if ((${#skipped[@]} > 0)); then
	log "tests passed, but ${#skipped[@]} suite(s) were SKIPPED:"
	printf '  %s\n' "${skipped[@]}" >&2
	exit 0
fi
log "all tests passed"
