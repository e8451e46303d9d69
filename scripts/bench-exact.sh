#!/usr/bin/env bash
# Exact counting benchmark (issue 3): per workload, best-of-$REPS wall seconds of
#   native | bare qemu-x86_64 (no plugin: TCG's own cost) | proftrust truth (QEMU plugin,
#   edges on) | truth --no-edges (inline counters only) | truth --backend callgrind
# and the ratios truth/native (goal <= 3), truth/bare (what the plugin adds on top of QEMU),
# callgrind/truth (goal >= 10), plus block-trace throughput (blocks/s) and memory-trace
# throughput (data accesses/s) from the trace-throughput example.
#
#   bash scripts/bench-exact.sh                 # workloads/*.c if present, else the test programs
#   REPS=1 bash scripts/bench-exact.sh prog.c   # given C sources
#   COMPARE_PLUGIN=/tmp/old.so bash scripts/bench-exact.sh
#       # also times another plugin build against this one, plugin only (qemu-x86_64
#       # -plugin X,out=/dev/null,mode=count,edges=on), in the columns old_edges/new_edges
#
# Timings are wall clock on whatever else the machine runs; compare ratios on one input.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
TARGET=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p proftrust -p proftrust-qemu-plugin
cargo build --release -q -p proftrust-exact --example trace-throughput
PT="$TARGET/release/proftrust"
TT="$TARGET/release/examples/trace-throughput"
export PROFTRUST_QEMU_PLUGIN="$TARGET/release/libproftrust_qemu_plugin.so"
QEMU=${PROFTRUST_QEMU:-qemu-x86_64}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

if [ $# -gt 0 ]; then srcs=("$@")
elif compgen -G "workloads/*.c" >/dev/null; then srcs=(workloads/*.c)
else srcs=(crates/exact/tests/c/loop.c crates/exact/tests/c/mix.c); fi

# Arguments per test program (workloads take their defaults).
args_for() {
  case "$(basename "$1" .c)" in
    loop) echo 30000000 ;;
    mix) echo 2000000 ;;
    memwalk) echo 1048576 200 ;;
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

printf '%-9s %7s %7s %7s %7s %8s | %6s %6s %6s %6s %7s %7s | %9s %9s\n' workload native \
  bare truth inline callgrnd tr/nat in/nat br/nat tr/bare cg/tr cg/inl blk/s mem_acc/s
for src in "${srcs[@]}"; do
  name=$(basename "$src" .c)
  gcc -O2 -g -pthread "$src" -o "$tmp/$name" -lm
  read -r -a a <<<"$(args_for "$src")"
  nat=$(best "$tmp/$name" "${a[@]}")
  bare=$(best "$QEMU" "$tmp/$name" "${a[@]}")
  q=$(best "$PT" -q truth -o "$tmp/q.ptexact" -- "$tmp/$name" "${a[@]}")
  qi=$(best "$PT" -q truth --no-edges -o "$tmp/qi.ptexact" -- "$tmp/$name" "${a[@]}")
  cg=$(REPS=1 best "$PT" -q truth --backend callgrind -o "$tmp/c.ptexact" -- "$tmp/$name" "${a[@]}")
  tr=$("$TT" "$tmp/$name" "${a[@]}" | sed -n 's/.*blocks_per_second=\([0-9]*\).*/\1/p')
  mem=$("$TT" --mem "$tmp/$name" "${a[@]}" | sed -n 's/.*accesses_per_second=\([0-9]*\).*/\1/p')
  awk -v n="$name" -v nat="$nat" -v bare="$bare" -v q="$q" -v qi="$qi" -v cg="$cg" \
      -v tr="$tr" -v mem="$mem" 'BEGIN{
    printf "%-9s %7.3f %7.3f %7.3f %7.3f %8.3f | %6.2f %6.2f %6.2f %6.2f %7.2f %7.2f | %8.1fM %8.1fM\n",
      n, nat, bare, q, qi, cg, q/nat, qi/nat, bare/nat, q/bare, cg/q, cg/qi, tr/1e6, mem/1e6 }'
  if [ -n "${COMPARE_PLUGIN:-}" ]; then
    old=$(best "$QEMU" -plugin "$COMPARE_PLUGIN,out=/dev/null,mode=count,edges=on" "$tmp/$name" "${a[@]}")
    new=$(best "$QEMU" -plugin "$PROFTRUST_QEMU_PLUGIN,out=/dev/null,mode=count,edges=on" "$tmp/$name" "${a[@]}")
    oldi=$(best "$QEMU" -plugin "$COMPARE_PLUGIN,out=/dev/null,mode=count,edges=off" "$tmp/$name" "${a[@]}")
    awk -v n="$name" -v o="$old" -v nw="$new" -v oi="$oldi" -v bare="$bare" 'BEGIN{
      printf "  %-9s plugin only: old_edges %.3f  new_edges %.3f  (old/new %.2f)  inline %.3f  bare %.3f\n",
        n, o, nw, o/nw, oi, bare }'
  fi
done
echo "goals: truth/native <= 3 (tr/nat; in/nat with --no-edges), callgrind/truth >= 10 (cg/tr)"
echo "br/nat is QEMU's TCG alone (no plugin): the floor under every QEMU column"
