#!/usr/bin/env bash
# Exact counting benchmark (issue 3): per workload, wall time of
#   native run | proftrust truth (QEMU plugin, edges on) | truth --no-edges (inline only)
#   | truth --backend callgrind
# and the ratios qemu/native (goal <= 3) and callgrind/qemu (goal >= 10), plus block-trace
# throughput (blocks/s) from the trace-throughput example. Best of $REPS runs each.
#
#   bash scripts/bench-exact.sh                 # workloads/*.c if present, else the test programs
#   REPS=1 bash scripts/bench-exact.sh prog.c   # given C sources
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
TARGET=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p proftrust -p proftrust-qemu-plugin
cargo build --release -q -p proftrust-exact --example trace-throughput
PT="$TARGET/release/proftrust"
TT="$TARGET/release/examples/trace-throughput"
export PROFTRUST_QEMU_PLUGIN="$TARGET/release/libproftrust_qemu_plugin.so"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

if [ $# -gt 0 ]; then srcs=("$@")
elif compgen -G "workloads/*.c" >/dev/null; then srcs=(workloads/*.c)
else srcs=(crates/exact/tests/c/loop.c crates/exact/tests/c/mix.c); fi

# Arguments per test program (workloads take their defaults).
args_for() {
  case "$(basename "$1" .c)" in
    loop) echo 30000000 ;;
    mix) echo 2000000 ;;
    *) echo "" ;;
  esac
}

best() { # best wall seconds of REPS runs of "$@"
  local b=""
  for _ in $(seq "$REPS"); do
    local s e
    s=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s.%N)
    b=$(awk -v s="$s" -v e="$e" -v b="$b" 'BEGIN{t=e-s; if(b==""||t<b) b=t; printf "%.3f", b}')
  done
  echo "$b"
}

printf '%-14s %8s %8s %8s %9s %8s %8s %11s %14s\n' workload native qemu inline callgrind \
  q/nat inl/nat cg/qemu trace_blk/s
for src in "${srcs[@]}"; do
  name=$(basename "$src" .c)
  gcc -O2 -g -pthread "$src" -o "$tmp/$name" -lm
  read -r -a a <<<"$(args_for "$src")"
  nat=$(best "$tmp/$name" "${a[@]}")
  q=$(best "$PT" -q truth -o "$tmp/q.ptexact" -- "$tmp/$name" "${a[@]}")
  qi=$(best "$PT" -q truth --no-edges -o "$tmp/qi.ptexact" -- "$tmp/$name" "${a[@]}")
  cg=$(REPS=1 best "$PT" -q truth --backend callgrind -o "$tmp/c.ptexact" -- "$tmp/$name" "${a[@]}")
  tr=$("$TT" "$tmp/$name" "${a[@]}" | sed -n 's/.*blocks_per_second=\([0-9]*\).*/\1/p')
  awk -v n="$name" -v nat="$nat" -v q="$q" -v qi="$qi" -v cg="$cg" -v tr="$tr" 'BEGIN{
    printf "%-14s %8.3f %8.3f %8.3f %9.3f %8.2f %8.2f %11.1f %14s\n", n, nat, q, qi, cg,
      q/nat, qi/nat, cg/q, tr }'
done
echo "goals: qemu/native <= 3, callgrind/qemu >= 10 (columns q/nat, inl/nat, cg/qemu)"
