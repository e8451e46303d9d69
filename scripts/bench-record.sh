#!/usr/bin/env bash
# Sampler overhead of `proftrust record` against `perf record`, same event, same period,
# same workload (crates/record/tests/c/work.c, gcc -O2 -g). Goal: ratio <= 1.0.
#
#   scripts/bench-record.sh [RUNS=7] [SCALE=150] [PERIOD_NS=100003]
#
# Runs, interleaved RUNS times: the program alone; `perf record -e cpu-clock:u -c PERIOD`;
# `perf record -B` (the same without perf's build-id pass, for reference); `proftrust record
# -e cpu-clock -c PERIOD` (user-only by default, like `:u`). Prints medians of wall time and
# of CPU time (user+sys of the whole process tree), the overheads (minus native), and the
# ratios proftrust/perf. On a shared machine wall times move with the load; the ratios of
# interleaved medians are the figures to quote.
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

python3 - "$PT" "$TMP" "$RUNS" "$SCALE" "$PERIOD" <<'PY'
import json, resource, statistics, subprocess, sys, time
pt, tmp, runs, scale, period = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
work = [f"{tmp}/work", scale]
cmds = {
    "native": work,
    "perf record": ["perf", "record", "-q", "-e", "cpu-clock:u", "-c", period, "-o", f"{tmp}/perf.data", "--"] + work,
    "perf record -B": ["perf", "record", "-q", "-B", "-e", "cpu-clock:u", "-c", period, "-o", f"{tmp}/perfB.data", "--"] + work,
    "proftrust record": [pt, "-q", "record", "-e", "cpu-clock", "-c", period, "-o", f"{tmp}/out.ptsamp", "--"] + work,
}

def timed(cmd):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)

wall = {k: [] for k in cmds}
cpu = {k: [] for k in cmds}
for _ in range(runs):
    for k, c in cmds.items():
        w, u = timed(c)
        wall[k].append(w)
        cpu[k].append(u)
med = {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in cmds}

def count(args):
    out = subprocess.run([pt, "read", "--json"] + args, capture_output=True, check=True).stdout
    return json.loads(out)["samples"]

ours_n = count([f"{tmp}/out.ptsamp"])
perf_n = count([f"{tmp}/perf.data"])
nw, nc = med["native"]
print(f"workload: work {scale}, event cpu-clock (user), period {period} ns, {runs} interleaved runs (median)")
print(f"samples in the last run: perf record {perf_n}, proftrust record {ours_n}")
for k in cmds:
    w, c = med[k]
    extra = "" if k == "native" else f"  (overhead wall {1e3 * (w - nw):7.1f} ms, cpu {1e3 * (c - nc):7.1f} ms)"
    print(f"{k:18s} wall {1e3 * w:8.1f} ms  cpu {1e3 * c:8.1f} ms{extra}")
pw, pc = med["perf record"]
ow, oc = med["proftrust record"]
print(f"ratio wall proftrust/perf     = {ow / pw:.3f}  (goal <= 1.0)")
print(f"ratio cpu  proftrust/perf     = {oc / pc:.3f}")
if pw - nw > 0:
    print(f"ratio wall overhead proftrust/perf = {(ow - nw) / (pw - nw):.3f}")
if pc - nc > 0:
    print(f"ratio cpu  overhead proftrust/perf = {(oc - nc) / (pc - nc):.3f}")
bw, bc = med["perf record -B"]
if bw - nw > 0:
    print(f"ratio wall overhead proftrust/(perf record -B) = {(ow - nw) / (bw - nw):.3f}")
PY
