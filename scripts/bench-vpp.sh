#!/usr/bin/env bash
# Variational path profiling benchmark (issue 8, seed 004): closing the loop on the bundled
# workload workloads/vpp.c and its prefetching variant workloads/vpp_prefetch.c.
#
#   bash scripts/bench-vpp.sh                      # REPS=5 SCALE=100 TABLE_MB=64 LOAD=2
#   REPS=9 SCALE=200 bash scripts/bench-vpp.sh
#
# Prints, each over REPS interleaved runs (medians; the machine is shared, so ratios of
# interleaved runs, not absolute times, are the result):
#   1. native run time without probes, base vs prefetch: the speedup of the optimisation;
#   2. probe overhead: probed (nCheck 10000) vs unprobed run time of the same program;
#   3. `proftrust vpp --source probe` on base and prefetch: which path ranks first, the net
#      variation of lookup() (extrapolated to all executions, ms) and its drop;
#   4. the instrumentation bias (median, consistency);
#   5. hot paths by frequency and by total time against VPP's top paths (Fig. 11);
#   6. stability: light vs heavy load (LOAD busy threads, Fig. 4), train vs ref input
#      (Fig. 5);
#   7. the virtual PMU on base and prefetch (QEMU runs prefetches as no-ops: no change).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-5}
SCALE=${SCALE:-100}
TABLE_MB=${TABLE_MB:-64}
LOAD=${LOAD:-2}
TARGET=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p proftrust -p proftrust-qemu-plugin
PT="$TARGET/release/proftrust"
export PROFTRUST_QEMU_PLUGIN="$TARGET/release/libproftrust_qemu_plugin.so"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
CFLAGS=(-O2 -g -fno-omit-frame-pointer)
for v in vpp vpp_prefetch; do
  gcc "${CFLAGS[@]}" -o "$tmp/$v" "workloads/$v.c"
  gcc "${CFLAGS[@]}" -DPT_DISABLE -o "$tmp/${v}_np" "workloads/$v.c"
done
ARGS=("$SCALE" "$TABLE_MB")
echo "bench-vpp: REPS=$REPS SCALE=$SCALE TABLE_MB=$TABLE_MB LOAD=$LOAD ($(nproc) cores, shared)"

# Seconds of one run of "$@": its CPU time (perf stat's task-clock, else GNU time's user +
# sys), less disturbed by the other processes of a shared machine than wall time; wall time
# when neither tool works.
if perf stat -x, -e task-clock -o "$tmp/t" true >/dev/null 2>&1; then
  run_s() { perf stat -x, -e task-clock -o "$tmp/t" "$@" >/dev/null 2>&1; awk -F, '/task-clock/{printf "%.4f", $1/1000}' "$tmp/t"; }
  CLOCK="cpu (perf task-clock)"
elif [ -x /usr/bin/time ]; then
  run_s() { /usr/bin/time -f "%U %S" -o "$tmp/t" "$@" >/dev/null 2>&1; awk '{printf "%.4f", $1+$2}' "$tmp/t"; }
  CLOCK="cpu (user+sys)"
else
  run_s() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); awk -v s="$s" -v e="$e" 'BEGIN{printf "%.4f", e-s}'; }
  CLOCK="wall"
