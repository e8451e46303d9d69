//! `proftrust record` end to end: the file is written (and read back with the native reader)
//! whatever happens to the program; errors exit with status 2 and say what to do.

use proftrust_model::{PeriodMode, RunOutcome};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn proftrust(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_proftrust"))
        .args(args)
        .output()
        .expect("run proftrust")
}

/// Compiles `crates/record/tests/c/<name>.c` into `dir` (gcc -O2 -g, frame pointers).
fn compile(test: &str, name: &str, dir: &Path) -> Option<PathBuf> {
    if !proftrust_testkit::have("gcc") {
        proftrust_testkit::skip!("{test}: gcc not installed");
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../record/tests/c");
    let flags = [
        "-fno-omit-frame-pointer",
        "-mno-omit-leaf-frame-pointer",
        "-pthread",
    ];
    Some(proftrust_testkit::compile_c(dir, &src, name, &flags))
}

fn read(path: &Path) -> proftrust_model::SampleSet {
    let bytes = std::fs::read(path).expect("output file exists");
    proftrust_formats::native::read_samples(&bytes).expect("native sample file reads back")
}

#[test]
fn records_a_program_with_seed_and_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = compile("records_a_program", "work", dir.path()) else {
        return;
    };
    let out = dir.path().join("w.ptsamp");
    let b = bin.to_str().unwrap();
    let o = proftrust(&[
        "record",
        "-c",
        "100003",
        "--randomize",
        "--seed",
        "5",
        "-o",
        out.to_str().unwrap(),
        "--",
        b,
        "20",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("seed 5"), "{err}");
    let set = read(&out);
    assert_eq!(set.outcome, Some(RunOutcome::Exited { code: 0 }));
    assert_eq!(set.command, vec![b.to_string(), "20".to_string()]);
    assert_eq!(set.events[0].name, "cpu-clock");
    assert_eq!(set.events[0].config.seed, Some(5));
    assert_eq!(set.events[0].config.randomize_max, Some(100_003 / 8));
    assert!(set.samples.len() >= 50, "{} samples", set.samples.len());
    assert!(set.modules.find_by_file_name("work").is_some());
}

/// Without `-o` the file is `proftrust.ptsamp` in the current directory, not `perf.data`:
/// perf cannot read our format, so perf's name would be a trap (issue 31). The file is a
/// native sample file that `read` recognises by its magic, and a second recording keeps
/// the first as `.old`.
#[test]
fn without_output_flag_writes_proftrust_ptsamp_in_the_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = compile("default_output", "work", dir.path()) else {
        return;
    };
    let run = tempfile::tempdir().unwrap();
    let b = bin.to_str().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_proftrust"))
        .current_dir(run.path())
        .args(["record", "--seed", "3", "--", b, "20"])
        .output()
        .expect("run proftrust");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("proftrust.ptsamp"), "{err}");
    assert!(!run.path().join("perf.data").exists());
    let file = run.path().join("proftrust.ptsamp");
    let set = read(&file);
    assert_eq!(set.outcome, Some(RunOutcome::Exited { code: 0 }));
    assert_eq!(set.command, vec![b.to_string(), "20".to_string()]);
    assert_eq!(set.events[0].config.seed, Some(3));
    assert!(set.samples.len() >= 50, "{} samples", set.samples.len());
    // A consumer: `read` takes the default file by name and reports it as our format.
    let r = Command::new(env!("CARGO_BIN_EXE_proftrust"))
        .current_dir(run.path())
        .args(["read", "--json", "proftrust.ptsamp"])
        .output()
        .expect("run proftrust read");
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).expect("read --json is JSON");
    assert_eq!(v["format"], "samples", "{v}");
    // A second recording keeps the first as proftrust.ptsamp.old, as perf record does.
    let first = std::fs::read(&file).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_proftrust"))
        .current_dir(run.path())
        .args(["record", "--seed", "4", "--", b, "20"])
        .output()
        .expect("run proftrust");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("proftrust.ptsamp.old"), "{err}");
    assert_eq!(
        std::fs::read(run.path().join("proftrust.ptsamp.old")).unwrap(),
        first
    );
    assert_eq!(read(&file).events[0].config.seed, Some(4));
}

