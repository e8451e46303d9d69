#!/usr/bin/env bash
# Runs every cargo-fuzz target of proftrust's readers for FUZZ_SECONDS (default 60) each and
# prints, per target, the seconds, executions and findings. Not part of CI.
#
#   scripts/fuzz.sh                 # all targets, 60 s each
#   FUZZ_SECONDS=300 scripts/fuzz.sh perf_data callgrind
#
# Needs cargo-fuzz (installed from crates.io when missing). cargo-fuzz passes `-Z` flags
# (sanitizer, coverage) to rustc: with a nightly toolchain installed it is used; otherwise
# the stable compiler is told to accept them with RUSTC_BOOTSTRAP=1 (the same compiler
# with the unstable gate lifted; fine for a local fuzzing build, never for a release).
# Findings are left in fuzz/artifacts/<target>/; the exit status is 1 if there is any.
set -u
cd "$(dirname "$0")/.."
secs="${FUZZ_SECONDS:-60}"
all=(perf_data perf_counts perf_script callgrind native load binary_open flags)
if [ $# -gt 0 ]; then targets=("$@"); else targets=("${all[@]}"); fi

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz (cargo install cargo-fuzz --locked)" >&2
    cargo install cargo-fuzz --locked || { echo "fuzz.sh: cannot install cargo-fuzz" >&2; exit 1; }
fi
if rustup run nightly rustc --version >/dev/null 2>&1; then
    fuzz=(cargo +nightly fuzz)
else
    echo "fuzz.sh: no nightly toolchain; using the stable compiler with RUSTC_BOOTSTRAP=1" >&2
    # Only for the fuzz builds (fuzz/target): set for the workspace build it would make
    # cargo rebuild everything in target/.
    fuzz=(env RUSTC_BOOTSTRAP=1 cargo fuzz)
fi

# Seed corpora, generated from the test sources (kept out of git, see .gitignore).
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for t in "${all[@]}"; do mkdir -p "fuzz/corpus/$t"; done
if command -v gcc >/dev/null; then
    gcc -O2 -g -o "$tmp/loops" crates/formats/tests/data/loops.c
    cp "$tmp/loops" fuzz/corpus/binary_open/loops
    if command -v perf >/dev/null &&
        perf record -q -e cpu-clock -c 1000000 -o "$tmp/perf.data" "$tmp/loops" 3000000 1 >/dev/null 2>&1; then
        cp "$tmp/perf.data" fuzz/corpus/perf_data/seed
        cp "$tmp/perf.data" fuzz/corpus/perf_counts/seed
        perf script -i "$tmp/perf.data" -F comm,tid,time,period,event,ip,sym,symoff,dso 2>/dev/null |
            head -50 >fuzz/corpus/perf_script/seed
    fi
    if command -v valgrind >/dev/null &&
        valgrind --tool=callgrind --dump-instr=yes --collect-jumps=yes \
            --callgrind-out-file="$tmp/cg.out" "$tmp/loops" 100 1 >/dev/null 2>&1; then
        head -c 20000 "$tmp/cg.out" >fuzz/corpus/callgrind/seed
    fi
    cargo build --release -q -p proftrust
    pt="${CARGO_TARGET_DIR:-target}/release/proftrust"
    "$pt" -q record -c 1000003 -o "$tmp/s.ptsamp" -- "$tmp/loops" 3000000 1 >/dev/null 2>&1 &&
        cp "$tmp/s.ptsamp" fuzz/corpus/native/samples
    if command -v valgrind >/dev/null; then
        "$pt" -q truth --backend callgrind -o "$tmp/e.ptexact" -- "$tmp/loops" 100 1 >/dev/null 2>&1 &&
            cp "$tmp/e.ptexact" fuzz/corpus/native/exact
    fi
fi
# The loader's seeds: the other seeds as they are and gzip-, zstd- and xz-compressed.
for t in perf_data perf_script callgrind native; do
    for f in fuzz/corpus/$t/*; do
        [ -f "$f" ] || continue
        b="fuzz/corpus/load/$t-$(basename "$f")"
        head -c 100000 "$f" >"$b"
        gzip -c "$b" >"$b.gz"
        command -v zstd >/dev/null && zstd -q -c "$b" >"$b.zst"
        command -v xz >/dev/null && xz -c "$b" >"$b.xz"
    done
done

echo "fuzz.sh: building ${targets[*]}"
for t in "${targets[@]}"; do
    "${fuzz[@]}" build "$t" || { echo "fuzz.sh: $t does not build (see above)" >&2; exit 1; }
done

status=0
summary=()
for t in "${targets[@]}"; do
    echo "fuzz.sh: $t for ${secs}s"
    mkdir -p "fuzz/artifacts/$t"
    findings() { find "fuzz/artifacts/$t" -maxdepth 1 \( -name 'crash-*' -o -name 'oom-*' \
        -o -name 'timeout-*' -o -name 'leak-*' \) | wc -l; }
    before=$(findings)
    log="fuzz/artifacts/$t/last-run.log"
    "${fuzz[@]}" run "$t" "fuzz/corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2048 \
        -timeout=20 -print_final_stats=1 >"$log" 2>&1
    grep -E "panicked at|^==[0-9]+== ERROR|^SUMMARY|^stat::number_of_executed_units" "$log" || true
    grep -A2 "panicked at" "$log" | head -6 || true
    runs=$(grep -oE "^Done [0-9]+ runs in [0-9]+ second" "$log" | awk '{print $2 " runs in " $5 " s"}')
    if [ -z "$runs" ]; then
        n=$(grep -oE "^stat::number_of_executed_units: [0-9]+" "$log" | awk '{print $2}')
        runs="stopped by a finding after ${n:-?} runs (log: $log)"
    fi
    found=$(($(findings) - before))
    if [ "$found" -gt 0 ] || grep -q "SUMMARY:" "$log"; then status=1; fi
    summary+=("$(printf '%-12s %s, %d new finding(s)' "$t" "$runs" "$found")")
done
echo "fuzz.sh: summary (${secs} s per target)"
printf '  %s\n' "${summary[@]}"
exit $status
