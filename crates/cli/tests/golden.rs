//! Golden tests: the text and JSON output of every subcommand on deterministic inputs,
//! compared byte for byte with the files in `tests/golden/expected/` (see docs/testing.md).
//!
//! Inputs: the freestanding program `tests/golden/fixtures/tiny.c` (no C library, so its
//! exact counts depend on nothing but its code), its committed binary `tiny`, and files made
//! from it by `tests/golden/fixtures/make.sh` (exact counts, seeded virtual-PMU samples, a
//! callgrind file, a perf.data and its `perf script`). Commands that run the program (truth,
//! vpmu, paths, cct, vpp, calibrate --vpmu) run the committed binary under QEMU, whose guest
//! instruction stream is deterministic; the simulations are seeded.
//!
//! Masked (replaced by a placeholder before the comparison), because they genuinely vary
//! between machines or runs: the test's temporary directory (`[DIR]`), the directory of the
//! proftrust build holding the QEMU plugin (`[BUILD]`, whichever of its two copies is newer), the version strings of qemu-x86_64 and
//! valgrind (`[QEMU-VERSION]`, `[VALGRIND-VERSION]`), proftrust's own version where a report
//! states it (`[VERSION]`), valgrind's pid in the banner it prints
//! (`==PID==`), and in `record`'s output, which samples
//! a real run by time, every number (`N`). Nothing else is masked.
//!
//! A missing expected file fails. Re-bless after an intended change with
//! `PROFTRUST_BLESS=1 cargo test --release -p proftrust --test golden` and review `git diff`.

use proftrust_testkit::{assert_golden, need, Masks};
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_proftrust");
const VERSION: &str = env!("CARGO_PKG_VERSION");

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// A scratch directory holding a copy of the fixtures; every command runs in it.
struct Sandbox {
    dir: tempfile::TempDir,
    masks: Masks,
}

