#!/usr/bin/env bash
# Skid correction benchmarks (docs/skid.md).
#  1. One loop with 16 simple loops: time per solve, Gibbs (Algorithm 1) and lsq, with the
#     per-loop (eq. 6) and the mixed emulation. Target: <= 100 ms.
#  2. Whole workloads: `proftrust vpmu` (QEMU trace + virtual PMU) and `proftrust correct`
#     on every bundled workload with S = 30 cycles and heavy loads of 200 cycles; prints the
#     correction time (target <= 10 s) and raw vs corrected epsilon against the exact counts.
# Usage: scripts/bench-skid.sh [SCALE]   (workload size scale, default 2)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
scale="${1:-2}"
cd "$root"
cargo run -q --release -p proftrust-skid --example bench_correct
cargo build -q --release -p proftrust -p proftrust-qemu-plugin
pt="$CARGO_TARGET_DIR/release/proftrust"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
bash workloads/build.sh "$tmp/bin" >/dev/null
printf '%-8s %10s %10s %8s %8s %8s %8s\n' workload vpmu_s correct_s eps_f_raw eps_f_cor eps_i_raw eps_i_cor
for w in hmmer soplex omnet mcf libsvm; do
  t0=$(date +%s.%N)
  "$pt" -q vpmu --skid 30 --period 1009 --cpi-model cache --heavy-load 200 --seed 1 \
     -o "$tmp/$w.samples" --exact "$tmp/$w.exact" -- "$tmp/bin/$w" "$scale" >/dev/null
  t1=$(date +%s.%N)
  "$pt" -q correct --skid 30 --samples "$tmp/$w.samples" --binary "$tmp/bin/$w" \
     --truth "$tmp/$w.exact" --json > "$tmp/$w.json"
  t2=$(date +%s.%N)
  python3 - "$w" "$t0" "$t1" "$t2" "$tmp/$w.json" <<'PY'
import json, sys
w, t0, t1, t2, p = sys.argv[1], *map(float, sys.argv[2:5]), sys.argv[5]
m = json.load(open(p))["metrics"]
print(f"{w:<8} {t1-t0:10.2f} {t2-t1:10.2f} {m['epsilon_function_raw']:8.4f} {m['epsilon_function_corrected']:8.4f} "
      f"{m['epsilon_instruction_raw']:8.4f} {m['epsilon_instruction_corrected']:8.4f}")
PY
done
