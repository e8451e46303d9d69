//! Issue 20 and the rest of issue 19, one labelled case per finding (each failed before the
//! fix): output paths (devices, FIFOs, directories, modes, no temporaries), numeric flags
//! (panics, aborts, hangs, absurd memory), silent wrong answers (QEMU that never ran the
//! program, `correct --truth` of another program, NaN shares), process odds (daemons,
//! abnormal ends in text output; the hostile-names fixture through every output is
//! `hostile.rs`). Plus `audit` of a forking and of an exec'ing program: both sides cover
//! the same process, and the warning says what was left out.

use proftrust_testkit::need;
use serde_json::Value;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn proftrust() -> Command {
    Command::new(env!("CARGO_BIN_EXE_proftrust"))
}

fn c_source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{name}.c"))
}

fn compile(dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    let st = Command::new("gcc")
        .args(["-O1", "-g"])
        .arg(c_source(name))
        .arg("-o")
        .arg(&out)
        .status()
        .expect("run gcc");
    assert!(st.success(), "gcc {name}");
    out
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A clean refusal: exit status 2, the needle in stderr, no panic.
fn assert_refused(label: &str, o: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{label}: {}", text(o));
    assert!(!err.contains("panicked"), "{label}: {err}");
    assert!(
        err.to_lowercase().contains(&needle.to_lowercase()),
        "{label}: expected {needle:?} in {err}"
    );
}

/// Files named like a temporary in `dir`.
fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') && n.contains("proftrust"))
        .collect()
}

/// An x86-64 ELF turned into an AArch64 one (`e_machine` = 183): QEMU and valgrind refuse
/// to run it.
fn foreign_elf(dir: &Path, from: &Path) -> PathBuf {
    let mut b = std::fs::read(from).unwrap();
    b[18] = 183;
    b[19] = 0;
    let p = dir.join("arm-elf");
    std::fs::write(&p, b).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn output_paths_table() {
    if !need("output_paths_table", &["gcc"]) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let prog = compile(dir, "spin");
    let run = |out: &Path| {
        proftrust()
            .args(["-q", "record", "-o"])
            .arg(out)
            .arg("--")
            .arg(&prog)
            .arg("0.05")
            .output()
            .unwrap()
    };
    // 1. /dev/full: the device's error; it stays a device.
    if Path::new("/dev/full").exists() {
        let o = run(Path::new("/dev/full"));
        assert_refused("record -o /dev/full", &o, "no space left");
        assert!(std::fs::metadata("/dev/full")
            .unwrap()
            .file_type()
            .is_char_device());
    }
    // 2. /dev/null: written in place, stays a device.
    let o = run(Path::new("/dev/null"));
    assert!(o.status.success(), "{}", text(&o));
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    // 3. a directory: refused before the program runs, no temporary left.
    let marker = dir.join("ran");
    let o = proftrust()
        .args(["-q", "record", "-o"])
        .arg(dir)
        .args(["--", "sh", "-c"])
        .arg(format!("touch {}", marker.display()))
        .output()
        .unwrap();
    assert_refused("record -o DIR", &o, "is a directory");
    assert!(
        !marker.exists(),
        "the program ran before the output was checked"
    );
    assert!(temporaries(dir).is_empty(), "{:?}", temporaries(dir));
    // 4. an existing 0600 file keeps its mode.
    let private = dir.join("private.ptsamp");
    std::fs::write(&private, "old").unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = run(&private);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::metadata(&private).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(std::fs::read(&private).unwrap().starts_with(b"PTSAMP"));
    // 5. a missing directory: refused up front.
    let o = run(&dir.join("no/such/x.ptsamp"));
    assert_refused("record -o no/such/x", &o, "no/such");
    // 6. a FIFO is written in place.
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let reader = {
        let f = fifo.clone();
        std::thread::spawn(move || std::fs::read(f).unwrap())
    };
    let o = run(&fifo);
    assert!(o.status.success(), "{}", text(&o));
    assert!(reader.join().unwrap().starts_with(b"PTSAMP"));
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    // 7. every writer refuses a directory the same way (no "os error 21" twice).
    for args in [
        vec![
            "simulate", "sampling", "--preset", "table2", "--reps", "2", "-o",
        ],
        vec!["calibrate", "--vpmu", "--passes", "10", "--json"],
    ] {
        let mut c = proftrust();
        c.args(&args);
        if args[0] == "simulate" {
            c.arg(dir);
        }
        let o = c.output().unwrap();
        if args[0] == "simulate" {
            assert_refused("simulate -o DIR", &o, "is a directory");
        }
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !err.contains("(os error 21): Is a directory (os error 21)"),
            "{err}"
        );
    }
    let o = proftrust().args(["read"]).arg(dir).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2));
    // Said once ("is a directory" or the OS's "Is a directory (os error 21)"), not twice.
    assert_eq!(
        err.to_lowercase().matches("is a directory").count(),
        1,
        "{err}"
    );
}

