//! `proftrust read` end to end, against independent oracles: `perf report -n` per-symbol
//! sample counts, `callgrind_annotate` totals and per-function Ir, `nm` addresses. Tests
//! needing a missing tool print `SKIP: <test>: <reason>` and return.

use proftrust_formats::native;
use proftrust_model::{
    EventDesc, EventKind, ExactProfile, InstrCount, Location, Module, ModuleTable, Sample,
    SampleSet, SamplingConfig,
};
use proftrust_testkit::{have, skip_test};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const WORKLOAD: &str = r#"
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) long work(long n) {
    long s = 0;
    for (long i = 0; i < n; i++) { if (i % 3) s += i * i; else s -= i; }
    return s;
}
__attribute__((noinline)) double fa(long n) {
    double s = 0; for (long i = 0; i < n; i++) s += i * 0.5; return s;
}
__attribute__((noinline)) double fb(long n) {
    double s = 0; for (long i = 0; i < n; i++) s += i * 0.25 + 1; return s;
}
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    long calls = argc > 2 ? atol(argv[2]) : 3;
    long s = 0;
    for (long k = 0; k < calls; k++) s += work(n + k);
    printf("%ld %f\n", s, fa(n) + fb(n / 2));
    return 0;
}
"#;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn proftrust(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_proftrust"))
        .args(args)
        .output()
        .expect("run proftrust")
}

fn read_json(file: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["read", file.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let out = proftrust(&args);
    assert!(
        out.status.success(),
        "read failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn compile(dir: &Path) -> PathBuf {
    let src = dir.join("w.c");
    std::fs::write(&src, WORKLOAD).unwrap();
    proftrust_testkit::gcc(&dir.join("workload"), &[&src], &[])
}

/// `nm` start addresses of the defined functions.
fn nm(bin: &Path) -> HashMap<String, u64> {
    run(Command::new("nm").arg("--defined-only").arg(bin))
        .lines()
        .filter_map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            (t.len() == 3 && matches!(t[1], "T" | "t"))
                .then(|| Some((t[2].to_string(), u64::from_str_radix(t[0], 16).ok()?)))
                .flatten()
        })
        .collect()
}

fn by_name(v: &Value, list: &str, count: &str) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    for x in v[list].as_array().expect("list") {
        *m.entry(x["name"].as_str().unwrap().to_string())
            .or_default() += x[count].as_u64().unwrap();
    }
    m
}

