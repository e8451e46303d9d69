#!/usr/bin/env bash
# Path profiling and CCT building benchmark (issue 7). Per workload:
#   * native wall time;
#   * `proftrust paths --json` and `proftrust cct --json` wall time with the default timing
#     (cache simulation over traced data addresses) and with `--cpi-model flat`, and their
#     ratio to native;
#   * throughput over the block trace (blocks/s, instructions/s) of: the bare QEMU trace, the
#     path profiler, the CCT builder, both, the bare trace with data addresses, and paths+CCT
#     with the cache simulation (crates/paths/examples/paths-throughput.rs), each as a
#     multiple of the bare trace.
#
#   bash scripts/bench-paths.sh                 # workloads/*.c if present, else the test programs
#   REPS=1 bash scripts/bench-paths.sh prog.c   # given C sources (built with gcc -O2 -g)
#   SCALE=5 bash scripts/bench-paths.sh         # workload size scale (workloads' default is 100;
#                                               # the trace runs ~100x slower than native)
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
SCALE=${SCALE:-2}
TARGET=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p proftrust -p proftrust-qemu-plugin
cargo build --release -q -p proftrust-paths --example paths-throughput
PT="$TARGET/release/proftrust"
TT="$TARGET/release/examples/paths-throughput"
export PROFTRUST_QEMU_PLUGIN="$TARGET/release/libproftrust_qemu_plugin.so"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

if [ $# -gt 0 ]; then srcs=("$@")
elif compgen -G "workloads/*.c" >/dev/null; then srcs=(workloads/*.c)
else srcs=(crates/paths/tests/c/branches.c crates/paths/tests/c/recursion.c); fi

# Arguments per program: the bundled workloads take a size scale.
args_for() {
  case "$1" in
    workloads/*) echo "$SCALE" ;;
    *) echo "" ;;
  esac
}

# Best wall time of $REPS runs of a command, in seconds.
best() {
  local b=""
  for _ in $(seq "$REPS"); do
    local s e
    s=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s.%N)
    b=$(awk -v s="$s" -v e="$e" -v b="$b" 'BEGIN{t=e-s; if(b==""||t<b) b=t; printf "%.4f", b}')
  done
  echo "$b"
}

echo "workload scale: $SCALE (REPS=$REPS, best of REPS; $(nproc) cores)"
printf "%-9s %8s %8s %8s %8s %8s %9s %9s %9s %9s\n" workload native_s paths_s paths_fl cct_s cct_fl paths/nat pfl/nat cct/nat cfl/nat
for src in "${srcs[@]}"; do
  name=$(basename "$src" .c)
  gcc -O2 -g -fno-omit-frame-pointer -o "$tmp/$name" "$src" -lm
  read -r -a a <<<"$(args_for "$src")"
  n=$(best "$tmp/$name" "${a[@]}")
  p=$(best "$PT" -q paths --json -- "$tmp/$name" "${a[@]}")
  pf=$(best "$PT" -q paths --json --cpi-model flat -- "$tmp/$name" "${a[@]}")
  c=$(best "$PT" -q cct --json -- "$tmp/$name" "${a[@]}")
  cf=$(best "$PT" -q cct --json --cpi-model flat -- "$tmp/$name" "${a[@]}")
  awk -v w="$name" -v n="$n" -v p="$p" -v pf="$pf" -v c="$c" -v cf="$cf" \
    'BEGIN{printf "%-9s %8.3f %8.3f %8.3f %8.3f %8.3f %9.1f %9.1f %9.1f %9.1f\n", w, n, p, pf, c, cf, p/n, pf/n, c/n, cf/n}'
done
echo
echo "throughput over the block trace (best of REPS=$REPS runs each):"
for src in "${srcs[@]}"; do
  name=$(basename "$src" .c)
  read -r -a a <<<"$(args_for "$src")"
  echo "== $name ${a[*]}"
  REPS="$REPS" "$TT" "$tmp/$name" "${a[@]}" 2>/dev/null
done
