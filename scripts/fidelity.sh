#!/usr/bin/env bash
# Fidelity table (docs/fidelity.md): per seed paper, the paper's claim and number beside
# proftrust's number on the same kind of work, the command that produced it, and a verdict.
#
#   bash scripts/fidelity.sh            # a few minutes; REPS=5 OVERHEAD pairs
#   REPS=9 bash scripts/fidelity.sh
#
# Prints a Markdown table on stdout (paste it into docs/fidelity.md with the date and
# `uptime`). Verdicts: "agrees" / "differs" where a threshold of the paper decides it,
# "see notes" where the comparison needs reading (docs/fidelity.md explains each row).
# Needs: cargo, gcc, perf (cpu-clock), qemu-x86_64 (audit's exact run), python3 (JSON).
# Seed 000 rows (virtual PMU modes, time truth) take minutes per trace: the script prints
# them from the measurement in docs/skid.md and docs/audit.md, marked as not rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-5}
TARGET=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p proftrust -p proftrust-qemu-plugin
PT="$PWD/$TARGET/release/proftrust"
export PROFTRUST_QEMU_PLUGIN="$PWD/$TARGET/release/libproftrust_qemu_plugin.so"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export PROFTRUST_WORKLOAD_DIR="$tmp/wl"
py() { python3 -c "$1" "${@:2}"; }
row() { printf '| %s | %s | %s | %s | `%s` | %s |\n' "$@"; }

echo "fidelity: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "| seed | claim | paper | proftrust | command | verdict |"
echo "|---|---|---|---|---|---|"

# ---- seed 000: measured separately (minutes per trace), not rerun here.
row "000" "skid correction error on real CPUs (vs CCTLib)" "5.7-18%" "not rerun: docs/skid.md, PMU modes (simulated CPU, interrupt mode on the out-of-order model, skid normal 30+-10 cycles: instruction epsilon raw -> corrected omnet 0.627 -> 0.002, soplex 0.287 -> 0.043; its cycle samples against the TIP time oracle: epsilon instruction 0.010-0.028)" "proftrust vpmu --mode interrupt ...; proftrust audit --correct-skid 30 ..." "see notes"
row "000" "cpu-clock audit: CPI counted as error (time truth)" "-" "not rerun: docs/audit.md, Time truth (epsilon function, instruction -> time-model weight: soplex 0.154 -> 0.018, mcf 0.130 -> 0.029, omnet 0.388 -> 0.0003, third-party regex 0.177 -> 0.135)" "proftrust audit --truth-weight time-model ..." "see notes"