/// Issue 20 "panics and aborts from flag values" and "wrong answers accepted silently":
/// each case is refused with exit status 2 naming the flag or the problem.
#[test]
fn absurd_flags_table() {
    if !need("absurd_flags_table", &["gcc"]) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let prog = compile(dir, "spin");
    let p = prog.to_str().unwrap();
    let out = dir.join("o").display().to_string();
    let mut cases: Vec<(String, Vec<String>, &str)> = Vec::new();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    for bad in ["1e30", "NaN", "-1", "0", "inf"] {
        for cmd in [
            vec!["record", "-o", &out],
            vec!["truth", "-o", &out],
            vec!["audit"],
            vec!["vpmu", "-o", &out],
            vec!["paths"],
            vec!["cct"],
            vec!["vpp"],
        ] {
            let mut a = s(&cmd);
            a.extend(s(&[&format!("--timeout={bad}"), "--", p, "0.01"]));
            cases.push((format!("{} --timeout {bad}", cmd[0]), a, "--timeout"));
        }
    }
    let more: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            // Issue 32 item 10: docs say 1 to 4194304 (PID_MAX_LIMIT); 2^31-1 was taken.
            "record --pid 4194305",
            vec!["record", "--pid", "4194305"],
            "--pid",
        ),
        (
            "simulate --reps u64::MAX",
            vec![
                "simulate",
                "sampling",
                "--preset",
                "table2",
                "--reps",
                "18446744073709551615",
            ],
            "needs ~",
        ),
        (
            "simulate --reps 1e12",
            vec![
                "simulate", "sampling", "--preset", "table2", "--reps", "1e12",
            ],
            "needs ~",
        ),
        (
            "calibrate --light 4e9",
            vec!["calibrate", "--vpmu", "--light", "4e9"],
            "--light",
        ),
        (
            "calibrate --passes 2^64-1",
            vec!["calibrate", "--vpmu", "--passes", "18446744073709551615"],
            "--passes",
        ),
        (
            "calibrate --passes x --light",
            vec![
                "calibrate",
                "--vpmu",
                "--passes",
                "1000000000",
                "--light",
                "1000000",
            ],
            "instructions to replay",
        ),
        (
            "correct --skid 1000000",
            vec![
                "correct",
                "--skid",
                "1000000",
                "--samples",
                &out,
                "--binary",
                p,
            ],
            "--skid",
        ),
        (
            "correct --skid 10000",
            vec![
                "correct",
                "--skid",
                "10000",
                "--samples",
                &out,
                "--binary",
                p,
            ],
            "--skid",
        ),
        (
            "correct --skid NaN",
            vec!["correct", "--skid", "NaN", "--samples", &out, "--binary", p],
            "--skid",
        ),
        (
            "correct --hot-share 2",
            vec![
                "correct",
                "--skid",
                "3",
                "--hot-share",
                "2",
                "--samples",
                &out,
                "--binary",
                p,
            ],
            "--hot-share",
        ),
        (
            "vpmu --period 1",
            vec!["vpmu", "--period", "1", "-o", &out, "--", p],
            "--period",
        ),
        (
            "audit --rank-threshold NaN",
            vec!["audit", "--rank-threshold", "NaN", "--", p],
            "--rank-threshold",
        ),
        (
            "audit --rank-threshold 2",
            vec!["audit", "--rank-threshold", "2", "--", p],
            "--rank-threshold",
        ),
        (
            "paths --cover 0",
            vec!["paths", "--cover", "0", "--", p],
            "--cover",
        ),
        (
            "paths --cover NaN",
            vec!["paths", "--cover", "NaN", "--", p],
            "--cover",
        ),
        (
            "paths --hot-share -1",
            vec!["paths", "--hot-share=-1", "--", p],
            "--hot-share",
        ),
        (
            "simulate --util 1",
            vec!["simulate", "sampling", "--preset", "sweep", "--util", "1"],
            "--util",
        ),
        (
            "simulate --r NaN",
            vec!["simulate", "sampling", "--preset", "sweep", "--r", "NaN"],
            "--r",
        ),
        (
            "record -F 0",
            vec!["record", "-F", "0", "-o", &out, "--", p],
            "--freq",
        ),
        (
            "vpp --bins 0",
            vec!["vpp", "--bins", "0", "--", p],
            "--bins",
        ),
        (
            "vpp --load 1000",
            vec!["vpp", "--source", "probe", "--load", "1000", "--", p],
            "--load",
        ),
        (
            "inspect --simple-loop-cap huge",
            vec!["inspect", "--simple-loop-cap", "18446744073709551615", p],
            "--simple-loop-cap",
        ),
        (
            "vpmu --skid-dist NaN",
            vec!["vpmu", "--skid-dist", "normal:NaN:1", "-o", &out, "--", p],
            "--skid-dist",
        ),
    ];
    for (label, args, needle) in more {
        cases.push((label.to_string(), s(&args), needle));
    }
    for (label, args, needle) in &cases {
        let started = Instant::now();
        let o = proftrust().args(args).output().unwrap();
        assert_refused(label, &o, needle);
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{label}: took {:?}",
            started.elapsed()
        );
    }
    assert!(temporaries(dir).is_empty());
}

