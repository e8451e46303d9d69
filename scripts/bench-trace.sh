#!/usr/bin/env bash
# Trace analyses benchmark (issue 21). Per workload, the CPU seconds (user + sys of the whole
# process tree: proftrust, QEMU and the plugin; best of REPS) and the wall seconds of that run:
#   native | plain qemu-x86_64 (no plugin) | valgrind --tool=callgrind --cache-sim=yes |
#   proftrust paths --json (default timing: class cycles + simulated caches) |
#   paths --cpi-model flat | proftrust cct --json | proftrust vpmu -o FILE (its default timing:
#   class cycles, no cache) | vpmu --cpi-model cache-sim (with its cache model, the like of
#   callgrind --cache-sim=yes) | vpmu --cpi-model flat
# and each analysis as a multiple of plain QEMU (CPU time; the goals of issue 21 are
# paths, cct and flat vpmu <= 5x plain QEMU, vpmu with its cache model 2x faster than
# callgrind --cache-sim=yes: the vpmu/callgrind column is vpmu-cache over callgrind-cs),
# then the QEMU side alone (the plugin tracing into /dev/null: blocks only, and blocks with
# every access through its cache simulation), the floor under the analyses' wall time.
# CPU time rather than wall time because the development machine is shared: the analysis
# runs beside QEMU (the trace is a pipe), so on an idle 2-core machine the wall time is
# about the larger of the two processes' CPU times.
#
# With BREAKDOWN=1 (default) it also records one `paths --json` run per workload with
# `perf record -e cpu-clock` and prints where the CPU time goes: per process (QEMU with the
# plugin vs the analysis) and the top symbols.
#
#   bash scripts/bench-trace.sh                  # WORKLOADS (default: sort soplex), size SIZE
#   REPS=3 SIZE=5 bash scripts/bench-trace.sh sort sqlite
#
# PT=/path/to/proftrust PLUGIN=/path/to/libproftrust_qemu_plugin.so benchmarks those binaries
# (e.g. a copy of an earlier build) instead of building this tree's.
#
# Workloads are built on first use by `proftrust --workload` into the user's workload cache
# ($PROFTRUST_WORKLOAD_DIR, else ~/.cache/proftrust/workloads): the C kernels (hmmer soplex
# omnet mcf libsvm) with gcc, the third-party ones (bzip2 zlib lua sqlite regex sort) with
# cargo, several minutes the first time.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-1}
SIZE=${SIZE:-5}
BREAKDOWN=${BREAKDOWN:-1}
TARGET=${CARGO_TARGET_DIR:-target}
if [ -z "${PT:-}" ]; then
  cargo build --release -q -p proftrust -p proftrust-qemu-plugin
  PT="$PWD/$TARGET/release/proftrust"
  PLUGIN="$PWD/$TARGET/release/libproftrust_qemu_plugin.so"
fi
export PROFTRUST_QEMU_PLUGIN="${PLUGIN:-$(dirname "$PT")/libproftrust_qemu_plugin.so}"
QEMU=${QEMU:-${PROFTRUST_QEMU:-$(bash scripts/install-qemu.sh)}}
export PROFTRUST_QEMU="$QEMU"
WDIR=${PROFTRUST_WORKLOAD_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/proftrust/workloads}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

if [ $# -gt 0 ]; then ws=("$@")
else read -r -a ws <<<"${WORKLOADS:-sort soplex}"; fi

exe_of() { # the built executable of workload $1
  case "$1" in
    hmmer|soplex|omnet|mcf|libsvm) echo "$WDIR/$1" ;;
    *) echo "$WDIR/thirdparty/target/release/$1" ;;
  esac
}

# "cpu wall" seconds of the best (least CPU) of REPS runs of "$@", output discarded.
cpu() {
  local best="" line
  for _ in $(seq "$REPS"); do
    /usr/bin/time -f '%U %S %e' -o "$tmp/t" "$@" >/dev/null 2>&1 || true
    line=$(awk '{printf "%.2f %.2f", $1+$2, $3}' "$tmp/t")
    best=$(printf '%s\n%s\n' "$best" "$line" | grep . | sort -g | head -1)
  done
  echo "$best"
}

echo "QEMU: $QEMU ($("$QEMU" --version | head -1)); callgrind: $(valgrind --version 2>/dev/null || echo absent)"
echo "size $SIZE, best of REPS=$REPS; $(nproc) cores; load at start:$(uptime | sed 's/.*load average://')"
echo "CPU seconds (user+sys, all processes), wall seconds in parentheses; x = CPU / plain QEMU,"
echo "wall x = wall / plain QEMU's wall (the issue's table; meaningful only on an unloaded machine)"
printf '%-7s %13s %13s %13s %13s %13s %13s %13s %13s %13s\n' workload native plain callgrind-cs \
  paths paths-flat cct vpmu vpmu-cache vpmu-flat
