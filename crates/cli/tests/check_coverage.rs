//! `proftrust check` against the exact truth, where truth exists (issue 14, "Show"):
//!
//! * coverage: virtual-PMU profiles of bundled workloads (randomised period, several seeds)
//!   and their exact counts from the same QEMU run; the 95% intervals `check` states for
//!   the functions it does not call noise hold the exact share (`audit`'s `exact_share`) at
//!   about the stated rate;
//! * skid: with a skid of 30 cycles and heavy loads, `check` warns of skid and stops trusting
//!   instruction-level attribution, and the audit measures a large instruction-level error;
//!   without skid it does neither;
//! * aliasing: a five-instruction loop under an instructions period that is a multiple of
//!   five is flagged with a fixed period and not with `--randomize`;
//! * cpu-clock (no exact truth): single randomised recordings against the merge of the
//!   others.
//!
//! Needs qemu-x86_64, gcc and the QEMU plugin (built with the CLI), the cpu-clock test gcc
//! and perf_event_open; skips loudly otherwise.

use proftrust_testkit::{have, skip_test};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// The tests of this file one at a time: the cpu-clock test's recordings measure time
/// shares, which move when the other tests' QEMU runs compete for the cores (at 2 cores its
/// coverage fell from ~0.8 alone to 0.44 beside them).
static ALONE: Mutex<()> = Mutex::new(());

fn alone() -> MutexGuard<'static, ()> {
    ALONE.lock().unwrap_or_else(|e| e.into_inner())
}