fi
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{print (NR%2? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo
echo "== 1. speedup of the prefetch (native, no probes; $CLOCK seconds; pairs in ABBA order)"
b=(); p=(); r=()
for i in $(seq "$REPS"); do
  if [ $((i % 2)) -eq 1 ]; then
    x=$(run_s "$tmp/vpp_np" "${ARGS[@]}"); y=$(run_s "$tmp/vpp_prefetch_np" "${ARGS[@]}")
  else
    y=$(run_s "$tmp/vpp_prefetch_np" "${ARGS[@]}"); x=$(run_s "$tmp/vpp_np" "${ARGS[@]}")
  fi
  b+=("$x"); p+=("$y"); r+=("$(awk -v x="$x" -v y="$y" 'BEGIN{printf "%.3f", x/y}')")
done
mb=$(echo "${b[*]}" | median); mp=$(echo "${p[*]}" | median); mr=$(echo "${r[*]}" | median)
echo "base:     ${b[*]}"
echo "prefetch: ${p[*]}"
echo "per-pair base/prefetch: ${r[*]}"
awk -v b="$mb" -v p="$mp" -v r="$mr" 'BEGIN{printf "median base %.3f s, prefetch %.3f s: speedup %.3fx (median of pair ratios %.3fx)\n", b, p, b/p, r}'

echo
echo "== 2. probe overhead (nCheck 10000, nInstr 1; probed / unprobed $CLOCK time, interleaved)"
o=()
for _ in $(seq "$REPS"); do
  x=$(run_s "$tmp/vpp_np" "${ARGS[@]}")
  y=$(run_s env PROFTRUST_PROBE_OUT="$tmp/o.txt" "$tmp/vpp" "${ARGS[@]}")
  o+=("$(awk -v x="$x" -v y="$y" 'BEGIN{printf "%.3f", y/x}')")
done
echo "probed/unprobed per pair: ${o[*]}; median $(echo "${o[*]}" | median)"

echo
echo "== 3-5. proftrust vpp --source probe (nCheck 10000), base vs prefetch"
summ() { # JSON on stdin -> one line: top1-source lookup-NV-ms total-share bias within freq-diff time-diff
  python3 -c '
import json, sys
d = json.load(sys.stdin)
lk = "vpp.c:" + sys.argv[1]
tpn = d["source_stats"]["tsc_per_ns"] or 1.0
eps = d["executions_per_sample"]
nv = sum(p["net_variation"] for p in d["paths"] if p["source"] == lk)
top = d["paths"][0]["source"] if d["paths"] else "-"
r = {x["ranking"]: x["not_in_other"] for x in d["rankings"]}
b = d["bias"] or {}
print(top, "%.2f" % (nv * eps / tpn / 1e6), "%.4f" % d["net_variation_share"],
      b.get("median", 0), "%.3f" % b.get("within", 0), r["frequency"], r["total_time"])
' "$1"
}
lk=$(awk '/static long lookup\(/{f=1} f&&/PT_FOR\(/{print NR; exit}' workloads/vpp.c)
echo "lookup()'s probe site: vpp.c:$lk"
echo "run   variant   top-1      lookup-NV-ms  NV-share  bias  within  top3-not-in-freq  top3-not-in-time"
nb=(); np=()
for i in $(seq "$REPS"); do
  for v in vpp vpp_prefetch; do
    line=$("$PT" -q vpp --source probe --json --top 3 --seed "$i" --randomize -- "$tmp/$v" "${ARGS[@]}" | summ "$lk")
    read -r top nv share bias within fd td <<<"$line"
    printf "%-5s %-9s %-10s %12s  %8s  %4s  %6s  %16s  %16s\n" "$i" "${v#vpp_}" "$top" "$nv" "$share" "$bias" "$within" "$fd" "$td"
    if [ "$v" = vpp ]; then nb+=("$nv"); else np+=("$nv"); fi
  done
done
mnb=$(echo "${nb[*]}" | median); mnp=$(echo "${np[*]}" | median)
awk -v a="$mnb" -v b="$mnp" 'BEGIN{printf "lookup() net variation, median: base %.2f ms, prefetch %.2f ms: %.1f%% less (ratio %.2fx)\n", a, b, 100*(1-b/a), a/b}'

echo
echo "== 6. stability (probe source, top 3)"
"$PT" -q vpp --source probe --top 3 --compare-load "$LOAD" -- "$tmp/vpp" "${ARGS[@]}" | grep -E "system load|net variation:"
"$PT" -q vpp --source probe --top 3 --train "$((SCALE / 3 + 1)) $TABLE_MB 7" -- "$tmp/vpp" "${ARGS[@]}" | grep -E "inputs|net variation:"

echo
echo "== 7. virtual PMU (scale 1, 4 MiB table, 512 KiB LLC): prefetches are invisible to QEMU"
for v in vpp_np vpp_prefetch_np; do
  "$PT" -q vpp --json --top 2 --llc-kib 512 -- "$tmp/$v" 1 4 | python3 -c '
import json, sys
d = json.load(sys.stdin)
p = d["paths"][0]
print("%-16s top-1 %s %s, NV share of the run %.2f%%, all paths %.2f%%" % (sys.argv[1], p["signature"], p["function"], 100*p["share_of_time"], 100*d["net_variation_share"]))
' "$v"
done
