//! Issue 35: `check` flags a period locked to a cycle of the program, and gives an interval
//! for another run of the same program and input (`run_low`/`run_high`), from several
//! recordings when given and from one by the over-dispersion estimator. The coverage of those
//! intervals over repeated recordings is measured by `scripts/check-run-coverage.sh`
//! (docs/check.md, "Intervals for another run"): it takes minutes and wants a quiet machine.

use crate::check_util::{f, fixtures, json, perf_record, programs, pt_record, row, run};
use proftrust_testkit::{need, skip_test};
use serde_json::Value;
use std::collections::HashMap;
use std::process::Command;

/// The Wilson interval of share `p` over `n` (possibly effective) samples at 95%, as
/// Wilson (1927) wrote it.
fn wilson(p: f64, n: f64) -> (f64, f64) {
    let z = 1.959_963_984_540_054_f64;
    let d = 1.0 + z * z / n;
    let c = (p + z * z / (2.0 * n)) / d;
    let h = z / d * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    (
        if p <= 0.0 { 0.0 } else { (c - h).max(0.0) },
        if p >= 1.0 { 1.0 } else { (c + h).min(1.0) },
    )
}

/// Samples of `(thread, time in ns, function)` from `perf script`-like text whose sample
/// lines read `COMM TID[/TID] [CPU] SECONDS: PERIOD EVENT: ADDR SYMBOL (DSO)` (perf's
/// default fields with one frame, or `proftrust read --script`).
fn parse_script(text: &str) -> Vec<(u64, u64, String)> {
    let mut out = Vec::new();
    for l in text.lines() {
        if l.starts_with('#') {
            continue;
        }
        let w: Vec<&str> = l.split_whitespace().collect();
        let Some(t) = w.iter().position(|x| x.ends_with(':') && x.contains('.')) else {
            continue;
        };
        let Ok(secs) = w[t].trim_end_matches(':').parse::<f64>() else {
            continue;
        };
        let tid = w[1].rsplit('/').next().unwrap().parse().unwrap_or(0);
        // After the time: period, event, address, symbol.
        let sym = w.get(t + 4).copied().unwrap_or("?");
        out.push((tid, (secs * 1e9).round() as u64, sym.to_string()));
    }
    out
}

/// The samples of perf.data `data` as `perf script` reads them ([`parse_script`]).
fn perf_script_samples(data: &std::path::Path) -> Vec<(u64, u64, String)> {
    let script = Command::new("perf")
        .args(["script", "-F", "comm,tid,time,period,event,ip,sym", "-i"])
        .arg(data)
        .output()
        .unwrap();
    parse_script(&String::from_utf8_lossy(&script.stdout))
}

/// Of the samples in uninterrupted stretches (no gap of 4 periods) of at least 20 samples
/// of `a` or `b`, the share that sits in stretches where `a` has under 5% or over 95% of
/// them: locked stretches, each seeing the 100 µs cycle at one phase (a takes 20% of the
/// time). Also `a`'s share of the `a` and `b` samples over the run.
fn locked_share(samples: &[(u64, u64, String)]) -> (f64, f64) {
    let mut by_tid: HashMap<u64, Vec<&(u64, u64, String)>> = HashMap::new();
    for s in samples {
        by_tid.entry(s.0).or_default().push(s);
    }
    let (mut locked, mut all) = (0usize, 0usize);
    let (mut na, mut nb) = (0usize, 0usize);
    let mut close = |st: &mut Vec<&str>| {
        let a = st.iter().filter(|f| **f == "a").count();
        let b = st.iter().filter(|f| **f == "b").count();
        na += a;
        nb += b;
        if a + b >= 20 {
            all += a + b;
            let share = a as f64 / (a + b) as f64;
            if !(0.05..=0.95).contains(&share) {
                locked += a + b;
            }
        }
        st.clear();
    };
    for v in by_tid.values() {
        let mut st: Vec<&str> = Vec::new();
        for (i, s) in v.iter().enumerate() {
            if i > 0 && s.1.saturating_sub(v[i - 1].1) > 400_000 {
                close(&mut st);
            }
            st.push(s.2.as_str());
        }
        close(&mut st);
    }
    (
        locked as f64 / all.max(1) as f64,
        na as f64 / (na + nb).max(1) as f64,
    )
}

