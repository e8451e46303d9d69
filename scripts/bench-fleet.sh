#!/usr/bin/env bash
# Benchmark of `proftrust fleet` (docs/fleet.md): a synthetic fleet of HOSTS hosts with
# SAMPLES samples in total (proftrust sample files from the hidden, seeded `fleet synth`:
# addresses inside the largest functions of a real binary, the bundled hmmer workload),
#   1. ingest: one `fleet ingest --host hNNNN` per host, as a fleet's collectors would run
#      it; prints samples/s over the whole ingest (goal >= 5 M/s) and the store's size;
#   2. report: `fleet report --json` on the embedded engine; wall time (goal <= 20 s for
#      10^8 samples) and peak RSS (`/usr/bin/time -v`: the samples are never held in RAM);
#      checks that the report's samples equal SAMPLES and its hosts HOSTS;
#   3. with `--engine ballista://HOST:PORT` in BALLISTA (a running cluster; docs/fleet.md),
#      the same report through it, and its JSON compared with the embedded one.
# Quote the load (`uptime`) with the numbers: the machine is shared.
#
# Usage: [PT=BINARY] [BALLISTA=ballista://HOST:PORT] scripts/bench-fleet.sh [SAMPLES=100000000]
#        [HOSTS=1000] [SEED=1]
set -euo pipefail
cd "$(dirname "$0")/.."
samples="${1:-100000000}"
hosts="${2:-1000}"
seed="${3:-1}"
target="${CARGO_TARGET_DIR:-target}"
if [ -n "${PT:-}" ]; then
  # A given binary, e.g. one built with `--features ballista` for step 3 (building it here
  # without the feature would relink the default binary over it).
  pt="$(realpath "$PT")"
else
  cargo build --release -q -p proftrust
  pt="$(cd "$target/release" && pwd)/proftrust"
fi
tmp="$(mktemp -d "${TMPDIR:-/tmp}/bench-fleet.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "== load: $(uptime)"

# A real binary to put the samples in: the bundled hmmer workload, built by proftrust.
"$pt" -q vpmu --workload hmmer --size 10 -o "$tmp/w.ptsamp" >/dev/null 2>&1 || true
bin="$("$pt" read "$tmp/w.ptsamp" --json | python3 -c 'import json,sys; print([m for m in json.load(sys.stdin)["symbols"] if "hmmer" in m["module"]][0]["module"])' 2>/dev/null || true)"
if [ -z "$bin" ] || [ ! -f "$bin" ]; then
  bin="$(find "${XDG_CACHE_HOME:-$HOME/.cache}/proftrust" -name hmmer -type f 2>/dev/null | head -1)"
fi
[ -f "$bin" ] || { echo "cannot find the hmmer workload binary (run: proftrust vpmu --workload hmmer)"; exit 1; }
echo "== binary: $bin"

echo "== generating $samples samples for $hosts hosts (seed $seed)"
t0=$(date +%s.%N)
"$pt" fleet synth --binary "$bin" --out "$tmp/profiles" --hosts "$hosts" --samples "$samples" --seed "$seed"
t1=$(date +%s.%N)
echo "   $(du -sh "$tmp/profiles" | cut -f1) of sample files in $(echo "$t1 - $t0" | bc) s"

echo "== ingest (one process per host)"
t0=$(date +%s.%N)
for f in "$tmp"/profiles/host-*.ptsamp; do
  h="$(basename "$f" .ptsamp)"
  n=${h#host-}
  "$pt" -q fleet ingest --host "$h" --labels "build=$(( 10#$n % 2 ))" --out "$tmp/store" "$f" >/dev/null
done
t1=$(date +%s.%N)
secs=$(echo "$t1 - $t0" | bc)
echo "   ingest: $samples samples in $secs s = $(echo "$samples / $secs / 1000000" | bc -l | cut -c1-6) M samples/s (goal >= 5)"
echo "   store: $(du -sh "$tmp/store" | cut -f1), $(find "$tmp/store" -name '*.parquet' | wc -l) Parquet files"

echo "== report, embedded"
/usr/bin/time -v "$pt" fleet report "$tmp/store" --json > "$tmp/embedded.json" 2> "$tmp/time.txt"
wall=$(grep 'Elapsed (wall clock)' "$tmp/time.txt" | awk '{print $NF}')
rss=$(grep 'Maximum resident set size' "$tmp/time.txt" | awk '{print $NF}')
echo "   report: wall $wall (goal <= 20 s at 10^8), peak RSS $(( rss / 1024 )) MiB"
python3 - "$tmp/embedded.json" "$samples" "$hosts" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["samples"] == int(sys.argv[2]), (r["samples"], sys.argv[2])
assert r["hosts"] == int(sys.argv[3]), (r["hosts"], sys.argv[3])
s = sum(f["share"] for f in r["functions"])
assert abs(s - 1) < 1e-9, s
top = r["functions"][0]
print(f"   checked: {r['samples']} samples, {r['hosts']} hosts, shares sum to 1; top {top['name']} {top['share']:.4f} [{top['ci_low']:.4f}, {top['ci_high']:.4f}] deff {top['design_effect']:.2f}")
PY

echo "== diff build=0 vs build=1, embedded"
/usr/bin/time -f '   diff: wall %e s, peak RSS %M KiB' "$pt" fleet diff "$tmp/store" --a build=0 --b build=1 --json > "$tmp/diff.json"

if [ -n "${BALLISTA:-}" ]; then
  echo "== report, $BALLISTA"
  /usr/bin/time -f '   report: wall %e s, peak RSS %M KiB' "$pt" fleet report "$tmp/store" --json --engine "$BALLISTA" > "$tmp/ballista.json"
  python3 - "$tmp/embedded.json" "$tmp/ballista.json" <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
a.pop("engine"); b.pop("engine")
print("   identical to the embedded report:", a == b)
sys.exit(0 if a == b else 1)
PY
  /usr/bin/time -f '   diff: wall %e s, peak RSS %M KiB' "$pt" fleet diff "$tmp/store" --a build=0 --b build=1 --json --engine "$BALLISTA" > "$tmp/diff-ballista.json"
  python3 - "$tmp/diff.json" "$tmp/diff-ballista.json" <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
a.pop("engine", None); b.pop("engine", None)
print("   diff identical to the embedded one:", a == b)
sys.exit(0 if a == b else 1)
PY
else
  echo "== Ballista: skipped (set BALLISTA=ballista://HOST:PORT with a running cluster; docs/fleet.md)"
fi
echo "== load: $(uptime)"