/// QEMU or valgrind that never run the program: an error with their message, not an empty
/// profile with exit status 0 (`truth`, `paths`, `vpp`, `audit`).
#[test]
fn failed_starts_are_errors_with_the_tools_message() {
    if !need(
        "failed_starts_are_errors_with_the_tools_message",
        &["gcc", "qemu-x86_64", "valgrind"],
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let prog = compile(dir, "spin");
    let arm = foreign_elf(dir, &prog);
    let out = dir.join("t.ptexact");
    let p = prog.to_str().unwrap();
    let a = arm.to_str().unwrap();
    let o_ = out.to_str().unwrap();
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "truth --cpu bogus",
            vec!["truth", "--cpu", "bogus", "-o", o_, "--", p, "0.01"],
            "unable to find CPU model",
        ),
        (
            "truth on an AArch64 ELF",
            vec!["truth", "-o", o_, "--", a],
            "runs x86-64 programs only",
        ),
        (
            "truth --backend callgrind on an AArch64 ELF",
            vec!["truth", "--backend", "callgrind", "-o", o_, "--", a],
            "runs x86-64 programs only",
        ),
        (
            "paths --cpu bogus",
            vec!["paths", "--cpu", "bogus", "--", p, "0.01"],
            "unable to find CPU model",
        ),
        (
            "vpp --cpu bogus",
            vec!["vpp", "--cpu", "bogus", "--", p, "0.01"],
            "unable to find CPU model",
        ),
        (
            "vpmu on an AArch64 ELF",
            vec!["vpmu", "-o", o_, "--", a],
            "runs x86-64 programs only",
        ),
    ];
    for (label, args, needle) in cases {
        let o = proftrust().args(&args).output().unwrap();
        // The message is the up-front check's or the tool's own (on stderr above the error, or in it).
        assert_refused(label, &o, needle);
        assert!(!out.exists(), "{label}: wrote an output");
    }
}

/// A daemonised grandchild neither delays the end nor keeps running (QEMU and callgrind);
/// `paths` and `cct` say in their text output how the program ended.
#[test]
fn daemons_and_abnormal_ends() {
    if !need(
        "daemons_and_abnormal_ends",
        &["gcc", "qemu-x86_64", "valgrind"],
    ) {
        return;
    }
    let d = tempfile::Builder::new()
        .prefix("pt-daemon-")
        .tempdir()
        .unwrap();
    let dir = d.path();
    let prog = compile(dir, "spin");
    let needle = dir.to_string_lossy().into_owned();
    for backend in ["qemu", "callgrind"] {
        let started = Instant::now();
        let o = proftrust()
            .args(["-q", "truth", "--backend", backend, "-o"])
            .arg(dir.join("d.ptexact"))
            .arg("--")
            .arg(&prog)
            .args(["0.3", "daemon"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{backend}: {}", text(&o));
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{backend}: waited {:?} for the daemon",
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(300));
        let left: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.contains(&needle))
            .collect();
        assert!(left.is_empty(), "{backend}: {left:?}");
    }
    // paths and cct, text output: exit 3, SIGSEGV, SIGKILL.
    let script = |body: &str| -> PathBuf {
        let src = dir.join("end.c");
        std::fs::write(
            &src,
            format!(
                "#include <signal.h>\n#include <stdlib.h>\nint main(void) {{ {body} return 0; }}\n"
            ),
        )
        .unwrap();
        let exe = dir.join(format!("end{}", body.len()));
        assert!(Command::new("gcc")
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .status()
            .unwrap()
            .success());
        exe
    };
    for (body, said) in [
        ("exit(3);", "exited with status 3, which usually means it failed: WHAT may show its error path rather than its normal work; check its arguments and input"),
        ("raise(SIGSEGV);", "was killed by SIGSEGV (it crashed): WHAT cover the run up to the crash; fix the crash, or profile an input it completes"),
        ("raise(SIGKILL);", "was killed by SIGKILL: WHAT cover the run up to then; run it where nothing kills it to cover the whole run"),
    ] {
        let exe = script(body);
        for (cmd, what) in [("paths", "the paths"), ("cct", "the contexts")] {
            let said = format!("warning: the program {}", said.replace("WHAT", what));
            let o = proftrust()
                .args(["-q", cmd, "--cpi-model", "flat", "--"])
                .arg(&exe)
                .output()
                .unwrap();
            assert!(o.status.success(), "{cmd} {body}: {}", text(&o));
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(out.lines().any(|l| l == said), "{cmd} {body}: {said}\n{out}");
        }
    }
}