/// The recorded program starts with every signal at its default disposition and none
/// blocked (issue 31: SIGPIPE was ignored, `SigIgn: ...1000`, so `yes | head -1` said
/// "Broken pipe" under `record` and not under the exact run). Oracle: the kernel's own
/// `/proc/self/status` of the recorded process, and the shell pipeline's stderr.
#[test]
fn the_recorded_program_starts_with_default_signals() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.ptsamp");
    let o = Command::new(env!("CARGO_BIN_EXE_proftrust"))
        .args(["-q", "record", "-o"])
        .arg(&out)
        .args([
            "--",
            "sh",
            "-c",
            "grep -E '^Sig(Ign|Blk):' /proc/self/status; yes | head -1",
        ])
        .output()
        .expect("run proftrust");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        stdout, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\ny\n",
        "{stdout}"
    );
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("Broken pipe"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// One period parser for `record -c` and `audit -c` (issue 31: `-c 10G` was taken by one
/// and refused by the other); a period too long for any sample of the run is reported
/// right after the recording, before the exact run.
#[test]
fn periods_parse_alike_and_a_period_without_samples_stops_before_the_exact_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.ptsamp");
    let o = out.to_str().unwrap();
    let r = proftrust(&["-q", "record", "-c", "10G", "-o", o, "--", "true"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(
        read(&out).events[0].config.period,
        PeriodMode::Fixed(10 << 30)
    );
    for cmd in ["record", "audit"] {
        let r = proftrust(&[cmd, "-c", "0", "--", "true"]);
        assert_eq!(r.status.code(), Some(2), "{cmd}");
        assert!(
            String::from_utf8_lossy(&r.stderr).contains("expected 1 to 1000000000000000"),
            "{cmd}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
    }
    let t0 = std::time::Instant::now();
    let r = proftrust(&["audit", "--backend", "qemu", "-c", "10G", "--", "true"]);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("no exact run was made"), "{err}");
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        t0.elapsed()
    );
}

/// `record --pid` of another user's process, as an unprivileged user: a permission
/// refusal says so (it said "no process with pid N"); a pid that does not exist still
/// says that.
#[test]
fn record_pid_of_another_users_process_says_permission() {
    let t = "record_pid_of_another_users_process_says_permission";
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        proftrust_testkit::skip!("{t}: needs root to run the test as user nobody");
        return;
    }
    if !proftrust_testkit::need(t, &["setpriv", "sleep"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let out = dir.path().join("n.ptsamp");
    let as_nobody = |pid: &str| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_proftrust"))
            .args(["record", "--timeout", "1", "--pid", pid, "-o"])
            .arg(&out)
            .output()
            .unwrap()
    };
    let o = as_nobody(&sleeper.id().to_string());
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "process {} exists but this user may not profile it",
            sleeper.id()
        )),
        "{err}"
    );
    assert!(err.contains("Operation not permitted"), "{err}");
    let o = as_nobody("4000000");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no process with pid 4000000"), "{err}");
    assert!(!out.exists());
}

