#!/usr/bin/env bash
# The bad-input campaign of issues 19 and 20: every subcommand x the bad-input kinds
# (missing, empty, random, truncated and foreign files; directories, devices and missing
# directories as outputs; programs that do not exist, are not executable, are for another
# architecture) x absurd values of every numeric flag. Each case must end as a clean error:
# exit status 2 with an `error:` line, no panic, no signal, no hang (60 s), and no bad input
# accepted silently (exit 0; a cut perf.data read up to its last complete record with a
# warning naming the cut, as perf reads a killed recording, is counted apart, as are
# perf.data files with a corrupt record size or unknown record types read with a warning
# giving the numbers). Prints the counts; exits non-zero unless every case is a clean error
# or such a warned read.
#
#   bash scripts/bad-input.sh                 # builds the release binary first
#   PROFTRUST=path/to/proftrust bash scripts/bad-input.sh
#   VERBOSE=1 bash scripts/bad-input.sh       # one line per case
set -uo pipefail
cd "$(dirname "$0")/.."

if [ -z "${PROFTRUST:-}" ]; then
  cargo build --release -q -p proftrust -p proftrust-qemu-plugin || exit 1
  PROFTRUST="$PWD/target/release/proftrust"
fi
command -v gcc >/dev/null || { echo "bad-input.sh needs gcc"; exit 1; }

work=$(mktemp -d /tmp/proftrust-bad-input.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"

clean=0 warned=0 panics=0 signals=0 hangs=0 silent=0
failures=()

# run LABEL -- ARGS...: one case that must be refused.
run() {
  local label=$1; shift; shift
  local out err code
  out="$work/case.out"; err="$work/case.err"
  timeout -k 5 60 "$PROFTRUST" "$@" >"$out" 2>"$err" </dev/null
  code=$?
  local kind
  if [ $code -eq 124 ]; then kind=hang
  elif grep -q "panicked" "$err" || [ $code -eq 101 ]; then kind=panic
  elif [ $code -gt 128 ]; then kind=signal
  # A cut perf.data is read up to its last complete record, as perf reads a killed
  # recording, with a warning naming the cut (on stderr, or in the JSON's or the report's
  # warnings): accepted, but not silently.
  # Likewise a record with an impossible size (the records before it read, the numbers
  # given) and records of types perf does not define (counted and reported).
  elif [ $code -eq 0 ] && grep -qiE "cut copy|truncated|killed|interrupted|declares [0-9]+ bytes|does not define" "$err" "$out"; then kind=warned
  elif [ $code -eq 0 ]; then kind=silent
  elif [ $code -eq 2 ] && grep -q "^error" "$err"; then kind=clean
  else kind=signal
  fi
  case $kind in
    clean) clean=$((clean + 1)) ;;
    warned) warned=$((warned + 1)) ;;
    panic) panics=$((panics + 1)); failures+=("PANIC  $label") ;;
    signal) signals=$((signals + 1)); failures+=("SIGNAL/$code $label") ;;
    hang) hangs=$((hangs + 1)); failures+=("HANG   $label") ;;
    silent) silent=$((silent + 1)); failures+=("SILENT $label") ;;
  esac
  if [ -n "${VERBOSE:-}" ]; then
    printf '%-7s %s: %s\n' "$kind" "$label" "$(head -c 200 "$err" | tr '\n' ' ')"
  fi
  # Nothing half-written or temporary may be left next to the outputs.
  if ls -a "$work" | grep -q '^\..*proftrust'; then
    failures+=("TEMP   $label: $(ls -a "$work" | grep proftrust | tr '\n' ' ')")
    rm -f "$work"/.*proftrust*
    silent=$((silent + 1))
  fi
}

