#!/usr/bin/env bash
# Conformance suite: generates profile files from the sources in src/ with the real tools,
# and the reference tools' answers for them, into OUT (one directory per case).
#
#   tests/conformance/gen.sh OUT
#
# perf cases (OUT/<case>/): the programs are built into a/, recorded, then MOVED to b/ (so
# their recorded paths no longer exist); symfs/ mirrors the recorded paths for
# `perf report --symfs`. Each case holds:
#   p.data (or p.txt for perf script text)  the profile
#   args        extra `proftrust read` arguments, one per line (the moved binaries)
#   dsos        file names of the moved binaries whose symbols are compared
#   report.txt  `perf report --symfs symfs --stdio --sort dso,sym -n` of the recording
# callgrind cases (OUT/cg-<case>/): callgrind.out* files and, for each, FILE.annotate
# (`callgrind_annotate --threshold=100 --auto=no`).
# A case whose tool option this machine lacks is skipped with a line on stderr.
set -euo pipefail
OUT=$(realpath -m "${1:?usage: gen.sh OUT}")
SRC=$(cd "$(dirname "$0")/src" && pwd)
mkdir -p "$OUT"
CC=${CC:-gcc}
PERIOD=${PERIOD:-100000}
N=${N:-20000000}

# new_case NAME: a fresh directory with a/ and b/.
new_case() { rm -rf "$OUT/$1"; mkdir -p "$OUT/$1/a" "$OUT/$1/b"; cd "$OUT/$1"; }

# move_all: a/* -> b/, and symfs/<abs a>/ holding copies for perf report --symfs.
move_all() {
    local here; here=$(pwd)
    mkdir -p "symfs$here/a"
    cp -p a/* "symfs$here/a/"
    mv a/* b/
    : > args; : > dsos
    for f in b/*; do echo "--binary" >> args; echo "$here/$f" >> args; basename "$f" >> dsos; done
}

report() { perf report -i "$1" --symfs symfs --stdio --no-children -g none --sort dso,sym -n 2>/dev/null > report.txt; }

rec() { perf record -q -e cpu-clock -c "$PERIOD" "$@" 2>/dev/null; }

for kind in nonpie pie static; do
    new_case "$kind"
    case $kind in
        nonpie) flags="-no-pie" ;;
        pie) flags="-pie -fPIE" ;;
        static) flags="-static" ;;
    esac
    $CC -O2 -g $flags -o a/work "$SRC/work.c"
    rec -o p.data a/work "$N" > /dev/null
    move_all; report p.data
done

# A static program calling IFUNC functions through its PLT (IRELATIVE stubs).
new_case ifunc
$CC -O2 -g -static -o a/ifunc "$SRC/ifunc.c"
rec -o p.data a/ifunc "$N" > /dev/null
move_all; report p.data

# A shared library and its program, both moved.
new_case shared
$CC -O2 -g -shared -fPIC -o a/libwork.so "$SRC/lib.c"
$CC -O2 -g -o a/uselib "$SRC/uselib.c" -La -lwork -Wl,-rpath,"$OUT/shared/a"
rec -o p.data a/uselib "$N" > /dev/null
move_all; report p.data

# fork + exec + threads.
new_case procs
$CC -O2 -g -pthread -o a/procs "$SRC/procs.c"
$CC -O2 -g -o a/work "$SRC/work.c"
rec -o p.data a/procs "$OUT/procs/a/work" > /dev/null
move_all; report p.data

# Pipe mode.
new_case pipe
$CC -O2 -g -o a/work "$SRC/work.c"
rec -o - a/work "$N" > p.data 2>/dev/null
move_all; report p.data

# Compressed records (perf record -z), when this perf has zstd.
new_case zstd
$CC -O2 -g -o a/work "$SRC/work.c"
if rec -z -o p.data a/work "$N" > /dev/null; then
    move_all; report p.data
else
    echo "gen.sh: skip zstd: perf record -z is not supported here" >&2; rm -rf "$OUT/zstd"
fi

# perf inject (build-ids of every DSO injected).
new_case inject
$CC -O2 -g -o a/work "$SRC/work.c"
rec -o raw.data a/work "$N" > /dev/null
perf inject -b -i raw.data -o p.data
move_all; report p.data

# perf script -F variants of one recording (read back as text, compared with perf report).
new_case script-base
$CC -O2 -g -o a/work "$SRC/work.c"
rec -o p.data a/work "$N" > /dev/null
move_all; report p.data
i=0
for fields in "" "-F comm,tid,time,event,ip,sym,symoff,dso" "-F ip,sym,symoff,dso" \
              "-F comm,pid,tid,time,period,event,ip,sym,symoff,dso" "--show-mmap-events"; do
    i=$((i + 1))
    d="$OUT/script-$i"; rm -rf "$d"; mkdir -p "$d"
    # shellcheck disable=SC2086
    if ! perf script -i p.data --symfs symfs $fields > "$d/p.txt" 2>/dev/null; then
        echo "gen.sh: skip script-$i: perf script $fields failed" >&2; rm -rf "$d"; continue
    fi
    cp args dsos report.txt "$d/"
    echo "$fields" > "$d/fields"
done

# A non-PIE recording with call chains (-g), as perf script text: perf 6.1 prints the chain
# frames (the first one is the sample's ip) as file offsets in their dso (1080 for
# 0x401080), with the default fields, with -F ip,sym,dso and with --show-mmap-events.
new_case script-g
$CC -O2 -g -no-pie -fno-omit-frame-pointer -o a/work "$SRC/work.c"
rec -g -o p.data a/work "$N" > /dev/null
move_all; report p.data
i=0
for fields in "" "-F ip,sym,dso" "--show-mmap-events"; do
    i=$((i + 1))
    d="$OUT/script-g$i"; rm -rf "$d"; mkdir -p "$d"
    # shellcheck disable=SC2086
    if ! perf script -i p.data --symfs symfs $fields > "$d/p.txt" 2>/dev/null; then
        echo "gen.sh: skip script-g$i: perf script $fields failed" >&2; rm -rf "$d"; continue
    fi
    cp args dsos report.txt "$d/"
    echo "$fields" > "$d/fields"
done

# callgrind: threads in separate files, a dump every N basic blocks (several parts), and
# uncompressed names and positions.
if command -v valgrind > /dev/null; then
    rm -rf "$OUT/cg"; mkdir -p "$OUT/cg"; cd "$OUT/cg"
    $CC -O2 -g -pthread -o procs "$SRC/procs.c"
    $CC -O2 -g -o work "$SRC/work.c"
    cg() { valgrind -q --tool=callgrind --dump-instr=yes --collect-jumps=yes "$@"; }
    cg --separate-threads=yes --callgrind-out-file=threads.%p ./procs > /dev/null
    cg --dump-every-bb=2000000 --callgrind-out-file=parts.%p ./work 3000000 > /dev/null
    cg --compress-strings=no --compress-pos=no --callgrind-out-file=plain.%p ./work 3000000 > /dev/null
    # --separate-threads=yes leaves the per-process base file empty: only FILE-NN hold data.
    find . -maxdepth 1 -name 'threads.*' -size 0 -delete
    for f in threads.* parts.* plain.*; do
        case $f in *.annotate) continue ;; esac
        callgrind_annotate --threshold=100 --auto=no "$f" > "$f.annotate"
    done
else
    echo "gen.sh: skip callgrind cases: no valgrind" >&2
fi