/// `correct --truth` of another program is refused like `audit` refuses the pair.
#[test]
fn correct_checks_the_truth_is_the_same_program() {
    if !need(
        "correct_checks_the_truth_is_the_same_program",
        &["gcc", "qemu-x86_64"],
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let spin = compile(dir, "spin");
    let forker = compile(dir, "forker");
    let samples = dir.join("s.ptsamp");
    let truth = dir.join("other.ptexact");
    let o = proftrust()
        .args(["-q", "vpmu", "--skid", "20", "-o"])
        .arg(&samples)
        .arg("--")
        .arg(&spin)
        .arg("0.2")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let o = proftrust()
        .args(["-q", "truth", "-o"])
        .arg(&truth)
        .arg("--")
        .arg(&forker)
        .arg("1000")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let o = proftrust()
        .args(["-q", "correct", "--skid", "20", "--samples"])
        .arg(&samples)
        .arg("--binary")
        .arg(&spin)
        .arg("--truth")
        .arg(&truth)
        .output()
        .unwrap();
    assert_refused(
        "correct --truth of another program",
        &o,
        "contains nothing from spin",
    );
}

fn json(o: &Output) -> Value {
    assert!(o.status.success(), "{}", text(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

/// The processes rows of an audit report as (name, start, sampled images, exact images,
/// compared).
fn process_rows(v: &Value) -> Vec<(String, String, u64, u64, bool)> {
    let mut r: Vec<_> = v["processes"]
        .as_array()
        .unwrap_or_else(|| panic!("no processes rows: {v}"))
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["start"].as_str().unwrap().to_string(),
                r["sampled_images"].as_u64().unwrap(),
                r["exact_images"].as_u64().unwrap(),
                r.get("left_out").is_none(),
            )
        })
        .collect();
    r.sort();
    r
}

/// A forking program: the child is counted on both sides (it was left out of the samples
/// while the exact side counted the parent alone), the rows say so, and both work
/// functions are compared. Oracle: the program's own loop lengths (n in the parent, 3n in
/// the child): child_work holds about 3/4 of the exact count, and epsilon stays small. An
/// exec'ing program: the exec'd image (spin) is compared on both sides too.
#[test]
fn audit_of_forking_and_execing_programs_covers_the_same_process() {
    if !need(
        "audit_of_forking_and_execing_programs_covers_the_same_process",
        &["gcc", "qemu-x86_64"],
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let forker = compile(dir, "forker");
    let o = proftrust()
        .args([
            "-q",
            "audit",
            "--backend",
            "qemu",
            "--json",
            "-o",
            "-",
            "--",
        ])
        .arg(&forker)
        .arg("60000000")
        .output()
        .unwrap();
    let v = json(&o);
    assert_eq!(
        process_rows(&v),
        vec![
            ("forker".into(), "forked".into(), 1, 1, true),
            ("forker".into(), "started".into(), 1, 1, true),
        ]
    );
    let funcs = v["functions"].as_array().unwrap();
    let child = funcs
        .iter()
        .find(|f| f["name"] == "child_work")
        .unwrap_or_else(|| panic!("child_work not compared: {funcs:?}"));
    let share = child["exact_share"].as_f64().unwrap();
    assert!((0.65..0.85).contains(&share), "{child}");
    assert!(child["samples"].as_u64().unwrap() > 0, "{child}");
    let eps = v["metrics"]["epsilon_function"].as_f64().unwrap();
    assert!(eps < 0.2, "epsilon {eps}");

    let execer = compile(dir, "execer");
    let spin = compile(dir, "spin");
    let o = proftrust()
        .args([
            "-q",
            "audit",
            "--backend",
            "qemu",
            "--json",
            "-o",
            "-",
            "--binary",
        ])
        .arg(&spin)
        .arg("--")
        .arg(&execer)
        .arg("60000000")
        .arg(&spin)
        .arg("0.5")
        .output()
        .unwrap();
    let v = json(&o);
    assert_eq!(
        process_rows(&v),
        vec![
            ("execer".into(), "started, then exec".into(), 1, 1, true),
            ("spin".into(), "exec".into(), 1, 1, true),
        ]
    );
    let funcs = v["functions"].as_array().unwrap();
    let spin_work = funcs
        .iter()
        .find(|f| f["name"] == "spin_work")
        .unwrap_or_else(|| panic!("spin_work not compared: {funcs:?}"));
    assert!(
        spin_work["exact_instructions"].as_u64().unwrap() > 0,
        "{spin_work}"
    );
    assert!(spin_work["samples"].as_u64().unwrap() > 0, "{spin_work}");
}

/// A program whose path holds a newline is audited (issue 32: the exact side named it
/// `\012`, as /proc/PID/maps writes it, the samples with the newline, and the two did not
/// meet).
#[test]
fn audit_of_a_program_whose_path_holds_a_newline() {
    if !need(
        "audit_of_a_program_whose_path_holds_a_newline",
        &["gcc", "qemu-x86_64"],
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let odd = d.path().join("a\nb");
    std::fs::create_dir(&odd).unwrap();
    let spin = compile(&odd, "spin");
    let o = proftrust()
        .args([
            "-q",
            "audit",
            "--backend",
            "qemu",
            "--json",
            "-o",
            "-",
            "--",
        ])
        .arg(&spin)
        .arg("0.3")
        .output()
        .unwrap();
    let v = json(&o);
    let funcs = v["functions"].as_array().unwrap();
    let spin_work = funcs
        .iter()
        .find(|f| f["name"] == "spin_work")
        .unwrap_or_else(|| panic!("spin_work not compared: {funcs:?}"));
    assert!(spin_work["samples"].as_u64().unwrap() > 0, "{spin_work}");
    assert!(
        spin_work["exact_instructions"].as_u64().unwrap() > 0,
        "{spin_work}"
    );
    assert!(
        v["config"]["binary"].as_str().unwrap().contains("a\nb"),
        "{}",
        v["config"]
    );
}

/// Silent accepts (issue 32) are refused before any run: an empty file as the program
/// (callgrind ran /bin/sh on it and exited 0), a `PROFTRUST_QEMU_PLUGIN` naming a missing
/// file (the built-in plugin was used instead), `--size` beyond its range (4294967296 ran
/// for days).
#[test]
fn silent_accepts_are_refused_up_front() {
    let d = tempfile::tempdir().unwrap();
    let empty = d.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    std::fs::set_permissions(&empty, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = d.path().join("t.ptexact");
    for backend in ["callgrind", "qemu"] {
        let o = proftrust()
            .args(["truth", "--backend", backend, "-o"])
            .arg(&out)
            .arg("--")
            .arg(&empty)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{backend}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("an empty file is not a program"),
            "{backend}: {err}"
        );
        assert!(!out.exists());
    }
    let text_file = d.path().join("notes");
    std::fs::write(&text_file, b"echo hi\n").unwrap();
    std::fs::set_permissions(&text_file, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = proftrust()
        .args(["audit", "--"])
        .arg(&text_file)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("neither an ELF program nor a #! script"),
        "{}",
        text(&o)
    );
    let o = proftrust()
        .env("PROFTRUST_QEMU_PLUGIN", d.path().join("no-such-plugin.so"))
        .args(["truth", "-o"])
        .arg(&out)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("$PROFTRUST_QEMU_PLUGIN=") && err.contains("no such file"),
        "{err}"
    );
    let o = proftrust()
        .args(["truth", "--workload", "mcf", "--size", "4294967296", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("expected 1 to 10000"),
        "{}",
        text(&o)
    );
}

/// SIGKILL of `truth --backend callgrind` leaves its directory of valgrind files (nothing
/// can remove it then); the next callgrind run removes it (its lock is free), and leaves
/// alone a directory whose run still holds its lock.
#[test]
fn a_callgrind_directory_left_by_sigkill_is_removed_by_the_next_run() {
    if !need(
        "a_callgrind_directory_left_by_sigkill_is_removed_by_the_next_run",
        &["gcc", "valgrind"],
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let tmp = d.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let spin = compile(d.path(), "spin");
    let dirs = || -> Vec<PathBuf> {
        std::fs::read_dir(&tmp)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("proftrust-cg-"))
            .map(|e| e.path())
            .collect()
    };
    let mut child = proftrust()
        .env("TMPDIR", &tmp)
        .args(["-q", "truth", "--backend", "callgrind", "-o"])
        .arg(d.path().join("k.ptexact"))
        .arg("--")
        .arg(&spin)
        .arg("10")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while dirs().is_empty() && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    let left = dirs();
    assert_eq!(
        left.len(),
        1,
        "the run made no directory, or several: {left:?}"
    );
    // Wait for the watchdog to end valgrind (it holds nothing of the lock: the lock is
    // proftrust's own descriptor).
    std::thread::sleep(Duration::from_millis(500));
    let o = proftrust()
        .env("TMPDIR", &tmp)
        .args(["-q", "truth", "--backend", "callgrind", "-o"])
        .arg(d.path().join("n.ptexact"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(dirs().is_empty(), "left: {:?}", dirs());
}

/// Issue 32 item 10: a full disk (`/dev/full`: every write fails with ENOSPC) under
/// `cct --folded` and `vpp --svg` is an error naming the file.
#[test]
fn a_full_disk_names_the_file() {
    if !need("a_full_disk_names_the_file", &["gcc", "qemu-x86_64"]) {
        return;
    }
    if !Path::new("/dev/full").exists() {
        proftrust_testkit::skip!("a_full_disk_names_the_file: no /dev/full");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let prog = compile(d.path(), "spin");
    for (label, flag) in [("cct", "--folded"), ("vpp", "--svg")] {
        let o = proftrust()
            .args([label, flag, "/dev/full", "--"])
            .arg(&prog)
            .arg("0.001")
            .output()
            .unwrap();
        assert_refused(label, &o, "cannot write /dev/full: No space left on device");
    }
}

/// Issue 32 item 4: readers look at the format before they read the rest. A 50 GB sparse
/// file of zeros and the endless `/dev/zero` are refused as an unknown format by `read`,
/// `check` and `export` (they were read whole: past 60 s, or until memory ran out); a 50 GB
/// file that starts as a perf.data under an address-space limit of 4 GB (`ulimit -v`) is an
/// error naming its size, not an abort with "memory allocation of 53687091200 bytes failed".
#[test]
fn huge_inputs_are_refused_before_they_are_read() {
    let d = tempfile::tempdir().unwrap();
    let zeros = d.path().join("zeros.data");
    std::fs::File::create(&zeros)
        .unwrap()
        .set_len(50 << 30)
        .unwrap();
    let out = d.path().join("x.folded");
    for input in [zeros.as_path(), Path::new("/dev/zero")] {
        if !input.exists() {
            continue;
        }
        let runs: [&[&str]; 3] = [&["read"], &["check"], &["export", "--to", "folded", "-o"]];
        for args in runs {
            let started = Instant::now();
            let mut c = proftrust();
            c.args(args);
            if args[0] == "export" {
                c.arg(&out);
            }
            let o = c.arg(input).output().unwrap();
            let label = format!("{args:?} {}", input.display());
            assert_refused(&label, &o, "unknown file format");
            // Not a timing test: a reader that read the input whole would take minutes or
            // never end (/dev/zero); this bound only catches that.
            assert!(started.elapsed() < Duration::from_secs(60), "{label}");
        }
    }
    assert!(!out.exists());
    let big = d.path().join("big.data");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&big).unwrap();
        f.write_all(b"PERFILE2").unwrap();
        f.set_len(50 << 30).unwrap();
    }
    for cmd in ["read", "check"] {
        let o = Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 4000000 && exec \"$0\" \"$@\"")
            .arg(env!("CARGO_BIN_EXE_proftrust"))
            .args([cmd, big.to_str().unwrap()])
            .output()
            .unwrap();
        assert_refused(cmd, &o, "53687091200 bytes cannot be mapped into memory");
    }
}