# ---- seed 001: OD on a bundled workload, both readings, and its trend with the period.
cmd001="proftrust audit --workload mcf --sweep 64K,256K,1M,4M,16M --json"
"$PT" -q audit --workload mcf --sweep 64K,256K,1M,4M,16M --json >"$tmp/a.json" 2>/dev/null
read -r od odp n trend kept dropped < <(py '
import json, sys
d = json.load(open(sys.argv[1]))
m = d["metrics"]
pts = [p for p in d["sweep"] if not p["randomized"] and p["od_prose"] is not None]
trend = ",".join("%.2f" % p["od_prose"] for p in pts)
dropped = sum(1 for w in d["warnings"] if w.startswith("--sweep:"))
print("%.3f %.3f %d %s %d %d" % (m["od"], m["od_prose"], m["samples"], trend or "-", len(pts), dropped))
' "$tmp/a.json")
verdict=$(py 'import sys; print("agrees" if float(sys.argv[1]) <= 1.0 else "differs")' "$od")
row "001" "OD of most benchmarks around or below 1.0 (OD as printed)" "<= 1.0" "OD $od (mcf, $n samples)" "$cmd001" "$verdict"
verdict=$(py 'import sys; print("agrees" if float(sys.argv[1]) <= 2.0 else "differs")' "$odp")
row "001" "\"OD 2.0 = deviated by 2\"; above 2 is not good (prose reading, no /m)" "<= 2 good" "OD prose $odp" "$cmd001" "$verdict"
row "001" "OD rises with the period (fixed period, prose OD per kept period)" "ascending" "$trend ($kept periods kept, $dropped sweep warnings)" "$cmd001" "see notes"

# ---- seed 002: unbiased sampled shares (Tables 2, 4, 5), Wilson coverage.
for t in table2 table4 table5 "table2 --interval-noise 20"; do
  # shellcheck disable=SC2086
  "$PT" -q simulate sampling --preset $t --reps 1000 --seed 1 --json >"$tmp/$t.json"
  read -r bias sd cov < <(py '
import json, sys
d = json.load(open(sys.argv[1]))
r = d["rows"]
print("%.4f %.4f %.3f" % (max(abs(x["profiled_mean"] - x["actual_mean"]) for x in r),
      max(x["profiled_sd"] for x in r), min(x["wilson_coverage"] for x in r)))
' "$tmp/$t.json")
  verdict=$(py 'import sys; print("agrees" if float(sys.argv[1]) < 0.01 else "differs")' "$bias")
  row "002" "$t: sampled share unbiased (mean of 1000 profilings = actual share)" "bias < 0.01" "max bias $bias, max SD $sd, min 95% Wilson coverage $cov" "proftrust simulate sampling --preset $t --reps 1000 --seed 1 --json" "$verdict"
done

# ---- seeds 003 and 004: path timing on workloads/vpp.c with the probes.
gcc -O2 -g -fno-omit-frame-pointer -o "$tmp/vpp" workloads/vpp.c
gcc -O2 -g -fno-omit-frame-pointer -DPT_DISABLE -o "$tmp/vpp_np" workloads/vpp.c
cpu_s() { perf stat -x, -e task-clock -o "$tmp/t" "$@" >/dev/null 2>&1; awk -F, '/task-clock/{printf "%.4f", $1/1000}' "$tmp/t"; }
o=()
for _ in $(seq "$REPS"); do
  x=$(cpu_s "$tmp/vpp_np"); y=$(cpu_s env PROFTRUST_PROBE_OUT="$tmp/p.txt" "$tmp/vpp")
  o+=("$(awk -v x="$x" -v y="$y" 'BEGIN{printf "%.3f", y/x}')")
done
med=$(printf '%s\n' "${o[@]}" | sort -g | awk '{a[NR]=$1} END{print (NR%2? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
verdict=$(py 'import sys; print("agrees" if float(sys.argv[1]) < 1.05 else "differs")' "$med")
row "003" "overhead of path profiling with hardware metrics (Table 3)" "digits lost in the text" "nearest: the probes below (${med}x); proftrust's own path profiles run under QEMU (no native overhead to compare)" "-" "not comparable"
row "004" "bursty tracing, nCheck 10000: overhead < 5%" "< 1.05x" "${med}x median of $REPS (${o[*]})" "perf stat: vpp (PT_FOR probes, recording) / vpp -DPT_DISABLE" "$verdict"

"$PT" -q vpp --source probe --json -- "$tmp/vpp" >"$tmp/v.json" 2>/dev/null
py '
import json, sys
d = json.load(open(sys.argv[1]))
b = d["bias"]; p = d["paths"]
top = p[0]
row = lambda *c: print("| " + " | ".join(c) + " |")
cmd = "`proftrust vpp --source probe --json -- vpp`"
row("004", "the bias is small and systematic (consistent)", "consistent",
    "%d ticks (median %d, %.0f%% within ±%d; timer step %s)" % (b["subtracted"], b["median"], 100 * b["within"], b["tolerance"], d.get("timer_resolution")),
    cmd, "agrees" if b["consistent"] else "differs")
row("004", "top-10 paths NV share of execution time (Fig. 3 avg); dominant path", "43%; 17%",
    "%.1f%%; %.1f%% (%s, timing inflation %s)" % (100 * d["top_share"], 100 * top["share_of_time"], top["source"],
        "%.2fx" % d["timing_inflation"] if d.get("timing_inflation") else "none"),
    cmd, "see notes")
row("004", "VPP top path: net variation below total time, basetime > 0", "basetime = min",
    "%s: basetime %d, NV %d of total %d ticks; %d of %d paths unresolved (< 1 step)" % (
        top["signature"], top["basetime"], top["net_variation"], top["total_time"],
        sum(1 for x in p if x.get("resolved") is False), len(p)),
    cmd, "agrees" if top["basetime"] > 0 and top["net_variation"] < top["total_time"] else "differs")
fr = {r["ranking"]: r["not_in_other"] for r in d["rankings"]}
row("004", "Fig. 11: top VPPs not in the top frequency / time paths (SPEC: similar; bzip2 4 of 10)", "0-4 of 10",
    "%d / %d of %d" % (fr.get("frequency", -1), fr.get("total_time", -1), len(p)), cmd, "see notes")
' "$tmp/v.json"
