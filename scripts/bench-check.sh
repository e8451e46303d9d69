#!/usr/bin/env bash
# Benchmark of `proftrust check` on a large profile (issue 14: "check of 10^7 samples in a
# few seconds").
#
# The profile is made deterministically from the golden fixture's virtual-PMU sample file
# (crates/cli/tests/golden/fixtures/tiny.ptsamp, 1644 samples of `tiny`): its samples are
# repeated, each copy shifted in time past the previous one, until SAMPLES samples are
# written, into a proftrust sample file (PTSAMP01, docs/file-formats.md: magic, u64 header
# length, JSON header, 50-byte records). `check --json --binary tiny` then runs RUNS times;
# the median wall and CPU time (user+sys) are printed with `uptime` (the machine is shared:
# the CPU time is the steadier number). The answer is checked: the checked event's samples
# equal the count written, and the top function's share equals the fixture's own.
#
# Part 2 (issue 14 Show (b)): cpu-clock coverage. REC randomised recordings (`record
# --randomize -c 50021`) of omnet 15 and hmmer 45 (static, -O2 -g); each is checked on its
# own and its 95% intervals (function and line rows not called noise, no aliasing flag) are
# compared with the merge of the other recordings; the coverage is printed per level.
#
# Usage: scripts/bench-check.sh [SAMPLES=10000000] [RUNS=3] [REC=7]
# Needs python3 (and gcc, perf_event_open for part 2).
set -euo pipefail
cd "$(dirname "$0")/.."
samples="${1:-10000000}"
runs="${2:-3}"
rec="${3:-7}"
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p proftrust
pt="$(cd "$target/release" && pwd)/proftrust"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fix=crates/cli/tests/golden/fixtures

python3 - "$fix/tiny.ptsamp" "$tmp/big.ptsamp" "$samples" <<'PY'
import json, struct, sys
src, dst, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
b = open(src, "rb").read()
assert b[:8] == b"PTSAMP01"
hl = struct.unpack("<Q", b[8:16])[0]
h = json.loads(b[16:16 + hl])
recs = b[16 + hl:]
R = 50  # fixed record bytes; the fixture has no call chains or branches
assert len(recs) == R * h["sample_count"]
block = [recs[i:i + R] for i in range(0, len(recs), R)]
# Only the first event's samples (the one `check` reads by default).
block = [r for r in block if struct.unpack_from("<H", r, 0)[0] == 0]
times = [struct.unpack_from("<Q", r, 10)[0] for r in block]
t0, span = min(times), max(times) - min(times) + 1
h["sample_count"] = want
h["events"] = h["events"][:1]
head = json.dumps(h).encode()
with open(dst, "wb") as f:
    f.write(b"PTSAMP01" + struct.pack("<Q", len(head)) + head)
    written, rep = 0, 0
    pack = struct.Struct("<Q").pack
    while written < want:
        n = min(len(block), want - written)
        off = rep * span
        f.write(b"".join(r[:10] + pack(t - t0 + off) + r[18:] for r, t in zip(block[:n], times)))
        written += n
        rep += 1
print(f"wrote {want} samples ({rep} copies of the fixture's {len(block)}) to the sample file")
PY
ls -l "$tmp/big.ptsamp" | awk '{printf "file: %.0f MB\n", $5 / 1e6}'
echo "load: $(uptime)"

python3 - "$pt" "$tmp" "$runs" "$fix" "$samples" <<'PY'
import json, resource, statistics, subprocess, sys, time
pt, tmp, runs, fix, want = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])

def timed(cmd, out):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(out, "w") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)

cmd = [pt, "check", f"{tmp}/big.ptsamp", "--binary", f"{fix}/tiny", "--json", "-q"]
walls, cpus = [], []
for _ in range(runs):
    w, c = timed(cmd, f"{tmp}/big.json")
    walls.append(w); cpus.append(c)
big = json.load(open(f"{tmp}/big.json"))
small = json.loads(subprocess.run(
    [pt, "check", f"{fix}/tiny.ptsamp", "--binary", f"{fix}/tiny", "--json", "-q"],
    check=True, capture_output=True).stdout)
assert big["samples"] == want, (big["samples"], want)
top_b, top_s = big["functions"][0], small["functions"][0]
assert top_b["name"] == top_s["name"], (top_b["name"], top_s["name"])
# Whole copies keep the fixture's shares exactly; a partial last copy moves them by < 1e-3.
assert abs(top_b["share"] - top_s["share"]) < 1e-3, (top_b["share"], top_s["share"])
print(f"check --json of {want} samples: median wall {statistics.median(walls):.2f} s, "
      f"median CPU {statistics.median(cpus):.2f} s over {runs} runs "
      f"(walls {', '.join(f'{w:.2f}' for w in walls)}); "
      f"top function {top_b['name']} {100 * top_b['share']:.2f}% "
      f"(fixture {100 * top_s['share']:.2f}%), verdict {big['verdict']}")
PY
echo "load: $(uptime)"

echo "== cpu-clock coverage: $rec randomised recordings each of omnet 15, hmmer 45"
for w in omnet hmmer; do
  gcc -O2 -g -fno-omit-frame-pointer -static -o "$tmp/$w" "workloads/$w.c" -lm
done
for w in "omnet 15" "hmmer 45"; do
  set -- $w
  for i in $(seq 1 "$rec"); do
    "$pt" -q record --randomize -c 50021 -o "$tmp/$1-$i.ptsamp" -- "$tmp/$1" "$2" >/dev/null
    "$pt" -q check "$tmp/$1-$i.ptsamp" --json >"$tmp/$1-$i.json"
  done
done
python3 - "$tmp" "$rec" <<'PY'
import json, sys
tmp, rec = sys.argv[1], int(sys.argv[2])
tot = {}
for w in ["omnet", "hmmer"]:
    rs = [json.load(open(f"{tmp}/{w}-{i}.json")) for i in range(1, rec + 1)]
    for level in ["functions", "lines"]:
        for i, r in enumerate(rs):
            if (r.get("aliasing") or {}).get("flagged"):
                continue
            ref, n = {}, 0
            for j, o in enumerate(rs):
                if j != i:
                    for f in o[level]:
                        ref[f["name"]] = ref.get(f["name"], 0) + f["samples"]
                        n += f["samples"]
            for f in r[level]:
                if f["verdict"] == "noise":
                    continue
                p = ref.get(f["name"], 0) / n
                c = tot.setdefault((w, level), [0, 0])
                c[1] += 1
                c[0] += f["ci_low"] <= p <= f["ci_high"]
all_c = sum(c[0] for c in tot.values()); all_n = sum(c[1] for c in tot.values())
for (w, level), (c, n) in sorted(tot.items()):
    print(f"  {w:6} {level:9} {c:4} of {n:4} rows hold the merge of the other recordings")
print(f"cpu-clock coverage: {all_c} of {all_n} ({all_c / max(all_n, 1):.3f}) against 0.95 stated")
PY
echo "load: $(uptime)"
