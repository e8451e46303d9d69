//! Readers against real files made at test time, checked with independent oracles:
//! `callgrind_annotate` (totals, per-function Ir), `objdump -d` (jump and call sites),
//! `nm` (function ranges, bias inference), `perf script` (per-sample ips) and
//! `perf report` (per-symbol sample counts). Tests needing a missing tool print
//! `SKIP: <test>: <reason>` and return.

use proftrust_formats::callgrind::{self, BiasSource, ExactOptions};
use proftrust_formats::segments::{ElfSegmentsFromDisk, NoSegments};
use proftrust_formats::{
    count_perf_data, read_perf_data, read_perf_data_with, read_perf_script, sniff, Format,
    FormatError, FunctionSymbol, ObjectSymbols, PerfDataOptions, SampleCounts, SymbolSource,
};
use proftrust_model::{Location, SampleSet};
use proftrust_testkit::{have, skip_test};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Compiles tests/data/loops.c with gcc -O2 -g into `dir`.
fn compile(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/loops.c");
    proftrust_testkit::gcc(&dir.join("loops"), &[&src], &[])
}

/// Function symbols from `nm -S --defined-only` (an oracle independent of our ELF code).
fn nm_functions(bin: &Path) -> Vec<FunctionSymbol> {
    let out = run(Command::new("nm").args(["-S", "--defined-only"]).arg(bin));
    out.lines()
        .filter_map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            if t.len() == 4 && matches!(t[2], "T" | "t" | "W" | "w") {
                Some(FunctionSymbol {
                    name: t[3].to_string(),
                    start: u64::from_str_radix(t[0], 16).ok()?,
                    size: u64::from_str_radix(t[1], 16).ok()?,
                })
            } else {
                None
            }
        })
        .collect()
}

struct NmSymbols {
    path: String,
    functions: Vec<FunctionSymbol>,
}

impl SymbolSource for NmSymbols {
    fn symbols(&self, path: &str, _: Option<&proftrust_model::BuildId>) -> Option<ObjectSymbols> {
        (path == self.path).then(|| ObjectSymbols {
            build_id: None,
            functions: self.functions.clone(),
        })
    }
}

fn range_of(f: &[FunctionSymbol], name: &str) -> (u64, u64) {
    let s = f
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("nm has no {name}"));
    (s.start, s.start + s.size)
}

fn parse_num(s: &str) -> u64 {
    s.replace(',', "").parse().expect("number")
}

