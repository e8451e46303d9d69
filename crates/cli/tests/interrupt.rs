//! Interrupts and process trees (docs/processes.md): every command that runs a program is
//! sent SIGINT, SIGTERM or SIGHUP at the start, in the middle and near the end of a run of
//! a program that lasts a known wall-clock time; and SIGKILL in the middle. Checks: proftrust
//! ends by the signal it received (a shell sees 128 + signal); the output is complete,
//! readable and marked "interrupted" (its outcome says which signal); afterwards no process
//! of the run remains (a scan of /proc for the fixture's directory in any command line: the
//! program, its forked child, its daemonised grandchild, QEMU, valgrind), also after
//! SIGKILL of proftrust.

use proftrust_testkit::need;
use serde_json::Value;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn proftrust() -> Command {
    Command::new(env!("CARGO_BIN_EXE_proftrust"))
}

fn compile(dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{name}.c"));
    let out = dir.join(name);
    let st = Command::new("gcc")
        .args(["-O1", "-g"])
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status()
        .expect("run gcc");
    assert!(st.success(), "gcc {name}");
    out
}

/// Pids of live processes (not zombies) whose command line mentions `needle`.
fn processes_with(needle: &str) -> Vec<(u32, String)> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, r)| r.split_whitespace().next().map(str::to_string))
            })
            .unwrap_or_default();
        // proftrust itself (and its watchdog) names the output in its command line.
        let ours = cmd.starts_with(env!("CARGO_BIN_EXE_proftrust"));
        if cmd.contains(needle) && state != "Z" && pid != std::process::id() && !ours {
            v.push((pid, cmd));
        }
    }
    v
}

/// Waits up to 5 s for every process mentioning `needle` to be gone; the survivors.
fn survivors(needle: &str) -> Vec<(u32, String)> {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let v = processes_with(needle);
        if v.is_empty() || Instant::now() > end {
            return v;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Children of `pid` per /proc (the scan by parent).
fn children_of(pid: u32) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let ppid = std::fs::read_to_string(format!("/proc/{p}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<u32>().ok())
            });
        if ppid == Some(pid) {
            v.push(p);
        }
    }
    v
}

struct Case {
    /// Seconds after the start (after `after_procs` processes of the run exist, when not 0)
    /// when the signal is sent.
    at: f64,
    signal: i32,
    /// Wait until this many processes mention the fixture (the program, its child, its
    /// daemon, QEMU or valgrind running it) before counting `at`: a signal before
    /// proftrust's `main` runs cannot be handled by anyone, and a daemon must exist (and
    /// the watchdog know of it, within half a second) to test that it goes too.
    after_procs: usize,
}

