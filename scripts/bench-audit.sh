#!/usr/bin/env bash
# Benchmark: end-to-end `proftrust audit` against the manual chain a performance engineer
# would type for the same answer (perf record + valgrind --tool=callgrind + perf report +
# callgrind_annotate), on the same bundled workload and input. Prints wall times and ratios.
#
#   bash scripts/bench-audit.sh [WORKLOAD] [SIZE] [REPEATS]
#   (defaults: omnet 20 3; PROFTRUST=path/to/proftrust to skip the cargo build)
set -euo pipefail
cd "$(dirname "$0")/.."
w="${1:-omnet}"; size="${2:-20}"; reps="${3:-3}"
for t in perf valgrind callgrind_annotate gcc; do
  command -v "$t" >/dev/null || { echo "bench-audit: $t is required" >&2; exit 1; }
done
if [ -z "${PROFTRUST:-}" ]; then
  cargo build --release -q -p proftrust
  PROFTRUST="${CARGO_TARGET_DIR:-target}/release/proftrust"
fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
bash workloads/build.sh "$work/bin" >/dev/null
exe="$work/bin/$w"
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

run_manual() {
  perf record -q -e cpu-clock -c 1000003 -o "$work/perf.data" "$exe" "$size" >/dev/null 2>&1
  valgrind --tool=callgrind --dump-instr=yes --collect-jumps=yes -q \
    --callgrind-out-file="$work/cg.out" "$exe" "$size" >/dev/null 2>&1
  perf report -i "$work/perf.data" --stdio -n --sort sym >/dev/null 2>&1
  callgrind_annotate "$work/cg.out" >/dev/null
}
run_reports() {
  perf report -i "$work/perf.data" --stdio -n --sort sym >/dev/null 2>&1
  callgrind_annotate "$work/cg.out" >/dev/null
}
run_audit() { # $1 = backend
  "$PROFTRUST" -q audit --backend "$1" --period 1000003 --json -- "$exe" "$size" >/dev/null 2>&1
}
run_files() {
  "$PROFTRUST" -q audit --samples "$work/perf.data" --truth "$work/cg.out" --binary "$exe" --json >/dev/null
}

native=$( { for _ in $(seq "$reps"); do s=$(now); "$exe" "$size" >/dev/null; e=$(now); echo "$e - $s" | bc -l; done; } | median)
manual=$( { for _ in $(seq "$reps"); do s=$(now); run_manual; e=$(now); echo "$e - $s" | bc -l; done; } | median)
reports=$( { for _ in $(seq "$reps"); do s=$(now); run_reports; e=$(now); echo "$e - $s" | bc -l; done; } | median)
files=$( { for _ in $(seq "$reps"); do s=$(now); run_files; e=$(now); echo "$e - $s" | bc -l; done; } | median)
cg=$( { for _ in $(seq "$reps"); do s=$(now); run_audit callgrind; e=$(now); echo "$e - $s" | bc -l; done; } | median)
printf 'workload %s size %s, median of %s runs (wall seconds)\n' "$w" "$size" "$reps"
printf '  native run                                  %8.3f\n' "$native"
printf '  manual chain (perf+callgrind+2 reports)     %8.3f\n' "$manual"
printf '  proftrust audit --backend callgrind         %8.3f   ratio to manual %.2f\n' "$cg" "$(echo "$cg / $manual" | bc -l)"
if "$PROFTRUST" -q audit --backend qemu --period 1000003 --json -- "$exe" 1 >/dev/null 2>&1; then
  q=$( { for _ in $(seq "$reps"); do s=$(now); run_audit qemu; e=$(now); echo "$e - $s" | bc -l; done; } | median)
  printf '  proftrust audit --backend qemu              %8.3f   ratio to manual %.2f\n' "$q" "$(echo "$q / $manual" | bc -l)"
else
  echo "  proftrust audit --backend qemu: skipped (QEMU plugin not available)"
fi
printf '  perf report + callgrind_annotate (files)    %8.3f\n' "$reports"
printf '  proftrust audit --samples --truth (files)   %8.3f   ratio to the two reports %.2f\n' "$files" "$(echo "$files / $reports" | bc -l)"
