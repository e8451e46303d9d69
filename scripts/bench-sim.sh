#!/usr/bin/env bash
# Benchmark of the sampling simulation (seed 002, issue 5): the full reproduction of the
# paper's Tables 2-6 at 1000 repetitions each, timed with /usr/bin/time -v (wall clock and
# peak RSS), against the goal of <= 2 s on 2 cores in <= 200 MB. Also times every preset
# alone, and the peer: a per-unit simulation (every resource unit stepped in every
# repetition, crates/sim/examples/per-unit-baseline.rs) timed on one 1M-unit cell and
# extrapolated to Tables 2-6; prints the ratio.
#
# Usage: scripts/bench-sim.sh [reps]   (default 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
REPS="${1:-1000}"
TARGET="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p proftrust
cargo build --release -q -p proftrust-sim --example per-unit-baseline
BIN="$TARGET/release/proftrust"
PEER="$TARGET/release/examples/per-unit-baseline"
if [ ! -x /usr/bin/time ]; then
    echo "bench-sim: /usr/bin/time is missing (apt-get install time)" >&2
    exit 1
fi
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

measure() { # name args...
    local name="$1"; shift
    /usr/bin/time -v "$BIN" -q simulate sampling "$@" --reps "$REPS" --seed 1 --json \
        -o "$OUT/$name.json" 2> "$OUT/$name.time"
    local wall rss
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$OUT/$name.time" \
        | awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
    rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$OUT/$name.time")
    local user sys
    user=$(awk -F': ' '/User time/ {print $2}' "$OUT/$name.time")
    sys=$(awk -F': ' '/System time/ {print $2}' "$OUT/$name.time")
    printf '%-14s wall %6.2f s  user %5.2f s  sys %5.2f s  peak RSS %7.1f MB\n' \
        "$name" "$wall" "$user" "$sys" "$(awk -v r="$rss" 'BEGIN { print r / 1024 }')"
    echo "$wall $rss" > "$OUT/$name.fig"
}

echo "proftrust simulate sampling, $REPS repetitions per cell, $(nproc) cores"
for p in table2 table3 table4 table5 table6 aliasing fragmentation coverage sweep; do
    measure "$p" --preset "$p"
done
measure "tables-2-6" --preset all
read -r wall rss < "$OUT/tables-2-6.fig"
mb=$(awk -v r="$rss" 'BEGIN { print r / 1024 }')
printf '\nfull reproduction of Tables 2-6: %.2f s (goal <= 2 s, %.1fx headroom), %.1f MB (goal <= 200 MB)\n' \
    "$wall" "$(awk -v w="$wall" 'BEGIN { print 2 / (w + 0.0001) }')" "$mb"
read -r user < <(awk -F': ' '/User time/ {print $2}' "$OUT/tables-2-6.time")
"$PEER" 50 | tee "$OUT/peer.txt"
peer=$(awk '/estimate for Tables/ { for (i = 1; i <= NF; i++) if ($i == "s") print $(i-1) }' "$OUT/peer.txt")
printf 'per-unit peer / proftrust: %.0fx (single-core peer estimate %.1f s vs %.2f s user CPU), %.0fx against the wall time\n' \
    "$(awk -v p="$peer" -v u="$user" 'BEGIN { print p / (u + 0.005) }')" "$peer" "$user" \
    "$(awk -v p="$peer" -v w="$wall" 'BEGIN { print p / w }')"
if awk -v w="$wall" -v m="$mb" 'BEGIN { exit !(w <= 2 && m <= 200) }'; then
    echo "goal met"
else
    echo "GOAL MISSED"
    exit 1
fi