/// Runs `cmd`, sends `case.signal` after `case.at` seconds, and returns (exit status,
/// stdout, stderr); asserts nothing of the run is left (by command line and by parent).
fn interrupt(
    mut cmd: Command,
    case: &Case,
    needle: &str,
) -> (std::process::ExitStatus, String, String) {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start proftrust");
    let pid = child.id();
    if case.after_procs > 0 {
        let end = Instant::now() + Duration::from_secs(30);
        while processes_with(needle).len() < case.after_procs && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    std::thread::sleep(Duration::from_secs_f64(case.at));
    // SAFETY: signalling our own child by pid; it has not been reaped yet.
    unsafe {
        libc::kill(pid as i32, case.signal);
    }
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    let took = started.elapsed();
    let left = survivors(needle);
    assert!(
        left.is_empty(),
        "signal {} at {} s: left running: {left:?}",
        case.signal,
        case.at
    );
    assert!(
        children_of(pid).is_empty(),
        "children of the dead proftrust {pid}"
    );
    // TERM grace (2 s) + QEMU's stop + writing: well under 10 s.
    assert!(took < Duration::from_secs(10), "took {took:?} to stop");
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn read_json(file: &Path) -> Value {
    let out = proftrust()
        .args(["read", "--json"])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "read {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A native sample file's outcome, as JSON (`read --json` of a sample file lists symbols).
fn samples_json(file: &Path) -> Value {
    let b = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let s = proftrust_formats::native::read_samples(&b)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    serde_json::json!({ "outcome": s.outcome })
}

/// The outcome the file records is "interrupted" by `sig`.
fn assert_marked(v: &Value, sig: i32, what: &str) {
    let o = v
        .pointer("/outcome")
        .or_else(|| v.pointer("/header/outcome"))
        .unwrap_or_else(|| panic!("{what}: no outcome in {v}"));
    assert_eq!(o["kind"], "interrupted", "{what}: {o}");
    assert_eq!(o["signal"].as_i64(), Some(sig as i64), "{what}: {o}");
}

fn assert_ended_by(status: &std::process::ExitStatus, sig: i32, err: &str) {
    assert_eq!(status.signal(), Some(sig), "{status:?}: {err}");
}

/// The three moments and signals of every command: (at, signal) relative to a run of
/// `len` seconds that starts `offset` seconds in.
fn moments(offset: f64, len: f64) -> Vec<Case> {
    vec![
        Case {
            at: 0.0,
            signal: libc::SIGINT,
            after_procs: 1,
        },
        Case {
            at: offset + len / 2.0,
            signal: libc::SIGTERM,
            after_procs: 0,
        },
        Case {
            at: offset + len - 0.4,
            signal: libc::SIGHUP,
            after_procs: 0,
        },
    ]
}

/// The same three moments counted from when the program (or the QEMU/valgrind process that
/// runs it) exists, for commands whose start-up time varies with the load: the last signal
/// then always comes before a `len`-second program can end, however fast the tool starts.
fn moments_from_start(len: f64) -> Vec<Case> {
    moments(0.0, len)
        .into_iter()
        .map(|c| Case {
            after_procs: 1,
            ..c
        })
        .collect()
}

fn fixture(test: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    if !need(test, &["gcc"]) {
        return None;
    }
    let dir = tempfile::Builder::new()
        .prefix("pt-interrupt-")
        .tempdir()
        .unwrap();
    let spin = compile(dir.path(), "spin");
    Some((dir, spin))
}

#[test]
fn record_interrupted_at_start_middle_and_end() {
    let Some((dir, spin)) = fixture("record_interrupted_at_start_middle_and_end") else {
        return;
    };
    let needle = dir.path().to_string_lossy().into_owned();
    for (i, case) in moments(0.0, 2.0).iter().enumerate() {
        let out = dir.path().join(format!("r{i}.ptsamp"));
        let mut c = proftrust();
        c.args(["record", "-o"])
            .arg(&out)
            .arg("--")
            .arg(&spin)
            .args(["2", "fork", "daemon"]);
        let (st, _, err) = interrupt(c, case, &needle);
        assert_ended_by(&st, case.signal, &err);
        assert_marked(&samples_json(&out), case.signal, "record");
    }
}

#[test]
fn truth_interrupted_under_both_backends() {
    if !need(
        "truth_interrupted_under_both_backends",
        &["gcc", "qemu-x86_64", "valgrind"],
    ) {
        return;
    }
    let Some((dir, spin)) = fixture("truth_interrupted_under_both_backends") else {
        return;
    };
    let needle = dir.path().to_string_lossy().into_owned();
    for backend in ["qemu", "callgrind"] {
        for (i, case) in moments_from_start(2.0).iter().enumerate() {
            let out = dir.path().join(format!("t-{backend}-{i}.ptexact"));
            let mut c = proftrust();
            c.args(["truth", "--backend", backend, "-o"])
                .arg(&out)
                .arg("--")
                .arg(&spin)
                .args(["2", "fork", "daemon"]);
            let (st, _, err) = interrupt(c, case, &needle);
            assert_ended_by(&st, case.signal, &err);
            let v = read_json(&out);
            assert_marked(&v, case.signal, backend);
            // No temporary callgrind directory is left behind.
            let tmp = std::env::temp_dir();
            let pid_dirs: Vec<_> = std::fs::read_dir(&tmp)
                .unwrap()
                .flatten()
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.starts_with("proftrust-cg-")
                        && std::fs::read_dir(e.path())
                            .map(|d| {
                                d.flatten().any(|f| {
                                    std::fs::read_to_string(f.path())
                                        .is_ok_and(|t| t.contains(&needle))
                                })
                            })
                            .unwrap_or(false)
                })
                .collect();
            assert!(pid_dirs.is_empty(), "{backend}: {pid_dirs:?}");
        }
    }
}

#[test]
fn audit_vpmu_and_paths_interrupted() {
    if !need("audit_vpmu_and_paths_interrupted", &["gcc", "qemu-x86_64"]) {
        return;
    }
    let Some((dir, spin)) = fixture("audit_vpmu_and_paths_interrupted") else {
        return;
    };
    let needle = dir.path().to_string_lossy().into_owned();
    // audit: recording (2 s), then the exact run under QEMU (2 s).
    for (i, case) in moments(1.0, 3.3).iter().enumerate() {
        let html = dir.path().join(format!("a{i}.html"));
        let mut c = proftrust();
        c.args(["audit", "--backend", "qemu", "--json", "-o", "-", "--html"])
            .arg(&html)
            .arg("--")
            .arg(&spin)
            .args(["2", "fork"]);
        let (st, stdout, err) = interrupt(c, case, &needle);
        assert_ended_by(&st, case.signal, &err);
        let v: Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("audit at {}: {e}: {stdout}\n{err}", case.at));
        let why = v["config"]["interrupted"].as_str().unwrap_or_default();
        assert!(why.starts_with("SIG"), "audit at {}: {v}", case.at);
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(page.contains("Interrupted:"), "audit html at {}", case.at);
        assert!(page.trim_end().ends_with("</html>"));
        if case.at < 1.0 {
            assert_eq!(v["config"]["truth_missing"], true, "{v}");
        }
        // One note for the graphs an empty exact side leaves out, not one per graph.
        let empty = err
            .lines()
            .filter(|l| l.contains("nothing to export"))
            .count();
        assert!(empty <= 1, "audit at {}: {err}", case.at);
    }
    // vpmu and paths: QEMU traces (about 2 s of the program, slower under the trace).
    for (i, case) in moments(0.3, 2.0).iter().enumerate() {
        let out = dir.path().join(format!("v{i}.ptsamp"));
        let mut c = proftrust();
        c.args(["vpmu", "-o"])
            .arg(&out)
            .arg("--")
            .arg(&spin)
            .args(["2", "fork", "daemon"]);
        let (st, _, err) = interrupt(c, case, &needle);
        assert_ended_by(&st, case.signal, &err);
        assert_marked(&samples_json(&out), case.signal, "vpmu");

        let mut c = proftrust();
        c.args(["paths", "--json", "--cpi-model", "flat", "--"])
            .arg(&spin)
            .args(["2", "fork", "daemon"]);
        let (st, stdout, err) = interrupt(c, case, &needle);
        assert_ended_by(&st, case.signal, &err);
        let v: Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("paths at {}: {e}: {stdout}\n{err}", case.at));
        assert_marked(&v, case.signal, "paths");
    }
}

