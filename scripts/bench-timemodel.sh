#!/usr/bin/env bash
# Benchmark of the time truth (docs/audit.md, "The time model"): per bundled third-party
# workload, the native run, `audit` against instructions and against the static time model
# (the exact QEMU count with edges plus per-block costs), and with TRACE=1 the older trace
# model (--time-model trace), and with BRANCHES=1 the static model with --time-branches (the
# plugin's history-based predictor on the actual branch outcomes); wall seconds, medians of
# REPEATS, the ratio of each to native, and the function-level epsilon of the audit's own
# cpu-clock samples (randomised period).
#
#   bash scripts/bench-timemodel.sh [SIZE] [REPEATS] [WORKLOADS...]
#   (defaults: 30 3 bzip2 zlib lua sqlite regex sort; PROFTRUST=path/to/proftrust to skip
#   the cargo build; PERIOD=ns of the cpu-clock period, default 20011)
set -euo pipefail
cd "$(dirname "$0")/.."
size="${1:-30}"; reps="${2:-3}"; shift $(( $# > 2 ? 2 : $# )) || true
workloads=("$@"); [ ${#workloads[@]} -gt 0 ] || workloads=(bzip2 zlib lua sqlite regex sort)
period="${PERIOD:-20011}"
if [ -z "${PROFTRUST:-}" ]; then
  cargo build --release -q -p proftrust
  PROFTRUST="${CARGO_TARGET_DIR:-target}/release/proftrust"
fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# Wall seconds of a command; its stdout kept in file $1.
wall_to() { local out=$1 t0 t1; shift; t0=$(date +%s.%N); "$@" >"$out" 2>/dev/null || true; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
wall() { wall_to /dev/null "$@"; }
# Median wall seconds of REPEATS audits of the current workload with the options after $1;
# the JSON report of the last one in $work/$1.json (for its epsilon).
audit_median() { local name=$1; shift; for i in $(seq "$reps"); do wall_to "$work/$name.json" "$PROFTRUST" -q audit "$@" --period "$period" --randomize --json -o - -- "$exe" "$size"; done | median; }
eps() { python3 -c 'import json,sys; print("%.4f" % json.load(open(sys.argv[1]))["metrics"]["epsilon_function"])' "$1" 2>/dev/null || echo "-"; }
echo "size $size, median of $reps (wall seconds; ratio to native); epsilon(function) of the audit's cpu-clock samples, period $period ns randomised"
printf '%-8s %8s %18s %18s' workload native "audit instr" "audit time-model"
[ -n "${TRACE:-}" ] && printf ' %18s' "audit trace model"
[ -n "${BRANCHES:-}" ] && printf ' %18s' "audit +branches"
printf ' %9s %9s' "eps instr" "eps model"
[ -n "${BRANCHES:-}" ] && printf ' %9s' "eps +br"
printf '\n'
for w in "${workloads[@]}"; do
  # Build once and find the program (the audit's --workload does the same).
  "$PROFTRUST" -q truth --workload "$w" --size 1 -o "$work/warm.ptexact" >/dev/null 2>&1
  exe=$(find "${PROFTRUST_WORKLOAD_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/proftrust/workloads}" -type f -name "$w" -perm -u+x | head -1)
  nat=$(for i in $(seq "$reps"); do wall "$exe" "$size"; done | median)
  ai=$(audit_median i)
  at=$(audit_median t --truth-weight time-model)
  printf '%-8s %8.3f %10.3f (%4.1fx) %10.3f (%4.1fx)' "$w" "$nat" "$ai" "$(echo "$ai/$nat" | bc -l)" "$at" "$(echo "$at/$nat" | bc -l)"
  if [ -n "${TRACE:-}" ]; then
    ao=$(wall "$PROFTRUST" -q audit --truth-weight time-model --time-model trace --period "$period" --randomize --json -- "$exe" "$size")
    printf ' %10.3f (%4.0fx)' "$ao" "$(echo "$ao/$nat" | bc -l)"
  fi
  if [ -n "${BRANCHES:-}" ]; then
    ab=$(audit_median b --truth-weight time-model --time-branches)
    printf ' %10.3f (%4.1fx)' "$ab" "$(echo "$ab/$nat" | bc -l)"
  fi
  printf ' %9s %9s' "$(eps "$work/i.json")" "$(eps "$work/t.json")"
  [ -n "${BRANCHES:-}" ] && printf ' %9s' "$(eps "$work/b.json")"
  printf '\n'
done
