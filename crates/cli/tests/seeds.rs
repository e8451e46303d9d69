//! One seed convention for every command that draws (issue 18; docs/ARCHITECTURE.md,
//! "Randomness"): `--seed N` defaults to 1 everywhere, the seed is printed (in the text
//! report, or as a note by commands that write a file) and stored (JSON, written files), and
//! the same seed with the same inputs makes the same output. Also perf's spellings of the
//! sampling flags (`-e a,b`, `-e a -e b`, `-c PERIOD`, `-F FREQ`) in `record` and `audit`.

use proftrust_testkit::need;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn proftrust_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_proftrust"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run proftrust")
}

fn proftrust(args: &[&str]) -> Output {
    proftrust_in(Path::new("."), args)
}

fn ok(args: &[&str], o: &Output) -> (String, String) {
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(o.status.success(), "proftrust {args:?} failed: {err}");
    (out, err)
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).expect("JSON on stdout")
}

/// The golden tests' fixtures (samples of the virtual PMU, QEMU's exact counts, the binary)
/// copied into a fresh directory, so commands may write beside them.
fn fixtures() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/fixtures");
    for f in ["tiny", "tiny.ptsamp", "tiny.ptexact"] {
        std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
    }
    let p = dir.path().to_path_buf();
    (dir, p)
}

/// True when the output says this machine forbids `perf_event_open` (the test then skips).
fn perf_refused(test: &str, o: &Output) -> bool {
    let err = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() && err.contains("perf_event_open") {
        proftrust_testkit::skip!("{test}: perf_event_open is not allowed here: {err}");
        return true;
    }
    false
}

#[test]
fn simulate_seed_defaults_to_1_is_printed_stored_and_reproduces() {
    let args = [
        "simulate", "sampling", "--preset", "aliasing", "--reps", "20", "--json",
    ];
    let (a, err) = ok(&args, &proftrust(&args));
    assert!(err.contains("proftrust: seed 1\n"), "{err}");
    assert_eq!(json(&a)["seed"], 1);
    let (b, _) = ok(&args, &proftrust(&args));
    assert_eq!(a, b, "two runs with the default seed differ");
    let explicit: Vec<&str> = args.iter().copied().chain(["--seed", "1"]).collect();
    assert_eq!(ok(&explicit, &proftrust(&explicit)).0, a);
    let other: Vec<&str> = args.iter().copied().chain(["--seed", "2"]).collect();
    let (c, _) = ok(&other, &proftrust(&other));
    assert_eq!(json(&c)["seed"], 2);
    assert_ne!(c, a, "another seed draws the same simulation");
    // The text report states it too.
    let text = [
        "simulate", "sampling", "--preset", "aliasing", "--reps", "20",
    ];
    assert!(ok(&text, &proftrust(&text)).0.contains("seed 1"));
}

#[test]
fn calibrate_seed_defaults_to_1_is_printed_stored_and_reproduces() {
    let args = [
        "calibrate",
        "--vpmu",
        "--passes",
        "2000",
        "--period",
        "997",
        "--randomize",
    ];
    let (text, _) = ok(&args, &proftrust(&args));
    assert!(text.contains("period 997 randomised, seed 1\n"), "{text}");
    let j: Vec<&str> = args.iter().copied().chain(["--json"]).collect();
    let (a, _) = ok(&j, &proftrust(&j));
    assert_eq!(json(&a)["seed"], 1);
    assert_eq!(ok(&j, &proftrust(&j)).0, a);
}

#[test]
fn correct_seed_defaults_to_1_is_printed_stored_and_reproduces() {
    let (_keep, dir) = fixtures();
    let args = [
        "correct",
        "--samples",
        "tiny.ptsamp",
        "--skid",
        "3",
        "--binary",
        "tiny",
        "--truth",
        "tiny.ptexact",
        "--solver",
        "gibbs",
    ];
    let (text, _) = ok(&args, &proftrust_in(&dir, &args));
    assert!(text.contains("solver gibbs, seed 1;"), "{text}");
    let j: Vec<&str> = args.iter().copied().chain(["--json"]).collect();
    let (a, _) = ok(&j, &proftrust_in(&dir, &j));
    assert_eq!(json(&a)["seed"], 1);
    assert_eq!(ok(&j, &proftrust_in(&dir, &j)).0, a);
}

