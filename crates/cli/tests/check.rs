//! End-to-end tests of `proftrust check` against independent oracles: intervals and
//! quantities computed by hand, `perf report` sample counts of a perf-recorded perf.data,
//! and bad input. (The coverage of the intervals against exact shares is in
//! `check_coverage.rs`; the text and JSON layouts are golden files, `golden.rs`.)

use crate::check_util::{f, fixtures, json, perf_record, programs, row, run};
use proftrust_testkit::{have, skip_test};
use std::process::Command;

/// The fixture's virtual-PMU profile of `tiny`: 754 instruction samples, 358 in `leaf`,
/// 303 in `work`, 93 in `walk` (the same counts `audit` reads from it).
#[test]
fn intervals_and_resolution_by_hand() {
    let d = fixtures();
    let p = d.join("tiny.ptsamp");
    let b = d.join("tiny");
    let r = json(&[
        "check",
        p.to_str().unwrap(),
        "--binary",
        b.to_str().unwrap(),
        "--target",
        "1%",
        "--json",
    ]);
    assert_eq!(r["samples"], 754);
    assert_eq!(r["event"]["name"], "instructions:vpmu");
    let leaf = row(&r["functions"], "leaf");
    assert_eq!(leaf["samples"], 358);
    // Wilson by hand: p = 358/754, z = 1.959964: centre (p + z²/2n)/(1 + z²/n) = 0.474929,
    // half z/(1 + z²/n)·sqrt(p(1−p)/n + z²/4n²) = 0.035553 -> [0.439376, 0.510482].
    assert!((f(&leaf["ci_low"]) - 0.439_376).abs() < 1e-5, "{leaf}");
    assert!((f(&leaf["ci_high"]) - 0.510_482).abs() < 1e-5, "{leaf}");
    assert_eq!(leaf["interval"], "wilson");
    // Smallest share told from zero: 1 − 0.05^(1/754) = 0.0039652.
    assert!((f(&r["smallest_share"]) - 0.003_965_2).abs() < 1e-6);
    // leaf against work: (358 − 303)/sqrt(358 + 303 − 55²/754) = 2.1458 > 1.96.
    assert_eq!(leaf["distinct_from_next"], true);
    // ±7% of its share: acted on.
    assert_eq!(leaf["verdict"], "act");
    // --target 1%: the widest of the top 3 half-widths, squared over 0.01².
    let top = r["functions"].as_array().unwrap();
    let want = top
        .iter()
        .take(10)
        .map(|x| ((f(&x["ci_high"]) - f(&x["ci_low"])) / 2.0 / 0.01).powi(2))
        .fold(0.0, f64::max);
    assert!((f(&r["target"]["factor"]) - want).abs() < 1e-9);
    assert_eq!(r["target"]["samples_needed"], (754.0 * want).ceil() as u64);
    // Every warning has the contract's keys.
    for w in r["warnings"].as_array().unwrap() {
        assert!(w["kind"].is_string() && w["message"].is_string());
    }
    // A fixed period on a loop that does not divide it drifts over every phase: no
    // aliasing (see docs/check.md).
    assert_eq!(r["aliasing"]["flagged"], false);
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.txt");
    std::fs::write(&garbage, "hello world\n").unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "").unwrap();
    let html = dir.path().join("out.html");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["check".into(), "/nonexistent/perf.data".into()],
            "no such file",
        ),
        (
            vec!["check".into(), garbage.display().to_string()],
            "unknown file format",
        ),
        (vec!["check".into(), empty.display().to_string()], "empty"),
        (
            vec![
                "check".into(),
                fixtures().join("tiny.ptsamp").display().to_string(),
                "--event".into(),
                "nosuch".into(),
            ],
            "it has instructions:vpmu, cycles:vpmu",
        ),
        (
            vec![
                "check".into(),
                fixtures().join("tiny.ptsamp").display().to_string(),
                "--target".into(),
                "200%".into(),
            ],
            "between 0 and 100%",
        ),
        (
            vec![
                "check".into(),
                garbage.display().to_string(),
                "--html".into(),
                html.display().to_string(),
            ],
            "unknown file format",
        ),
    ];
    for (args, want) in cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{a:?}: {err}");
        assert!(err.contains(want), "{a:?}: {err}");
        assert!(!err.contains("panicked"), "{a:?}: {err}");
    }
    assert!(!html.exists(), "no report is written for bad input");
}

/// A cut perf.data is read up to its last complete record and reported as ended early.
#[test]
fn truncated_perf_data_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let data = std::fs::read(fixtures().join("tiny.perf.data")).unwrap();
    let cut = dir.path().join("cut.data");
    std::fs::write(&cut, &data[..3000]).unwrap();
    let r = json(&["check", cut.to_str().unwrap(), "--json"]);
    assert!(
        r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["kind"] == "ended-early"),
        "{}",
        r["warnings"]
    );
}

