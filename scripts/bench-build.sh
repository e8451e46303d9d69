#!/usr/bin/env bash
# Build-time benchmark (docs/testing.md, "Build times"): what a new user and CI pay.
#
#   bash scripts/bench-build.sh            # default build, incremental rebuilds
#   FLEET=1 bash scripts/bench-build.sh    # also the fleet binary and the Ballista feature
#   COLD_REGISTRY=1 ...                    # a fresh CARGO_HOME: crates.io index and
#                                          # downloads included in the cold build
#
# Works on a fresh clone of this checkout (HEAD) in a temporary directory with an empty
# target/, so nothing built before counts. Prints wall and CPU seconds per step and the load
# average when it started (2-core machines: other work moves wall time, not CPU time much).
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/bench-build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
git clone -q "$src" "$work/tree"
cd "$work/tree"
if [ -n "${COLD_REGISTRY:-}" ]; then
  export CARGO_HOME="$work/cargo-home"
  mkdir -p "$CARGO_HOME"
  registry="cold (fresh CARGO_HOME: index and downloads included)"
else
  registry="warm (${CARGO_HOME:-~/.cargo} as it is)"
fi
echo "commit:   $(git rev-parse --short HEAD)"
echo "machine:  $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) at the start"
echo "registry: $registry"
echo

# `timed NAME CMD...`: wall and CPU (user+sys of the children) seconds of CMD.
timed() {
  local name=$1; shift
  local t0 c0 t1 c1
  t0=$(date +%s.%N)
  c0=$(awk '{print $14+$15+$16+$17}' /proc/$$/stat)
  "$@" >"$work/log" 2>&1 || { cat "$work/log"; echo "FAILED: $*"; exit 1; }
  t1=$(date +%s.%N)
  c1=$(awk '{print $14+$15+$16+$17}' /proc/$$/stat)
  local ticks; ticks=$(getconf CLK_TCK)
  local compiled; compiled=$(grep -c '^ *Compiling ' "$work/log" || true)
  printf '%-58s %8.1f s wall %8.1f s CPU %5d crates compiled\n' "$name" \
    "$(echo "$t1 - $t0" | bc)" "$(echo "($c1 - $c0) / $ticks" | bc -l)" "$compiled"
}

timed "cold: cargo build --release (default build)" cargo build --release
for f in crates/formats/src/lib.rs crates/metrics/src/lib.rs crates/cli/src/lib.rs; do
  touch "$f"
  timed "incremental: touch $f" cargo build --release
done

if [ -n "${FLEET:-}" ]; then
  timed "fleet: cargo build --release -p proftrust-fleet-cli" \
    cargo build --release -p proftrust-fleet-cli
  grep '^ *Compiling ' "$work/log" | awk '{print $2}' | sort -u >"$work/fleet.crates"
  timed "fleet: + --features ballista (Ballista's own crates)" \
    cargo build --release -p proftrust-fleet-cli --features ballista
  grep '^ *Compiling ' "$work/log" | awk '{print $2}' | sort -u >"$work/ballista.crates"
  # One DataFusion build: the Ballista step must not recompile what the fleet step built
  # (the fleet crates themselves excepted: the feature is theirs).
  again=$(comm -12 "$work/fleet.crates" "$work/ballista.crates" | grep -v '^proftrust' || true)
  echo
  if [ -z "$again" ]; then
    echo "one DataFusion build: the ballista step recompiled none of the fleet step's crates"
  else
    echo "recompiled by the ballista step (feature sets differ):"; echo "$again" | sed 's/^/  /'
  fi
fi
