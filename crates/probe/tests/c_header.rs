//! The C header (`include/proftrust_probe.h`) compiled with gcc and run natively.
//! Oracles: the Rust bursty state machine (`Bursty`, checked by hand traces and the closed
//! form) for which iterations are timed, the loop index for their branch bits, and
//! `addr2line` (binutils) for where the recorded entry address lies in the source.

use proftrust_probe::{expected_timed, format, Bursty, BurstyOptions, ProbeFile};
use proftrust_testkit::need;
use std::path::{Path, PathBuf};
use std::process::Command;

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn compile(dir: &Path, out: &str, sources: &[&str], defines: &[&str]) -> PathBuf {
    let exe = dir.join(out);
    let o = Command::new("gcc")
        .args(["-O2", "-g", "-Wall", "-Wextra"])
        .args(defines)
        .arg("-I")
        .arg(here().join("include"))
        .args(sources.iter().map(|s| here().join("tests/c").join(s)))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run gcc");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "gcc failed: {err}");
    assert!(
        err.trim().is_empty(),
        "the header compiles with warnings: {err}"
    );
    exe
}

fn run(exe: &Path, dir: &Path, n: u64, env: &[(&str, &str)]) -> (Option<ProbeFile>, String) {
    let out = dir.join("probe.txt");
    let _ = std::fs::remove_file(&out);
    let o = Command::new(exe)
        .arg(n.to_string())
        .current_dir(dir)
        .env("PROFTRUST_PROBE_OUT", &out)
        .envs(env.iter().copied())
        .output()
        .expect("run the probed program");
    assert!(o.status.success());
    let f = std::fs::read(&out)
        .ok()
        .map(|b| format::read(&b).expect("a valid probe file"));
    (f, String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Branch bits of the paths the machine times (the path starting at boundary k is
/// iteration k's and ends timed at boundary k + 1).
fn expected_bits(o: BurstyOptions, n: u64) -> Vec<u64> {
    let mut b = Bursty::new(o);
    let steps: Vec<_> = (0..n).map(|_| b.boundary()).collect();
    (0..n as usize - 1)
        .filter(|&k| steps[k].starts_timed && steps[k + 1].ends_timed)
        .map(|k| u64::from(k % 3 == 0) | u64::from(k % 2 == 0) << 1)
        .collect()
}

fn site_line() -> usize {
    1 + include_str!("c/probe_loop.c")
        .lines()
        .position(|l| l.contains("PT_BOUNDARY(); /* the site */"))
        .unwrap()
}

#[test]
fn c_header_times_the_paths_bursty_tracing_picks() {
    let t = "c_header_times_the_paths_bursty_tracing_picks";
    if !need(t, &["gcc", "addr2line"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "probe_loop", &["probe_loop.c"], &[]);
    let n = 10_000;
    let (f, _) = run(
        &exe,
        dir.path(),
        n,
        &[
            ("PROFTRUST_PROBE_NCHECK", "7"),
            ("PROFTRUST_PROBE_NINSTR", "2"),
            ("PROFTRUST_PROBE_CALIBRATE", "500"),
        ],
    );
    let f = f.expect("the program wrote its probe file");
    assert_eq!(f.boundaries, n);
    assert_eq!(f.samples.len() as u64, expected_timed(n, 7, 2));
    let bo = BurstyOptions {
        n_check: 7,
        n_instr: 2,
        randomize: false,
        seed: 0,
    };
    let bits: Vec<u64> = f.samples.iter().map(|s| s.bits).collect();
    assert_eq!(bits, expected_bits(bo, n));
    assert!(f.samples.iter().all(|s| s.nbits == 2));
    assert_eq!(f.calibration.iter().map(|c| c.1).sum::<u64>(), 500);
    assert_eq!(f.calibration_exit.iter().map(|c| c.1).sum::<u64>(), 500);
    assert_eq!((f.dropped, f.foreign, f.n_check, f.n_instr), (0, 0, 7, 2));
    assert!(f.tsc_per_ns > 0.0);
    // One site; addr2line puts the return address's call in probe_loop.c at PT_BOUNDARY().
    assert_eq!(f.sites.len(), 1);
    let (addr, name) = &f.sites[0];
    assert!(
        name.ends_with(&format!("probe_loop.c:{}", site_line())),
        "{name}"
    );
    assert!(f.samples.iter().all(|s| s.entry == *addr));
    let o = Command::new("addr2line")
        .args(["-i", "-e"])
        .arg(&exe)
        .arg(format!("{:#x}", addr - 1))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let outer = text.lines().last().unwrap_or("");
    assert!(
        outer.ends_with(&format!("probe_loop.c:{}", site_line())),
        "addr2line says {text:?}"
    );
}

#[test]
fn c_header_jitter_every_path_and_capacity() {
    let t = "c_header_jitter_every_path_and_capacity";
    if !need(t, &["gcc"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "probe_loop", &["probe_loop.c"], &[]);
    // Jitter: the same count as the Rust machine with the same seed (same splitmix64).
    let n = 50_000;
    let (f, _) = run(
        &exe,
        dir.path(),
        n,
        &[
            ("PROFTRUST_PROBE_NCHECK", "50"),
            ("PROFTRUST_PROBE_RANDOMIZE", "1"),
            ("PROFTRUST_PROBE_SEED", "9"),
            ("PROFTRUST_PROBE_CALIBRATE", "0"),
        ],
    );
    let f = f.unwrap();
    let o = BurstyOptions {
        n_check: 50,
        n_instr: 1,
        randomize: true,
        seed: 9,
    };
    assert_eq!(
        f.samples.iter().map(|s| s.bits).collect::<Vec<_>>(),
        expected_bits(o, n)
    );
    assert_ne!(f.samples.len() as u64, expected_timed(n, 50, 1));
    assert!(f.calibration.is_empty() && f.calibration_exit.is_empty());
    // Every path timed, 100 kept: the rest are counted as dropped.
    let (f, _) = run(
        &exe,
        dir.path(),
        1000,
        &[
            ("PROFTRUST_PROBE_NCHECK", "0"),
            ("PROFTRUST_PROBE_CAPACITY", "100"),
        ],
    );
    let f = f.unwrap();
    assert_eq!((f.samples.len(), f.dropped), (100, 999 - 100));
    // A bad setting falls back to the default with a message.
    let (f, err) = run(&exe, dir.path(), 100, &[("PROFTRUST_PROBE_NCHECK", "ten")]);
    assert_eq!(f.unwrap().n_check, 10_000);
    assert!(err.contains("PROFTRUST_PROBE_NCHECK=ten"), "{err}");
}

#[test]
fn c_header_disabled_and_second_unit() {
    let t = "c_header_disabled_and_second_unit";
    if !need(t, &["gcc"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // -DPT_DISABLE: no probe code, no file.
    let exe = compile(dir.path(), "off", &["probe_loop.c"], &["-DPT_DISABLE"]);
    let (f, _) = run(&exe, dir.path(), 100, &[]);
    assert!(f.is_none());
    let nm = Command::new("nm").arg(&exe).output();
    if let Ok(o) = nm {
        assert!(!String::from_utf8_lossy(&o.stdout).contains("pt_slow"));
    }
    // Without PROFTRUST_PROBE_OUT the probes stay idle and write nothing.
    let exe_on = compile(dir.path(), "on", &["probe_loop.c"], &[]);
    let quiet = tempfile::tempdir().unwrap();
    let o = Command::new(&exe_on)
        .arg("1000")
        .current_dir(quiet.path())
        .env_remove("PROFTRUST_PROBE_OUT")
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(std::fs::read_dir(quiet.path()).unwrap().count(), 0);
    // Two translation units: one copy records, the other says it is off.
    let exe = compile(dir.path(), "two", &["probe_loop.c", "probe_two_tu.c"], &[]);
    let (f, err) = run(&exe, dir.path(), 1000, &[("PROFTRUST_PROBE_NCHECK", "0")]);
    assert!(err.contains("its probes are off"), "{err}");
    let f = f.unwrap();
    assert_eq!(f.boundaries, 1000);
    assert!(f.sites[0].1.contains("probe_loop.c:"));
}

/// Runs `exe MODE N` with the probes recording; returns the file, stdout and stderr.
fn run_mode(
    exe: &Path,
    dir: &Path,
    mode: &str,
    n: u64,
    env: &[(&str, &str)],
) -> (Option<ProbeFile>, String, String) {
    let out = dir.join("probe.txt");
    let _ = std::fs::remove_file(&out);
    let o = Command::new(exe)
        .args([mode, &n.to_string()])
        .current_dir(dir)
        .env("PROFTRUST_PROBE_OUT", &out)
        .envs(env.iter().copied())
        .output()
        .expect("run the probed program");
    assert!(o.status.success());
    let f = std::fs::read(&out)
        .ok()
        .map(|b| format::read(&b).expect("a valid probe file"));
    (
        f,
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// PT_FOR (bursty tracing's clean and probed copies of the loop body): the paths timed and
/// their bits are the machine's, as with PT_BOUNDARY() in every iteration; the loop computes
/// what the plain for loop of -DPT_DISABLE computes, also with continue, break and return in
/// the body (boundaries = the iterations run); the site is the PT_FOR line by addr2line; a
/// nested PT_FOR is reported.
#[test]
fn c_header_pt_for_two_copies() {
    let t = "c_header_pt_for_two_copies";
    if !need(t, &["gcc", "addr2line"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "probe_for", &["probe_for.c"], &[]);
    let plain = compile(dir.path(), "plain", &["probe_for.c"], &["-DPT_DISABLE"]);
    let n = 10_000;
    let env = [
        ("PROFTRUST_PROBE_NCHECK", "7"),
        ("PROFTRUST_PROBE_NINSTR", "2"),
        ("PROFTRUST_PROBE_CALIBRATE", "500"),
    ];
    let (f, out, err) = run_mode(&exe, dir.path(), "loop", n, &env);
    let (none, out_plain, _) = run_mode(&plain, dir.path(), "loop", n, &env);
    assert!(none.is_none());
    assert_eq!(
        out, out_plain,
        "the probed loop computes what the plain loop does"
    );
    assert!(err.is_empty(), "{err}");
    let f = f.expect("the program wrote its probe file");
    assert_eq!(f.boundaries, n);
    assert_eq!(f.samples.len() as u64, expected_timed(n, 7, 2));
    let bo = BurstyOptions {
        n_check: 7,
        n_instr: 2,
        randomize: false,
        seed: 0,
    };
    let bits: Vec<u64> = f.samples.iter().map(|s| s.bits).collect();
    assert_eq!(bits, expected_bits(bo, n));
    assert!(f.samples.iter().all(|s| s.nbits == 2));
    assert_eq!(f.calibration.iter().map(|c| c.1).sum::<u64>(), 500);
    assert_eq!(f.calibration_exit.iter().map(|c| c.1).sum::<u64>(), 500);
    let line = 1 + include_str!("c/probe_for.c")
        .lines()
        .position(|l| l.contains("/* the site */"))
        .unwrap();
    assert_eq!(f.sites.len(), 1, "{:?}", f.sites);
    let (addr, name) = &f.sites[0];
    assert!(name.ends_with(&format!("probe_for.c:{line}")), "{name}");
    let o = Command::new("addr2line")
        .args(["-i", "-e"])
        .arg(&exe)
        .arg(format!("{:#x}", addr - 1))
        .output()
        .unwrap();
    // `file:line`, possibly followed by ` (discriminator N)`.
    let text = String::from_utf8_lossy(&o.stdout);
    let outer = text.lines().last().unwrap_or("");
    assert!(
        outer
            .split(" (discriminator")
            .next()
            .unwrap()
            .ends_with(&format!("probe_for.c:{line}")),
        "addr2line says {text:?}"
    );

    // continue, break, return: the same results, boundaries = iterations run.
    let env = [
        ("PROFTRUST_PROBE_NCHECK", "7"),
        ("PROFTRUST_PROBE_CALIBRATE", "0"),
    ];
    let (f, out, err) = run_mode(&exe, dir.path(), "exits", 1001, &env);
    let (_, out_plain, _) = run_mode(&plain, dir.path(), "exits", 1001, &env);
    assert_eq!(out, out_plain);
    assert_eq!(out.trim(), "500 62250 171389", "hand-computed");
    assert!(err.is_empty(), "{err}");
    let f = f.unwrap();
    assert_eq!(f.boundaries, 501 + 501 + 1001);
    assert_eq!(f.samples.len() as u64, expected_timed(2003, 7, 1));
    assert_eq!(f.sites.len(), 3);

    // A PT_FOR inside a PT_FOR's body: the header says the timings there are not exact.
    let (_, out, err) = run_mode(&exe, dir.path(), "nested", 1000, &env);
    let (_, out_plain, _) = run_mode(&plain, dir.path(), "nested", 1000, &env);
    assert_eq!(out, out_plain);
    assert!(
        err.contains("PT_FOR loop's clean copy met another probe"),
        "{err}"
    );
}
