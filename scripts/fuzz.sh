#!/usr/bin/env bash
# Runs every cargo-fuzz target of proftrust's readers for FUZZ_SECONDS (default 60) each.
# Needs `cargo fuzz` (cargo install cargo-fuzz) and a nightly toolchain; without them it
# says why and exits 0. Not part of CI. Crashes are left in fuzz/artifacts/<target>/.
set -u
cd "$(dirname "$0")/.."
secs="${FUZZ_SECONDS:-60}"
targets=(perf_data perf_script callgrind native)

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: cargo-fuzz is not installed (cargo install cargo-fuzz); not fuzzing." >&2
    exit 0
fi
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "fuzz.sh: no nightly toolchain (rustup toolchain install nightly); not fuzzing." >&2
    exit 0
fi

# Seed corpora from the test sources (small, generated from files in the repo).
mkdir -p fuzz/corpus/{perf_data,perf_script,callgrind,native}
if command -v gcc >/dev/null && command -v perf >/dev/null && [ ! -s fuzz/corpus/perf_data/seed ]; then
    tmp="$(mktemp -d)"
    gcc -O2 -g -o "$tmp/loops" crates/formats/tests/data/loops.c &&
        perf record -q -e cpu-clock -c 1000000 -o "$tmp/perf.data" "$tmp/loops" 3000000 1 >/dev/null 2>&1 &&
        cp "$tmp/perf.data" fuzz/corpus/perf_data/seed &&
        perf script -i "$tmp/perf.data" -F comm,tid,time,period,event,ip,sym,symoff,dso 2>/dev/null | head -50 >fuzz/corpus/perf_script/seed
    if command -v valgrind >/dev/null; then
        valgrind --tool=callgrind --dump-instr=yes --collect-jumps=yes \
            --callgrind-out-file="$tmp/cg.out" "$tmp/loops" 100 1 >/dev/null 2>&1 &&
            head -c 20000 "$tmp/cg.out" >fuzz/corpus/callgrind/seed
    fi
    rm -rf "$tmp"
fi

status=0
for t in "${targets[@]}"; do
    if ! cargo +nightly fuzz build "$t"; then
        echo "fuzz.sh: $t does not build with cargo fuzz (see above)" >&2
        status=1
        continue
    fi
    echo "fuzz.sh: $t for ${secs}s"
    if ! cargo +nightly fuzz run "$t" "fuzz/corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2048; then
        echo "fuzz.sh: $t FOUND A CRASH (see fuzz/artifacts/$t/)" >&2
        status=1
    fi
done
exit $status
