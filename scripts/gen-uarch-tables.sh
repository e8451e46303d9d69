#!/usr/bin/env bash
# Regenerates proftrust-uarch's instruction tables (crates/uarch/tables/*.tsv) from LLVM's
# scheduling models through llvm-mca (docs/audit.md, "The time model"). The instruction forms
# are those of the ELF files on this machine (system libraries and programs) and of the
# bundled workloads: every iced-x86 Code (with and without a memory operand) that occurs.
#   bash scripts/gen-uarch-tables.sh [LLVM_MCA]   (default /usr/lib/llvm-19/bin/llvm-mca)
set -euo pipefail
cd "$(dirname "$0")/.."
MCA=${1:-/usr/lib/llvm-19/bin/llvm-mca}
[ -x "$MCA" ] || { echo "llvm-mca not found at $MCA (Debian: apt-get install llvm-19)" >&2; exit 2; }
files=()
while IFS= read -r f; do files+=("$f"); done < <(
    { find /usr/lib/x86_64-linux-gnu /usr/bin /usr/lib/llvm-19/lib -maxdepth 1 -type f \( -name '*.so*' -o -perm -u+x \) 2>/dev/null
      find "${PROFTRUST_WORKLOAD_DIR:-$HOME/.cache/proftrust/workloads}" -maxdepth 4 -type f -perm -u+x 2>/dev/null; } | sort -u)
for cpu in sapphirerapids znver4; do
    cargo run --release -q -p proftrust-uarch --example gen_tables -- \
        --llvm-mca "$MCA" --cpu "$cpu" --out "crates/uarch/tables/$cpu.tsv" "${files[@]}"
done