#[test]
fn vpmu_seed_defaults_to_1_is_printed_stored_and_reproduces() {
    if !need("vpmu seed", &["qemu-x86_64"]) {
        return;
    }
    let (_keep, dir) = fixtures();
    let run = |out: &str| {
        let args = [
            "vpmu",
            "--skid-dist",
            "uniform:0:8",
            "--period",
            "997",
            "--randomize",
            "-o",
            out,
            "--",
            "./tiny",
        ];
        let (_, err) = ok(&args, &proftrust_in(&dir, &args));
        assert!(err.contains(", seed 1\n"), "{err}");
        let bytes = std::fs::read(dir.join(out)).unwrap();
        proftrust_formats::native::read_samples(&bytes).unwrap()
    };
    let (a, b) = (run("a.ptsamp"), run("b.ptsamp"));
    assert_eq!(a.events[0].config.seed, Some(1));
    assert!(a.samples.len() > 100, "{} samples", a.samples.len());
    // The process id differs between runs; the draws (periods, skids) and so every sample's
    // place, time and period are the seed's.
    let draws = |s: &proftrust_model::SampleSet| -> Vec<_> {
        s.samples
            .iter()
            .map(|x| (x.event, x.time, x.period, x.ip))
            .collect()
    };
    assert!(
        draws(&a) == draws(&b),
        "two runs with the default seed differ"
    );
}

#[test]
fn vpp_seed_defaults_to_1_is_printed_stored_and_reproduces() {
    if !need("vpp seed", &["qemu-x86_64"]) {
        return;
    }
    let (_keep, dir) = fixtures();
    let args = ["vpp", "--n-check", "50", "--randomize", "--", "./tiny"];
    let (text, err) = ok(&args, &proftrust_in(&dir, &args));
    assert!(text.contains("(source vpmu, seed 1)"), "{text}");
    assert!(err.contains("seed 1,"), "{err}");
    let j = [
        "vpp",
        "--n-check",
        "50",
        "--randomize",
        "--json",
        "--",
        "./tiny",
    ];
    let (a, _) = ok(&j, &proftrust_in(&dir, &j));
    assert_eq!(json(&a)["seed"], 1);
    assert_eq!(ok(&j, &proftrust_in(&dir, &j)).0, a);
}

/// `record`: the default seed is 1 (not drawn from the clock), noted and stored in the file;
/// `-e a,b` and `-e a -e b` record the same two events, as perf does.
#[test]
fn record_seed_and_perf_event_spellings() {
    let (_keep, dir) = fixtures();
    let rec = |out: &str, events: &[&str]| -> Option<proftrust_model::SampleSet> {
        let mut args = vec!["record"];
        args.extend_from_slice(events);
        args.extend(["-c", "100003", "-o", out, "--", "./tiny", "3000000"]);
        let o = proftrust_in(&dir, &args);
        if perf_refused("record seed", &o) {
            return None;
        }
        let (_, err) = ok(&args, &o);
        assert!(err.contains("proftrust: seed 1\n"), "{err}");
        let bytes = std::fs::read(dir.join(out)).unwrap();
        Some(proftrust_formats::native::read_samples(&bytes).unwrap())
    };
    let Some(a) = rec("a.ptsamp", &["-e", "task-clock,cpu-clock"]) else {
        return;
    };
    let names = |s: &proftrust_model::SampleSet| -> Vec<String> {
        s.events.iter().map(|e| e.name.clone()).collect()
    };
    assert_eq!(names(&a), ["task-clock", "cpu-clock"]);
    assert!(a.events.iter().all(|e| e.config.seed == Some(1)));
    let b = rec("b.ptsamp", &["-e", "task-clock", "-e", "cpu-clock"]).unwrap();
    assert_eq!(names(&b), names(&a));
}

/// `audit` takes perf's `-e`, `-c` and `-F` (it had only `--event` and `--period`), and its
/// default seed is 1, stored in the report.
#[test]
fn audit_takes_perf_flags_and_stores_the_seed() {
    let help = String::from_utf8_lossy(&proftrust(&["audit", "--help"]).stdout).into_owned();
    for flag in ["-e, --event", "-c, --period", "-F, --freq", "--seed <N>"] {
        assert!(help.contains(flag), "audit --help lacks {flag}");
    }
    let both = proftrust(&["audit", "-c", "100003", "-F", "1000", "--", "true"]);
    assert_eq!(both.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&both.stderr).contains("cannot be used with"));
    if !need("audit -e -c", &["qemu-x86_64"]) {
        return;
    }
    let (_keep, dir) = fixtures();
    let args = [
        "audit",
        "-e",
        "task-clock",
        "-c",
        "100003",
        "--backend",
        "qemu",
        "--json",
        "-o",
        "-",
        "--",
        "./tiny",
        "3000000",
    ];
    let o = proftrust_in(&dir, &args);
    if perf_refused("audit -e -c", &o) {
        return;
    }
    let (out, _) = ok(&args, &o);
    let v = json(&out);
    assert_eq!(v["config"]["event"], "task-clock");
    assert_eq!(v["config"]["period"], 100003);
    assert_eq!(v["config"]["seed"], 1);
}