fn fails_with(args: &[&str], needle: &str) {
    let out = proftrust(args);
    assert_eq!(out.status.code(), Some(2), "{args:?} should exit 2");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn perf_data_symbols_match_perf_report() {
    let t = "perf_data_symbols_match_perf_report";
    if !have("gcc") || !have("perf") {
        return skip_test(t, "needs gcc and perf");
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let data = dir.path().join("perf.data");
    let rec = Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-c", "100000", "-o"])
        .arg(&data)
        .arg(&exe)
        .args(["30000000", "1"])
        .output()
        .unwrap();
    if !rec.status.success() {
        return skip_test(t, "perf record does not work here (perf_event_paranoid?)");
    }
    let v = read_json(&data, &[]);
    assert_eq!(v["format"], "perf.data");
    assert_eq!(v["events"][0]["name"], "cpu-clock");
    assert_eq!(v["events"][0]["samples"], v["samples"]);
    assert_eq!(v["lost"], 0);
    let ours = by_name(&v, "symbols", "samples");
    // Symbols are sorted by samples, largest first.
    let counts: Vec<u64> = v["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["samples"].as_u64().unwrap())
        .collect();
    assert!(counts.windows(2).all(|w| w[0] >= w[1]));
    // Oracle: perf report -n.
    let report = run(Command::new("perf")
        .args(["report", "--stdio", "--sort", "sym", "-n", "-i"])
        .arg(&data));
    let mut theirs: HashMap<String, u64> = HashMap::new();
    let mut user: HashMap<String, u64> = HashMap::new();
    for l in report.lines() {
        let t: Vec<&str> = l.split_whitespace().collect();
        if t.len() >= 4 && t[0].ends_with('%') && t[2].starts_with('[') {
            if let Ok(n) = t[1].parse::<u64>() {
                *theirs.entry(t[3..].join(" ")).or_default() += n;
                if t[2] == "[.]" && !t[3].starts_with("0x") {
                    *user.entry(t[3..].join(" ")).or_default() += n;
                }
            }
        }
    }
    let mut seen = 0;
    for f in ["fa", "fb", "work"] {
        assert_eq!(ours.get(f), theirs.get(f), "samples of {f}");
        seen += ours.get(f).copied().unwrap_or(0);
    }
    assert!(seen > 50, "{seen}");
    // Every user-space symbol perf names (the loader's and libc's too) has the same count.
    // perf counts the PLT under `_init` (see `perf_counts_under_init`): compare the sum.
    let folded_plt: u64 = ours
        .iter()
        .filter(|(k, _)| proftrust_testkit::perf_counts_under_init(k, user.contains_key(*k)))
        .map(|(_, n)| *n)
        .sum();
    for (name, n) in &user {
        let mine = match name.as_str() {
            "_init" => ours.get("_init").copied().unwrap_or(0) + folded_plt,
            _ => ours.get(name).copied().unwrap_or(0),
        };
        assert_eq!(mine, *n, "samples of {name}");
    }
    let total: u64 = theirs.values().sum();
    assert_eq!(v["samples"].as_u64().unwrap(), total);

    // --script: one header line per sample.
    let out = proftrust(&["read", data.to_str().unwrap(), "--script"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let lines = text.lines().filter(|l| l.contains(" cpu-clock: ")).count() as u64;
    assert_eq!(lines, total);
    assert!(text.contains(" fa ("), "{}", &text[..text.len().min(500)]);

    // A cut copy: the complete records are read, with a warning (exit 0); another
    // architecture is read with a note.
    let bytes = std::fs::read(&data).unwrap();
    let cut = dir.path().join("cut.data");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let v = read_json(&cut, &[]);
    let n = v["samples"].as_u64().unwrap();
    assert!(n > 0 && n < total, "{n} of {total}");
    let cut_warning = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["message"].as_str().unwrap().contains("a cut copy?"))
        .unwrap_or_else(|| panic!("{}", v["warnings"]));
    assert_eq!(cut_warning["kind"], "ended-early", "{cut_warning}");
    let mut arm = bytes.clone();
    let needle = b"x86_64\0";
    for i in 0..arm.len().saturating_sub(needle.len()) {
        if &arm[i..i + needle.len()] == needle {
            arm[i..i + needle.len()].copy_from_slice(b"aarch64");
        }
    }
    let armf = dir.path().join("arm.data");
    std::fs::write(&armf, &arm).unwrap();
    let v = read_json(&armf, &[]);
    assert_eq!(v["samples"].as_u64().unwrap(), total);
    assert!(
        v["warnings"].to_string().contains("recorded on aarch64"),
        "{}",
        v["warnings"]
    );
}

#[test]
fn callgrind_totals_match_callgrind_annotate() {
    let t = "callgrind_totals_match_callgrind_annotate";
    if !have("gcc") || !have("valgrind") {
        return skip_test(t, "needs gcc and valgrind");
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let out = dir.path().join("callgrind.out");
    run(Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--dump-instr=yes",
            "--collect-jumps=yes",
        ])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&exe)
        .args(["2000", "2"]));
    let v = read_json(&out, &[]);
    assert_eq!(v["format"], "callgrind");
    let ann = run(Command::new("callgrind_annotate")
        .args(["--threshold=100", "--auto=no"])
        .arg(&out));
    let num = |s: &str| -> u64 { s.replace(',', "").parse().unwrap() };
    let total = ann
        .lines()
        .find(|l| l.contains("PROGRAM TOTALS"))
        .map(|l| num(l.split_whitespace().next().unwrap()))
        .unwrap();
    assert_eq!(v["total_instructions"].as_u64().unwrap(), total);
    let ours = by_name(&v, "functions", "instructions");
    for f in ["work", "fa", "fb"] {
        let line = ann
            .lines()
            .find(|l| l.contains(&format!(":{f} [")))
            .unwrap_or_else(|| panic!("annotate has no {f}"));
        let theirs = num(line.split_whitespace().next().unwrap());
        assert_eq!(ours.get(f), Some(&theirs), "Ir of {f}");
    }
}

#[test]
fn native_files_read_back_with_symbols() {
    let t = "native_files_read_back_with_symbols";
    if !have("gcc") || !have("nm") {
        return skip_test(t, "needs gcc and nm");
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path());
    let syms = nm(&exe);
    let mut modules = ModuleTable::default();
    let m = modules.intern(Module::new(exe.to_str().unwrap()));
    let at = |f: &str, off: u64| Location::new(m, syms[f] + off);
    // Exact: work 10 + 7 instructions' worth, fa 5.
    let e = ExactProfile {
        modules: modules.clone(),
        instructions: vec![
            InstrCount {
                loc: at("work", 0),
                count: 10,
            },
            InstrCount {
                loc: at("work", 4),
                count: 7,
            },
            InstrCount {
                loc: at("fa", 0),
                count: 5,
            },
        ],
        total_instructions: 22,
        backend: "qemu".into(),
        ..Default::default()
    };
    let ef = dir.path().join("x.exact");
    native::write_exact(std::fs::File::create(&ef).unwrap(), &e).unwrap();
    let v = read_json(&ef, &[]);
    assert_eq!(v["format"], "exact");
    assert_eq!(v["total_instructions"], 22);
    let f = by_name(&v, "functions", "instructions");
    assert_eq!(f.get("work"), Some(&17));
    assert_eq!(f.get("fa"), Some(&5));

    let sample = |loc| Sample {
        event: 0,
        pid: 1,
        tid: 1,
        time: 0,
        cpu: 0,
        period: 1000,
        ip: loc,
        callchain: vec![],
        branches: vec![],
    };
    let s = SampleSet {
        modules,
        events: vec![EventDesc {
            name: "task-clock".into(),
            kind: EventKind::TaskClock,
            config: SamplingConfig::default(),
        }],
        samples: vec![
            sample(at("fb", 2)),
            sample(at("fb", 0)),
            sample(at("work", 1)),
        ],
        lost: 4,
        ..Default::default()
    };
    let sf = dir.path().join("x.samples");
    native::write_samples(std::fs::File::create(&sf).unwrap(), &s).unwrap();
    let v = read_json(&sf, &[]);
    assert_eq!(v["format"], "samples");
    assert_eq!(v["lost"], 4);
    assert_eq!(v["events"][0]["name"], "task-clock");
    assert_eq!(v["events"][0]["samples"], 3);
    assert_eq!(v["symbols"][0]["name"], "fb");
    assert_eq!(v["symbols"][0]["samples"], 2);
    assert_eq!(v["symbols"][0]["module"], exe.to_str().unwrap());
    assert_eq!(v["symbols"][1]["name"], "work");
    assert!(
        v["events"][0].get("symbols").is_none(),
        "one event: one table"
    );

    // Two events (as a virtual-PMU file has): a table per event, and the top-level table
    // sums them. instructions: fb x2, work x1; cycles: work x3.
    let mut two = s.clone();
    two.events = vec![
        EventDesc {
            name: "instructions".into(),
            kind: EventKind::Instructions,
            config: SamplingConfig::default(),
        },
        EventDesc {
            name: "cycles".into(),
            kind: EventKind::Cycles,
            config: SamplingConfig::default(),
        },
    ];
    for _ in 0..3 {
        two.samples.push(Sample {
            event: 1,
            ..sample(at("work", 0))
        });
    }
    let tf = dir.path().join("two.samples");
    native::write_samples(std::fs::File::create(&tf).unwrap(), &two).unwrap();
    let v = read_json(&tf, &[]);
    let per = |i: usize| -> BTreeMap<String, u64> {
        v["events"][i]["symbols"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                (
                    x["name"].as_str().unwrap().to_string(),
                    x["samples"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(
        per(0),
        BTreeMap::from([("fb".to_string(), 2), ("work".to_string(), 1)])
    );
    assert_eq!(per(1), BTreeMap::from([("work".to_string(), 3)]));
    let all = by_name(&v, "symbols", "samples");
    assert_eq!((all.get("fb"), all.get("work")), (Some(&2), Some(&4)));

    // A sample file over 4 MiB is mapped instead of read: same answer. 100,000 samples
    // (50 bytes each): 3 in 5 in fa, the rest in work.
    let mut big = s.clone();
    big.samples = (0..100_000u64)
        .map(|i| {
            sample(if i % 5 < 3 {
                at("fa", i % 4)
            } else {
                at("work", 0)
            })
        })
        .collect();
    let bf = dir.path().join("big.samples");
    native::write_samples(std::fs::File::create(&bf).unwrap(), &big).unwrap();
    assert!(std::fs::metadata(&bf).unwrap().len() >= 4 << 20);
    let v = read_json(&bf, &[]);
    assert_eq!(v["samples"], 100_000);
    let f = by_name(&v, "symbols", "samples");
    assert_eq!(f.get("fa"), Some(&60_000));
    assert_eq!(f.get("work"), Some(&40_000));
}

#[test]
fn bad_inputs_exit_2_with_the_file_and_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str, content: &[u8]| -> String {
        let f = dir.path().join(name);
        std::fs::write(&f, content).unwrap();
        f.to_str().unwrap().to_string()
    };
    let empty = p("empty", b"");
    fails_with(&["read", &empty], "empty");
    fails_with(&["read", &empty], &empty);
    let text = p("notes.txt", b"just some notes\nnothing here\n");
    fails_with(&["read", &text], "unknown file format");
    let v2 = p("cg.out", b"# callgrind format\nversion: 2\nevents: Ir\n");
    fails_with(&["read", &v2], "version \"2\"");
    fails_with(&["read", &v2], &v2);
    let forced = p("forced", b"hello\n");
    fails_with(
        &["read", &forced, "--format", "callgrind"],
        "not a callgrind file",
    );
    let bad = p("bad.samples", b"PTSAMP07\0\0\0\0\0\0\0\0");
    fails_with(&["read", &bad], "version \"07\"");
    let junk = p("junk.data", b"PERFILE2\xff\xff\xff\xff\xff\xff\xff\xffmore");
    fails_with(&["read", &junk], &junk);
    fails_with(
        &["read", dir.path().join("missing").to_str().unwrap()],
        "cannot read",
    );
}

/// Branch stacks in `read --json` and the text table, from `perf script` text with
/// `brstack` (perf's `-F comm,tid,time,event,ip,sym,dso,brstack`; perf 6.1 ends each entry
/// with `/TYPE`, empty here, older perf does not) of the golden non-PIE `tiny`, whose
/// runtime addresses are its SVMAs. Expected values by hand: `nm tiny` puts 0x4010a9 and
/// 0x401098 in `leaf` (0x401080..), 0x401157 in `work`.
#[test]
fn branch_stacks_per_sample_and_aggregated() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/fixtures");
    let tiny = fixtures.join("tiny");
    let text = "\
tiny 22000  6758.543590: cpu-clock:u:  401080 leaf (/tmp/proftrust-golden/tiny) 0x4010a9/0x401098/P/-/-/3  0x401157/0x401080/M/-/-/12  0x4010a9/0x401098/-/-/-/0 
tiny 22000  6758.543639: cpu-clock:u:  40109b leaf (/tmp/proftrust-golden/tiny) 0x4010a9/0x401098/M/-/-/5/ 
tiny 22000  6758.543688: cpu-clock:u:  401157 work (/tmp/proftrust-golden/tiny)
";
    let f = dir.path().join("lbr.perf-script");
    std::fs::write(&f, text).unwrap();
    // Issue 31 item 15: per-sample stacks only when asked for.
    let v = read_json(&f, &["--binary", tiny.to_str().unwrap()]);
    assert!(v.get("branch_stacks").is_none(), "{v}");
    assert_eq!(v["branches"].as_array().map(Vec::len), Some(2));
    let v = read_json(&f, &["--binary", tiny.to_str().unwrap(), "--branch-stacks"]);
    assert_eq!(v["samples"], 3);
    // The aggregated table, most frequent first.
    let t = v["branches"].as_array().unwrap();
    assert_eq!(t.len(), 2, "{t:?}");
    let pair = |b: &Value| {
        (
            b["from"]["address"].as_u64().unwrap(),
            b["from"]["symbol"].as_str().unwrap().to_string(),
            b["to"]["address"].as_u64().unwrap(),
            b["to"]["symbol"].as_str().unwrap().to_string(),
            b["count"].as_u64().unwrap(),
            b["mispredicted"].as_u64().unwrap(),
        )
    };
    assert_eq!(
        pair(&t[0]),
        (0x4010a9, "leaf".into(), 0x401098, "leaf".into(), 3, 1)
    );
    assert_eq!(
        pair(&t[1]),
        (0x401157, "work".into(), 0x401080, "leaf".into(), 1, 1)
    );
    assert_eq!(
        t[0]["from"]["module"].as_str(),
        Some("/tmp/proftrust-golden/tiny")
    );
    // Per sample: only the two samples with a stack, entries as perf gave them.
    let s = v["branch_stacks"].as_array().unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(
        (s[0]["sample"].as_u64(), s[1]["sample"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(s[0]["event"], "cpu-clock:u");
    let e = s[0]["branches"].as_array().unwrap();
    let got: Vec<(u64, u64, Value, u64)> = e
        .iter()
        .map(|b| {
            (
                b["from"]["address"].as_u64().unwrap(),
                b["to"]["address"].as_u64().unwrap(),
                b["mispredicted"].clone(),
                b["cycles"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (0x4010a9, 0x401098, Value::Bool(false), 3),
            (0x401157, 0x401080, Value::Bool(true), 12),
            (0x4010a9, 0x401098, Value::Null, 0),
        ]
    );
    // The text output's branch table.
    let o = proftrust(&[
        "read",
        f.to_str().unwrap(),
        "--binary",
        tiny.to_str().unwrap(),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("branch stacks: 2 samples, 4 taken branches (2 mispredicted), 2 distinct"),
        "{out}"
    );
    assert!(
        out.contains("         3         1  leaf 0x4010a9 -> leaf 0x401098"),
        "{out}"
    );
    // Without branch stacks the keys are absent.
    let plain = read_json(&fixtures.join("tiny.ptsamp"), &[]);
    assert!(plain.get("branches").is_none() && plain.get("branch_stacks").is_none());
}

/// The golden fixtures' perf.data (`perf record` of `tiny` in /tmp/proftrust-golden) and
/// exact counts copied into `dir`, and a `--symfs` root in `dir` holding the binary at its
/// recorded path (the test's own copy: nothing is put at the recorded path itself).
fn golden_perf_fixture(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/fixtures");
    let root = dir.join("root");
    let under = root.join("tmp/proftrust-golden/tiny");
    std::fs::create_dir_all(under.parent().unwrap()).unwrap();
    std::fs::copy(fx.join("tiny"), &under).unwrap();
    let (pd, ex) = (dir.join("tiny.perf.data"), dir.join("tiny.ptexact"));
    std::fs::copy(fx.join("tiny.perf.data"), &pd).unwrap();
    std::fs::copy(fx.join("tiny.ptexact"), &ex).unwrap();
    (pd, ex, root)
}

/// `read --script` prints the comm perf script prints (the program's name from its COMM
/// record after exec, `tiny`), not perf's own name from the recorded command line: the
/// oracle is `perf script` on the same perf.data, sample by sample.
#[test]
fn read_script_comm_is_perf_scripts() {
    let t = "read_script_comm_is_perf_scripts";
    if !have("perf") {
        return skip_test(t, "perf not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let (pd, _, root) = golden_perf_fixture(dir.path());
    let comms = |out: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(out)
            .lines()
            .filter(|l| !l.starts_with(['\t', '#']) && !l.trim().is_empty())
            .map(|l| l.split_whitespace().next().unwrap().to_string())
            .collect()
    };
    let ours = Command::new(env!("CARGO_BIN_EXE_proftrust"))
        .args(["read", "--script"])
        .arg(&pd)
        .arg("--symfs")
        .arg(&root)
        .output()
        .unwrap();
    assert!(
        ours.status.success(),
        "{}",
        String::from_utf8_lossy(&ours.stderr)
    );
    let perf = Command::new("perf")
        .args(["script", "-F", "comm,pid,tid,time,ip", "-i"])
        .arg(&pd)
        .output()
        .unwrap();
    if !perf.status.success() {
        return skip_test(t, "perf script cannot read the fixture");
    }
    let (a, b) = (comms(&ours.stdout), comms(&perf.stdout));
    assert_eq!(a.len(), 163);
    assert_eq!(a, b);
    assert!(a.iter().all(|c| c == "tiny"), "{a:?}");
}

/// `audit --samples perf.data --truth FILE` without `--binary` audits the program perf
/// recorded (`tiny`, found under `--symfs`), not perf itself (whose command line perf.data
/// stores).
#[test]
fn audit_of_perf_data_defaults_to_the_recorded_program() {
    let dir = tempfile::tempdir().unwrap();
    let (pd, ex, root) = golden_perf_fixture(dir.path());
    let o = Command::new(env!("CARGO_BIN_EXE_proftrust"))
        .args(["audit", "--json", "--samples"])
        .arg(&pd)
        .arg("--truth")
        .arg(&ex)
        .arg("--symfs")
        .arg(&root)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("nothing from perf"), "{err}");
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    // The recorded program, found under --symfs (perf's rule: ROOT/RECORDED_PATH).
    let audited = j["config"]["binary"].as_str().unwrap();
    assert_eq!(
        Path::new(audited),
        root.join("tmp/proftrust-golden/tiny"),
        "{}",
        j["config"]
    );
}

const FORK_EXEC: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
__attribute__((noinline)) long spin(long n) {
    volatile long s = 0;
    for (long i = 0; i < n; i++) s += i ^ (s >> 3);
    return s;
}
static void *worker(void *arg) {
    prctl(PR_SET_NAME, "renamed worker");
    return (void *)spin((long)arg);
}
int main(int argc, char **argv) {
    long n = 60000000;
    spin(n);
    pthread_t t;
    pthread_create(&t, 0, worker, (void *)n);
    pthread_join(t, 0);
    pid_t c = fork();
    if (c == 0) {
        execl(argv[1], argv[1], (char *)0);
        _exit(127);
    }
    int st = 0;
    waitpid(c, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
"#;

const EXECED: &str = r#"
__attribute__((noinline)) long spin2(long n) {
    volatile long s = 0;
    for (long i = 0; i < n; i++) s += i ^ (s >> 5);
    return s;
}
int main(void) { return spin2(60000000) == 1; }
"#;

/// A recording of a process tree (a thread renamed with `prctl`, a child forked that
/// execs another program): every sample's comm in `read --script` is its own thread's name
/// at that time, as `perf script` prints it (the oracle, sample by sample, by pid/tid and
/// time stamp), and the program of the recording is the parent (its exec COMM record).
#[test]
fn read_script_comm_per_thread_across_fork_exec_and_rename() {
    let t = "read_script_comm_per_thread_across_fork_exec_and_rename";
    if !have("perf") {
        return skip_test(t, "perf is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.c"), dir.path().join("b.c"));
    std::fs::write(&a, FORK_EXEC).unwrap();
    std::fs::write(&b, EXECED).unwrap();
    let parent = proftrust_testkit::gcc(&dir.path().join("forkparent"), &[&a], &["-pthread"]);
    let child = proftrust_testkit::gcc(&dir.path().join("execedchild"), &[&b], &[]);
    let pd = dir.path().join("tree.perf.data");
    let rec = Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-F", "2000", "-o"])
        .arg(&pd)
        .arg("--")
        .arg(&parent)
        .arg(&child)
        .output()
        .unwrap();
    if !rec.status.success() {
        return skip_test(
            t,
            &format!(
                "perf record cannot record here: {}",
                String::from_utf8_lossy(&rec.stderr)
            ),
        );
    }
    // (pid/tid, time, comm) per sample line; perf prints `comm pid/tid time:`, ours has a
    // `[cpu]` between: the comm is what precedes the pid/tid token.
    let rows = |out: &[u8]| -> Vec<(String, String, String)> {
        let mut v: Vec<(String, String, String)> = String::from_utf8_lossy(out)
            .lines()
            .filter(|l| !l.starts_with(['\t', '#']) && !l.trim().is_empty())
            .filter_map(|l| {
                let toks: Vec<&str> = l.split_whitespace().collect();
                let p = toks.iter().position(|x| {
                    x.split_once('/')
                        .is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok())
                })?;
                let time = toks[p + 1..].iter().find(|x| x.ends_with(':'))?;
                Some((toks[p].to_string(), time.to_string(), toks[..p].join(" ")))
            })
            .collect();
        v.sort();
        v
    };
    let ours = proftrust(&["read", "--script", pd.to_str().unwrap()]);
    assert!(
        ours.status.success(),
        "{}",
        String::from_utf8_lossy(&ours.stderr)
    );
    let perf = Command::new("perf")
        .args(["script", "--ns", "-F", "comm,pid,tid,time,ip", "-i"])
        .arg(&pd)
        .output()
        .unwrap();
    assert!(perf.status.success());
    let (x, y) = (rows(&ours.stdout), rows(&perf.stdout));
    assert!(x.len() > 300, "{} samples", x.len());
    assert_eq!(x.len(), y.len());
    let comms: std::collections::BTreeSet<&str> = y.iter().map(|r| r.2.as_str()).collect();
    // The three names the oracle shows: the program, the renamed thread, the exec'd child.
    for want in ["forkparent", "renamed worker", "execedchild"] {
        assert!(comms.contains(want), "perf script shows {comms:?}");
    }
    let diff: Vec<_> = x.iter().zip(&y).filter(|(a, b)| a != b).take(5).collect();
    assert!(diff.is_empty(), "first differences (ours, perf): {diff:?}");
    // The file's own names: the exec'd child's program shows under its name in the model.
    let opts = proftrust_formats::LoadOptions::default();
    let set = proftrust_formats::load_samples(proftrust_formats::Source::Path(&pd), &opts)
        .unwrap()
        .0;
    assert_eq!(set.program_comm(), Some("forkparent"));
    let child_pid = set
        .threads
        .iter()
        .find(|n| n.exec && n.comm == "execedchild")
        .map(|n| n.pid)
        .expect("an exec COMM record for the child");
    assert!(set.samples.iter().any(|s| s.pid == child_pid));
    assert!(child.exists());
}

/// Issue 31 item 7: a complete callgrind file whose `summary:` is a little off the sum of its
/// records (a gprof2dot test file was 0.04% apart; callgrind 3.21 files differ by 2) is
/// read, with a warning naming both numbers; `export` of it too. A file whose records fall
/// far short of its summary is still refused as cut short. Hand-computed: 6000 + 3996 = 9996
/// Ir against a stated 10000 (0.040%).
#[test]
fn callgrind_summary_a_little_off_is_read_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let text = "version: 1\ncreator: hand\npositions: instr\nevents: Ir\nsummary: 10000\n\
                fn=main\n0x1000 6000\nfn=work\n0x2000 3996\n";
    let f = dir.path().join("callgrind.out.1");
    std::fs::write(&f, text).unwrap();
    let warning = "its summary: line states 10000 Ir, its records add up to 9996 (short by 0.040%): the records are used";
    let v = read_json(&f, &[]);
    assert_eq!(v["total_instructions"], 9996, "{v}");
    assert_eq!(v["warnings"][0]["message"], warning, "{v}");
    assert_eq!(v["warnings"][0]["kind"], "input", "{v}");
    let o = proftrust(&["read", f.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains(warning), "{err}");
    let folded = dir.path().join("cg.folded");
    let o = proftrust(&[
        "export",
        f.to_str().unwrap(),
        "--to",
        "folded",
        "-o",
        folded.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains(warning), "{err}");
    // No binary names the addresses: the records' total, under one frame.
    assert_eq!(
        std::fs::read_to_string(&folded).unwrap(),
        "[unknown] 9996\n"
    );
    // Half the records gone: cut short, refused.
    let cut = dir.path().join("callgrind.out.2");
    std::fs::write(&cut, text.replace("3996", "1000")).unwrap();
    fails_with(&["read", cut.to_str().unwrap()], "cut short");
}
