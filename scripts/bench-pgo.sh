#!/usr/bin/env bash
# PGO benchmark (docs/export.md): what a profile is worth to `clang -fprofile-sample-use`.
#
# One bundled workload is built with clang (-O2, line tables, -fdebug-info-for-profiling, as
# AutoFDO asks) and profiled on a training input; each profile is exported as an LLVM sample
# profile by proftrust and fed back to clang; the PGO binaries are timed on the reference
# input against the build without PGO:
#   (a) sampled:    a plain sampled profile, exported as is. This machine has no hardware
#                   PMU, so two are measured: a1 = `record -e cpu-clock -c 100003` (10 kHz; the timer a user
#                   without a PMU has, on the reference input: the training run is too short
#                   for a clock), a2 = the virtual PMU's `instructions` samples with skid
#                   (period PERIOD, skid SKID cycles, what a PMU's instruction event with
#                   skid gives; the same samples (b) corrects);
#   (b) corrected:  a2 after `proftrust correct` (whole-program flow solver), exported with
#                   `correct --export llvm-sample:FILE`;
#   (c) exact:      the exact counts of the same virtual-PMU run (the upper bound).
# Printed: median and minimum CPU time of RUNS interleaved runs per binary, speedup against no PGO, and
# how much of (c)'s gain each profile recovers: (t_base - t_x) / (t_base - t_c).
#
# Wall time on a shared 2-core VM has a spread (~5%) as large as the gain PGO gives here, so
# each binary is also run once under callgrind (--cache-sim=yes --branch-sim=yes) on the
# reference input: its event counts are deterministic (the same binary and input give the same
# numbers whatever else the machine does), and the table prints executed instructions (Ir),
# conditional and indirect branch mispredictions (Bcm + Bim, callgrind's branch predictor
# model) and KCachegrind's cycle estimate CEst = Ir + 10 Bm + 10 L1m + 100 LLm (L1m = I1mr +
# D1mr + D1mw, LLm = ILmr + DLmr + DLmw), with each profile's share of (c)'s reduction. These
# are simulated costs, not time: they show whether the profiles lead clang to different code
# and in which direction, which the wall times alone cannot settle. CG=0 skips them.
#
# Usage: scripts/bench-pgo.sh
# Environment: WORKLOAD (default soplex), TRAIN (training scale under the virtual PMU, default
#   10), REF (reference scale, default 100), RUNS (default 11), SKID (cycles, default 30),
#   PERIOD (default 1009), SEED (default 1), CLANG (default clang-14), KEEP=DIR keeps the
#   profiles and binaries, CG (1: the callgrind table, default), CGREF (its input scale,
#   default REF).
# Needs clang (apt-get install clang-14), qemu-user, and proftrust with its QEMU plugin built.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
w="${WORKLOAD:-soplex}"
train="${TRAIN:-10}"
ref="${REF:-100}"
runs="${RUNS:-11}"
skid="${SKID:-30}"
period="${PERIOD:-1009}"
seed="${SEED:-1}"
clang="${CLANG:-clang-14}"
command -v "$clang" >/dev/null || { echo "bench-pgo: $clang not installed (apt-get install clang-14)" >&2; exit 1; }
cd "$root"
cargo build -q --release -p proftrust -p proftrust-qemu-plugin
pt="$CARGO_TARGET_DIR/release/proftrust"
tmp="${KEEP:-$(mktemp -d)}"
mkdir -p "$tmp"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) (2-core VM; wall-clock times)"
echo "workload $w: training scale $train, reference scale $ref, $runs runs; virtual PMU skid $skid, period $period, seed $seed; $($clang --version | head -1)"

flags=(-O2 -gline-tables-only -fdebug-info-for-profiling -fno-omit-frame-pointer)
src="workloads/$w.c"
$clang "${flags[@]}" -o "$tmp/base" "$src" -lm

# Profiles.
"$pt" -q vpmu --skid "$skid" --period "$period" --seed "$seed" --cpi-model cache \
  --exact "$tmp/exact.ptexact" -o "$tmp/vpmu.ptsamp" -- "$tmp/base" "$train" >/dev/null
"$pt" -q record -e cpu-clock -c 100003 --seed "$seed" -o "$tmp/clock.ptsamp" -- "$tmp/base" "$ref" >/dev/null
ev="$("$pt" read --json "$tmp/vpmu.ptsamp" | python3 -c 'import json,sys; print(next(e["name"] for e in json.load(sys.stdin)["events"] if e["name"].startswith("instructions")))')"
"$pt" -q export "$tmp/clock.ptsamp" --to llvm-sample -o "$tmp/a1.prof" --binary "$tmp/base"
"$pt" -q export "$tmp/vpmu.ptsamp" --event "$ev" --to llvm-sample -o "$tmp/a2.prof" --binary "$tmp/base"
"$pt" -q correct --samples "$tmp/vpmu.ptsamp" --skid "$skid" --binary "$tmp/base" \
  --truth "$tmp/exact.ptexact" --export "llvm-sample:$tmp/b.prof" > "$tmp/correct.txt"
