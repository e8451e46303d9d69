#!/usr/bin/env python3
"""A large synthetic callgrind out file, for export's memory benchmark (issue 32 item 3).

ADDRESSES distinct instruction addresses (one cost line each, `positions: instr line`,
addresses relative to the previous line as callgrind compresses them) spread over FUNCTIONS
functions of one module whose binary is not on disk (`ob=/nonexistent/libbig.so`): every
address is named `libbig.so+0xOFFSET`, nothing is symbolized, and every address is a
distinct stack, location and name in every export. Deltas and counts are a fixed
pseudo-random sequence (seeded): two runs write the same file.

The defaults (26,800,000 addresses, 1000 functions) make a ~200 MB file, the case of
issue 32 (`read` 11 s / 1.4 GB; `export --to folded` past 14 GB before the fix).

Usage: scripts/gen-big-callgrind.py OUT [ADDRESSES=26800000] [FUNCTIONS=1000] [SEED=1]
"""
import random
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 26_800_000
    nfun = max(1, int(sys.argv[3]) if len(sys.argv) > 3 else 1000)
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    rng = random.Random(seed)
    # A cycle of 256 line tails (address delta, same source line, count) keeps the
    # generator fast; each function starts at another point of the cycle.
    deltas = [rng.choice((1, 2, 3, 4, 5, 7)) for _ in range(256)]
    tails = [f"+{d} * {rng.randint(1, 99)}\n" for d in deltas]
    cycle = tails * 2
    with open(out, "w", buffering=1 << 20) as f:
        f.write("# callgrind format\nversion: 1\ncreator: scripts/gen-big-callgrind.py\n")
        f.write(f"pid: 4242\ncmd: ./big {n} {nfun} {seed}\npart: 1\n\n")
        f.write("positions: instr line\nevents: Ir\n\n")
        f.write("ob=(1) /nonexistent/libbig.so\nfl=(1) big.c\n")
        addr, done = 0x10000, 0
        for i in range(nfun):
            k = n // nfun + (1 if i < n % nfun else 0)
            if k == 0:
                continue
            f.write(f"fn=({i + 1}) f{i}\n{addr:#x} {10 + i} {1 + i % 97}\n")
            rest, start = k - 1, (i * 7919) & 255
            full, part = divmod(rest, 256)
            for _ in range(full):
                f.writelines(cycle[start:start + 256])
            f.writelines(cycle[start:start + part])
            addr += sum(deltas) * full + sum(deltas[(start + j) & 255] for j in range(part))
            addr += 64
            done += k
        f.write("\n")
    print(f"{out}: {done} addresses in {nfun} functions of /nonexistent/libbig.so", file=sys.stderr)


if __name__ == "__main__":
    main()
