#!/usr/bin/env bash
# Benchmark of `proftrust export` on a huge exact profile (issue 32 item 3): time and peak
# RSS of every `--to` format against `proftrust read` of the same file, and the 4 GB goal.
#
# The input is scripts/gen-big-callgrind.py's callgrind file: ADDRESSES distinct addresses
# of a module that is not on disk (26.8 M addresses, ~210 MB by default: issue 32's case),
# so every address is its own stack, location and name. Each command runs once under
# /usr/bin/time (wall seconds, peak RSS), with its address space capped at CAP_GB so a
# format that would not fit fails instead of taking the machine's memory. The diff formats
# compare the file with itself (two profiles loaded); annotate needs a sample profile and
# is refused on exact counts (its row shows how fast). A row that exits non-zero prints
# the first line of its error.
#
# Usage: scripts/bench-export.sh [ADDRESSES=26800000] [CAP_GB=8] [FORMATS="pprof firefox ..."]
# Needs python3 and /usr/bin/time.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-26800000}"
cap_gb="${2:-8}"
formats="${3:-pprof firefox speedscope folded folded-diff flamegraph flamegraph-diff llvm-sample annotate annotate-html}"
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p proftrust
pt="$(cd "$target/release" && pwd)/proftrust"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 scripts/gen-big-callgrind.py "$tmp/cg.out" "$n" 1000 2>/dev/null
size=$(stat -c %s "$tmp/cg.out")
printf 'input: %s addresses, %.1f MB callgrind (module not on disk); address space capped at %s GB\n' \
    "$n" "$(echo "$size / 1000000" | bc -l)" "$cap_gb"
printf '%-16s %9s %10s %8s %10s  %s\n' command seconds 'peak MB' 'x read' 'output MB' status

run() { # NAME OUT COMMAND...
    local name="$1" out="$2"
    shift 2
    local rc=0
    (ulimit -v $((cap_gb * 1024 * 1024)); /usr/bin/time -f '%e %M' -o "$tmp/time" "$@" \
        >"$tmp/stdout" 2>"$tmp/stderr") || rc=$?
    read -r secs kb < <(tail -1 "$tmp/time")
    local mb=$((kb / 1024)) outmb='-'
    [[ -f "$out" ]] && outmb=$(($(stat -c %s "$out") / 1000000))
    local status=ok
    if ((rc != 0)); then
        status="exit $rc: $(grep -v '^Command\|^\s' "$tmp/stderr" | head -1 | cut -c1-110)"
    elif ((mb > 4096)); then
        status="over 4 GB"
    fi
    local ratio='-'
    [[ -n "${read_secs:-}" ]] && ratio=$(printf '%.1f' "$(echo "$secs / $read_secs" | bc -l)")
    printf '%-16s %9s %10s %8s %10s  %s\n' "$name" "$secs" "$mb" "$ratio" "$outmb" "$status"
    rm -f "$out"
    if [[ "$name" == read ]]; then read_secs="$secs"; fi
}

run read "$tmp/none" "$pt" -q read "$tmp/cg.out"
for f in $formats; do
    case "$f" in
        folded-diff | flamegraph-diff | annotate | annotate-html)
            run "$f" "$tmp/out" "$pt" -q export "$tmp/cg.out" --to "$f" --against "$tmp/cg.out" -o "$tmp/out" ;;
        *)
            run "$f" "$tmp/out" "$pt" -q export "$tmp/cg.out" --to "$f" -o "$tmp/out" ;;
    esac
done