/// SIGKILL of proftrust: nothing can be written, but nothing of the run may keep running:
/// the program, its forked child (same process group), QEMU or valgrind (parent-death
/// signal), and the daemonised grandchild (the watchdog learnt of it).
#[test]
fn sigkill_of_proftrust_leaves_nothing_running() {
    if !need(
        "sigkill_of_proftrust_leaves_nothing_running",
        &["gcc", "qemu-x86_64", "valgrind"],
    ) {
        return;
    }
    let Some((dir, spin)) = fixture("sigkill_of_proftrust_leaves_nothing_running") else {
        return;
    };
    let needle = dir.path().to_string_lossy().into_owned();
    let out = dir.path().join("k.out");
    let runs: Vec<Vec<String>> = vec![
        vec!["record".into(), "-o".into(), out.display().to_string()],
        vec!["truth".into(), "-o".into(), out.display().to_string()],
        vec![
            "truth".into(),
            "--backend".into(),
            "callgrind".into(),
            "-o".into(),
            out.display().to_string(),
        ],
        vec![
            "audit".into(),
            "--backend".into(),
            "qemu".into(),
            "--json".into(),
            "-o".into(),
            "-".into(),
        ],
        vec!["vpmu".into(), "-o".into(), out.display().to_string()],
        vec!["paths".into(), "--json".into()],
    ];
    for args in runs {
        let mut c = proftrust();
        c.args(&args)
            .arg("--")
            .arg(&spin)
            .args(["4", "fork", "daemon"]);
        let case = Case {
            at: 1.0,
            signal: libc::SIGKILL,
            after_procs: 3,
        };
        let (st, _, _) = interrupt(c, &case, &needle);
        assert_eq!(st.signal(), Some(libc::SIGKILL), "{args:?}");
        assert!(!out.exists(), "{args:?}: an output after SIGKILL");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(leftovers.is_empty(), "{args:?}: {leftovers:?}");
    }
}