#[test]
fn callgrind_matches_callgrind_annotate_objdump_and_nm() {
    let t = "callgrind_matches_callgrind_annotate_objdump_and_nm";
    if !have("gcc") || !have("valgrind") || !have("objdump") || !have("nm") {
        return skip_test(t, "needs gcc, valgrind, objdump and nm");
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let out = dir.path().join("cg.out");
    let calls = 3u64;
    run(Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--dump-instr=yes",
            "--collect-jumps=yes",
        ])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&exe)
        .args(["1000", &calls.to_string()]));
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(sniff(text.as_bytes()), Some(Format::Callgrind));
    let p = callgrind::parse(&text).unwrap();
    let ir = p.event_index("Ir").unwrap();

    // Oracle 1: callgrind_annotate totals and per-function self Ir.
    let ann = run(Command::new("callgrind_annotate")
        .args(["--threshold=100", "--auto=no"])
        .arg(&out));
    let total_line = ann
        .lines()
        .find(|l| l.contains("PROGRAM TOTALS"))
        .expect("annotate totals");
    let total = parse_num(total_line.split_whitespace().next().unwrap());
    assert_eq!(p.totals()[ir], total);
    assert_eq!(p.stated_totals().unwrap()[ir], total);
    // Lines: "9,006 (6.62%)  file:function [object]"; annotate keys by the inline file
    // too and omits the object on some lines, so sum by function name on both sides.
    let mut theirs: HashMap<String, u64> = HashMap::new();
    for l in ann.lines() {
        let l = l.trim_start();
        let Some((num, rest)) = l.split_once(' ') else {
            continue;
        };
        if !num.bytes().all(|b| b.is_ascii_digit() || b == b',') || num.is_empty() {
            continue;
        }
        let Some(close) = rest.find(")  ") else {
            continue;
        };
        let rest = &rest[close + 3..];
        let ff = match rest.rfind(" [") {
            Some(i) => &rest[..i],
            None => rest,
        };
        if ff == "PROGRAM TOTALS" {
            continue;
        }
        let func = ff.rsplit_once(':').map_or(ff, |x| x.1);
        *theirs.entry(func.to_string()).or_default() += parse_num(num);
    }
    let exe_s = exe.to_str().unwrap().to_string();
    let mut ours: HashMap<String, u64> = HashMap::new();
    for f in p.function_totals() {
        *ours.entry(f.name).or_default() += f.costs[ir];
    }
    for name in ["work", "rec", "main", "fa", "fb"] {
        assert_eq!(ours.get(name), theirs.get(name), "self Ir of {name}");
        assert!(ours.get(name).is_some_and(|&n| n > 0), "{name} missing");
    }
    let ours_sum: u64 = ours.values().sum();
    let theirs_sum: u64 = theirs.values().sum();
    assert_eq!(ours_sum, theirs_sum);
    assert_eq!(ours, theirs);

    // Oracle 2: objdump: every jump source in the executable is a jump, every call site a call.
    let dis = run(Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(&exe));
    let mut mnemonic: HashMap<u64, String> = HashMap::new();
    for l in dis.lines() {
        let Some((a, rest)) = l.split_once(":\t") else {
            continue;
        };
        if let Ok(a) = u64::from_str_radix(a.trim(), 16) {
            mnemonic.insert(a, rest.split_whitespace().next().unwrap_or("").to_string());
        }
    }
    let exe_obj = p.objects.iter().position(|o| *o == exe_s).unwrap() as u32;
    let mut checked_jumps = 0;
    for j in &p.jumps {
        if p.functions[j.function as usize].object == Some(exe_obj) {
            let m = &mnemonic[&j.from_instr];
            assert!(m.starts_with('j'), "jump source {:#x} is {m}", j.from_instr);
            assert!(
                mnemonic.contains_key(&j.to_instr),
                "jump target {:#x}",
                j.to_instr
            );
            checked_jumps += 1;
        }
    }
    assert!(checked_jumps >= 5, "{checked_jumps}");
    for c in &p.calls {
        if p.functions[c.caller as usize].object == Some(exe_obj) {
            let m = &mnemonic[&c.site_instr];
            assert!(
                m.starts_with("call"),
                "call site {:#x} is {m}",
                c.site_instr
            );
        }
    }

    // Oracle 3: nm ranges and a known count: work is entered `calls` times (rec is not
    // checked: gcc -O2 may turn its recursion into a loop).
    let functions = nm_functions(&exe);
    let syms = NmSymbols {
        path: exe_s.clone(),
        functions: functions.clone(),
    };
    let biases = p.biases(&ExactOptions::default(), &syms).unwrap();
    let b = biases.iter().find(|b| b.object == exe_s).unwrap();
    assert!(
        matches!(b.source, BiasSource::Inferred { agreeing, matched } if agreeing == matched && matched >= 5)
    );
    let e = p.to_exact(&ExactOptions::default(), &syms).unwrap();
    assert_eq!(e.total_instructions, total);
    let m = e.modules.find_by_file_name("loops").unwrap();
    let (work, _) = range_of(&functions, "work");
    assert_eq!(e.count_at(Location::new(m, work)), calls);
    // Every instruction callgrind puts in work, fa, fb or main lies in nm's range of it
    // (after the inferred bias).
    for c in &p.costs {
        let f = &p.functions[c.function as usize];
        let name = p.names[f.name as usize].as_str();
        if f.object == Some(exe_obj) && ["work", "fa", "fb", "main"].contains(&name) {
            let (lo, hi) = range_of(&functions, name);
            let a = c.instr - b.bias;
            assert!(
                a >= lo && a < hi,
                "{a:#x} outside {name} [{lo:#x}, {hi:#x})"
            );
        }
    }
    // The calls from main to work: `calls` of them, target = work's entry.
    let to_work: u64 = e
        .calls
        .iter()
        .filter(|c| c.target == Location::new(m, work))
        .map(|c| c.count)
        .sum();
    assert_eq!(to_work, calls);

    // The same file with runtime addresses of a PIE at 0x108000 gets the same exact profile.
    let mut mutated = p.clone();
    for c in &mut mutated.costs {
        if mutated.functions[c.function as usize].object == Some(exe_obj) {
            c.instr += 0x108000;
        }
    }
    let e2 = mutated.to_exact(&ExactOptions::default(), &syms).unwrap();
    assert_eq!(e2.count_at(Location::new(m, work)), calls);
    assert_eq!(e2.modules.get(m).unwrap().load_bias, 0x108000);
}