impl Sandbox {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        for entry in std::fs::read_dir(golden_dir().join("fixtures")).expect("fixtures") {
            let p = entry.expect("fixture").path();
            std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).expect("copy fixture");
        }
        // The recorded fixtures (perf.data, perf script, ptsamp) name the program where
        // make.sh ran it, /tmp/proftrust-golden/tiny, and proftrust finds the binary by that
        // recorded path as perf does: put the committed binary there when it is missing
        // (a fresh machine), or the reports lose their symbols.
        let recorded = Path::new("/tmp/proftrust-golden/tiny");
        if !recorded.exists() {
            let tmp = recorded.with_extension(format!("tmp{}", std::process::id()));
            _ = std::fs::create_dir_all(recorded.parent().unwrap());
            if std::fs::copy(golden_dir().join("fixtures/tiny"), &tmp).is_ok() {
                _ = std::fs::rename(&tmp, recorded);
            }
        }
        let build = Path::new(BIN).parent().unwrap().to_path_buf();
        let canonical = dir.path().canonicalize().unwrap();
        let masks = Masks::new()
            .add(canonical.display().to_string(), "[DIR]")
            .add(dir.path().display().to_string(), "[DIR]")
            // Cargo leaves the plugin in target/*/ and target/*/deps/; proftrust takes the
            // newer copy, which depends on the build order.
            .add(
                format!("{}/deps/libproftrust_qemu_plugin.so", build.display()),
                "[BUILD]/libproftrust_qemu_plugin.so",
            )
            .add(build.display().to_string(), "[BUILD]")
            .add(
                tool_version("qemu-x86_64", "--version", "version "),
                "[QEMU-VERSION]",
            )
            .add(
                tool_version("valgrind", "--version", "valgrind-"),
                "[VALGRIND-VERSION]",
            )
            // The kernel release the audit stores among its tool versions.
            .add(kernel_release(), "[KERNEL]")
            .add(
                format!("\"proftrust_version\": \"{VERSION}\""),
                "\"proftrust_version\": \"[VERSION]\"",
            )
            .add(
                format!("<th>proftrust</th><td class=\"mono\">{VERSION}</td>"),
                "<th>proftrust</th><td class=\"mono\">[VERSION]</td>",
            );
        Sandbox { dir, masks }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs `proftrust ARGS` in the sandbox with a fixed environment and returns the
    /// transcript: the command, stdout, stderr (when not empty) and the exit status.
    fn run(&self, args: &[&str]) -> String {
        let out = Command::new(BIN)
            .args(args)
            .current_dir(self.dir.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LC_ALL", "C")
            .output()
            .expect("run proftrust");
        let mut t = format!("$ proftrust {}\n", args.join(" "));
        t.push_str(&String::from_utf8_lossy(&out.stdout));
        if !t.ends_with('\n') {
            t.push('\n');
        }
        if !out.stderr.is_empty() {
            t.push_str("--- stderr\n");
            t.push_str(&String::from_utf8_lossy(&out.stderr));
            if !t.ends_with('\n') {
                t.push('\n');
            }
        }
        t.push_str(&format!("--- exit {}\n", out.status.code().unwrap_or(-1)));
        self.masks.apply(&t)
    }

    /// Runs each command and compares the transcripts, joined, with `expected/NAME.txt`.
    fn check(&self, name: &str, commands: &[&[&str]]) {
        let text: Vec<String> = commands.iter().map(|a| self.run(a)).collect();
        assert_golden(
            &golden_dir().join("expected").join(format!("{name}.txt")),
            &text.join("\n"),
        );
    }

    /// `check` of one JSON command into `expected/NAME.json` (stdout alone, as printed);
    /// stderr must be empty and the exit status 0.
    fn check_json(&self, name: &str, args: &[&str]) {
        let out = Command::new(BIN)
            .args(args)
            .current_dir(self.dir.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LC_ALL", "C")
            .output()
            .expect("run proftrust");
        let stdout = String::from_utf8(out.stdout).expect("JSON is UTF-8");
        assert!(
            out.status.success(),
            "proftrust {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str::<serde_json::Value>(&stdout)
            .unwrap_or_else(|e| panic!("proftrust {args:?}: not JSON ({e})"));
        assert_golden(
            &golden_dir().join("expected").join(format!("{name}.json")),
            &self.masks.apply(&stdout),
        );
    }

    /// The contents of a text file a command wrote, masked, after a `--- file NAME` line.
    fn file(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.path(name))
            .unwrap_or_else(|e| panic!("{name} was not written: {e}"));
        format!("--- file {name}\n{}", self.masks.apply(&text))
    }
}

/// `uname -r`: the kernel release the audit stores among its tool versions.
fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// The version in the first line of `tool FLAG` after `marker` (up to the end of the line),
/// or "" when the tool is absent.
fn tool_version(tool: &str, flag: &str, marker: &str) -> String {
    let Ok(out) = Command::new(tool).arg(flag).output() else {
        return String::new();
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().next().unwrap_or("");
    match line.find(marker) {
        Some(i) => line[i + marker.len()..].trim().to_string(),
        None => String::new(),
    }
}

/// valgrind's banner lines start with `==PID==`: the pid becomes `PID`.
fn valgrind_pids(text: &str) -> String {
    text.lines()
        .map(
            |l| match l.strip_prefix("==").and_then(|r| r.split_once("==")) {
                Some((pid, rest)) if pid.bytes().all(|b| b.is_ascii_digit()) => {
                    format!("==PID=={rest}\n")
                }
                _ => format!("{l}\n"),
            },
        )
        .collect()
}

#[test]
fn simulate() {
    let s = Sandbox::new();
    s.check(
        "simulate",
        &[
            &[
                "simulate", "sampling", "--preset", "table2", "--reps", "40", "--seed", "3",
            ],
            &[
                "simulate", "sampling", "--preset", "aliasing", "--reps", "40", "--seed", "3",
            ],
            &[
                "simulate",
                "sampling",
                "--preset",
                "fragmentation",
                "--reps",
                "40",
                "--seed",
                "3",
            ],
            &[
                "simulate",
                "sampling",
                "--preset",
                "sweep",
                "--reps",
                "40",
                "--seed",
                "3",
                "--r",
                "0.5,1,2.8",
            ],
        ],
    );
    s.check_json(
        "simulate-table4",
        &[
            "simulate", "sampling", "--preset", "table4", "--reps", "40", "--seed", "3", "--json",
        ],
    );
}

/// `calibrate` without `--vpmu` needs a hardware PMU (machine-dependent); the virtual PMU's
/// replay is deterministic.
#[test]
fn calibrate() {
    if !need("golden calibrate", &["qemu-x86_64"]) {
        return;
    }
    let s = Sandbox::new();
    s.check(
        "calibrate",
        &[
            &["calibrate", "--vpmu", "--passes", "2000", "--seed", "5"],
            &[
                "calibrate",
                "--vpmu",
                "--skid",
                "11",
                "--light",
                "40",
                "--period",
                "997",
                "--randomize",
                "--passes",
                "2000",
                "--seed",
                "5",
            ],
        ],
    );
    s.check_json(
        "calibrate",
        &[
            "calibrate",
            "--vpmu",
            "--passes",
            "2000",
            "--seed",
            "5",
            "--json",
        ],
    );
}

#[test]
fn analyze() {
    let s = Sandbox::new();
    s.check(
        "analyze",
        &[
            &["analyze", "granularity", "tiny.ptsamp", "--binary", "tiny"],
            &[
                "analyze",
                "granularity",
                "tiny.ptsamp",
                "--binary",
                "tiny",
                "--second-event",
                "1",
            ],
            &[
                "analyze",
                "granularity",
                "tiny.perf.data",
                "--binary",
                "tiny",
            ],
        ],
    );
    s.check_json(
        "analyze",
        &[
            "analyze",
            "granularity",
            "tiny.ptsamp",
            "--binary",
            "tiny",
            "--json",
        ],
    );
}

#[test]
fn read() {
    let s = Sandbox::new();
    s.check(
        "read",
        &[
            &["read", "tiny.ptsamp"],
            &["read", "tiny.ptsamp", "--binary", "tiny", "--top", "5"],
            &["read", "tiny.lbr.ptsamp", "--top", "5"],
            &["read", "tiny.ptexact"],
            &["read", "tiny.perf.data", "--binary", "tiny"],
            &["read", "tiny.perf-script", "--binary", "tiny"],
            &["read", "tiny.callgrind", "--binary", "tiny"],
        ],
    );
    s.check(
        "read-script",
        &[
            &["read", "tiny.ptexact", "--script"],
            &["read", "tiny.perf.data", "--script"],
        ],
    );
    for (name, file) in [
        ("read-ptsamp", "tiny.ptsamp"),
        ("read-ptexact", "tiny.ptexact"),
        ("read-perf-data", "tiny.perf.data"),
        ("read-perf-script", "tiny.perf-script"),
        ("read-callgrind", "tiny.callgrind"),
        ("read-lbr", "tiny.lbr.ptsamp"),
    ] {
        s.check_json(name, &["read", file, "--binary", "tiny", "--json"]);
    }
}

#[test]
fn fleet() {
    let s = Sandbox::new();
    // A store of four "hosts" from the committed fixtures: two virtual-PMU files (events
    // instructions:vpmu and cycles:vpmu) and the perf.data and its perf script (cpu-clock:u).
    // The ingest's own output names recording ids and times, so it is not compared.
    for (host, labels, file) in [
        ("a", "build=A", "tiny.ptsamp"),
        ("b", "build=B", "tiny.lbr.ptsamp"),
        ("c", "build=B", "tiny.perf.data"),
        ("d", "build=A", "tiny.perf-script"),
    ] {
        let t = s.run(&[
            "fleet", "ingest", "--host", host, "--labels", labels, "--out", "store", file,
        ]);
        assert!(t.ends_with("--- exit 0\n"), "{t}");
    }
    s.check(
        "fleet",
        &[
            &["fleet", "report", "store"],
            &[
                "fleet",
                "report",
                "store",
                "--event",
                "cpu-clock:u",
                "--level",
                "line",
            ],
            &["fleet", "diff", "store", "--a", "build=A", "--b", "build=B"],
        ],
    );
    s.check_json("fleet-report", &["fleet", "report", "store", "--json"]);
    s.check_json(
        "fleet-diff",
        &[
            "fleet", "diff", "store", "--a", "build=A", "--b", "build=B", "--json",
        ],
    );
    std::fs::create_dir(s.path("empty")).unwrap();
    s.check(
        "fleet-errors",
        &[
            &["fleet", "report", "missing"],
            &["fleet", "report", "empty"],
            &["fleet", "report", "store", "--event", "nope"],
            &["fleet", "diff", "store", "--a", "build=A", "--b", "team=x"],
            &["fleet", "diff", "store", "--a", "build=A", "--b", "build=Z"],
            &["fleet", "report", "store", "--engine", "spark://h:1"],
            &[
                "fleet",
                "ingest",
                "--host",
                "a/b",
                "--out",
                "store",
                "tiny.ptsamp",
            ],
            &[
                "fleet",
                "ingest",
                "--host",
                "e",
                "--labels",
                "build",
                "--out",
                "store",
                "tiny.ptsamp",
            ],
            &["fleet", "ingest", "--host", "e", "--out", "store", "tiny.c"],
        ],
    );
}

#[test]
fn inspect() {
    let s = Sandbox::new();
    s.check(
        "inspect",
        &[
            &["inspect", "tiny"],
            &["inspect", "tiny", "--function", "work"],
            &["inspect", "tiny", "--function", "walk", "--dot"],
        ],
    );
    s.check_json("inspect", &["inspect", "tiny", "--json"]);
    s.check_json(
        "inspect-work",
        &["inspect", "tiny", "--function", "work", "--json"],
    );
}

/// `proftrust audit --samples SAMPLES --truth TRUTH --binary tiny EXTRA...`.
fn audit_args<'a>(samples: &'a str, truth: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "audit",
        "--samples",
        samples,
        "--truth",
        truth,
        "--binary",
        "tiny",
    ];
    v.extend_from_slice(extra);
    v
}