/// The rest of the CLI contract: `-e EVENT`, `-F FREQ`, `-g`; the file reads back through
/// `proftrust read --json` as format `samples` with the event's samples and the symbols.
#[test]
fn event_frequency_and_call_graph_options() {
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = compile("event_frequency_and_call_graph", "chain", dir.path()) else {
        return;
    };
    let out = dir.path().join("c.ptsamp");
    let o = out.to_str().unwrap();
    let r = proftrust(&[
        "record",
        "-e",
        "task-clock",
        "-F",
        "2000",
        "-g",
        "-o",
        o,
        "--",
        bin.to_str().unwrap(),
        "20",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let set = read(&out);
    assert_eq!(set.events.len(), 1);
    assert_eq!(set.events[0].name, "task-clock");
    assert_eq!(set.events[0].config.period, PeriodMode::Frequency(2000));
    assert!(set.events[0].config.callchain);
    assert!(set.samples.len() >= 50, "{}", set.samples.len());
    let with_chain = set
        .samples
        .iter()
        .filter(|s| !s.callchain.is_empty())
        .count();
    assert!(with_chain * 10 >= set.samples.len() * 9, "{with_chain}");

    let r = proftrust(&["read", o, "--json"]);
    assert!(r.status.success());
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["format"], "samples");
    assert_eq!(v["events"][0]["name"], "task-clock");
    assert_eq!(v["events"][0]["samples"], set.samples.len() as u64);
    assert_eq!(v["lost"], set.lost);
    assert_eq!(v["symbols"][0]["name"], "inner");
    assert!(v["symbols"][0]["module"]
        .as_str()
        .unwrap()
        .ends_with("/chain"));
}

#[test]
fn failures_of_the_program_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = compile("failures_of_the_program", "multi", dir.path()) else {
        return;
    };
    let b = bin.to_str().unwrap();
    let out = dir.path().join("x.ptsamp");
    let o = out.to_str().unwrap();

    // not found: file written with exit status 127, then an error (status 2)
    let r = proftrust(&["record", "-o", o, "--", "/no/such/program"]);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("could not be started") && err.contains("No such file"),
        "{err}"
    );
    assert_eq!(read(&out).outcome, Some(RunOutcome::Exited { code: 127 }));

    // killed by SIGSEGV
    let r = proftrust(&["record", "-o", o, "--", b, "segv"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stderr).contains("SIGSEGV"));
    assert_eq!(
        read(&out).outcome,
        Some(RunOutcome::Signaled {
            signal: 11,
            name: "SIGSEGV".into()
        })
    );
    // `check` of that file says so in a sentence.
    let r = proftrust(&["check", o, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&r.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&r.stderr)));
    let early = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["kind"] == "ended-early")
        .unwrap_or_else(|| panic!("{}", v["warnings"]));
    assert_eq!(
        early["message"],
        "the recorded program was killed by SIGSEGV (it crashed): the samples cover the run up to the crash; fix the crash, or profile an input it completes",
        "{early}"
    );

    // non-zero exit
    let r = proftrust(&["record", "-o", o, "--", b, "exit3"]);
    assert!(r.status.success());
    assert_eq!(read(&out).outcome, Some(RunOutcome::Exited { code: 3 }));

    // timeout: killed, reaped, recorded
    let pidfile = dir.path().join("pid");
    let r = proftrust(&[
        "record",
        "--timeout",
        "0.3",
        "-o",
        o,
        "--",
        b,
        "sleep",
        pidfile.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(
        read(&out).outcome,
        Some(RunOutcome::TimedOut { millis: 300 })
    );
    // The program and the child it forked (pids written by the program) are gone.
    for pid in std::fs::read_to_string(&pidfile).unwrap().lines() {
        assert!(
            !Path::new(&format!("/proc/{}", pid.trim())).exists(),
            "process {pid} is still there"
        );
    }

    // killed by SIGKILL
    let r = proftrust(&["record", "-o", o, "--", b, "kill9"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stderr).contains("SIGKILL"));
    assert_eq!(
        read(&out).outcome,
        Some(RunOutcome::Signaled {
            signal: 9,
            name: "SIGKILL".into()
        })
    );

    // not executable: written with status 126, then an error
    let r = proftrust(&["record", "-o", o, "--", dir.path().to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("could not be started"),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(read(&out).outcome, Some(RunOutcome::Exited { code: 126 }));
}

#[test]
fn bad_requests_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("y.ptsamp");
    let o = out.to_str().unwrap();
    let r = proftrust(&["record", "-o", o]);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("nothing to record"));
    let r = proftrust(&["record", "-e", "bogus", "-o", o, "--", "/bin/true"]);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("known events"));
    let r = proftrust(&["record", "-e", "cycles", "-o", o, "--", "/bin/true"]);
    if r.status.success() {
        proftrust_testkit::skip!(
            "bad_requests_are_clear_errors (cycles part): this machine has a PMU"
        );
    } else {
        assert_eq!(r.status.code(), Some(2));
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(
            err.trim(),
            "error: hardware event `cycles` is not available on this machine (no PMU visible to perf_event_open); use -e cpu-clock or -e task-clock"
        );
        assert!(!out.exists());
    }
    // Beyond the kernel's PID_MAX_LIMIT: a usage error before anything runs.
    let r = proftrust(&["record", "--pid", "999999999", "-o", o]);
    assert_eq!(r.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("4194304"),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    // PID_MAX_LIMIT itself parses, and no process has it (pids stay below pid_max).
    let r = proftrust(&["record", "--pid", "4194304", "-o", o]);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("no process with pid"));
}