/// Records a perf.data of the test program with `perf record -e cpu-clock -c PERIOD`.
fn record(dir: &Path, exe: &Path, extra: &[&str]) -> Option<PathBuf> {
    let data = dir.join("perf.data");
    let out = Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-c", "100000"])
        .args(extra)
        .arg("-o")
        .arg(&data)
        .arg(exe)
        .args(["30000000", "1"])
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "perf record failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    Some(data)
}

/// `perf report` sample counts per symbol (`-n`), for `--sort sym`.
fn perf_report_counts(data: &Path) -> HashMap<String, u64> {
    let out = run(Command::new("perf")
        .args(["report", "--stdio", "--sort", "sym", "-n", "-i"])
        .arg(data));
    let mut m = HashMap::new();
    for l in out.lines() {
        let t: Vec<&str> = l.split_whitespace().collect();
        // "70.91%  1253  [.] fa"
        if t.len() >= 4 && t[0].ends_with('%') && t[2].starts_with('[') {
            if let Ok(n) = t[1].parse::<u64>() {
                *m.entry(t[3..].join(" ")).or_default() += n;
            }
        }
    }
    m
}

fn samples_in(s: &SampleSet, file: &str, r: (u64, u64)) -> u64 {
    let m = s.modules.find_by_file_name(file);
    s.samples
        .iter()
        .filter(|x| x.ip.module == m && m.is_some() && x.ip.svma.0 >= r.0 && x.ip.svma.0 < r.1)
        .count() as u64
}

/// perf script's runtime ips, in order, equal our SVMA + load bias.
fn assert_ips_match_perf_script(data: &Path, s: &SampleSet) {
    let ips = run(Command::new("perf")
        .args(["script", "-F", "ip", "-i"])
        .arg(data));
    let theirs: Vec<u64> = ips
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| u64::from_str_radix(l.trim(), 16).unwrap())
        .collect();
    let ours: Vec<u64> = s
        .samples
        .iter()
        .map(|x| match x.ip.module.and_then(|m| s.modules.get(m)) {
            Some(m) => x.ip.svma.0.wrapping_add(m.load_bias),
            None => x.ip.svma.0,
        })
        .collect();
    assert!(!ours.is_empty());
    assert_eq!(ours, theirs);
}

/// The streaming counter with default options and no ELF files.
fn count(b: &[u8], p: &Path) -> Result<SampleCounts, FormatError> {
    count_perf_data(b, p, &PerfDataOptions::default(), &NoSegments).map(|x| x.0)
}

/// `(event, module path or "-", svma) -> samples`, independent of module order.
fn normalized(c: &SampleCounts) -> BTreeMap<(u16, String, u64), u64> {
    let mut m = BTreeMap::new();
    for x in &c.counts {
        let module =
            x.ip.module
                .and_then(|i| c.modules.get(i))
                .map_or("-".to_string(), |m| m.path.clone());
        *m.entry((x.event, module, x.ip.svma.0)).or_default() += x.samples;
    }
    m
}