fn aliasing_warning(r: &Value) -> Option<String> {
    r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["kind"] == "aliasing")
        .map(|w| w["message"].as_str().unwrap().to_string())
}

/// The program of issue 35 (`tests/check/locked.c`: a() and b() alternating in a strict
/// 100 µs TSC-timed cycle, 20/80) recorded as the issue did, `perf record -e cpu-clock:u -c
/// 100000`, aliases: read back by `perf script`, the stretches of the recording sit at one
/// phase of the cycle (all a() or all b(), where a() has 20% of the time). `check` warns
/// (kind `aliasing`) naming the period, a and b, and the fixes. Randomised (`proftrust record
/// --randomize`), the stretches are mixed, a() gets about its 20%, and no aliasing warning.
///
/// A fixed recording carries evidence of the lock only where the sampling instant crosses a
/// boundary of the cycle (the timer's jitter, the program's phase drifting, the thread
/// interrupted): on a quiet machine one of seven recordings stayed in b() for 2 s without a
/// crossing (docs/check.md). The fixed recording is therefore taken up to three times; the
/// warning must come on one of those perf's reading finds locked (none locked: the machine
/// was too busy to hold the cycle, and the test skips saying so).
#[test]
fn period_locked_loop_is_flagged_with_a_fixed_period_only() {
    let t = "period_locked_loop_is_flagged_with_a_fixed_period_only";
    if !need(t, &["gcc", "perf"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = proftrust_testkit::compile_c(dir.path(), &programs(), "locked", &[]);
    let pb = prog.to_str().unwrap();
    let (mut flagged, mut locked_runs) = (None, 0);
    for attempt in 0..3 {
        let data = dir.path().join(format!("fixed{attempt}.data"));
        if let Err(e) = perf_record(&["-e", "cpu-clock:u", "-c", "100000"], &data, &prog, "2") {
            return skip_test(t, &e);
        }
        let samples = perf_script_samples(&data);
        let (locked, a_share) = locked_share(&samples);
        eprintln!(
            "fixed recording {attempt}: {} samples, {:.1}% of them in locked stretches, a() {:.1}% of a() and b() (time: 20%)",
            samples.len(),
            100.0 * locked,
            100.0 * a_share
        );
        // The premise, by perf's own reading: the machine held the lock. A busy machine
        // (other builds on both cores) delays the timer enough to break it; such a
        // recording says nothing about check and is taken again.
        if locked < 0.8 {
            eprintln!("fixed recording {attempt}: not locked by perf's reading (a busy machine?)");
            continue;
        }
        locked_runs += 1;
        let r = json(&["check", data.to_str().unwrap(), "--binary", pb, "--json"]);
        if let Some(w) = aliasing_warning(&r) {
            flagged = Some((r, w));
            break;
        }
    }
    if locked_runs == 0 {
        return skip_test(
            t,
            "none of three fixed-period recordings was locked by perf's own reading: the machine \
             is too busy for the program's 100 us cycle to hold (run the test on a quiet machine)",
        );
    }
    let (r, w) = flagged.expect("no aliasing warning on the locked recordings");
    assert!(w.contains("the period (100000 ns) is locked"), "{w}");
    assert!(
        w.contains("the shares of a, b") || w.contains("the shares of b, a"),
        "{w}"
    );
    assert!(
        w.contains("--randomize") && w.contains("perf record -c"),
        "{w}"
    );
    assert_eq!(r["phase_lock"]["flagged"], true);
    assert_eq!(r["phase_lock"]["period"], 100000);
    assert_ne!(r["verdict"], "act");
    assert_eq!(r["run_interval"]["method"], "stretches");

    // Randomised: mixed stretches, a() near its time share, no warning.
    let rnd = dir.path().join("rnd.ptsamp");
    pt_record(&["--randomize", "-c", "100000"], &rnd, &prog, "3").unwrap();
    let text = run(&["read", "--script", rnd.to_str().unwrap(), "--binary", pb]);
    let samples = parse_script(&String::from_utf8_lossy(&text.stdout));
    let (locked, a_share) = locked_share(&samples);
    eprintln!(
        "randomised recording: {} samples, {:.1}% in locked stretches, a() {:.1}%",
        samples.len(),
        100.0 * locked,
        100.0 * a_share
    );
    // The randomised period (T + uniform(0..T/8), seed 001 §4) moves the phase by 6 µs a
    // sample on average: a short stretch can still miss a()'s 20 µs, so some are pure, but
    // far fewer than under the fixed period; over the run a() is near its 20% (measured
    // 16.7% to 19.8%, with about 300 independent looks at the cycle in 3 s).
    assert!(locked <= 0.5, "{locked}");
    assert!((a_share - 0.2).abs() < 0.07, "{a_share}");
    let r = json(&["check", rnd.to_str().unwrap(), "--binary", pb, "--json"]);
    assert_eq!(aliasing_warning(&r), None);
    assert!(
        r["phase_lock"].is_null(),
        "not tested on a randomised period"
    );
    assert_eq!(r["run_interval"]["method"], "overdispersion");
}

/// Of the consecutive samples of one thread at most 4 periods apart, the share whose
/// interval is within 10% of the period `p` (ns): how well the machine kept the timer. A
/// busy machine delays timer interrupts, and a delayed interval is both a larger shift from
/// the period and more time for a phased program to change function, which the phase-lock
/// test cannot tell from a lock (docs/check.md).
fn timer_kept_share(samples: &[(u64, u64, String)], p: u64) -> f64 {
    let mut by_tid: HashMap<u64, Vec<u64>> = HashMap::new();
    for s in samples {
        by_tid.entry(s.0).or_default().push(s.1);
    }
    let (mut kept, mut all) = (0usize, 0usize);
    for v in by_tid.values() {
        for w in v.windows(2) {
            let iv = w[1].saturating_sub(w[0]);
            if iv <= 4 * p {
                all += 1;
                kept += usize::from(iv.abs_diff(p) * 10 <= p);
            }
        }
    }
    kept as f64 / all.max(1) as f64
}

/// The other half of issue 35's "stays quiet": programs without a period-locked loop (one
/// with phases of milliseconds, one steady fine-grained mix of sub-microsecond calls)
/// recorded with the same fixed 100 µs period are tested for a phase lock (the period is not
/// randomised) and not flagged, and no aliasing warning comes (measured z -2.0 to 2.7
/// against the threshold 4 in 11 runs, docs/check.md). The premise, by perf's own reading:
/// the machine kept the timer (at least 95% of the intervals within 10% of the period); a
/// recording on a busy machine says nothing here and is taken again, up to three times (a
/// CI run with both cores busy gave the phased program z 4.13).
#[test]
fn fixed_period_without_a_locked_loop_is_not_flagged() {
    let t = "fixed_period_without_a_locked_loop_is_not_flagged";
    if !need(t, &["gcc", "perf"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (name, arg) in [("phases", "30"), ("steady", "350000")] {
        let prog = proftrust_testkit::compile_c(dir.path(), &programs(), name, &[]);
        let mut tested = false;
        for attempt in 0..3 {
            let data = dir.path().join(format!("{name}{attempt}.data"));
            if let Err(e) = perf_record(&["-e", "cpu-clock:u", "-c", "100000"], &data, &prog, arg) {
                return skip_test(t, &e);
            }
            let kept = timer_kept_share(&perf_script_samples(&data), 100_000);
            eprintln!(
                "{name} recording {attempt}: {:.1}% of the intervals within 10% of the period",
                100.0 * kept
            );
            if kept < 0.95 {
                continue;
            }
            let r = json(&[
                "check",
                data.to_str().unwrap(),
                "--binary",
                prog.to_str().unwrap(),
                "--json",
            ]);
            eprintln!("{name}: phase_lock {}", r["phase_lock"]);
            assert_eq!(r["phase_lock"]["period"], 100000, "{name}: tested");
            assert_eq!(r["phase_lock"]["flagged"], false, "{name}");
            assert_eq!(aliasing_warning(&r), None, "{name}");
            assert_eq!(r["run_interval"]["method"], "overdispersion", "{name}");
            tested = true;
            break;
        }
        if !tested {
            return skip_test(
                t,
                &format!("none of three fixed-period recordings of {name} kept the timer (95% of the intervals within 10% of the period): the machine is too busy (run the test on a quiet machine)"),
            );
        }
    }
}

/// Three "recordings": the fixture's 163 cpu-clock samples of `tiny` cut into three `perf
/// script` files of 54, 54 and 55 samples. Checked together, the samples merge (163) and
/// each function's `run_low`/`run_high` is the prediction interval of the three shares
/// (computed here from the files' own first frames): mean ± t(2, 97.5%)·sd·√(1 + 1/3), never
/// narrower than the Wilson interval at the mean size. One recording alone: the Wilson
/// interval at the effective size 1/(1/n + 0.028²).
#[test]
fn several_recordings_give_the_spread_between_them() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixtures().join("tiny.perf-script")).unwrap();
    let blocks: Vec<&str> = text
        .split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .collect();
    assert_eq!(blocks.len(), 163);
    let parts = [&blocks[..54], &blocks[54..108], &blocks[108..]];
    let mut paths = Vec::new();
    let mut leaf = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let p = dir.path().join(format!("part{i}.perf-script"));
        std::fs::write(&p, format!("{}\n\n", part.join("\n\n"))).unwrap();
        paths.push(p.display().to_string());
        // The leaf frame: the line after the header.
        let k = part
            .iter()
            .filter(|b| b.lines().nth(1).is_some_and(|l| l.contains(" leaf ")))
            .count();
        leaf.push(k as f64 / part.len() as f64);
    }
    let b = fixtures().join("tiny");
    let mut args = vec!["check"];
    args.extend(paths.iter().map(String::as_str));
    args.extend(["--binary", b.to_str().unwrap(), "--json"]);
    let r = json(&args);
    assert_eq!(r["samples"], 163);
    assert_eq!(r["recordings"].as_array().unwrap().len(), 3);
    assert_eq!(r["run_interval"]["method"], "recordings");
    assert_eq!(r["run_interval"]["recordings"], 3);
    let m = leaf.iter().sum::<f64>() / 3.0;
    let sd = (leaf.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 2.0).sqrt();
    let half = 4.302_652_729_749_464 * sd * (4.0f64 / 3.0).sqrt();
    let (wl, wh) = wilson(m, 163.0 / 3.0);
    let (lo, hi) = ((m - half).max(0.0).min(wl), (m + half).min(1.0).max(wh));
    let l = row(&r["functions"], "leaf");
    assert!((f(&l["run_low"]) - lo).abs() < 1e-9, "{l} {lo} {leaf:?}");
    assert!((f(&l["run_high"]) - hi).abs() < 1e-9, "{l} {hi}");
    // The whole profile alone: the over-dispersion estimator.
    let one = json(&[
        "check",
        fixtures().join("tiny.perf-script").to_str().unwrap(),
        "--binary",
        b.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(one["run_interval"]["method"], "overdispersion");
    let l = row(&one["functions"], "leaf");
    let (lo, hi) = wilson(102.0 / 163.0, 1.0 / (1.0 / 163.0 + 0.028 * 0.028));
    assert!((f(&l["run_low"]) - lo).abs() < 1e-9, "{l} {lo}");
    assert!((f(&l["run_high"]) - hi).abs() < 1e-9, "{l} {hi}");
    // Recordings of different events are not checked together.
    let out = run(&[
        "check",
        fixtures().join("tiny.ptsamp").to_str().unwrap(),
        fixtures().join("tiny.perf.data").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("recordings are checked together by event name")
            && err.contains("no event instructions:vpmu"),
        "{err}"
    );
}