const BIN: &str = env!("CARGO_BIN_EXE_proftrust");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run_ok(args: &[&str]) -> Vec<u8> {
    let out = Command::new(BIN)
        .arg("-q")
        .args(args)
        .output()
        .expect("run proftrust");
    assert!(
        out.status.success(),
        "proftrust {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn json(args: &[&str]) -> Value {
    serde_json::from_slice(&run_ok(args)).expect("JSON")
}

fn ready(test: &str) -> bool {
    for tool in ["qemu-x86_64", "gcc"] {
        if !have(tool) {
            skip_test(test, &format!("{tool} not installed"));
            return false;
        }
    }
    true
}

/// The bundled workloads, linked statically: every sample and every counted instruction is
/// in the one binary, so `check`'s shares (of all samples) and `audit`'s exact shares (of the
/// binary's instructions) have the same denominator.
fn workloads(dir: &Path) -> PathBuf {
    let out = dir.join("bin");
    std::fs::create_dir_all(&out).unwrap();
    for w in ["omnet", "hmmer"] {
        proftrust_testkit::gcc(
            &out.join(w),
            &[&repo().join(format!("workloads/{w}.c"))],
            &["-fno-omit-frame-pointer", "-static", "-lm"],
        );
    }
    out
}

/// `vpmu` samples and exact counts of one run.
fn vpmu(dir: &Path, prog: &Path, args: &[&str], extra: &[&str], tag: &str) -> (PathBuf, PathBuf) {
    let s = dir.join(format!("{tag}.ptsamp"));
    let e = dir.join(format!("{tag}.ptexact"));
    let mut a: Vec<&str> = vec!["vpmu"];
    a.extend_from_slice(extra);
    let (ss, es) = (s.display().to_string(), e.display().to_string());
    a.extend_from_slice(&["--exact", &es, "-o", &ss, "--"]);
    let p = prog.display().to_string();
    a.push(&p);
    a.extend_from_slice(args);
    run_ok(&a);
    (s, e)
}

fn exact_shares(s: &Path, e: &Path, prog: &Path) -> Vec<(String, f64)> {
    let a = json(&[
        "audit",
        "--samples",
        s.to_str().unwrap(),
        "--truth",
        e.to_str().unwrap(),
        "--binary",
        prog.to_str().unwrap(),
        "--json",
    ]);
    a["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_string(),
                f["exact_share"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn intervals_cover_exact_shares() {
    let _alone = alone();
    let t = "intervals_cover_exact_shares";
    if !ready(t) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = workloads(dir.path());
    let (mut rows, mut covered) = (0u32, 0u32);
    let runs: [(&str, &str, u64); 8] = [
        ("omnet", "5", 1),
        ("omnet", "5", 2),
        ("omnet", "5", 3),
        ("omnet", "5", 4),
        ("omnet", "5", 5),
        ("omnet", "5", 6),
        ("hmmer", "1", 1),
        ("hmmer", "1", 2),
    ];
    for (w, size, seed) in runs {
        let prog = bin.join(w);
        let seed_s = seed.to_string();
        let (s, e) = vpmu(
            dir.path(),
            &prog,
            &[size],
            // --skid 0: the sampling statistics alone, without vpmu's default skid.
            &[
                "--skid",
                "0",
                "--period",
                "1009",
                "--randomize",
                "--seed",
                &seed_s,
            ],
            &format!("{w}{seed}"),
        );
        let exact = exact_shares(&s, &e, &prog);
        let c = json(&[
            "check",
            s.to_str().unwrap(),
            "--binary",
            prog.to_str().unwrap(),
            "--json",
        ]);
        for r in c["functions"].as_array().unwrap() {
            if r["verdict"] == "noise" {
                continue;
            }
            let name = r["name"].as_str().unwrap();
            let Some((_, x)) = exact.iter().find(|(n, _)| n == name) else {
                continue; // outside the audited binary (the dynamic loader)
            };
            let (lo, hi) = (
                r["ci_low"].as_f64().unwrap(),
                r["ci_high"].as_f64().unwrap(),
            );
            rows += 1;
            if (lo..=hi).contains(x) {
                covered += 1;
            } else {
                eprintln!("{w} seed {seed}: {name} exact {x:.4} outside [{lo:.4}, {hi:.4}]");
            }
        }
    }
    let rate = covered as f64 / rows as f64;
    eprintln!("coverage of the stated 95% intervals: {covered} of {rows} = {rate:.3}");
    assert!(rows >= 12, "too few rows ({rows}) to measure coverage");
    // 95% stated; with ~20 rows a rate below 0.8 has probability < 2% if the intervals
    // hold their level.
    assert!(rate >= 0.8, "coverage {rate:.3} ({covered} of {rows})");
}

#[test]
fn skid_is_flagged_where_the_audit_measures_it() {
    let _alone = alone();
    let t = "skid_is_flagged_where_the_audit_measures_it";
    if !ready(t) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = workloads(dir.path());
    let prog = bin.join("omnet");
    let mut results = Vec::new();
    for skid in ["0", "30"] {
        let (s, e) = vpmu(
            dir.path(),
            &prog,
            &["5"],
            &[
                "--period",
                "1009",
                "--randomize",
                "--seed",
                "3",
                "--cpi-model",
                "cache",
                "--skid",
                skid,
            ],
            &format!("skid{skid}"),
        );
        let c = json(&[
            "check",
            s.to_str().unwrap(),
            "--binary",
            prog.to_str().unwrap(),
            "--json",
        ]);
        let a = json(&[
            "audit",
            "--samples",
            s.to_str().unwrap(),
            "--truth",
            e.to_str().unwrap(),
            "--binary",
            prog.to_str().unwrap(),
            "--json",
        ]);
        let warned = c["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["kind"] == "skid");
        let level = c["trustworthy_at"]["level"].as_str().unwrap().to_string();
        let eps = a["metrics"]["epsilon_instruction"].as_f64().unwrap();
        eprintln!("skid {skid}: check warns {warned}, trust down to {level}; audit epsilon(instruction) {eps:.4}");
        results.push((warned, level, eps));
    }
    let (w0, l0, e0) = &results[0];
    let (w30, l30, e30) = &results[1];
    assert!(!w0, "no skid, but check warned of it");
    assert!(*w30, "skid 30 with heavy loads, but check did not warn");
    assert_ne!(l30, "instruction");
    assert!(l0 == "instruction" || l0 == "block", "{l0}");
    assert!(e30 > &(2.0 * e0), "audit: {e30} against {e0}");
}

#[test]
fn aliasing_flagged_with_fixed_period_only() {
    let _alone = alone();
    let t = "aliasing_flagged_with_fixed_period_only";
    if !ready(t) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/check");
    let prog = proftrust_testkit::compile_c(dir.path(), &src, "alias", &["-O1"]);
    let mut flagged = Vec::new();
    for extra in [&[][..], &["--randomize"][..]] {
        let mut a = vec!["--skid", "0", "--period", "10000", "--seed", "1"];
        a.extend_from_slice(extra);
        let tag = if extra.is_empty() { "fixed" } else { "random" };
        let (s, _) = vpmu(dir.path(), &prog, &["2000000"], &a, tag);
        let c = json(&[
            "check",
            s.to_str().unwrap(),
            "--binary",
            prog.to_str().unwrap(),
            "--json",
        ]);
        let f = c["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["kind"] == "aliasing");
        eprintln!("{tag} period: aliasing {f}; verdict {}", c["verdict"]);
        flagged.push((f, c["verdict"].clone()));
    }
    assert!(
        flagged[0].0,
        "fixed period 10000 on a 5-instruction loop: not flagged"
    );
    assert_ne!(flagged[0].1, "act");
    assert!(!flagged[1].0, "randomised period: flagged");
}

/// Issue 14 Show (b): for cpu-clock there is no exact truth, so the reference is a merge of
/// many randomised recordings of the same run (`record --randomize`; merged shares converge
/// to time shares as the recordings add up). Each recording is checked on its own and its
/// stated 95% intervals (function and source-line rows not called noise, recordings without
/// an aliasing flag) are compared with the merge of all the *other* recordings (leave one
/// out, so the reference is independent of the row). The intervals under-cover that
/// reference, by an amount that changes from run to run of this test: 89 of 117 rows (0.761)
/// at load average ~20, 0.86 in another try, 0.82 and 0.44-0.46 on a quiet machine (CI of
/// 2026-11-26). The misses are recordings whose shares move as a whole by more than the
/// binomial spread (omnet's `chase` 0.951 in one recording, 0.970-0.975 in the others;
/// hmmer.c:21 0.013-0.085 between recordings): a single run's Wilson interval bounds *that
/// run's* shares (docs/check.md); the variation between runs of the same program (page
/// faults, where the VM's timer interrupts land) is not in it and cannot be measured from
/// one run. So that rate is printed, and asserted only above 0.2 (intervals far too narrow
/// even for that).
///
/// What a run's interval does claim is checked with a reference from the same run: each
/// recording's samples are split in two by a seeded coin per sample, the first half is
/// checked and its intervals are compared with the second half's shares. The two halves
/// differ by binomial noise alone (variance p(1-p)(1/n1 + 1/n2), twice a half's own), so
/// 95% intervals that are right cover the other half's share at P(|Z| < 1.96/sqrt 2) = 0.83
/// (more where `check` widens an interval for clustered samples); intervals a third too
/// narrow would cover ~0.35. Asserted: at least 0.6.
#[test]
fn cpu_clock_intervals_cover_merged_randomized_recordings() {
    let _alone = alone();
    let test = "cpu_clock_intervals_cover_merged_randomized_recordings";
    if !have("gcc") {
        skip_test(test, "gcc not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = workloads(dir.path());
    let recordings = 7;
    let (mut covered, mut stated) = (0usize, 0usize);
    let (mut half_covered, mut half_stated) = (0usize, 0usize);
    for (w, size) in [("omnet", "15"), ("hmmer", "45")] {
        let prog = bin.join(w);
        let mut reports: Vec<Value> = Vec::new();
        for i in 0..recordings {
            let out = dir.path().join(format!("{w}{i}.ptsamp"));
            let rec = Command::new(BIN)
                .args(["-q", "record", "--randomize", "-c", "50021", "-o"])
                .arg(&out)
                .arg("--")
                .arg(&prog)
                .arg(size)
                .output()
                .expect("run proftrust record");
            if !rec.status.success() {
                let err = String::from_utf8_lossy(&rec.stderr);
                if err.contains("perf_event_paranoid") {
                    skip_test(test, &err);
                    return;
                }
                panic!("record {w}: {err}");
            }
            reports.push(json(&["check", out.to_str().unwrap(), "--json"]));
            let (c, n) = split_half_coverage(&out, &dir.path().join(format!("{w}{i}")), i as u64);
            half_covered += c;
            half_stated += n;
        }
        for level in ["functions", "lines"] {
            for (i, r) in reports.iter().enumerate() {
                if r["aliasing"]["flagged"] == true {
                    continue;
                }
                let mut merged: std::collections::HashMap<&str, u64> = Default::default();
                let mut total = 0u64;
                for (j, o) in reports.iter().enumerate() {
                    if j == i {
                        continue;
                    }
                    for row in o[level].as_array().unwrap() {
                        let n = row["samples"].as_u64().unwrap();
                        *merged.entry(row["name"].as_str().unwrap()).or_default() += n;
                        total += n;
                    }
                }
                let reference = |name: &str| *merged.get(name).unwrap_or(&0) as f64 / total as f64;
                let (c, n) = covering(r, level, reference, &format!("{w} recording {i}"));
                covered += c;
                stated += n;
            }
        }
    }
    let rate = covered as f64 / stated as f64;
    eprintln!(
        "cpu-clock coverage of the other recordings' merge: {covered} of {stated} rows ({rate:.3}) against 0.95 stated"
    );
    let half = half_covered as f64 / half_stated as f64;
    eprintln!(
        "cpu-clock coverage of the other half of the same run: {half_covered} of {half_stated} rows ({half:.3}); 0.83 expected"
    );
    assert!(stated >= 20, "only {stated} rows checked");
    assert!(half_stated >= 20, "only {half_stated} rows checked");
    assert!(rate >= 0.2, "{covered} of {stated} rows covered");
    assert!(half >= 0.6, "{half_covered} of {half_stated} rows covered");
}

/// Splits the sample file `rec` in two by a seeded coin per sample (SplitMix64 of the
/// sample's index and `seed`), checks the first half and counts the rows (functions and
/// lines, not called noise) whose interval holds the second half's share: (covered, rows).
fn split_half_coverage(rec: &Path, stem: &Path, seed: u64) -> (usize, usize) {
    let opts = proftrust_formats::LoadOptions::default();
    let set = proftrust_formats::load_samples(proftrust_formats::Source::Path(rec), &opts)
        .unwrap()
        .0;
    let coin = |k: u64| {
        let mut z =
            (k ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) & 1 == 1
    };
    let mut halves = [set.clone(), set.clone()];
    for (h, half) in halves.iter_mut().enumerate() {
        half.samples = set
            .samples
            .iter()
            .enumerate()
            .filter(|(k, _)| coin(*k as u64) == (h == 1))
            .map(|(_, s)| s.clone())
            .collect();
    }
    let reports: Vec<Value> = halves
        .iter()
        .enumerate()
        .map(|(h, half)| {
            let f = stem.with_extension(format!("half{h}.ptsamp"));
            let w = std::io::BufWriter::new(std::fs::File::create(&f).unwrap());
            proftrust_formats::native::write_samples(w, half).unwrap();
            json(&["check", f.to_str().unwrap(), "--json"])
        })
        .collect();
    if reports[0]["aliasing"]["flagged"] == true {
        return (0, 0);
    }
    let (mut covered, mut rows) = (0, 0);
    for level in ["functions", "lines"] {
        let other: std::collections::HashMap<&str, f64> = reports[1][level]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["name"].as_str().unwrap(), r["share"].as_f64().unwrap()))
            .collect();
        let reference = |name: &str| other.get(name).copied().unwrap_or(0.0);
        let what = format!("{} half 0", stem.display());
        let (c, n) = covering(&reports[0], level, reference, &what);
        covered += c;
        rows += n;
    }
    (covered, rows)
}

/// Of `report`'s rows at `level` not called noise: how many have an interval holding
/// `reference(name)`, and how many there are (misses are printed, prefixed with `what`).
fn covering(
    report: &Value,
    level: &str,
    reference: impl Fn(&str) -> f64,
    what: &str,
) -> (usize, usize) {
    let (mut covered, mut rows) = (0, 0);
    for row in report[level].as_array().unwrap() {
        if row["verdict"] == "noise" {
            continue;
        }
        let name = row["name"].as_str().unwrap();
        let p = reference(name);
        let (lo, hi) = (
            row["ci_low"].as_f64().unwrap(),
            row["ci_high"].as_f64().unwrap(),
        );
        rows += 1;
        if lo <= p && p <= hi {
            covered += 1;
        } else {
            eprintln!("{what} {level} {name}: reference {p:.4} outside {lo:.4}..{hi:.4}");
        }
    }
    (covered, rows)
}
