#!/usr/bin/env bash
# Builds QEMU 10.0 user-mode x86-64 with TCG plugin support, side by side with the system's
# qemu-user (which stays untouched), from Debian's source package (bookworm-backports).
#
#   bash scripts/install-qemu.sh          # prints the path of the built qemu-x86_64
#
# Why a build: Debian's QEMU 10.0 binary package (bookworm-backports qemu-user) is linked
# statically and has no plugin support (`-plugin` is an unknown option), and bookworm's own
# qemu-user is 7.2 (plugin API v1). QEMU >= 9.2 (plugin API v4) gives proftrust per-vCPU
# scoreboards, inline stores and conditional callbacks: race-free counts under threads and
# edges at almost no cost (docs/exact.md). Only x86_64-linux-user is built (~4 min on 2
# cores); the result is cached in $PROFTRUST_QEMU_PREFIX (default
# ${XDG_CACHE_HOME:-~/.cache}/proftrust/qemu-10.0.2), where proftrust looks for it.
# Sources: Debian's orig tarball (apt-get source), meson and pycotap from PyPI (QEMU's
# configure needs meson >= 1.5; bookworm has 1.0). Nothing else is downloaded.
set -euo pipefail
VERSION=10.0.2
PREFIX=${PROFTRUST_QEMU_PREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/proftrust/qemu-$VERSION}
BIN="$PREFIX/bin/qemu-x86_64"
if [ -x "$BIN" ] && "$BIN" --version 2>/dev/null | grep -q "version $VERSION"; then
  echo "$BIN"
  exit 0
fi
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
log() { echo "install-qemu: $*" >&2; }
list=/etc/apt/sources.list.d/proftrust-backports-src.list
if ! grep -rqs "^deb-src .*bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
  log "adding the bookworm-backports source suite (deb-src only) in $list"
  echo "deb-src http://deb.debian.org/debian bookworm-backports main" | $SUDO tee "$list" >/dev/null
fi
log "installing build dependencies"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
  build-essential ninja-build pkg-config libglib2.0-dev flex bison python3 python3-venv \
  xz-utils >/dev/null
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
log "fetching Debian's qemu $VERSION source"
# The orig tarball is all we need (Debian's patches concern packaging); apt-get may
# complain about other parts of the source package, so check for the tarball itself.
apt-get source --download-only -qq "qemu=1:$VERSION+ds-2+deb13u1~bpo12+1" >/dev/null 2>&1 ||
  apt-get source --download-only -qq -t bookworm-backports qemu >/dev/null 2>&1 || true
tarball=$(ls qemu_"$VERSION"*.orig.tar.xz 2>/dev/null | head -1)
[ -n "$tarball" ] || { log "could not fetch qemu_$VERSION*.orig.tar.xz from Debian"; exit 1; }
tar xf "$tarball"
log "preparing meson (PyPI)"
python3 -m venv "$work/py"
"$work/py/bin/pip" install -q "meson==1.5.0" "pycotap==1.3.1"
mkdir build && cd build
log "configuring (x86_64-linux-user, plugins on)"
"../qemu-$VERSION/configure" --python="$work/py/bin/python" --prefix="$PREFIX" \
  --target-list=x86_64-linux-user --enable-plugins --disable-docs --disable-tools \
  --disable-system --disable-werror --disable-download --disable-install-blobs >configure.log 2>&1 ||
  { tail -30 configure.log >&2; exit 1; }
log "building (a few minutes)"
ninja -j"$(nproc)" qemu-x86_64 >build.log 2>&1 || { tail -30 build.log >&2; exit 1; }
mkdir -p "$PREFIX/bin"
cp qemu-x86_64 "$BIN.tmp$$" && mv "$BIN.tmp$$" "$BIN"
"$BIN" --version >/dev/null
log "installed $BIN"
echo "$BIN"
