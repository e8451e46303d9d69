#!/usr/bin/env bash
# The whole proftrust test suite, installing what is missing (README quick start, step 2).
#
#   bash scripts/test.sh            # install tools if needed, fmt, clippy, tests, docs
#   SKIP_INSTALL=1 bash scripts/test.sh   # do not touch apt (tests needing tools skip loudly)
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for pair in qemu-x86_64:qemu-user perf:linux-perf valgrind:valgrind addr2line:binutils \
            objdump:binutils gcc:gcc chromium:chromium \
            go:golang-go llvm-profdata:llvm clang-14:clang-14 \
            aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu aarch64-linux-gnu-gcc:libc6-dev-arm64-cross \
            i686-linux-gnu-gcc:gcc-i686-linux-gnu i686-linux-gnu-gcc:libc6-dev-i386-cross; do
  bin=${pair%%:*}; pkg=${pair#*:}
  command -v "$bin" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ] && [ -z "${SKIP_INSTALL:-}" ]; then
  # shellcheck disable=SC2207
  uniq_need=($(printf '%s\n' "${need[@]}" | sort -u))
  echo "== installing: ${uniq_need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${uniq_need[@]}" >/dev/null
fi

# QEMU >= 9.2 with TCG plugins (plugin API v4: per-vCPU counters, derived edges), built
# from Debian's source package side by side with the system's qemu-user 7.2, which stays
# (tests compare the two plugin API generations). Cached after the first build (~4 min).
if [ -z "${SKIP_INSTALL:-}" ]; then
  echo "== QEMU 10 with plugins (scripts/install-qemu.sh)"
  bash scripts/install-qemu.sh
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --release -- -D warnings
echo "== cargo build --release"
cargo build --workspace --release
echo "== cargo test"
# cargo test hides the stderr of passing tests: skips are also collected in a file
# (proftrust-testkit's skip!) and listed at the end of this script.
export PROFTRUST_SKIP_LOG="$PWD/target/skipped-tests.log"
rm -f "$PROFTRUST_SKIP_LOG"
cargo test --workspace --release --no-fail-fast 2>&1 | tee target/test.log
echo "== cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --release >/dev/null
echo "== README quick start"
bash scripts/quickstart-check.sh
# The two-engine fleet test on a real local Ballista cluster (a scheduler and 2 executors on
# 127.0.0.1, started and stopped by the test). Behind the `ballista` feature: Ballista
# enables DataFusion's default features, so this compiles DataFusion a second time (same
# target/, the default build's artifacts stay) and relinks target/release/proftrust with the
# feature (the next `cargo build` relinks the default one); it runs last so every step above
# used the default binary. SKIP_BALLISTA=1 leaves
# it out (the test then stays skipped, as listed below).
if [ -z "${SKIP_BALLISTA:-}" ]; then
  echo "== Ballista cluster test (cargo test --features ballista --test fleet_ballista)"
  before=$(wc -l <"$PROFTRUST_SKIP_LOG" 2>/dev/null || echo 0)
  cargo test --release -p proftrust --features ballista --test fleet_ballista 2>&1 | tee target/test-ballista.log
  after=$(wc -l <"$PROFTRUST_SKIP_LOG" 2>/dev/null || echo 0)
  if [ "$after" = "$before" ]; then
    # It ran here, with the feature and a cluster: the default run's skip of it is not a
    # skip of the suite.
    sed -i '/built without the `ballista` feature/d' "$PROFTRUST_SKIP_LOG" 2>/dev/null || true
  fi
fi
echo "== skipped tests"
if [ -s "$PROFTRUST_SKIP_LOG" ]; then
  sort "$PROFTRUST_SKIP_LOG" | uniq -c | sed 's/^ */  /'
  echo "($(wc -l <"$PROFTRUST_SKIP_LOG") skip(s): the tests above did not run their checks here)"
else
  echo "  none"
fi