"$pt" -q export "$tmp/exact.ptexact" --to llvm-sample -o "$tmp/c.prof" --binary "$tmp/base"
grep '^epsilon' "$tmp/correct.txt" || true

variants=(base a1 a2 b c)
for v in a1 a2 b c; do
  $clang "${flags[@]}" -fprofile-sample-use="$tmp/$v.prof" -o "$tmp/$v" "$src" -lm
done

# Interleaved timing: one run of every binary per round; CPU time (user + system) of each
# run, which waiting for a core shared with other work does not inflate (caches still can).
declare -A times
TIMEFORMAT='%3U %3S'
for ((r = 0; r < runs; r++)); do
  for v in "${variants[@]}"; do
    t=$( { time "$tmp/$v" "$ref" >/dev/null; } 2>&1 | tail -1)
    times[$v]+="$(echo "$t" | awk '{printf "%d", 1000 * ($1 + $2)}') "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
minimum() { tr ' ' '\n' | grep -v '^$' | sort -n | head -1; }
declare -A med mn
for v in "${variants[@]}"; do
  med[$v]=$(echo "${times[$v]}" | median)
  mn[$v]=$(echo "${times[$v]}" | minimum)
done
label() {
  case "$1" in
    base) echo "no PGO";;
    a1) echo "(a1) sampled, cpu-clock";;
    a2) echo "(a2) sampled, instructions with skid";;
    b) echo "(b) proftrust-corrected";;
    c) echo "(c) exact counts";;
  esac
}
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-38s %9s %9s %9s %12s\n' profile "median ms" "min ms" speedup "of (c) gain"
for v in "${variants[@]}"; do
  awk -v n="$(label "$v")" -v t="${med[$v]}" -v m="${mn[$v]}" -v b="${med[base]}" -v c="${med[c]}" 'BEGIN {
    g = (b - c); rec = (g > 0) ? sprintf("%11.0f%%", 100 * (b - t) / g) : "          -";
    printf "%-38s %9d %9d %8.3fx %s\n", n, t, m, b / t, rec }'
done
echo "speedup and share of (c)'s gain from the medians; (c) must beat no PGO by more than the spread of the runs for the last column to mean anything"

[ "${CG:-1}" = 1 ] || exit 0
command -v valgrind >/dev/null || { echo "bench-pgo: valgrind not installed: no deterministic table" >&2; exit 0; }
cgref="${CGREF:-$ref}"
echo
echo "deterministic costs under callgrind --cache-sim=yes --branch-sim=yes, reference scale $cgref (one run each; same numbers on every run)"
declare -A ir bm cest
for v in "${variants[@]}"; do
  valgrind -q --tool=callgrind --cache-sim=yes --branch-sim=yes \
    --callgrind-out-file="$tmp/$v.cg" "$tmp/$v" "$cgref" >/dev/null 2>"$tmp/$v.cg.err" ||
    { echo "bench-pgo: callgrind failed on $v:" >&2; cat "$tmp/$v.cg.err" >&2; exit 1; }
  read -r ir[$v] bm[$v] cest[$v] < <(awk '
    /^events:/ { for (i = 2; i <= NF; i++) col[$i] = i - 1 }
    /^(summary|totals):/ { for (i = 2; i <= NF; i++) val[i - 1] = $i }
    END {
      ir = val[col["Ir"]]; bm = val[col["Bcm"]] + val[col["Bim"]]
      l1 = val[col["I1mr"]] + val[col["D1mr"]] + val[col["D1mw"]]
      ll = val[col["ILmr"]] + val[col["DLmr"]] + val[col["DLmw"]]
      printf "%.0f %.0f %.0f\n", ir, bm, ir + 10 * bm + 10 * l1 + 100 * ll
    }' "$tmp/$v.cg")
done
# "of (c) gain" only where (c) moves the figure by at least 0.1%: below that, a share of a
# gain of a few hundred events out of 10^8 is no result.
printf '%-38s %15s %8s %12s %15s %8s %12s\n' profile "Ir" "Ir vs" "mispredicts" "CEst" "CEst vs" "of (c) gain"
for v in "${variants[@]}"; do
  awk -v n="$(label "$v")" -v i="${ir[$v]}" -v ib="${ir[base]}" -v m="${bm[$v]}" -v e="${cest[$v]}" -v b="${cest[base]}" -v c="${cest[c]}" 'BEGIN {
    g = (b - c); rec = (g > 0.001 * b) ? sprintf("%11.0f%%", 100 * (b - e) / g) : "          -";
    printf "%-38s %15.0f %7.4fx %12.0f %15.0f %7.4fx %s\n", n, i, ib / i, m, e, b / e, rec }'
done
echo "Ir vs / CEst vs: no PGO's figure divided by the profile's (above 1: the PGO binary does less); '-': (c) changes CEst by under 0.1%"
