#!/usr/bin/env bash
# Sampler overhead of `proftrust record` against `perf record`, same event, same period,
# same workload (crates/record/tests/c/work.c, gcc -O2 -g). Goal: ratio <= 1.0.
#
#   scripts/bench-record.sh [RUNS] [SCALE] [PERIOD_NS]
#
# Prints the median wall time of: the program alone, under perf record, under proftrust
# record; then the ratios proftrust/perf of wall time and of overhead (time minus native).
set -euo pipefail
RUNS=${1:-7}
SCALE=${2:-150}
PERIOD=${3:-100003}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
command -v perf >/dev/null || { echo "perf is not installed (apt-get install linux-perf)"; exit 1; }
(cd "$ROOT" && cargo build --release -q -p proftrust)
PT=$TARGET/release/proftrust
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
gcc -O2 -g -o "$TMP/work" "$ROOT/crates/record/tests/c/work.c"

now() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
time_it() { # prints ns
  local t0 t1
  t0=$(now); "$@" >/dev/null 2>&1; t1=$(now); echo $((t1 - t0))
}

native=(); perf=(); ours=()
for i in $(seq "$RUNS"); do
  native+=("$(time_it "$TMP/work" "$SCALE")")
  perf+=("$(time_it perf record -q -e cpu-clock:u -c "$PERIOD" -o "$TMP/perf.data" -- "$TMP/work" "$SCALE")")
  ours+=("$(time_it "$PT" -q record -e cpu-clock -c "$PERIOD" -o "$TMP/out.ptsamp" -- "$TMP/work" "$SCALE")")
done
n=$(printf '%s\n' "${native[@]}" | median)
p=$(printf '%s\n' "${perf[@]}" | median)
o=$(printf '%s\n' "${ours[@]}" | median)
samples=$(perf script -F ip -i "$TMP/perf.data" 2>/dev/null | wc -l)
awk -v n="$n" -v p="$p" -v o="$o" -v runs="$RUNS" -v s="$samples" -v per="$PERIOD" 'BEGIN {
  printf "workload: work %s, event cpu-clock, period %d ns, %d runs (median), ~%d samples/run\n", "'"$SCALE"'", per, runs, s
  printf "native          %8.1f ms\n", n/1e6
  printf "perf record     %8.1f ms  (overhead %6.1f ms)\n", p/1e6, (p-n)/1e6
  printf "proftrust record%8.1f ms  (overhead %6.1f ms)\n", o/1e6, (o-n)/1e6
  printf "ratio wall proftrust/perf     = %.3f\n", o/p
  if (p - n > 0) printf "ratio overhead proftrust/perf = %.3f\n", (o-n)/(p-n)
}'