# ---- fixtures: a program, good files of every format, then bad ones -------------------
cat > prog.c <<'EOF'
volatile long s;
int main(int c, char **v) { for (long i = 0; i < 3000000; i++) s += i; return 0; }
EOF
gcc -O1 -g -o prog prog.c
prog="$work/prog"
"$PROFTRUST" -q record -o good.ptsamp -- "$prog" >/dev/null 2>&1
"$PROFTRUST" -q truth -o good.ptexact -- "$prog" >/dev/null 2>&1
"$PROFTRUST" -q vpmu -o good.vpmu -- "$prog" >/dev/null 2>&1
if command -v valgrind >/dev/null; then
  valgrind -q --tool=callgrind --dump-instr=yes --callgrind-out-file=good.callgrind "$prog" >/dev/null 2>&1
fi
if command -v perf >/dev/null; then
  perf record -q -e cpu-clock -o good.perf.data "$prog" >/dev/null 2>&1
  perf record -q -e cpu-clock -o - "$prog" 2>/dev/null > good.pipe.perf.data
fi
: > empty
head -c 65536 /dev/urandom > random
printf 'not a profile\n' > text
mkdir -p adir
cp "$prog" noexec; chmod -x noexec
python3 - "$prog" <<'EOF'
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
b[18] = 183; b[19] = 0   # EM_AARCH64
open('arm-elf', 'wb').write(b)
EOF
chmod +x arm-elf
bad_files=(missing-file empty random text adir /dev/null)
for f in good.ptsamp good.ptexact good.vpmu good.callgrind good.perf.data; do
  [ -f "$f" ] || continue
  size=$(stat -c %s "$f")
  for cut in 8 64 $((size / 3)) $((size / 2)) $((size - 7)); do
    [ "$cut" -gt 0 ] && [ "$cut" -lt "$size" ] || continue
    head -c "$cut" "$f" > "cut-$cut-$f"
    bad_files+=("cut-$cut-$f")
  done
done

# perf.data mutants (issue 20): a record's size field corrupted (0x50 -> 0x4d50) at the
# first sample (nothing readable: an error) and in the middle (the records before it read,
# with a warning giving the numbers); a data section size past the file's end; a record
# type perf does not define; a pipe-mode stream cut inside a record.
if [ -f good.perf.data ]; then
  python3 - <<'EOF'
import struct
b = bytes(open('good.perf.data', 'rb').read())
off, size = struct.unpack_from('<QQ', b, 40)
recs, p = [], off
while p < off + size:
    t, _, s = struct.unpack_from('<IHH', b, p)
    if s < 8:
        break
    recs.append((p, t, s)); p += s
samples = [r for r in recs if r[1] == 9]
def mutate(name, at, fmt, value):
    c = bytearray(b); struct.pack_into(fmt, c, at, value); open(name, 'wb').write(c)
