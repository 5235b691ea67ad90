#!/usr/bin/env bash
# Replay benchmarks: peak RSS and time of `autoheal replay` against the
# simulated fleet, for 100k and 1M entries about healthy nodes (memory must
# stay flat) and for 1k and 10k recreates (the cost per recreate must stay
# flat). Prints one table row per size: the median of RUNS runs, and the
# range when RUNS > 1; then the machine's cores and load average.
# Usage: bench/replay.sh   (SIZES="100000 1000000" RECREATES="1000 10000" RUNS=1 REPLAY_FLAGS=...)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '%s replay.sh: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }
[[ -x /usr/bin/time ]] || { log "needs GNU time (apt-get install time)"; exit 1; }
runs=${RUNS:-1}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { log "RUNS=$runs: want a positive integer"; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/autoheal" ./cmd/autoheal
go build -o "$work/replaygen" ./bench/replaygen

# median prints the middle of its arguments (numbers), and with more than
# one the range: "m (lo–hi)".
median() {
	local sorted
	sorted=$(printf '%s\n' "$@" | sort -g)
	local mid
	mid=$(sed -n "$((($# + 1) / 2))p" <<<"$sorted")
	if (($# > 1)); then
		printf '%s (%s–%s)' "$mid" "$(head -1 <<<"$sorted")" "$(tail -1 <<<"$sorted")"
	else
		printf '%s' "$mid"
	fi
}

measure() { # name mode entries [extra replay flags...]
	local name=$1 mode=$2 n=$3
	shift 3
	"$work/replaygen" -mode "$mode" -entries "$n" -nodes 1000 -fleet "$work/fleet.json" -out "$work/in.jsonl"
	local rss=() wall=() cpu=() lines rs wl us sy
	for _ in $(seq "$runs"); do
		/usr/bin/time -f '%M %e %U %S' -o "$work/time" \
			"$work/autoheal" replay --fleet "$work/fleet.json" --format json "$@" "$work/in.jsonl" >"$work/out.jsonl"
		read -r rs wl us sy <"$work/time"
		rss+=("$((rs / 1024))")
		wall+=("$wl")
		cpu+=("$(printf '%.1f' "$(echo "($us + $sy) * 1000000 / $n" | bc -l)")")
	done
	lines=$(wc -l <"$work/out.jsonl")
	printf '| %s | %d | %d | %s MiB | %s s | %s µs |\n' "$name" "$n" "$lines" \
		"$(median "${rss[@]}")" "$(median "${wall[@]}")" "$(median "${cpu[@]}")"
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
echo "$(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) at the end; median of $runs run(s)"