#[test]
fn audit() {
    let s = Sandbox::new();
    let (samp, exact) = ("tiny.ptsamp", "tiny.ptexact");
    s.check(
        "audit",
        &[
            &audit_args(samp, exact, &[]),
            &audit_args(
                samp,
                exact,
                &[
                    "--sample-event",
                    "cycles:vpmu",
                    "--truth-weight",
                    "instructions",
                    "--top",
                    "3",
                ],
            ),
            &audit_args(samp, exact, &["--correct-skid", "3"]),
            &audit_args("tiny.perf.data", "tiny.callgrind", &[]),
            &audit_args("tiny.perf.data", exact, &[]),
            &audit_args("tiny.perf-script", exact, &[]),
            &audit_args(samp, exact, &["--html", "report.html"]),
        ],
    );
    let html = s.file("report.html");
    assert_golden(&golden_dir().join("expected/audit-html.txt"), &html);
    s.check_json("audit", &audit_args(samp, exact, &["--json"]));
    s.check_json(
        "audit-corrected",
        &audit_args(samp, exact, &["--correct-skid", "3", "--json"]),
    );
}

/// Issue 18: an audit of 2 samples printed Kendall tau 1, OD 0 and coverage 0.5 without a
/// word, and a function with one sample got the bias mark `!`. The first two samples of
/// `tiny.perf-script` (`leaf`, both) against the exact counts: every metric says it is too
/// few to judge, a warning names the minimum and the fix, and no row is marked `!`.
#[test]
fn audit_few_samples() {
    let s = Sandbox::new();
    let script = std::fs::read_to_string(s.path("tiny.perf-script")).unwrap();
    // The fixture's addresses are link-time offsets (`1080`); perf script prints this
    // non-PIE program's runtime addresses (`401080`), which is what the reader maps.
    let two: String = script
        .split("\n\n")
        .take(2)
        .map(|s| {
            s.lines()
                .map(|l| match l.trim_start().split_once(' ') {
                    Some((ip, rest)) if l.starts_with('\t') => format!(
                        "\t{:>16x} {rest}",
                        0x400000 + u64::from_str_radix(ip, 16).unwrap()
                    ),
                    _ => l.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
        + "\n";
    assert_eq!(two.matches("cpu-clock").count(), 2, "{two}");
    std::fs::write(s.path("two.perf-script"), &two).unwrap();
    let t = s.run(&audit_args("two.perf-script", "tiny.ptexact", &[]));
    assert!(t.contains("only 2 samples in the audited binary"), "{t}");
    for metric in ["epsilon (function)", "OD", "Kendall tau-b", "coverage"] {
        let line = t
            .lines()
            .find(|l| l.starts_with(metric))
            .unwrap_or_else(|| panic!("no {metric} row: {t}"));
        assert!(line.contains("too few to judge"), "{line}");
    }
    let table = t.split("function ").nth(1).expect("function table");
    assert!(
        !table.lines().any(|l| l.trim_end().ends_with('!')),
        "bias mark on two samples: {t}"
    );
    assert_golden(&golden_dir().join("expected/audit-few-samples.txt"), &t);
}

#[test]
fn correct() {
    let s = Sandbox::new();
    let base = [
        "correct",
        "--samples",
        "tiny.ptsamp",
        "--skid",
        "3",
        "--binary",
        "tiny",
    ];
    let with =
        |extra: &[&'static str]| -> Vec<&str> { base.iter().chain(extra).copied().collect() };
    s.check(
        "correct",
        &[
            &with(&[]),
            &with(&["--truth", "tiny.ptexact"]),
            &with(&[
                "--truth",
                "tiny.ptexact",
                "--solver",
                "gibbs",
                "--seed",
                "2",
            ]),
            &with(&["--truth", "tiny.ptexact", "--solver", "lsq"]),
        ],
    );
    s.check_json("correct", &with(&["--truth", "tiny.ptexact", "--json"]));
}

#[test]
fn truth() {
    if !need("golden truth", &["qemu-x86_64"]) {
        return;
    }
    let s = Sandbox::new();
    let mut text = s.run(&["truth", "-o", "out.ptexact", "--", "./tiny"]);
    text.push('\n');
    text.push_str(&s.run(&["read", "out.ptexact"]));
    if need("golden truth --backend callgrind", &["valgrind"]) {
        text.push('\n');
        text.push_str(&s.run(&[
            "truth",
            "--backend",
            "callgrind",
            "-o",
            "cg.ptexact",
            "--",
            "./tiny",
        ]));
        text.push('\n');
        text.push_str(&s.run(&["read", "cg.ptexact"]));
    }
    assert_golden(
        &golden_dir().join("expected/truth.txt"),
        &valgrind_pids(&text),
    );
}

#[test]
fn vpmu() {
    if !need("golden vpmu", &["qemu-x86_64"]) {
        return;
    }
    let s = Sandbox::new();
    s.check(
        "vpmu",
        &[
            &[
                "vpmu", "--skid", "3", "--period", "1009", "--seed", "7", "-o", "a.ptsamp", "--",
                "./tiny",
            ],
            &["read", "a.ptsamp"],
            &[
                "vpmu",
                "--skid-dist",
                "uniform:0:8",
                "--period",
                "997",
                "--randomize",
                "--seed",
                "9",
                "--cpi-model",
                "cache-sim",
                "-o",
                "b.ptsamp",
                "--exact",
                "b.ptexact",
                "--",
                "./tiny",
            ],
            &["read", "b.ptsamp"],
            &["read", "b.ptexact"],
        ],
    );
}

/// The out-of-order PMU modes: a TIP run with its time truth (`tip_cycles`), the audit of
/// its cycle samples against that truth (`--truth-weight time-model`), and a PEBS run.
#[test]
fn vpmu_modes() {
    if !need("golden vpmu modes", &["qemu-x86_64"]) {
        return;
    }
    let s = Sandbox::new();
    s.check(
        "vpmu-modes",
        &[
            &[
                "vpmu",
                "--mode",
                "tip",
                "--period",
                "101",
                "--seed",
                "7",
                "--cpi-model",
                "cache-sim",
                "-o",
                "t.ptsamp",
                "--exact",
                "t.ptexact",
                "--",
                "./tiny",
            ],
            &["read", "t.ptexact"],
            &[
                "audit",
                "--samples",
                "t.ptsamp",
                "--truth",
                "t.ptexact",
                "--binary",
                "tiny",
                "--sample-event",
                "cycles:vpmu",
                "--truth-weight",
                "time-model",
                "--top",
                "3",
            ],
            &[
                "audit",
                "--samples",
                "tiny.ptsamp",
                "--truth",
                "tiny.ptexact",
                "--binary",
                "tiny",
                "--truth-weight",
                "time-model",
            ],
            &[
                "vpmu", "--mode", "pebs", "--rob", "32", "--period", "997", "--seed", "7", "-o",
                "p.ptsamp", "--", "./tiny",
            ],
            &["read", "p.ptsamp"],
        ],
    );
}

#[test]
fn paths() {
    if !need("golden paths", &["qemu-x86_64"]) {
        return;
    }
    let s = Sandbox::new();
    s.check(
        "paths",
        &[
            &["paths", "--", "./tiny"],
            &[
                "paths",
                "--function",
                "work",
                "--cpi-model",
                "class",
                "--",
                "./tiny",
            ],
            &["paths", "--lbr", "tiny.lbr.ptsamp", "--", "./tiny"],
        ],
    );
    s.check_json("paths", &["paths", "--json", "--", "./tiny"]);
}

#[test]
fn cct() {
    if !need("golden cct", &["qemu-x86_64"]) {
        return;
    }
    let s = Sandbox::new();
    let mut text = s.run(&["cct", "--folded", "exact.folded", "--", "./tiny"]);
    text.push_str(&s.file("exact.folded"));
    text.push('\n');
    text.push_str(&s.run(&[
        "cct",
        "--samples",
        "tiny.perf.data",
        "--sampled-folded",
        "sampled.folded",
        "--",
        "./tiny",
    ]));
    text.push_str(&s.file("sampled.folded"));
    assert_golden(&golden_dir().join("expected/cct.txt"), &text);
    s.check_json(
        "cct",
        &[
            "cct",
            "--json",
            "--samples",
            "tiny.perf.data",
            "--",
            "./tiny",
        ],
    );
}

#[test]
fn vpp() {
    if !need("golden vpp", &["qemu-x86_64"]) {
        return;
    }
    let s = Sandbox::new();
    s.check(
        "vpp",
        &[
            &["vpp", "--", "./tiny"],
            &[
                "vpp",
                "--source",
                "lbr",
                "--lbr-file",
                "tiny.lbr.ptsamp",
                "--",
                "./tiny",
            ],
            &[
                "vpp",
                "--n-check",
                "5",
                "--n-instr",
                "2",
                "--randomize",
                "--seed",
                "4",
                "--no-cache",
                "--",
                "./tiny",
            ],
        ],
    );
    s.check_json("vpp", &["vpp", "--json", "--", "./tiny"]);
}

/// `record` samples a real run by time, so its numbers vary: only the shape of its output
/// (and of `read`'s summary of what it wrote) is golden, every number masked.
#[test]
fn record() {
    let s = Sandbox::new();
    let digits = |t: &str| -> String {
        let mut out = String::new();
        let mut in_num = false;
        for c in t.chars() {
            if c.is_ascii_digit() {
                if !in_num {
                    out.push('N');
                }
                in_num = true;
            } else {
                in_num = false;
                out.push(c);
            }
        }
        out
    };
    let rec = s.run(&[
        "record",
        "-e",
        "task-clock",
        "-c",
        "100003",
        "--seed",
        "3",
        "-o",
        "r.ptsamp",
        "--",
        "./tiny",
        "3000000",
    ]);
    if rec.contains("perf_event_open") && !rec.contains("--- exit 0") {
        proftrust_testkit::skip!("golden record: perf_event_open is not allowed here: {rec}");
        return;
    }
    // Which functions got samples varies with timing: `read`'s summary and table header only.
    let read = s.run(&["read", "r.ptsamp"]);
    let header: String = read
        .lines()
        .take_while(|l| !l.trim_start().starts_with("samples "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_golden(
        &golden_dir().join("expected/record.txt"),
        &digits(&format!("{rec}\n{header}")),
    );
}

#[test]
fn check() {
    let s = Sandbox::new();
    s.check(
        "check",
        &[
            &["check", "tiny.ptsamp", "--binary", "tiny", "--target", "1%"],
            &[
                "check",
                "tiny.ptsamp",
                "--binary",
                "tiny",
                "--event",
                "cycles:vpmu",
                "--interval",
                "auto",
                "--top",
                "3",
            ],
            &["check", "tiny.perf.data", "--binary", "tiny"],
            &["check", "tiny.perf-script", "--binary", "tiny"],
            &["check", "tiny.callgrind"],
        ],
    );
    s.check_json(
        "check",
        &["check", "tiny.ptsamp", "--binary", "tiny", "--json"],
    );
}

/// What a person reads holds no Rust debug text: every golden transcript (the stdout and
/// stderr of every command above, which the other tests hold byte for byte) is free of
/// `Some(`, `None`, struct literals (`Exited { code: 0 }`), enum values in parentheses
/// (`(CpuClock)`, `Constant(30)`) and empty debug lists (`[]`); JSON string values are no
/// CamelCase enum names (`"CpuClock"`).
#[test]
fn no_debug_text_in_outputs() {
    fn camel(w: &str) -> bool {
        let mut c = w.chars();
        c.next().is_some_and(|f| f.is_ascii_uppercase())
            && w.chars().all(|c| c.is_ascii_alphanumeric())
            && w.chars().skip(1).any(|c| c.is_ascii_lowercase())
            && w.chars().skip(1).any(|c| c.is_ascii_uppercase())
    }
    /// `Word(` or `(Word)` with `Word` a Rust-style identifier starting upper case.
    fn enum_value(line: &str) -> Option<String> {
        let b = line.as_bytes();
        for (i, _) in line.match_indices('(') {
            let before = line[..i]
                .rsplit(|c: char| !c.is_ascii_alphanumeric())
                .next()
                .unwrap_or("");
            if camel(before) || ["Some", "Constant", "Uniform", "Normal", "Raw"].contains(&before) {
                return Some(format!("{before}("));
            }
            let after: String = line[i + 1..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            if b.get(i + 1 + after.len()) == Some(&b')')
                && (camel(&after)
                    || ["Class", "Instructions", "Cycles", "Mixed"].contains(&after.as_str()))
            {
                return Some(format!("({after})"));
            }
        }
        None
    }
    let mut bad = Vec::new();
    let dir = golden_dir().join("expected");
    for entry in std::fs::read_dir(&dir).expect("expected/") {
        let p = entry.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let json = name.ends_with(".json");
        for (n, line) in text.lines().enumerate() {
            // The transcript's command line is what the user typed.
            if line.starts_with("$ proftrust ") || line.contains("<svg") || line.contains("<path") {
                continue;
            }
            let mut why = Vec::new();
            if json {
                if let Some((_, v)) = line.split_once("\": \"") {
                    let v = v.trim_end_matches(',').trim_end_matches('"');
                    if camel(v) {
                        why.push(format!("enum name {v:?}"));
                    }
                }
            } else {
                for pat in ["Some(", "None", " { ", "[]"] {
                    if line.contains(pat) {
                        why.push(format!("{pat:?}"));
                    }
                }
            }
            if let Some(e) = enum_value(line) {
                why.push(e);
            }
            if !why.is_empty() {
                bad.push(format!("{name}:{}: {} <- {line}", n + 1, why.join(", ")));
            }
        }
    }
    assert!(bad.is_empty(), "debug text in outputs:\n{}", bad.join("\n"));
}