if samples:
    mutate('perf-size-first.perf.data', samples[0][0] + 6, '<H', samples[0][2] | 0x4d00)
    mid = samples[len(samples) // 2]
    mutate('perf-size-mid.perf.data', mid[0] + 6, '<H', mid[2] | 0x4d00)
    mutate('perf-size-small.perf.data', mid[0] + 6, '<H', 4)
    mutate('perf-type.perf.data', mid[0], '<I', 200)
mutate('perf-datasize.perf.data', 48, '<Q', size + 4096)
EOF
  for f in perf-size-first perf-size-mid perf-size-small perf-type perf-datasize; do
    [ -f "$f.perf.data" ] && bad_files+=("$f.perf.data")
  done
fi
if [ -s good.pipe.perf.data ]; then
  size=$(stat -c %s good.pipe.perf.data)
  head -c $((size - 13)) good.pipe.perf.data > cut-pipe.perf.data
  head -c $((size * 2 / 3)) good.pipe.perf.data > cut2-pipe.perf.data
  bad_files+=(cut-pipe.perf.data cut2-pipe.perf.data)
fi

# ---- bad input files x every command that reads files -----------------------------------
for f in "${bad_files[@]}"; do
  run "read $f" -- read "$f"
  run "read --json $f" -- read --json "$f"
  run "audit --samples $f" -- audit --samples "$f" --truth good.ptexact --binary "$prog"
  run "audit --truth $f" -- audit --samples good.ptsamp --truth "$f" --binary "$prog"
  run "correct --samples $f" -- correct --skid 5 --samples "$f" --binary "$prog"
  run "correct --truth $f" -- correct --skid 5 --samples good.vpmu --binary "$prog" --truth "$f"
  run "analyze $f" -- analyze granularity "$f"
  run "cct --samples $f" -- cct --samples "$f" -- "$prog"
  run "paths --lbr $f" -- paths --lbr "$f" -- "$prog"
  run "vpp --lbr-file $f" -- vpp --source lbr --lbr-file "$f" -- "$prog"
  run "vpp --probe-file $f" -- vpp --source probe --probe-file "$f"
  run "inspect $f" -- inspect "$f"
done

# ---- bad programs x every command that runs one -----------------------------------------
for p in missing-prog ./noexec ./adir ./arm-elf; do
  run "record $p" -- record -o r.out -- "$p"
  run "truth $p" -- truth -o t.out -- "$p"
  run "truth callgrind $p" -- truth --backend callgrind -o t.out -- "$p"
  run "audit $p" -- audit -- "$p"
  run "vpmu $p" -- vpmu -o v.out -- "$p"
  run "paths $p" -- paths -- "$p"
  run "cct $p" -- cct -- "$p"
  run "vpp $p" -- vpp -- "$p"
  run "vpp probe $p" -- vpp --source probe -- "$p"
done
run "truth --cpu bogus" -- truth --cpu bogus -o t.out -- "$prog"
run "paths --cpu bogus" -- paths --cpu bogus -- "$prog"
run "cct --cpu bogus" -- cct --cpu bogus -- "$prog"
run "vpp --cpu bogus" -- vpp --cpu bogus -- "$prog"

# ---- bad output paths x every writer ----------------------------------------------------
for o in adir no/such/dir/x /dev/full; do
  run "record -o $o" -- record -o "$o" -- "$prog"
  run "truth -o $o" -- truth -o "$o" -- "$prog"
  run "vpmu -o $o" -- vpmu -o "$o" -- "$prog"
  run "vpmu --exact $o" -- vpmu -o v.out --exact "$o" -- "$prog"
  run "audit --html $o" -- audit --html "$o" --samples good.ptsamp --truth good.ptexact --binary "$prog"
  run "simulate -o $o" -- simulate sampling --preset table2 --reps 2 -o "$o"
  run "analyze -o $o" -- analyze granularity good.ptsamp -o "$o"
  run "cct --folded $o" -- cct --folded "$o" -- "$prog"
  run "vpp --svg $o" -- vpp --svg "$o" -- "$prog"
done

# ---- absurd values of every numeric flag ------------------------------------------------
# flag spec: "command args...|--flag|values that must be refused"
absurd_real="NaN inf -inf -1 1e30 x"
absurd_int="-1 x 1.5 18446744073709551616 1e30"
huge=18446744073709551615
specs=(
  "record -o r.out|--timeout|0 $absurd_real"
  "record -o r.out|-c|0 $absurd_int $huge"
  "record -o r.out|-F|0 $absurd_int $huge"
  "record -o r.out|--pid|0 $absurd_int"
  "record -o r.out|--seed|$absurd_int"
  "truth -o t.out|--timeout|0 $absurd_real"
  "audit|--timeout|0 $absurd_real"
  "audit|--rank-threshold|$absurd_real 2"
  "audit|--correct-skid|$absurd_real 1000000"
  "audit|--top|0 $absurd_int $huge"
  "audit|--period|0 x -1 $huge"
  "audit|--sweep|0 x"
  "audit|--seed|$absurd_int"
  "vpmu -o v.out|--timeout|0 $absurd_real"
  "vpmu -o v.out|--period|0 1 $absurd_int $huge"
  "vpmu -o v.out|--cycle-period|0 1 $absurd_int"
  "vpmu -o v.out|--skid|$absurd_int 1000000 $huge"
  "vpmu -o v.out|--cpi|0 $absurd_int $huge"
  "vpmu -o v.out|--heavy-load|0 $absurd_int $huge"
  "vpmu -o v.out|--skid-dist|normal:NaN:1 uniform:5:1 uniform:-1:3 normal:1:inf constant:1e30 x"
  "vpmu -o v.out|--cache-config|l1=0:0:0 line=0 l1=99999999999K:1:1 x"
  "paths|--timeout|0 $absurd_real"
  "paths|--cover|0 $absurd_real 2"
  "paths|--hot-share|0 $absurd_real 2"
  "paths|--top|0 $absurd_int $huge"
  "cct|--timeout|0 $absurd_real"
  "cct|--top|0 $absurd_int $huge"
  "vpp|--timeout|0 $absurd_real"
  "vpp|--top|0 $absurd_int $huge"
  "vpp|--bins|0 $absurd_int $huge"
  "vpp|--histogram-paths|0 $absurd_int $huge"
  "vpp|--min-samples|0 $absurd_int $huge"
  "vpp|--n-instr|0 $absurd_int $huge"
  "vpp|--n-check|$absurd_int $huge"
  "vpp|--l1-kib|0 $absurd_int $huge"
  "vpp|--llc-kib|0 $absurd_int $huge"
  "vpp|--llc-latency|0 $absurd_int $huge"
  "vpp|--memory-latency|0 $absurd_int $huge"
  "vpp|--lbr-period|0 1 $absurd_int $huge"
  "vpp --source probe|--load|$absurd_int 100000"
  "vpp --source probe|--compare-load|0 $absurd_int 100000"
)
for spec in "${specs[@]}"; do
  IFS='|' read -r cmd flag values <<<"$spec"
  for v in $values; do
    # shellcheck disable=SC2086
    run "$cmd $flag $v" -- $cmd "$flag=$v" -- "$prog"
  done
done
file_specs=(
  "correct --samples good.vpmu --binary $prog|--skid|$absurd_real 1000000 10000"
  "correct --skid 5 --samples good.vpmu --binary $prog|--skid-spread|$absurd_real 1000000"
  "correct --skid 5 --samples good.vpmu --binary $prog|--hot-share|$absurd_real 2"
  "correct --skid 5 --samples good.vpmu --binary $prog|--max-blocks|0 $absurd_int $huge"
  "correct --skid 5 --samples good.vpmu --binary $prog|--max-simple-loops|0 $absurd_int $huge"
  "correct --skid 5 --samples good.vpmu --binary $prog|--seed|$absurd_int"
  "simulate sampling --preset table2|--reps|0 $absurd_int $huge 1e12"
  "simulate sampling --preset table2|--threads|$absurd_int 100000"
  "simulate sampling --preset sweep|--util|0 1 $absurd_real"
  "simulate sampling --preset sweep|--r|0 $absurd_real 100000"
  "calibrate --vpmu|--light|0 $absurd_int $huge 4e9"
  "calibrate --vpmu|--heavy|0 $absurd_int $huge"
  "calibrate --vpmu|--passes|0 $absurd_int $huge"
  "calibrate --vpmu|--period|0 $absurd_int $huge"
  "calibrate --vpmu|--skid|$absurd_int 1000000"
  "calibrate --vpmu --passes 1000000000|--light|1000000"
  "analyze granularity good.ptsamp|--top|0 $absurd_int $huge"
  "analyze granularity good.ptsamp|--base-event|$absurd_int 7"
  "inspect $prog|--simple-loop-cap|0 $absurd_int $huge"
  "read good.ptsamp|--top|$absurd_int"
)
for spec in "${file_specs[@]}"; do
  IFS='|' read -r cmd flag values <<<"$spec"
  for v in $values; do
    # shellcheck disable=SC2086
    run "$cmd $flag $v" -- $cmd "$flag=$v"
  done
done

total=$((clean + warned + panics + signals + hangs + silent))
echo "bad-input campaign: $total cases"
echo "  clean errors:    $clean"
echo "  read with a warning naming the cut or corruption: $warned"
echo "  panics:          $panics"
echo "  signal deaths:   $signals"
echo "  hangs:           $hangs"
echo "  silent accepts:  $silent"
for f in "${failures[@]}"; do echo "  $f"; done
[ $((panics + signals + hangs + silent)) -eq 0 ]