/// Issue 32 item 6: an interrupted sample file says so where it is read (`read`, `read
/// --json`, as `check` already did), and the files `cct --folded` and `vpp --svg` write on
/// an interrupt carry the mark (a comment line flame-graph tools skip; the plot's title).
#[test]
fn interrupted_outputs_say_so_wherever_they_are_read() {
    if !need(
        "interrupted_outputs_say_so_wherever_they_are_read",
        &["gcc", "qemu-x86_64"],
    ) {
        return;
    }
    let Some((dir, spin)) = fixture("interrupted_outputs_say_so_wherever_they_are_read") else {
        return;
    };
    let needle = dir.path().to_string_lossy().into_owned();
    let case = Case {
        at: 0.8,
        signal: libc::SIGINT,
        after_procs: 1,
    };
    let rec = dir.path().join("r.ptsamp");
    let mut c = proftrust();
    c.args(["record", "-o"])
        .arg(&rec)
        .arg("--")
        .arg(&spin)
        .arg("2");
    let (st, _, err) = interrupt(c, &case, &needle);
    assert_ended_by(&st, case.signal, &err);
    assert_marked(&read_json(&rec), case.signal, "read --json");
    let o = proftrust().arg("read").arg(&rec).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(
            "ENDED EARLY: the program was interrupted (proftrust received SIGINT): the samples cover the run up to then"
        ),
        "{text}"
    );
    // cct --folded and vpp --svg, interrupted while the trace runs.
    let folded = dir.path().join("c.folded");
    let mut c = proftrust();
    c.args(["cct", "--cpi-model", "flat", "--folded"])
        .arg(&folded)
        .arg("--")
        .arg(&spin)
        .arg("2");
    let (st, _, err) = interrupt(c, &case, &needle);
    assert_ended_by(&st, case.signal, &err);
    let f = std::fs::read_to_string(&folded).unwrap();
    let first = f.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        "# proftrust: the program was interrupted (proftrust received SIGINT): these stacks cover the run up to then [not a stack]"
    );
    // Every other line is a stack with its count.
    assert!(f.lines().count() > 1, "{f}");
    for l in f.lines().skip(1) {
        let n = l.rsplit_once(' ').map(|(_, n)| n.parse::<u64>());
        assert!(matches!(n, Some(Ok(_))), "{l:?}");
    }
    let svg = dir.path().join("v.svg");
    let mut c = proftrust();
    c.args(["vpp", "--svg"])
        .arg(&svg)
        .arg("--")
        .arg(&spin)
        .arg("2");
    let (st, _, err) = interrupt(c, &case, &needle);
    assert_ended_by(&st, case.signal, &err);
    let s = std::fs::read_to_string(&svg).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert!(
        s.contains("[the program was interrupted (proftrust received SIGINT): the paths cover the run up to then]"),
        "{s:.400}"
    );
}
