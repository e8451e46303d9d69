#!/usr/bin/env bash
# Exact counting benchmark (issues 3 and 13): per workload, the median wall seconds of REPS
# interleaved runs of
#   native | plain qemu-x86_64 (no plugin: TCG's own cost) | qemu-x86_64 with the plugin in
#   mode=idle (it hooks translation and instruments nothing: the floor QEMU itself puts
#   under any instrumenting plugin) | proftrust truth (instructions,
#   edges, calls) | truth --no-edges | truth --backend callgrind (valgrind --tool=callgrind
#   --dump-instr=yes --collect-jumps=yes)
# and the ratios truth/plain (goal <= 1.3), floor/plain, no-edges/plain, callgrind/truth (goal >= 5),
# truth/native. All QEMU columns use the same QEMU: $PROFTRUST_QEMU, else the QEMU 10 that
# scripts/install-qemu.sh builds (QEMU=/usr/bin/qemu-x86_64 benchmarks QEMU 7.2's plugin
# API v1 instead); its version is printed.
#
#   bash scripts/bench-exact.sh                      # every bundled workload, default scale
#   REPS=1 SIZE=30 bash scripts/bench-exact.sh sqlite lua   # one size for all
#   WORKLOADS="hmmer mcf" bash scripts/bench-exact.sh
#   PLUGIN=/tmp/old/libproftrust_qemu_plugin.so bash scripts/bench-exact.sh lua   # another plugin
#   PT=/tmp/old/proftrust PLUGIN=/tmp/old/libproftrust_qemu_plugin.so bash scripts/bench-exact.sh
#
# Default scale: per workload, the size at which it runs about 0.4-0.6 s natively (the
# programs issue 13 measured ran 0.3-1 s), so that truth's fixed cost per run (tens of ms)
# does not dominate the ratios; SIZE=N runs every workload at size N instead.
#
# Workloads: the C kernels (hmmer soplex omnet mcf libsvm, workloads/*.c) and third-party
# code (bzip2 zlib lua sqlite regex sort, workloads/thirdparty), built on first use by
# `proftrust --workload`. Timings are wall clock on whatever else the machine runs (the
# load average is printed); compare the ratios of one line.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
SIZE=${SIZE:-}
TARGET=${CARGO_TARGET_DIR:-target}
# Both given (another build of each): nothing to build here.
if [ -z "${PT:-}" ] || [ -z "${PLUGIN:-}" ]; then
  cargo build --release -q -p proftrust -p proftrust-qemu-plugin
fi
# PT=path benchmarks another build of the analyzer (e.g. an older commit's).
PT=${PT:-$PWD/$TARGET/release/proftrust}
# PLUGIN=path benchmarks another build of the plugin (e.g. an older commit's) with this analyzer.
export PROFTRUST_QEMU_PLUGIN="${PLUGIN:-$PWD/$TARGET/release/libproftrust_qemu_plugin.so}"
export PROFTRUST_WORKLOAD_DIR="$PWD/$TARGET/workloads"
QEMU=${QEMU:-${PROFTRUST_QEMU:-$(bash scripts/install-qemu.sh)}}
export PROFTRUST_QEMU="$QEMU"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

if [ $# -gt 0 ]; then ws=("$@")
else read -r -a ws <<<"${WORKLOADS:-hmmer soplex omnet mcf libsvm bzip2 zlib lua sqlite regex sort}"; fi

exe_of() { # the built executable of workload $1
  case "$1" in
    hmmer|soplex|omnet|mcf|libsvm) echo "$PROFTRUST_WORKLOAD_DIR/$1" ;;
    *) echo "$PROFTRUST_WORKLOAD_DIR/thirdparty/target/release/$1" ;;
  esac
}

scale_of() { # the size of workload $1: $SIZE, else ~0.4-0.6 s natively on a 2-core VM
  if [ -n "$SIZE" ]; then echo "$SIZE"; return; fi
  case "$1" in
    bzip2) echo 400 ;; zlib) echo 150 ;; lua) echo 250 ;; sqlite) echo 150 ;;
    regex) echo 300 ;; sort) echo 150 ;; hmmer) echo 120 ;; mcf) echo 120 ;;
    soplex) echo 80 ;; omnet) echo 60 ;; libsvm) echo 60 ;; *) echo 100 ;;
  esac
}

secs() { # wall seconds of "$@" (output discarded)
  local s e
  s=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s.%N)
  awk -v s="$s" -v e="$e" 'BEGIN{printf "%.3f", e-s}'
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "QEMU: $QEMU ($("$QEMU" --version | head -1)); callgrind: $(valgrind --version 2>/dev/null || echo absent)"
echo "plugin: $PROFTRUST_QEMU_PLUGIN"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; REPS=$REPS SIZE=${SIZE:-per workload} (medians)"
printf '%-7s %5s %7s %7s %7s %7s %7s %8s | %8s %8s %8s %8s %8s %8s\n' workload size native plain floor truth noedge \
  callgrnd tr/plain fl/plain ne/plain cg/truth tr/nat plain/nat
for w in "${ws[@]}"; do
  # Build on first use (and check the workload runs under the plugin at all).
  "$PT" -q truth --no-edges --workload "$w" --size 1 -o "$tmp/warm.ptexact" >/dev/null
  exe=$(exe_of "$w")
  n=$(scale_of "$w")
  nat=() plain=() fl=() tr=() ne=() cg=()
  for _ in $(seq "$REPS"); do
    nat+=("$(secs "$exe" "$n")")
    plain+=("$(secs "$QEMU" "$exe" "$n")")
    fl+=("$(secs "$QEMU" -plugin "$PROFTRUST_QEMU_PLUGIN,mode=idle" "$exe" "$n")")
    tr+=("$(secs "$PT" -q truth -o "$tmp/t.ptexact" -- "$exe" "$n")")
    ne+=("$(secs "$PT" -q truth --no-edges -o "$tmp/n.ptexact" -- "$exe" "$n")")
  done
  # callgrind is slow: one run unless CG_REPS says otherwise.
  for _ in $(seq "${CG_REPS:-1}"); do
    cg+=("$(secs "$PT" -q truth --backend callgrind -o "$tmp/c.ptexact" -- "$exe" "$n")")
  done
  a=$(echo "${nat[*]}" | median) b=$(echo "${plain[*]}" | median) c=$(echo "${tr[*]}" | median)
  d=$(echo "${ne[*]}" | median) e=$(echo "${cg[*]}" | median) f=$(echo "${fl[*]}" | median)
  awk -v w="$w" -v n="$n" -v a="$a" -v b="$b" -v c="$c" -v d="$d" -v e="$e" -v f="$f" 'BEGIN{
    printf "%-7s %5d %7.3f %7.3f %7.3f %7.3f %7.3f %8.3f | %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n",
      w, n, a, b, f, c, d, e, c/b, f/b, d/b, e/c, c/a, b/a }'
done
echo "goals (issue 13): tr/plain <= 1.3 (truth with edges and calls over plain QEMU), cg/truth >= 5"
echo "floor: QEMU with a plugin that instruments nothing (fl/plain is what any plugin pays; cg/plain = cg/truth x tr/plain bounds cg/truth)"
echo "truth's backend line names the plugin API: $("$PT" read "$tmp/t.ptexact" --json 2>/dev/null | grep -o '"backend_detail": *"[^;]*; plugin API v[0-9]' | sed 's/.*"backend_detail": *"//')"
