#!/usr/bin/env bash
# Coverage of `check`'s intervals for another run (issue 35, docs/check.md "Intervals for
# another run"): run_low/run_high of each function row against what other runs show.
#
# For each program, REC randomised cpu-clock recordings of the same command (`proftrust
# record --randomize -c 100003`, one after the other). Then, for every recording i:
#
#  * one recording (the over-dispersion estimator): `check rec_i` alone; its run interval of
#    each function holding at least 1% of the merge of the *other* recordings should hold
#    that merged share. The half-width is also compared with max(3 points, 3x the row's
#    Wilson half-width) (issue 35's bound).
#  * several recordings (the between-recording estimator): `check` of the other REC-1
#    recordings together; its run interval of each function of at least 1% should hold
#    recording i's own share (one more run).
#
# Programs: crates/cli/tests/check/{phases,chase,steady}.c (a program with phases, a pointer
# chase, a steady fine-grained mix), and with `calibrate` as first argument the bundled
# workloads omnet 15 and hmmer 45 (the sizes of tests/check_coverage.rs), on which the over-dispersion `tau` was calibrated: for those it
# prints each function's between-run variance beyond sampling, as tau² = (var of the shares
# − mean p(1−p)/n) / (p(1−p)), and their median.
#
# The machine's load moves time shares between runs: `uptime` is printed before and after.
# Usage: scripts/check-run-coverage.sh [calibrate] [REC=7]
# Needs gcc, python3 and perf_event_open (perf_event_paranoid <= 2).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=coverage
if [ "${1:-}" = calibrate ]; then
    mode=calibrate
    shift
fi
rec="${1:-7}"
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p proftrust
pt="$(cd "$target/release" && pwd)/proftrust"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
src=crates/cli/tests/check

if [ "$mode" = calibrate ]; then
    progs=("omnet 15" "hmmer 45")
    for w in omnet hmmer; do
        gcc -O2 -g -fno-omit-frame-pointer -o "$tmp/$w" "workloads/$w.c" -lm
    done
else
    progs=("phases 60" "chase 100" "steady 700000")
    for w in phases chase steady; do
        gcc -O2 -g -fno-omit-frame-pointer -o "$tmp/$w" "$src/$w.c"
    done
fi
echo "load before: $(uptime)"
for p in "${progs[@]}"; do
    set -- $p
    for i in $(seq 1 "$rec"); do
        "$pt" -q record --randomize -c 100003 --seed "$i" -o "$tmp/$1.$i.ptsamp" -- "$tmp/$1" "$2" > /dev/null
    done
done
echo "load after recording: $(uptime)"

python3 - "$pt" "$tmp" "$rec" "$mode" "${progs[@]}" <<'PY'
import json, statistics, subprocess, sys
pt, tmp, rec, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
progs = [p.split()[0] for p in sys.argv[5:]]

def check(files, binary):
    out = subprocess.run([pt, "-q", "check", *files, "--binary", binary, "--top", "1000", "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)

def rows(r):
    return {f["name"]: f for f in r["functions"]}

total = {"one": [0, 0, 0], "several": [0, 0]}
print()
if mode == "coverage":
    print("| program | recordings | one recording: rows | held | coverage | widest half-width / bound | several (R-1): rows | held | coverage |")
    print("|---|---|---|---|---|---|---|---|---|")
for prog in progs:
    binary = f"{tmp}/{prog}"
    files = [f"{tmp}/{prog}.{i}.ptsamp" for i in range(1, rec + 1)]
    single = [check([f], binary) for f in files]
    if mode == "calibrate":
        shares = {}
        for r in single:
            for name, f in rows(r).items():
                shares.setdefault(name, []).append((f["share"], r["samples"]))
        merged = rows(check(files, binary))
        taus = []
        for name, f in merged.items():
            p = f["share"]
            if p < 0.01 or len(shares.get(name, [])) < rec:
                continue
            s = [x[0] for x in shares[name]]
            sampling = statistics.mean(p * (1 - p) / x[1] for x in shares[name])
            t2 = (statistics.variance(s) - sampling) / (p * (1 - p))
            taus.append(t2)
            print(f"{prog:8s} {name:24s} share {p:.4f}  sd between runs {statistics.stdev(s):.4f}  sampling sd {sampling ** 0.5:.4f}  tau {max(t2, 0) ** 0.5:.4f}")
        med = statistics.median(taus)
        print(f"{prog}: median tau² {med:.6f} -> tau {max(med, 0) ** 0.5:.4f}")
        continue
    one = [0, 0, 0]
    several = [0, 0]
    worst = 0.0
    for i in range(rec):
        others = files[:i] + files[i + 1:]
        ref = check(others, binary)
        mine = rows(single[i])
        for name, f in rows(ref).items():
            if f["share"] < 0.01:
                continue
            one[0] += 1
            m = mine.get(name)
            if m and m["run_low"] <= f["share"] <= m["run_high"]:
                one[1] += 1
            elif m:
                print(f"  miss (one): {prog} rec {i + 1} {name}: {m['share']:.4f} run [{m['run_low']:.4f}, {m['run_high']:.4f}] others {f['share']:.4f}")
            else:
                print(f"  miss (one): {prog} rec {i + 1} {name}: no sample, others {f['share']:.4f}")
            if m:
                half = (m["run_high"] - m["run_low"]) / 2
                bound = max(0.03, 3 * (m["wilson_high"] - m["wilson_low"]) / 2)
                worst = max(worst, half / bound)
                if half > bound:
                    one[2] += 1
            # Several: the others' interval for one more run, against recording i.
            if m:
                several[0] += 1
                if f["run_low"] <= m["share"] <= f["run_high"]:
                    several[1] += 1
                else:
                    print(f"  miss (several): {prog} rec {i + 1} {name}: {m['share']:.4f} against [{f['run_low']:.4f}, {f['run_high']:.4f}]")
    for k in range(3):
        total["one"][k] += one[k]
    for k in range(2):
        total["several"][k] += several[k]
    print(f"| {prog} | {rec} | {one[0]} | {one[1]} | {one[1] / max(one[0], 1):.3f} | {worst:.3f} | {several[0]} | {several[1]} | {several[1] / max(several[0], 1):.3f} |")
if mode == "coverage":
    o, s = total["one"], total["several"]
    print(f"| all | | {o[0]} | {o[1]} | {o[1] / max(o[0], 1):.3f} | {o[2]} over the bound | {s[0]} | {s[1]} | {s[1] / max(s[0], 1):.3f} |")
PY
echo "load at the end: $(uptime)"