for w in "${ws[@]}"; do
  # Build on first use.
  "$PT" -q truth --no-edges --workload "$w" --size 1 -o "$tmp/warm.ptexact" >/dev/null
  exe=$(exe_of "$w")
  read -r n nw <<<"$(cpu "$exe" "$SIZE")"
  read -r q qw <<<"$(cpu "$QEMU" "$exe" "$SIZE")"
  if command -v valgrind >/dev/null; then
    read -r g gw <<<"$(cpu valgrind --tool=callgrind --cache-sim=yes --callgrind-out-file="$tmp/cg.out" "$exe" "$SIZE")"
  else g=nan; gw=nan; fi
  read -r p pw <<<"$(cpu "$PT" -q paths --json -- "$exe" "$SIZE")"
  read -r pf pfw <<<"$(cpu "$PT" -q paths --json --cpi-model flat -- "$exe" "$SIZE")"
  read -r c cw <<<"$(cpu "$PT" -q cct --json -- "$exe" "$SIZE")"
  read -r v vw <<<"$(cpu "$PT" -q vpmu -o "$tmp/v.ptsamp" -- "$exe" "$SIZE")"
  read -r vc vcw <<<"$(cpu "$PT" -q vpmu --cpi-model cache-sim -o "$tmp/v.ptsamp" -- "$exe" "$SIZE")"
  read -r vf vfw <<<"$(cpu "$PT" -q vpmu --cpi-model flat -o "$tmp/v.ptsamp" -- "$exe" "$SIZE")"
  cell() { printf '%5s (%5s)' "$1" "$2"; }
  printf '%-7s %13s %13s %13s %13s %13s %13s %13s %13s %13s\n' "$w" "$(cell "$n" "$nw")" "$(cell "$q" "$qw")" \
    "$(cell "$g" "$gw")" "$(cell "$p" "$pw")" "$(cell "$pf" "$pfw")" "$(cell "$c" "$cw")" \
    "$(cell "$v" "$vw")" "$(cell "$vc" "$vcw")" "$(cell "$vf" "$vfw")"
  awk -v q="$q" -v g="$g" -v p="$p" -v pf="$pf" -v c="$c" -v v="$v" -v vc="$vc" -v vf="$vf" \
    -v qw="$qw" -v gw="$gw" -v pw="$pw" -v pfw="$pfw" -v cw="$cw" -v vw="$vw" -v vcw="$vcw" \
    -v vfw="$vfw" 'BEGIN{
    printf "%-7s %13s %13s %12.1fx %12.1fx %12.1fx %12.1fx %12.1fx %12.1fx %12.1fx   vpmu-cache/callgrind %.2f\n",
      "  x", "", "1.0x", g/q, p/q, pf/q, c/q, v/q, vc/q, vf/q, vc/g
    printf "%-7s %13s %13s %12.1fx %12.1fx %12.1fx %12.1fx %12.1fx %12.1fx %12.1fx   vpmu-cache/callgrind %.2f\n",
      "  wall x", "", "1.0x", gw/qw, pw/qw, pfw/qw, cw/qw, vw/qw, vcw/qw, vfw/qw, vcw/gw }'
  # The QEMU side alone: the plugin tracing into /dev/null (no analysis, no pipe), blocks
  # only and blocks with every access through the default caches (what paths, cct and
  # vpmu-cache ask for): the floor under those columns' wall time.
  plug="$PROFTRUST_QEMU_PLUGIN,out=/dev/null,mode=trace"
  read -r fb fbw <<<"$(cpu "$QEMU" -plugin "$plug" "$exe" "$SIZE")"
  read -r fc fcw <<<"$(cpu "$QEMU" -plugin "$plug,mem=on,cache=64:32768:8:8388608:16" "$exe" "$SIZE")"
  awk -v q="$q" -v qw="$qw" -v fb="$fb" -v fbw="$fbw" -v fc="$fc" -v fcw="$fcw" 'BEGIN{
    printf "  QEMU side alone (plugin into /dev/null): block trace %.1fx (wall %.1fx), with the cache simulation %.1fx (wall %.1fx)\n",
      fb/q, fbw/qw, fc/q, fcw/qw }'
done
echo "goals (issue 21): paths, cct <= 5x plain QEMU; vpmu-flat <= 5x; vpmu-cache <= 0.5x callgrind-cs"

if [ "$BREAKDOWN" != 0 ] && command -v perf >/dev/null; then
  for w in "${ws[@]}"; do
    exe=$(exe_of "$w")
    echo
    echo "== where the CPU time of \`paths --json\` goes on $w (perf record -e cpu-clock, all processes)"
    rm -f "$tmp/perf.data"
    if ! perf record -q -F 999 -e cpu-clock -o "$tmp/perf.data" -- "$PT" -q paths --json -- "$exe" "$SIZE" \
      >/dev/null 2>"$tmp/perf.err" || [ ! -s "$tmp/perf.data" ]; then
      echo "(perf record failed: $(tail -1 "$tmp/perf.err"))"
      continue
    fi
    { perf report -i "$tmp/perf.data" --stdio --sort comm 2>/dev/null | grep -v '^#' | grep . | head -4; } || true
    { perf report -i "$tmp/perf.data" --stdio --sort comm,sym 2>/dev/null | grep -v '^#' | grep . |
      head -14 | cut -c1-140; } || true
  done
fi