/// The streaming counter against the full reader on one file: same counts per
/// (event, module, address), same lost count; returns the counts.
fn assert_counts_equal_full_reader(data: &Path, streamed: bool) -> SampleCounts {
    let bytes = std::fs::read(data).unwrap();
    let segs = ElfSegmentsFromDisk;
    let opts = PerfDataOptions::default();
    let (fast, _) = count_perf_data(&bytes, data, &opts, &segs).unwrap();
    let (full, _) = read_perf_data_with(&bytes, data, &opts, &segs).unwrap();
    let full = SampleCounts::from_samples(&full);
    assert_eq!(fast.streamed, streamed, "{}", data.display());
    assert_eq!(normalized(&fast), normalized(&full), "{}", data.display());
    assert_eq!(fast.lost, full.lost);
    assert_eq!(fast.per_event(), full.per_event());
    assert_eq!(fast.events, full.events);
    assert!(fast.total() > 100, "{} samples", fast.total());
    fast
}

#[test]
fn streaming_counts_equal_the_full_reader_on_real_recordings() {
    let t = "streaming_counts_equal_the_full_reader_on_real_recordings";
    if !have("gcc") || !have("perf") {
        return skip_test(t, "needs gcc and perf");
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let Some(data) = record(dir.path(), &exe, &[]) else {
        return skip_test(t, "perf record does not work here (perf_event_paranoid?)");
    };
    assert_counts_equal_full_reader(&data, true);

    // Threads, a forked child, an exec: per-process mappings, fork copies, exec clears.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/procs.c");
    let procs = dir.path().join("procs");
    run(Command::new("gcc")
        .args(["-O2", "-g", "-pthread", "-o"])
        .arg(&procs)
        .arg(&src));
    let pd = dir.path().join("procs.data");
    run(Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-c", "100000", "-o"])
        .arg(&pd)
        .arg(&procs)
        .arg("20000000"));
    let c = assert_counts_equal_full_reader(&pd, true);
    // The exec'ed child's after_exec and the threads' thread_work are in procs (nm).
    let f = nm_functions(&procs);
    let m = c.modules.find_by_file_name("procs").expect("procs module");
    let within = |name: &str| {
        let (lo, hi) = range_of(&f, name);
        c.counts
            .iter()
            .filter(|x| x.ip.module == Some(m) && x.ip.svma.0 >= lo && x.ip.svma.0 < hi)
            .map(|x| x.samples)
            .sum::<u64>()
    };
    assert!(within("spin") > 100, "spin: {}", within("spin"));

    // Two events in one file: told apart by their IDENTIFIER.
    let two = dir.path().join("two.data");
    run(Command::new("perf")
        .args([
            "record",
            "-q",
            "-e",
            "cpu-clock",
            "-e",
            "task-clock",
            "-c",
            "100000",
            "-o",
        ])
        .arg(&two)
        .arg(&exe)
        .args(["30000000", "1"]));
    let c = assert_counts_equal_full_reader(&two, true);
    assert_eq!(c.events.len(), 2);
    assert!(c.per_event().iter().all(|&n| n > 50), "{:?}", c.per_event());

    // zstd-compressed records: the full reader does the counting.
    if let Some(z) = record(dir.path(), &exe, &["-z"]) {
        assert_counts_equal_full_reader(&z, false);
    }
}

#[test]
fn perf_data_pipe_mode_and_zstd_compressed() {
    let t = "perf_data_pipe_mode_and_zstd_compressed";
    if !have("gcc") || !have("perf") {
        return skip_test(t, "needs gcc and perf");
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let Some(z) = record(dir.path(), &exe, &["-z"]) else {
        return skip_test(t, "perf record -z does not work here");
    };
    let bytes = std::fs::read(&z).unwrap();
    let s = read_perf_data(&bytes, &z).unwrap();
    assert_ips_match_perf_script(&z, &s);
    // Pipe mode: `perf record -o -` written to a file.
    let pipe = dir.path().join("pipe.data");
    let out = Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-c", "100000", "-o", "-"])
        .arg(&exe)
        .args(["30000000", "1"])
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::write(&pipe, &out.stdout).unwrap();
    let s = read_perf_data(&out.stdout, &pipe).unwrap();
    assert_ips_match_perf_script(&pipe, &s);
    // Pipe mode is not streamed: the full reader counts, same answer.
    assert_counts_equal_full_reader(&pipe, false);
    // A stream cut inside a record (issue 20): the samples before the cut are read, with
    // a warning naming the byte of the cut, as perf warns.
    let cut = &out.stdout[..out.stdout.len() - 13];
    let (c, notes) =
        read_perf_data_with(cut, &pipe, &PerfDataOptions::default(), &NoSegments).unwrap();
    assert!(!c.samples.is_empty() && c.samples.len() <= s.samples.len());
    assert!(
        notes
            .warnings
            .iter()
            .any(|w| w.contains("the stream ends inside a record at byte")),
        "{:?}",
        notes.warnings
    );
    // Mutation smoke test on both: errors or sample sets, never a panic or an abort.
    for b in [&bytes, &out.stdout] {
        let n = b.len();
        for i in (0..n).step_by((n / 301).max(1)) {
            let _ = read_perf_data(&b[..i], &pipe);
            let _ = count(&b[..i], &pipe);
            for x in [0xffu8, 0x80, 0x01] {
                let mut m = b.clone();
                m[i] ^= x;
                let _ = read_perf_data(&m, &pipe);
                let _ = count(&m, &pipe);
            }
        }
    }
}

#[test]
fn perf_data_matches_perf_script_and_perf_report() {
    let t = "perf_data_matches_perf_script_and_perf_report";
    if !have("gcc") || !have("perf") || !have("nm") {
        return skip_test(t, "needs gcc, perf and nm");
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let Some(data) = record(dir.path(), &exe, &[]) else {
        return skip_test(t, "perf record does not work here (perf_event_paranoid?)");
    };
    let bytes = std::fs::read(&data).unwrap();
    assert_eq!(sniff(&bytes), Some(Format::PerfData));
    let s = read_perf_data(&bytes, &data).unwrap();
    assert_eq!(s.events.len(), 1);
    assert_eq!(s.events[0].name, "cpu-clock");
    assert!(s.samples.len() > 100, "{} samples", s.samples.len());
    assert!(s.samples.iter().all(|x| x.period == 100000));

    // Oracle 1: perf script's runtime ips, in order, equal SVMA + load bias.
    assert_ips_match_perf_script(&data, &s);

    // Oracle 2: perf report counts per symbol equal our samples inside nm's ranges.
    let functions = nm_functions(&exe);
    let report = perf_report_counts(&data);
    let mut checked = 0;
    for f in ["fa", "fb", "work"] {
        let r = range_of(&functions, f);
        let ours = samples_in(&s, "loops", r);
        assert_eq!(Some(&ours), report.get(f).or(Some(&0)), "samples in {f}");
        checked += ours;
    }
    assert!(checked > 50, "{checked}");
    let m = s.modules.find_by_file_name("loops").unwrap();
    assert!(s.modules.get(m).unwrap().build_id.is_some());

    // Oracle 3: perf script text read back with nm symbols gives the same SVMAs.
    let text = run(Command::new("perf")
        .args([
            "script",
            "-F",
            "comm,tid,time,period,event,ip,sym,symoff,dso",
            "-i",
        ])
        .arg(&data));
    assert_eq!(sniff(text.as_bytes()), Some(Format::PerfScript));
    let syms = NmSymbols {
        path: exe.to_str().unwrap().to_string(),
        functions,
    };
    let (ps, _) = read_perf_script(&text, &syms, &NoSegments).unwrap();
    assert_eq!(ps.samples.len(), s.samples.len());
    let pm = ps.modules.find_by_file_name("loops").unwrap();
    let mut same = 0;
    for (a, b) in s.samples.iter().zip(&ps.samples) {
        assert_eq!(a.time / 1000, b.time / 1000);
        assert_eq!(a.tid, b.tid);
        if a.ip.module == Some(m) && b.ip.module == Some(pm) {
            assert_eq!(a.ip.svma, b.ip.svma);
            same += 1;
        }
    }
    assert!(same > 50);

    // Mutation smoke test: truncations and byte flips give errors or sample sets, never a
    // panic.
    let n = bytes.len();
    for cut in (0..n)
        .step_by((n / 97).max(1))
        .chain([n - 1, n - 8, 16, 104])
    {
        let _ = read_perf_data(&bytes[..cut.min(n)], &data);
        let _ = count(&bytes[..cut.min(n)], &data);
    }
    for i in (0..n).step_by((n / 401).max(1)) {
        for x in [0xffu8, 0x80, 0x01] {
            let mut m = bytes.clone();
            m[i] ^= x;
            let _ = read_perf_data(&m, &data);
            let _ = count(&m, &data);
        }
    }
}

#[test]
fn perf_data_bad_inputs_are_clear_errors() {
    let t = "perf_data_bad_inputs_are_clear_errors";
    let p = Path::new("x.data");
    assert!(matches!(
        read_perf_data(b"", p).unwrap_err(),
        FormatError::Empty { .. }
    ));
    assert!(matches!(
        read_perf_data(b"PERFILE2", p).unwrap_err(),
        FormatError::Truncated { .. }
    ));
    assert!(matches!(
        read_perf_data(b"this is not perf data at all", p).unwrap_err(),
        FormatError::NotThisFormat { .. }
    ));
    if !have("gcc") || !have("perf") {
        return skip_test(t, "needs gcc and perf for the real-file cases");
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let Some(data) = record(dir.path(), &exe, &[]) else {
        return skip_test(t, "perf record does not work here");
    };
    let bytes = std::fs::read(&data).unwrap();
    // Cut in the middle of the data section: the complete records are read, with a
    // warning saying what is missing.
    let whole = read_perf_data(&bytes, &data).unwrap();
    let (half, notes) = read_perf_data_with(
        &bytes[..bytes.len() / 2],
        &data,
        &PerfDataOptions::default(),
        &NoSegments,
    )
    .unwrap();
    assert!(!half.samples.is_empty() && half.samples.len() < whole.samples.len());
    assert!(
        notes.warnings.iter().any(|w| w.contains("a cut copy?")),
        "{:?}",
        notes.warnings
    );
    // Another architecture: rewrite the HEADER_ARCH string.
    let mut arm = bytes.clone();
    let needle = b"x86_64\0";
    let mut hits = 0;
    let mut i = 0;
    while i + needle.len() <= arm.len() {
        if &arm[i..i + needle.len()] == needle {
            arm[i..i + needle.len()].copy_from_slice(b"aarch64");
            hits += 1;
        }
        i += 1;
    }
    assert!(hits >= 1);
    // Another architecture is read (attribution is by the binaries' symbols), with a note.
    let (s, notes) =
        read_perf_data_with(&arm, &data, &PerfDataOptions::default(), &NoSegments).unwrap();
    assert_eq!(s.samples.len(), whole.samples.len());
    assert!(
        notes
            .warnings
            .iter()
            .any(|w| w.contains("recorded on aarch64")),
        "{:?}",
        notes.warnings
    );
    let _ = ElfSegmentsFromDisk;
}

/// Inputs the fuzz targets found (kept as regression tests).
#[test]
fn fuzz_findings_are_errors() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    // An MMAP2 record with a build-id length byte > 20 (linux-perf-event-reader asserts).
    let p = dir.join("fuzz-crash-mmap2-build-id.data");
    let b = std::fs::read(&p).unwrap();
    assert!(read_perf_data(&b, &p).is_err());
    // An EVENT_DESC attribute whose size field (102) is no perf_event_attr version: the
    // crate would read the following counts misaligned and reserve 7 GB.
    let p = dir.join("fuzz-oom-attr-size.data");
    let b = std::fs::read(&p).unwrap();
    let e = read_perf_data(&b, &p).unwrap_err();
    assert!(e.to_string().contains("attribute size 102"), "{e}");
    // A big-endian magic: the header was checked as little-endian and linux-perf-data
    // overflowed adding the data section's offset and size (a panic in debug builds).
    let p = dir.join("fuzz-big-endian-header.data");
    let b = std::fs::read(&p).unwrap();
    for e in [
        read_perf_data(&b, &p).unwrap_err(),
        count(&b, &p).unwrap_err(),
    ] {
        assert!(matches!(e, FormatError::WrongArchitecture { .. }), "{e}");
        assert!(e.to_string().contains("big-endian"), "{e}");
    }
    // A FINISHED_ROUND record of 40 bytes: linux-perf-data read its body as the next
    // records (4 samples), the streaming counter skipped it (3): both now call it corrupt.
    let p = dir.join("fuzz-finished-round-body.data");
    let b = std::fs::read(&p).unwrap();
    for e in [
        read_perf_data(&b, &p).unwrap_err(),
        count(&b, &p).unwrap_err(),
    ] {
        assert!(
            e.to_string().contains("FINISHED_ROUND record of 40 bytes"),
            "{e}"
        );
    }
    // A SAMPLE whose call-chain count times 8 overflows: linux-perf-event-reader multiplied
    // unchecked (a panic in debug builds, a misread record otherwise). The streaming
    // counter never reads call chains; the full reader now refuses the record.
    let p = dir.join("fuzz-callchain-count-overflow.data");
    let b = std::fs::read(&p).unwrap();
    let e = read_perf_data(&b, &p).unwrap_err();
    assert!(e.to_string().contains("call chain of"), "{e}");
    assert!(e.to_string().contains("does not fit"), "{e}");
    let _ = count(&b, &p);
    // An AUXTRACE record announcing 2^56 bytes of trace data: linux-perf-data allocated
    // them (an abort). Refused by both readers: the record's own declared size already runs
    // past the data section (the record-size check), or else its AUX payload is truncated.
    let p = dir.join("fuzz-auxtrace-size.data");
    let b = std::fs::read(&p).unwrap();
    for e in [
        read_perf_data(&b, &p).unwrap_err(),
        count(&b, &p).unwrap_err(),
    ] {
        let e = e.to_string();
        assert!(
            e.contains("runs past its section") || e.contains("bytes of AUX trace data"),
            "{e}"
        );
    }
    // An MMAP2 whose page offset makes `ip - start + pgoff` pass 2^64 (an overflow panic in
    // debug builds, a wrapped SVMA in a module otherwise): that third sample is unmapped, at
    // its runtime address, in both readers.
    let p = dir.join("fuzz-pgoff-overflow.data");
    let b = std::fs::read(&p).unwrap();
    let s = read_perf_data(&b, &p).unwrap();
    assert_eq!(s.samples.len(), 3);
    assert_eq!(s.samples[2].ip.module, None);
    assert_eq!(s.samples[2].ip.svma.0, 1_153_015_363_183_936_304);
    let c = count(&b, &p).unwrap();
    assert!(c.streamed);
    assert_eq!(normalized(&c), normalized(&SampleCounts::from_samples(&s)));
}

/// A forked child has its parent's name until it execs. `data/fork-sample-before-exec.data`
/// is a `perf record -e cpu-clock -F 2000` of `crates/cli/tests/read.rs`'s fork/exec program
/// (`forkparent` forks, the child execs `execedchild`) in which one sample of the child landed
/// between the fork and the exec's COMM (a 0.3 ms window, so a real recording rarely shows
/// it). Oracle, `perf script --ns --show-task-events -F comm,pid,tid,time,ip,event`:
/// `forkparent 27187/27187 48971.658513613: cpu-clock`, then `PERF_RECORD_COMM exec:
/// execedchild:27187/27187` at 48971.658745377, then `execedchild 27187/27187
/// 48971.659017961: cpu-clock`. The reader fell back to the child's first own name
/// (`execedchild`) for the first sample.
#[test]
fn forked_child_has_its_parents_name_until_exec() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fork-sample-before-exec.data");
    let b = std::fs::read(&p).unwrap();
    let s = read_perf_data(&b, &p).unwrap();
    let idx = s.comm_index();
    let name = |time: u64| {
        let x = s
            .samples
            .iter()
            .find(|x| x.tid == 27187 && x.time == time)
            .unwrap_or_else(|| panic!("no sample of 27187 at {time}"));
        idx.at(x.pid, x.tid, x.time)
    };
    assert_eq!(name(48_971_658_513_613), Some("forkparent"));
    assert_eq!(name(48_971_659_017_961), Some("execedchild"));
    assert_eq!(s.program_comm(), Some("forkparent"));
}

/// perf script's ip and call chain of every sample of `event` (`-F event,ip` with a call
/// chain prints the ip first, then one address per frame).
fn perf_script_chains(data: &Path, event: &str) -> Vec<Vec<u64>> {
    let out = run(Command::new("perf")
        .args(["script", "-F", "event,ip", "-i"])
        .arg(data));
    let mut chains: Vec<Vec<u64>> = Vec::new();
    let mut keep = false;
    for l in out.lines() {
        let t = l.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(ev) = t.strip_suffix(':') {
            keep = ev == event;
            if keep {
                chains.push(Vec::new());
            }
        } else if keep {
            chains
                .last_mut()
                .unwrap()
                .push(u64::from_str_radix(t, 16).unwrap());
        }
    }
    chains
}

/// A group recorded with leader sampling (`{a,b}:S`) puts each member's count in the
/// sample (`PERF_SAMPLE_READ`, `read_format` `ID|GROUP|LOST` from perf 6.x on a Linux 6
/// kernel) before the call chain. linux-perf-event-reader drops the LOST bit, so the call
/// chain was looked for 16 bytes early ("call chain of 23125229 entries does not fit",
/// issue 31 item 8). Oracle: perf script's ip and call chain of every sample.
#[test]
fn group_read_values_with_lost_counts_before_the_call_chain() {
    let t = "group_read_values_with_lost_counts_before_the_call_chain";
    if !have("gcc") || !have("perf") {
        return skip_test(t, "needs gcc and perf");
    }
    let dir = tempfile::tempdir().unwrap();
    // Frame pointers, so that the kernel's call chains are deep.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/loops.c");
    let exe = proftrust_testkit::gcc(
        &dir.path().join("loops"),
        &[&src],
        &["-fno-omit-frame-pointer"],
    );
    let data = dir.path().join("group.data");
    let out = Command::new("perf")
        .args([
            "record",
            "-q",
            "-e",
            "{cpu-clock,task-clock}:S",
            "-c",
            "200000",
            "-g",
        ])
        .arg("-o")
        .arg(&data)
        .arg(&exe)
        .args(["10000000", "1"])
        .output()
        .unwrap();
    if !out.status.success() {
        return skip_test(
            t,
            "perf record of a leader-sampled group does not work here",
        );
    }
    let evlist = run(Command::new("perf").args(["evlist", "-v", "-i"]).arg(&data));
    if !evlist.contains("LOST") {
        return skip_test(t, "this kernel or perf writes no PERF_FORMAT_LOST");
    }
    let bytes = std::fs::read(&data).unwrap();
    let s = read_perf_data(&bytes, &data).unwrap();
    let theirs = perf_script_chains(&data, "cpu-clock");
    assert!(theirs.len() > 20, "{} samples", theirs.len());
    // With a call chain perf script prints each frame map-relative (`map__map_ip`: the
    // file offset, which is the SVMA in these PIE and shared-object text segments; the
    // address itself for the kernel and for frames in no mapping).
    let ours: Vec<Vec<u64>> = s
        .samples
        .iter()
        .map(|x| {
            std::iter::once(x.ip.svma.0)
                .chain(x.callchain.iter().map(|l| l.svma.0))
                .collect()
        })
        .collect();
    assert_eq!(ours.len(), theirs.len());
    let deep = ours.iter().filter(|c| c.len() >= 2).count();
    assert!(deep > 10, "{deep} samples with a call chain");
    assert_eq!(ours, theirs);
    // The streaming counter (plain `read`) agrees on the ips.
    let c = count(&bytes, &data).unwrap();
    assert_eq!(c.total(), s.samples.len() as u64);
}
