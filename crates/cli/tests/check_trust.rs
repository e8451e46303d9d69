//! `check`'s verdicts stand on what the samples are attributed with and on enough samples
//! (issue 31 item 3; issue 29, "verdicts know what they stand on"): no "act on it" on a
//! handful of samples, 1 or 2 samples are noise, a row of code without a function is not
//! acted on and the profile is not trusted down to a level its samples are not attributed
//! at, leaving out the binary never raises the verdict, the share of samples without a
//! function is stated per module, and the inline table agrees with the function table.

use crate::check_util::{fixtures, json, programs, pt_record, run};
use proftrust_testkit::{have, need, skip_test};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The first `n` samples of the fixture's `perf script` text (163 cpu-clock samples of
/// `tiny`), with the recorded path of the binary replaced by `path`.
fn first_samples(dir: &Path, n: usize, path: &str) -> PathBuf {
    let text = std::fs::read_to_string(fixtures().join("tiny.perf-script")).unwrap();
    let blocks: Vec<&str> = text
        .split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .collect();
    assert!(blocks.len() >= n, "{} samples in the fixture", blocks.len());
    let mut out = blocks[..n]
        .join("\n\n")
        .replace("/tmp/proftrust-golden/tiny", path);
    out.push_str("\n\n");
    let p = dir.join(format!("first{n}.perf-script"));
    std::fs::write(&p, out).unwrap();
    p
}

fn rank(v: &Value) -> u8 {
    match v.as_str().unwrap() {
        "act" => 2,
        "rank-only" => 1,
        "noise" => 0,
        other => panic!("verdict {other}"),
    }
}

/// 10 samples, all in one binary whose file is not found: one `[tiny]` row with every
/// sample. It was "act on it" (Wilson 72%..100% is ±14% of a 100% share) with "trust down to:
/// inline" while no sample had a function; now the row is noise (10 < 16 samples), the
/// profile is noise (no sample has a function) and trusted down to nothing, and the share
/// without a function is stated for the module.
#[test]
fn a_handful_of_samples_without_a_function_is_not_acted_on() {
    let dir = tempfile::tempdir().unwrap();
    let p = first_samples(dir.path(), 10, "/nonexistent/proftrust-test/tiny");
    let r = json(&["check", p.to_str().unwrap(), "--json"]);
    assert_eq!(r["samples"], 10);
    let rows = r["functions"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["name"], "[tiny]");
    assert_eq!(rows[0]["attribution"], "module");
    assert_eq!(rows[0]["verdict"], "noise", "{}", rows[0]["reason"]);
    assert_eq!(r["verdict"], "noise", "{}", r["reason"]);
    assert!(r["reason"]
        .as_str()
        .unwrap()
        .starts_with("no sample has a function (100.00%"));
    assert_eq!(r["trustworthy_at"]["level"], "none");
    let u = &r["health"]["unattributed"];
    assert_eq!(u[0]["module"], "tiny", "{u}");
    assert_eq!(u[0]["samples"], 10);
    assert_eq!(u[0]["without_function"], 10);
    assert_eq!(u[0]["share"], 1.0);
    assert_eq!(r["health"]["unsymbolized"], 1.0);
    // The text states it too.
    let out = run(&["check", p.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "functions:    100.00% of the samples in no function (tiny 100.00% of its 10)"
        ),
        "{text}"
    );
}

/// 2 samples with the binary: both in `leaf` ([34.2%, 100%], ±33%): "rank only" before,
/// noise now; the profile is noise.
#[test]
fn one_or_two_samples_are_noise() {
    let dir = tempfile::tempdir().unwrap();
    let p = first_samples(dir.path(), 2, "/tmp/proftrust-golden/tiny");
    let b = fixtures().join("tiny");
    let r = json(&[
        "check",
        p.to_str().unwrap(),
        "--binary",
        b.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r["samples"], 2);
    for row in r["functions"].as_array().unwrap() {
        assert_eq!(row["verdict"], "noise", "{row}");
        assert!(row["samples"].as_u64().unwrap() <= 2);
    }
    assert_eq!(r["verdict"], "noise", "{}", r["reason"]);
}

/// The same 80 samples with and without the binary: with it, `leaf` and `work` (50 and 30
/// samples, below the 97 an act needs) make the profile "rank only"; without it, the one
/// `[tiny]` row of 80 samples was "act on it". Leaving out the binary must never raise the
/// verdict (nor the trusted level).
#[test]
fn leaving_out_the_binary_never_raises_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let p = first_samples(dir.path(), 80, "/nonexistent/proftrust-test/tiny");
    let ps = p.to_str().unwrap();
    let b = fixtures().join("tiny");
    let with = json(&["check", ps, "--binary", b.to_str().unwrap(), "--json"]);
    let without = json(&["check", ps, "--json"]);
    assert_eq!(with["functions"][0]["name"], "leaf");
    assert_eq!(with["verdict"], "rank-only", "{}", with["reason"]);
    assert!(
        rank(&without["verdict"]) <= rank(&with["verdict"]),
        "without the binary {} ({}), with it {}",
        without["verdict"],
        without["reason"],
        with["verdict"]
    );
    let level = |v: &Value| {
        ["none", "function", "inline", "line", "block", "instruction"]
            .iter()
            .position(|l| v["trustworthy_at"]["level"] == *l)
            .unwrap()
    };
    assert!(level(&without) <= level(&with));
    assert_eq!(without["trustworthy_at"]["level"], "none");
}

