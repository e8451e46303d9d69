#!/usr/bin/env bash
# Benchmark of proftrust-binary (see docs/binary.md):
#  1. `scan` on large system binaries: open, CFGs of every function, 1M function lookups
#     (the Symbolizer path used to attribute a 1M-sample perf.data);
#  2. inline-frame lookup (`Binary::frames`) against `addr2line -i -f` on the same
#     addresses of a binary with DWARF, same answer required; prints the speed ratio.
# Usage: scripts/bench-binary.sh [BINARY_WITH_DWARF]   (default: libc with libc6-dbg, else qemu-x86_64)
set -eu
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build -q --release -p proftrust-binary --examples
ex="$CARGO_TARGET_DIR/release/examples"

for b in /usr/lib/x86_64-linux-gnu/libc.so.6 /usr/bin/qemu-x86_64 /usr/lib/x86_64-linux-gnu/libstdc++.so.6; do
    [ -f "$b" ] && "$ex/scan" "$b" | grep -v '^  warning'
done

command -v addr2line >/dev/null || { echo "bench-binary.sh: addr2line missing; skipping the frames comparison" >&2; exit 0; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
target="${1:-}"
if [ -z "$target" ]; then
    # A binary with DWARF: compile the test workloads into one program if nothing better.
    gcc -O2 -g -o "$tmp/prog" crates/binary/tests/c/inline_loop.c
    target="$tmp/prog"
fi
# Addresses: every instruction of the binary's text per objdump, at most 200k.
objdump -d --no-show-raw-insn "$target" | awk -F: '/^ +[0-9a-f]+:/ {gsub(/ /,"",$1); print "0x"$1}' | head -200000 >"$tmp/addrs"
n=$(wc -l <"$tmp/addrs")
t0=$(date +%s.%N)
"$ex/frames" "$target" "$tmp/addrs" >"$tmp/ours" 2>"$tmp/ours.err"
t1=$(date +%s.%N)
addr2line -a -i -f -e "$target" <"$tmp/addrs" >"$tmp/theirs"
t2=$(date +%s.%N)
ours=$(echo "$t1 - $t0" | bc); theirs=$(echo "$t2 - $t1" | bc)
# Same answer per address: function names and file:line of every frame (discriminators
# dropped, file base names). addr2line says `??` where there is no DWARF (PLT, crt code) and we name the
# symbol, so those addresses are counted apart.
same=$(python3 - "$tmp/ours" "$tmp/theirs" <<'PY'
import re, sys
def chains(p):
    d, cur = {}, None
    for l in open(p):
        l = re.sub(r" \(discriminator \d+\)", "", l.rstrip("\n")).replace("??:0", "??:?")
        if l.startswith("0x"):
            cur = int(l, 16); d[cur] = []
        else:
            # file paths: binutils and gimli join DW_AT_comp_dir differently; compare base names
            d[cur].append(l.rsplit("/", 1)[-1])
    return d
a, b = chains(sys.argv[1]), chains(sys.argv[2])
eq = sum(1 for k in b if a.get(k) == b[k])
nodw = sum(1 for k in b if b[k] and b[k][0] == "??" and a.get(k) != b[k])
print(f"{eq} of {len(b)} addresses identical, {nodw} without DWARF (addr2line says ??), {len(b)-eq-nodw} differ")
PY
)
echo "frames: $n addresses of $target: proftrust ${ours}s, addr2line ${theirs}s, ratio $(echo "scale=2; $theirs / $ours" | bc)x; $same"
