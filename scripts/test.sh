#!/usr/bin/env bash
# The whole proftrust test suite, installing what is missing (README quick start, step 2).
#
#   bash scripts/test.sh                  # install tools if needed, fmt, clippy, tests, docs,
#                                         # the quick start, fleet (DataFusion) and Ballista
#   bash scripts/test.sh --quick          # developers' tier: fmt, clippy, unit, doc and golden
#                                         # tests of the default build; no apt, no QEMU build,
#                                         # no fleet, no Ballista (<= 3 min warm; docs/testing.md)
#   SKIP_INSTALL=1 bash scripts/test.sh   # do not touch apt (tests needing tools skip loudly)
#   SKIP_FLEET=1 / SKIP_BALLISTA=1        # leave out the fleet binary / the Ballista cluster test
#
# The tests run on a clean slate (docs/testing.md, "Fresh machine"): their TMPDIR is a new
# directory under target/, the workloads are built into a new cache there, and, where this
# runs as root with unshare(1), /tmp itself is an empty tmpfs in a private mount
# namespace, so a test that reads a fixed path under /tmp left by an earlier run fails here as on
# a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=""
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: bash scripts/test.sh [--quick]" >&2; exit 2 ;;
esac
if [ -n "$quick" ]; then SKIP_INSTALL=1; SKIP_FLEET=1; fi
start=$(date +%s)
steps=()
step() { steps+=("$(( $(date +%s) - start )) $*"); echo "== $* ($(( $(date +%s) - start )) s)"; }
# The time of every step, printed last (also when a step fails), so the tail of a CI log says
# where the minutes went.
timings() {
  local rc=$? end i t0 t1 name
  end=$(( $(date +%s) - start ))
  echo "== step times (exit $rc after $end s)"
  for i in "${!steps[@]}"; do
    t0=${steps[$i]%% *}; name=${steps[$i]#* }
    if [ $((i + 1)) -lt ${#steps[@]} ]; then t1=${steps[$((i + 1))]%% *}; else t1=$end; fi
    printf '  %5d s  %s\n' $((t1 - t0)) "$name"
  done
}
trap timings EXIT

if [ -z "${SKIP_INSTALL:-}" ]; then
  need=()
  for pair in qemu-x86_64:qemu-user perf:linux-perf valgrind:valgrind addr2line:binutils \
              objdump:binutils gcc:gcc chromium:chromium \
              go:golang-go llvm-profdata:llvm clang-14:clang-14 unshare:util-linux xmllint:libxml2-utils \
              llvm-mca-19:llvm-19 \
              /usr/bin/python3:python3 gawk:gawk bzip2:bzip2 lua5.4:lua5.4 setpriv:util-linux \
              aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu aarch64-linux-gnu-gcc:libc6-dev-arm64-cross \
              i686-linux-gnu-gcc:gcc-i686-linux-gnu i686-linux-gnu-gcc:libc6-dev-i386-cross \
              gawk:gawk xz:xz-utils bzip2:bzip2 lua5.4:lua5.4 dd:coreutils readelf:binutils; do
    bin=${pair%%:*}; pkg=${pair#*:}
    command -v "$bin" >/dev/null 2>&1 || need+=("$pkg")
  done
  if [ ${#need[@]} -gt 0 ]; then
    # shellcheck disable=SC2207
    uniq_need=($(printf '%s\n' "${need[@]}" | sort -u))
    step "installing: ${uniq_need[*]}"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${uniq_need[@]}" >/dev/null
  fi
  # QEMU >= 9.2 with TCG plugins (plugin API v4: per-vCPU counters, derived edges), built
  # from Debian's source package side by side with the system's qemu-user 7.2, which stays
  # (tests compare the two plugin API generations). Cached after the first build (~3-4 min).
  step "QEMU 10 with plugins (scripts/install-qemu.sh)"
  bash scripts/install-qemu.sh
fi

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy -D warnings (default build)"
cargo clippy --all-targets --release -- -D warnings
step "cargo build --release (default build: proftrust and its QEMU plugin)"
cargo build --release

# A clean slate for the tests (see the top of this file).
scratch="$PWD/target/test-scratch"
rm -rf "$scratch" && mkdir -p "$scratch/tmp" "$scratch/workloads"
export TMPDIR="$scratch/tmp" PROFTRUST_WORKLOAD_DIR="$scratch/workloads"
# cargo test hides the stderr of passing tests: skips are also collected in a file
# (proftrust-testkit's skip!) and listed at the end of this script.
export PROFTRUST_SKIP_LOG="$PWD/target/skipped-tests.log"
rm -f "$PROFTRUST_SKIP_LOG"
isolated() {
  # Runs "$@" with /tmp an empty tmpfs (private mount namespace) when possible.
  case "$PWD/" in
    /tmp/*)
      # A checkout under /tmp would be hidden by the new /tmp (and so would its target/).
      echo "   (not isolating /tmp: the checkout is under /tmp; TMPDIR is still private)"
      "$@"; return ;;
  esac
  if [ "$(id -u)" -eq 0 ] && [ -z "${PROFTRUST_SHARED_TMP:-}" ] && command -v unshare >/dev/null 2>&1 \
     && unshare --mount --propagation private true 2>/dev/null; then
    unshare --mount --propagation private bash -c 'mount -t tmpfs -o mode=1777 none /tmp && exec "$@"' isolated "$@"
  else
    echo "   (not isolating /tmp: needs root and unshare; TMPDIR is still private)"
    "$@"
  fi
}

if [ -n "$quick" ]; then
  step "cargo test (quick tier: unit, doc and golden tests)"
  isolated cargo test --release --no-fail-fast --lib --bins 2>&1 | tee target/test.log
  isolated cargo test --release --no-fail-fast --doc 2>&1 | tee -a target/test.log
  isolated cargo test --release --no-fail-fast -p proftrust --test cli golden:: 2>&1 | tee -a target/test.log
else
  step "cargo test (default build)"
  isolated cargo test --release --no-fail-fast 2>&1 | tee target/test.log
  step "cargo doc -D warnings"
  RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --release >/dev/null
  step "README quick start"
  bash scripts/quickstart-check.sh
fi

# Fleet: the separately built proftrust-fleet binary (Apache DataFusion). Its tests run
# `proftrust fleet …` through the proftrust binary built above. DataFusion is compiled once:
# clippy runs as the workspace crates' compiler during the test build (RUSTC_WORKSPACE_WRAPPER;
# a separate `cargo clippy` would run DataFusion's front end a second time, ~10 minutes
# here), and the build has the `ballista` feature, so the embedded-engine tests and the
# two-engine test on a real local Ballista cluster (a scheduler and 2 executors on
# 127.0.0.1, started and stopped by the test) come from one build. The embedded engine and
# Ballista use the same DataFusion feature set (crates/fleet/Cargo.toml).
if [ -z "${SKIP_FLEET:-}" ]; then
  fleet_features="--features proftrust-fleet-cli/ballista"
  [ -n "${SKIP_BALLISTA:-}" ] && fleet_features=""
  export RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
  RUSTC_WORKSPACE_WRAPPER="$(command -v clippy-driver)"
  step "fleet: clippy and build (cargo test --no-run -p proftrust-fleet -p proftrust-fleet-cli $fleet_features)"
  # shellcheck disable=SC2086
  cargo test --release --no-run -p proftrust-fleet -p proftrust-fleet-cli $fleet_features
  step "fleet: tests"
  # shellcheck disable=SC2086
  isolated cargo test --release --no-fail-fast -p proftrust-fleet -p proftrust-fleet-cli $fleet_features 2>&1 | tee target/test-fleet.log
  unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
fi
# A failed test fails this script (pipefail) before here; a test binary that died without
# a result line would not: every "test result" must say ok.
if grep -h "^test result:" target/test*.log | grep -qv "^test result: ok"; then
  echo "some tests failed:"; grep -h "^test result:" target/test*.log | grep -v "ok\."; exit 1
fi
step "skipped tests"
if [ -s "$PROFTRUST_SKIP_LOG" ]; then
  sort "$PROFTRUST_SKIP_LOG" | uniq -c | sed 's/^ */  /'
  echo "($(wc -l <"$PROFTRUST_SKIP_LOG") skip(s): the tests above did not run their checks here)"
else
  echo "  none"
fi
step "done"
