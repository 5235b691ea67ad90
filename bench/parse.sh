#!/usr/bin/env bash
# Parser benchmark (issue #14): the project's reader against jq on the same
# generated export, in both forms (JSON Lines, and the pretty-printed array
# `gcloud logging read --format=json` prints). Prints CPU seconds
# (user+sys) and peak RSS of each run, the medians, and jq's CPU over ours.
#
#   bench/parse.sh                 # ~1 GB export per form, 3 runs each
#   SIZE=300000000 RUNS=5 bench/parse.sh
#
# Needs go, jq and GNU time (/usr/bin/time). Work files go under a mktemp -d
# directory (WORKDIR to choose it), removed at the end unless KEEP=1.
set -euo pipefail

SIZE="${SIZE:-1000000000}"
RUNS="${RUNS:-3}"
FILTER='select(.protoPayload.methodName=="tpu.nodes.terminate") | {insertId, r: .protoPayload.metadata.terminateReason}'

log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v go >/dev/null || die "go is not installed"
command -v jq >/dev/null || die "jq is not installed (apt-get install -y jq)"
[[ -x /usr/bin/time ]] || die "GNU time is not installed (apt-get install -y time)"
[[ "$SIZE" =~ ^[0-9]+$ ]] || die "SIZE must be a number of bytes, got '$SIZE'"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive number, got '$RUNS'"

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${WORKDIR:-$(mktemp -d)}"
mkdir -p "$work"
cleanup() { if [[ "${KEEP:-0}" != 1 ]]; then rm -rf "$work"; fi; }
trap cleanup EXIT

log "building into $work"
(cd "$repo" && go build -o "$work/genexport" ./bench/genexport && go build -o "$work/parsebench" ./bench/parsebench) ||
	die "go build failed"

# measure NAME CMD... runs CMD, output to a file, and prints "cpu rss" of it.
measure() {
	local out="$1"
	shift
	local t="$work/time.txt"
	/usr/bin/time -o "$t" -f '%U %S %M' "$@" >"$out" 2>"$work/stderr.txt" || die "$* failed: $(cat "$work/stderr.txt")"
	awk '{ printf "%.2f %d\n", $1 + $2, $3 }' "$t"
}

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
spread() { sort -n | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s–%s", lo, hi }'; }

printf '| form | size | entries | selected | tool | CPU s (median) | CPU s (min–max) | peak RSS MiB | jq ÷ ours |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
for form in jsonl array; do
	export_file="$work/export.$form"
	log "generating $form export of $SIZE bytes"
	"$work/genexport" -size "$SIZE" -form "$form" >"$export_file" 2>"$work/gen.txt" || die "genexport failed"
	read -r _ entries _ terminates _ bytes <"$work/gen.txt"
	jqfilter="$FILTER"
	if [[ "$form" == array ]]; then jqfilter=".[] | $FILTER"; fi

	: >"$work/ours.cpu"
	: >"$work/jq.cpu"
	: >"$work/ours.rss"
	: >"$work/jq.rss"
	for run in $(seq 1 "$RUNS"); do
		log "$form run $run/$RUNS: ours"
		read -r cpu rss < <(measure "$work/ours.out" "$work/parsebench" "$export_file")
		echo "$cpu" >>"$work/ours.cpu"
		echo "$rss" >>"$work/ours.rss"
		log "$form run $run/$RUNS: ours ${cpu}s; jq"
		read -r cpu rss < <(measure "$work/jq.out" jq -c "$jqfilter" "$export_file")
		echo "$cpu" >>"$work/jq.cpu"
		echo "$rss" >>"$work/jq.rss"
		log "$form run $run/$RUNS: jq ${cpu}s"
		ours_n="$(wc -l <"$work/ours.out")"
		jq_n="$(wc -l <"$work/jq.out")"
		[[ "$ours_n" == "$jq_n" && "$ours_n" == "$terminates" ]] ||
			die "$form: selected counts differ: ours $ours_n, jq $jq_n, generated $terminates"
		cmp -s <(sort "$work/ours.out") <(sort "$work/jq.out") || die "$form: ours and jq selected different entries"
	done
	ours_med="$(median <"$work/ours.cpu")"
	jq_med="$(median <"$work/jq.cpu")"
	ratio="$(awk -v a="$jq_med" -v b="$ours_med" 'BEGIN { printf "%.1f×", a / b }')"
	mib() { median | awk '{ printf "%.0f", $1 / 1024 }'; }
	printf '| %s | %d MB | %d | %d | tpu-autoheal reader | %s | %s | %s | %s |\n' "$form" "$((bytes / 1000000))" "$entries" "$terminates" \
		"$ours_med" "$(spread <"$work/ours.cpu")" "$(mib <"$work/ours.rss")" "$ratio"
	printf '| %s | %d MB | %d | %d | jq %s | %s | %s | %s | |\n' "$form" "$((bytes / 1000000))" "$entries" "$terminates" \
		"$(jq --version)" "$jq_med" "$(spread <"$work/jq.cpu")" "$(mib <"$work/jq.rss")"
	rm -f "$export_file"
done
