#!/usr/bin/env bash
# Replay benchmarks: peak RSS and time of `autoheal replay` against the
# simulated fleet, for 100k and 1M entries about healthy nodes (memory must
# stay flat) and for 1k and 10k recreates (the cost per recreate must stay
# flat). Prints one table row per run.
# Usage: bench/replay.sh            (SIZES="100000 1000000" RECREATES="1000 10000")
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '%s replay.sh: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }
[[ -x /usr/bin/time ]] || { log "needs GNU time (apt-get install time)"; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/autoheal" ./cmd/autoheal
go build -o "$work/replaygen" ./bench/replaygen

measure() { # name mode entries [extra replay flags...]
	local name=$1 mode=$2 n=$3
	shift 3
	"$work/replaygen" -mode "$mode" -entries "$n" -nodes 1000 -fleet "$work/fleet.json" -out "$work/in.jsonl"
	/usr/bin/time -f '%M %e %U %S' -o "$work/time" \
		"$work/autoheal" replay --fleet "$work/fleet.json" --format json "$@" "$work/in.jsonl" >"$work/out.jsonl"
	read -r rss wall user sys <"$work/time"
	local lines
	lines=$(wc -l <"$work/out.jsonl")
	printf '| %s | %d | %d | %d MiB | %.1f s | %.1f µs |\n' "$name" "$n" "$lines" $((rss / 1024)) "$wall" \
		"$(echo "($user + $sys) * 1000000 / $n" | bc -l)"
}

echo "| run | entries | output lines | peak RSS | wall | CPU per entry |"
echo "| --- | --- | --- | --- | --- | --- |"
for n in ${SIZES:-100000 1000000}; do
	measure "healthy fleet" healthy "$n"
done
read -r -a extra <<<"${REPLAY_FLAGS:-}"
for n in ${RECREATES:-1000 10000}; do
	measure "recreates" recreate "$n" "${extra[@]}"
done
