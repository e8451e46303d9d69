#!/usr/bin/env bash
# Builds the bundled proftrust workloads into OUT_DIR (default: workloads/bin).
#   bash workloads/build.sh [OUT_DIR]
# Flags: -O2 -g (the seed case studies' optimised code with debug info for attribution),
# -fno-omit-frame-pointer so `record -g` / `perf record -g` can walk the stack.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/bin}"
mkdir -p "$out"
CC="${CC:-gcc}"
for w in hmmer soplex omnet mcf libsvm; do
  "$CC" -O2 -g -fno-omit-frame-pointer -o "$out/$w" "$here/$w.c" -lm
done
echo "built: hmmer soplex omnet mcf libsvm in $out"