/// perf record -e cpu-clock of a real program: `check`'s per-function samples equal `perf
/// report`'s, and the HTML report is written.
#[test]
fn perf_recorded_cpu_clock() {
    let t = "perf_recorded_cpu_clock";
    if !have("perf") || !have("gcc") {
        return skip_test(t, "perf or gcc not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = proftrust_testkit::compile_c(
        dir.path(),
        &fixtures(),
        "tiny",
        &[
            "-O2",
            "-g",
            "-fno-omit-frame-pointer",
            "-static",
            "-nostdlib",
            "-fno-pie",
            "-no-pie",
            "-fno-stack-protector",
        ],
    );
    let data = dir.path().join("perf.data");
    if let Err(e) = perf_record(
        &["-e", "cpu-clock:u", "-c", "20011"],
        &data,
        &prog,
        "3000000",
    ) {
        return skip_test(t, &e);
    }
    let rep = Command::new("perf")
        .args(["report", "--stdio", "-F", "sample,sym", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&rep.stdout);
    // Lines like "   1234  [.] leaf".
    let perf_counts: Vec<(String, u64)> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let n: u64 = it.next()?.parse().ok()?;
            let _ = it.next()?;
            Some((it.collect::<Vec<_>>().join(" "), n))
        })
        .collect();
    assert!(
        !perf_counts.is_empty(),
        "perf report printed nothing: {text}"
    );
    let html = dir.path().join("check.html");
    let r = json(&[
        "check",
        data.to_str().unwrap(),
        "--binary",
        prog.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r["event"]["kind"], "cpu-clock");
    assert_eq!(r["event"]["measures"], "time on CPU");
    let total: u64 = perf_counts.iter().map(|x| x.1).sum();
    assert_eq!(r["samples"], total);
    for (name, n) in &perf_counts {
        if name.starts_with("0x") {
            continue;
        }
        assert_eq!(row(&r["functions"], name)["samples"], *n, "{name}");
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.contains("leaf"));
    assert!(!page.contains("<script"));
}

/// Hardware time from the virtual PMU's branch stacks (issue 34): `calls.c` (a pointer-chase
/// step and a multiply-add mix called in turn) under `vpmu --lbr`, checked with its stacks.
///
/// * The flag's rule, from the JSON of every run: a row is flagged `hardware-time` exactly
///   when it has at least the noise floor (16) of samples and of measuring stacks and its
///   two intervals are disjoint; the run has rows below the floor whose intervals are
///   disjoint (1 sample, no measured range: the rows the floor exists for), not flagged.
/// * Cycles, skid 0 and skid 200: nothing flagged. A skid that does not depend on what the
///   core is doing moves every sample by the same time, so time-uniform overflows land
///   time-uniformly: a time event's shares do not move (docs/check.md "Hardware time").
/// * Instructions, skid 0: `step` flagged, its instruction share under its time (an event
///   that is not time); skid 200: the same event no longer flagged, the skid carries each
///   instruction sample 200 cycles on, to wherever the time is then.
#[test]
fn hardware_time_floor_and_skid_on_vpmu_branch_stacks() {
    let t = "hardware_time_floor_and_skid_on_vpmu_branch_stacks";
    if !proftrust_testkit::need(t, &["gcc", "qemu-x86_64"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = proftrust_testkit::compile_c(dir.path(), &programs(), "calls", &[]);
    let p = prog.to_str().unwrap();
    let check = |skid: &str, event: &str| {
        let s = dir.path().join(format!("skid{skid}.ptsamp"));
        if !s.exists() {
            let s = s.to_str().unwrap();
            let out = run(&[
                "vpmu",
                "--lbr",
                "--skid",
                skid,
                "--cpi-model",
                "cache",
                "--period",
                "1009",
                "--randomize",
                "--seed",
                "1",
                "-o",
                s,
                "--",
                p,
                "2",
            ]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        json(&[
            "check",
            s.to_str().unwrap(),
            "--binary",
            p,
            "--event",
            event,
            "--json",
        ])
    };
    // Rows below the floor whose intervals disagree, over every report: the floor must have
    // held back at least one flag (which rows fall below it moves with the guest's stack, so
    // it is asked of the reports together, not of each).
    let below_disjoint = std::cell::Cell::new(0usize);
    let flagged = |r: &serde_json::Value| -> Vec<String> {
        let mut out = Vec::new();
        for row in r["functions"].as_array().unwrap() {
            let (k, w) = (
                row["samples"].as_u64().unwrap(),
                row["hardware_time_windows"].as_u64().unwrap(),
            );
            let disjoint = f(&row["ci_high"]) < f(&row["hardware_time_low"])
                || f(&row["hardware_time_high"]) < f(&row["ci_low"]);
            let flag = row["flags"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x == "hardware-time");
            assert_eq!(flag, disjoint && k >= 16 && w >= 16, "{row}");
            below_disjoint.set(below_disjoint.get() + usize::from(disjoint && (k < 16 || w < 16)));
            if flag {
                out.push(row["name"].as_str().unwrap().to_string());
            }
        }
        out
    };
    for skid in ["0", "200"] {
        let r = check(skid, "cycles:vpmu");
        assert!(
            flagged(&r).is_empty(),
            "cycles, skid {skid}: {}",
            r["functions"]
        );
        assert!(r["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("fewer than 16 samples or fewer than 16 branch stacks")));
        // The time-proportional event agrees with the stacks: the sampled share's interval
        // and the hardware time's overlap. (Each estimate inside the other's 95% interval
        // would be a test that fails by chance about once in four runs of these six rows:
        // a run at another path moved `step` by 2.07 of its standard errors.)
        for name in ["main", "mix", "step"] {
            let row = row(&r["functions"], name);
            assert!(
                f(&row["ci_low"]) <= f(&row["hardware_time_high"])
                    && f(&row["hardware_time_low"]) <= f(&row["ci_high"]),
                "{row}"
            );
        }
    }
    let r0 = check("0", "instructions:vpmu");
    assert_eq!(
        flagged(&r0),
        vec!["step".to_string()],
        "{}",
        r0["functions"]
    );
    let step = row(&r0["functions"], "step");
    assert!(
        f(&step["ci_high"]) < f(&step["hardware_time_low"]),
        "{step}"
    );
    let r200 = check("200", "instructions:vpmu");
    assert!(flagged(&r200).is_empty(), "{}", r200["functions"]);
    assert!(
        below_disjoint.get() > 0,
        "no row below the floor disagrees in any of the four reports"
    );
}