/// A binary without debug information: the functions are known, inline frames and lines
/// are not, so the profile is trusted down to functions at most (it said "inline" before,
/// with "no line information" as the only reason not to go finer).
#[test]
fn no_debug_information_no_trust_below_functions() {
    let t = "no_debug_information_no_trust_below_functions";
    if !have("objcopy") {
        return skip_test(t, "objcopy (binutils) is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let stripped = dir.path().join("tiny");
    let st = Command::new("objcopy")
        .arg("--strip-debug")
        .arg(fixtures().join("tiny"))
        .arg(&stripped)
        .status()
        .unwrap();
    assert!(st.success());
    let p = fixtures().join("tiny.ptsamp");
    let r = json(&[
        "check",
        p.to_str().unwrap(),
        "--binary",
        stripped.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r["functions"][0]["name"], "leaf");
    assert_eq!(r["functions"][0]["attribution"], "function");
    assert_eq!(r["functions"][0]["verdict"], "act");
    assert_eq!(r["inlines"][0]["attribution"], "function");
    assert_ne!(r["inlines"][0]["verdict"], "act");
    assert_eq!(
        r["trustworthy_at"]["level"], "function",
        "{}",
        r["trustworthy_at"]
    );
    assert!(r["trustworthy_at"]["reason"]
        .as_str()
        .unwrap()
        .contains("no debug information"));
    assert!(r["lines"].as_array().unwrap().is_empty());
}

/// The locked program at `-O2 -g` inlines the TSC read (`__rdtsc`) into `a` and `b`, where
/// most samples land: the inline table named that row `__rdtsc` and gave `b` its own 5%
/// against 80% in the function table (issue 31 item 3). Now each inline row is a function
/// row's name or `INLINE (inlined in FUNCTION)`, and the inline rows of a function add up to
/// its samples.
#[test]
fn inline_rows_agree_with_function_rows() {
    let t = "inline_rows_agree_with_function_rows";
    if !need(t, &["gcc"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = proftrust_testkit::compile_c(dir.path(), &programs(), "locked", &[]);
    let data = dir.path().join("locked.ptsamp");
    if let Err(e) = pt_record(&["--randomize", "-c", "100000"], &data, &prog, "0.3") {
        return skip_test(t, &e);
    }
    let r = json(&[
        "check",
        data.to_str().unwrap(),
        "--binary",
        prog.to_str().unwrap(),
        "--top",
        "1000",
        "--json",
    ]);
    let functions = r["functions"].as_array().unwrap();
    let inlines = r["inlines"].as_array().unwrap();
    let samples_of = |rows: &[Value], name: &str| -> u64 {
        rows.iter()
            .filter(|x| {
                let n = x["name"].as_str().unwrap();
                n == name || n.ends_with(&format!(" (inlined in {name})"))
            })
            .map(|x| x["samples"].as_u64().unwrap())
            .sum()
    };
    for f in functions {
        let name = f["name"].as_str().unwrap();
        assert_eq!(
            samples_of(inlines, name),
            f["samples"].as_u64().unwrap(),
            "{name}: inline rows against the function row"
        );
    }
    let b = functions.iter().find(|f| f["name"] == "b").expect("b");
    let rdtsc_in_b = inlines
        .iter()
        .find(|x| x["name"] == "__rdtsc (inlined in b)")
        .expect("__rdtsc inlined in b");
    assert!(rdtsc_in_b["samples"].as_u64().unwrap() * 2 > b["samples"].as_u64().unwrap());
}
