//! CLI contract of `proftrust simulate sampling` and `proftrust analyze granularity`.

use proftrust_model::{EventDesc, EventKind, Location, Module, Sample, SampleSet, SamplingConfig};
use std::path::Path;
use std::process::{Command, Output};

fn proftrust(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_proftrust"))
        .args(args)
        .output()
        .expect("run proftrust")
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = proftrust(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

#[test]
fn simulate_sampling_json_contract_for_every_preset() {
    for (preset, rows) in [
        ("table2", 6),
        ("table3", 12),
        ("table4", 5),
        ("table5", 15),
        ("table6", 15),
        ("aliasing", 6),
        ("fragmentation", 4),
        ("sweep", 16),
    ] {
        let v = json(&[
            "simulate", "sampling", "--preset", preset, "--reps", "40", "--seed", "7", "--json",
        ]);
        assert_eq!(v["preset"], preset);
        assert_eq!(v["seed"], 7);
        let rs = v["rows"].as_array().expect("rows");
        assert_eq!(rs.len(), rows, "{preset}");
        for r in rs {
            for k in [
                "task",
                "granularity",
                "actual_mean",
                "profiled_mean",
                "profiled_sd",
            ] {
                assert!(!r[k].is_null(), "{preset}: row lacks {k}: {r}");
            }
        }
    }
}

#[test]
fn table4_means_match_actual_shares_and_seed_reproduces() {
    let args = [
        "simulate", "sampling", "--preset", "table4", "--reps", "200", "--seed", "42", "--json",
    ];
    let v = json(&args);
    let tasks: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["task"].as_str().unwrap())
        .collect();
    assert_eq!(tasks, ["idle", "1", "2", "3", "4"]);
    for r in v["rows"].as_array().unwrap() {
        let (a, p, sd) = (
            r["actual_mean"].as_f64().unwrap(),
            r["profiled_mean"].as_f64().unwrap(),
            r["profiled_sd"].as_f64().unwrap(),
        );
        // 4 standard errors of 200 repetitions + the 1/n edge effect (n = 10,000).
        assert!((a - p).abs() <= 4.0 * sd / 200f64.sqrt() + 1e-4, "{r}");
        assert!(sd < 0.01, "{r}");
    }
    assert_eq!(json(&args), v, "same seed, same output");
}

#[test]
fn text_tables_are_laid_out_like_the_paper() {
    let out = proftrust(&[
        "simulate", "sampling", "--preset", "table2", "--reps", "20", "--seed", "1",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Table 2") && text.contains("granularity"),
        "{text}"
    );
    assert!(text.contains("seed 1"), "seed printed: {text}");
    for g in ["30", "50", "100", "150", "200", "280"] {
        assert!(
            text.lines().any(|l| l.split_whitespace().next() == Some(g)),
            "row {g} in {text}"
        );
    }
    let out = proftrust(&["simulate", "sampling", "--preset", "table9"]);
    assert_eq!(out.status.code(), Some(2));
}

fn write_samples(path: &Path, set: &SampleSet) {
    let mut buf = Vec::new();
    proftrust_formats::native::write_samples(&mut buf, set).expect("encode samples");
    std::fs::write(path, buf).expect("write samples");
}

#[test]
fn analyze_granularity_on_a_hand_built_sample_file() {
    // Two modules on one CPU, a sample every 1 ms: a a a b b a a a b b ... (runs of 3 ms
    // and 2 ms), and a second event whose count per interval is 1000 in `a` and 0 or 2000
    // alternately in `b`.
    let mut set = SampleSet::default();
    let ma = set.modules.intern(Module::new("/opt/a.so"));
    let mb = set.modules.intern(Module::new("/opt/b.so"));
    let ev = |name: &str, kind| EventDesc {
        name: name.into(),
        kind,
        config: SamplingConfig::default(),
    };
    set.events = vec![
        ev("cpu-clock", EventKind::CpuClock),
        ev("cycles", EventKind::Cycles),
    ];
    let pattern = [ma, ma, ma, mb, mb];
    let mut b_toggle = false;
    for i in 0..500u64 {
        let m = pattern[(i % 5) as usize];
        let t = 1_000_000_000 + i * 1_000_000;
        let sample = |event: u16, time: u64, period: u64| Sample {
            event,
            pid: 1,
            tid: 1,
            time,
            cpu: 0,
            period,
            ip: Location::new(m, 0x1000),
            callchain: vec![],
            branches: vec![],
        };
        if i > 0 {
            let p = if m == ma {
                1000
            } else {
                b_toggle = !b_toggle;
                if b_toggle {
                    1
                } else {
                    2000
                }
            };
            set.samples.push(sample(1, t - 500_000, p));
        }
        set.samples.push(sample(0, t, 1_000_000));
    }
    set.samples.sort_by_key(|s| s.time);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.ptsamp");
    write_samples(&file, &set);
    let svg = dir.path().join("svg");
    let v = json(&[
        "analyze",
        "granularity",
        file.to_str().unwrap(),
        "--json",
        "--svg-dir",
        svg.to_str().unwrap(),
    ]);
    let m = &v["module"];
    assert_eq!(m["samples"], 500);
    assert_eq!(m["intervals"]["median"], 1_000_000.0);
    let keys = m["per_key"].as_array().unwrap();
    let a = keys.iter().find(|k| k["key"] == "a.so").expect("a.so");
    let b = keys.iter().find(|k| k["key"] == "b.so").expect("b.so");
    assert_eq!(a["samples"], 300);
    assert_eq!(b["samples"], 200);
    assert_eq!(a["runs"], 100);
    assert_eq!(b["runs"], 100);
    // Runs of 3 and 2 intervals of 1 ms (the first run's first sample counts the median).
    assert_eq!(a["run_ns"]["mean"], 3_000_000.0);
    assert_eq!(b["run_ns"]["mean"], 2_000_000.0);
    assert_eq!(a["r_mean"], 3.0);
    let sec = &m["second"];
    assert_eq!(sec["event"], "cycles");
    let sa = sec["per_key"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key"] == "a.so")
        .unwrap();
    // a: constant rate -> zero variance; b: rates 1e-6 and 2e-3 per ns alternate.
    assert_eq!(sa["var_of_max_share"], 0.0);
    let sb = sec["per_key"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key"] == "b.so")
        .unwrap();
    assert!(sb["cv2"].as_f64().unwrap() > 0.9, "{sb}");
    for f in [
        "intervals.svg",
        "granularity-module.svg",
        "granularity-function.svg",
        "second-event-proportion.svg",
    ] {
        let s = std::fs::read_to_string(svg.join(f)).expect(f);
        assert!(
            s.starts_with("<svg") && s.trim_end().ends_with("</svg>"),
            "{f}"
        );
    }
}

#[test]
fn analyze_granularity_of_a_real_perf_record() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("spin.c");
    std::fs::write(
        &src,
        "#include <stdlib.h>\n\
         static volatile unsigned long sink;\n\
         __attribute__((noinline)) static void a(long n) { for (long i = 0; i < n; i++) sink += i; }\n\
         __attribute__((noinline)) static void b(long n) { for (long i = 0; i < n; i++) sink ^= i; }\n\
         int main(int argc, char **argv) { long n = argc > 1 ? atol(argv[1]) : 3000000;\n\
           for (int r = 0; r < 40; r++) { a(n); b(n / 2); } return 0; }\n",
    )
    .unwrap();
    let exe = dir.path().join("spin");
    let cc = Command::new("gcc")
        .args(["-O2", "-g", "-o"])
        .arg(&exe)
        .arg(&src)
        .output();
    match cc {
        Ok(o) if o.status.success() => {}
        _ => {
            proftrust_testkit::skip!("analyze_granularity_of_a_real_perf_record: gcc unavailable");
            return;
        }
    }
    let data = dir.path().join("perf.data");
    let rec = Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-c", "250000", "-o"])
        .arg(&data)
        .arg(&exe)
        .output();
    match rec {
        Ok(o) if o.status.success() && data.exists() => {}
        Ok(o) => {
            proftrust_testkit::skip!(
                "analyze_granularity_of_a_real_perf_record: perf record failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return;
        }
        Err(e) => {
            proftrust_testkit::skip!(
                "analyze_granularity_of_a_real_perf_record: perf unavailable: {e}"
            );
            return;
        }
    }
    let v = json(&[
        "analyze",
        "granularity",
        data.to_str().unwrap(),
        "--json",
        "--binary",
        exe.to_str().unwrap(),
    ]);
    // Oracle: the fixed period of perf record (-c 250000 ns of cpu-clock).
    let median = v["module"]["intervals"]["median"].as_f64().unwrap();
    assert!(
        (median - 250_000.0).abs() < 50_000.0,
        "median interval {median} ns, perf was asked for 250000"
    );
    let f = v["function"]["per_key"].as_array().unwrap();
    let names: Vec<&str> = f.iter().filter_map(|k| k["key"].as_str()).collect();
    assert!(
        names.contains(&"a") && names.contains(&"b"),
        "functions {names:?}"
    );
    // a runs n iterations per call, b n/2: a's runs are the longer ones.
    let run = |n: &str| {
        f.iter().find(|k| k["key"] == n).unwrap()["run_ns"]["mean"]
            .as_f64()
            .unwrap()
    };
    assert!(run("a") > run("b"), "a {} b {}", run("a"), run("b"));
}

/// `proftrust record` with two events (cpu-clock as the base, task-clock as the second):
/// both are clocks of the same task, so the second event's rate per base interval is ~1 ns
/// per ns in every interval (physical oracle) and its squared coefficient of variation is far
/// below the sigma^2 = 0.25..4 of the paper's noise experiments.
#[test]
fn analyze_granularity_of_a_two_event_proftrust_record() {
    let t = "analyze_granularity_of_a_two_event_proftrust_record";
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("spin.c");
    std::fs::write(
        &src,
        "#include <stdlib.h>\n\
         static volatile unsigned long sink;\n\
         __attribute__((noinline)) static void spin(long n) { for (long i = 0; i < n; i++) sink += i; }\n\
         int main(int argc, char **argv) { long n = argc > 1 ? atol(argv[1]) : 60000000;\n\
           spin(n); return 0; }\n",
    )
    .unwrap();
    let exe = dir.path().join("spin");
    match Command::new("gcc")
        .args(["-O2", "-g", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
    {
        Ok(o) if o.status.success() => {}
        _ => {
            proftrust_testkit::skip!("{t}: gcc unavailable");
            return;
        }
    }
    let file = dir.path().join("two.ptsamp");
    let rec = proftrust(&[
        "record",
        "-e",
        "cpu-clock",
        "-e",
        "task-clock",
        "-c",
        "250000",
        "--seed",
        "3",
        "-o",
        file.to_str().unwrap(),
        "--",
        exe.to_str().unwrap(),
    ]);
    if !rec.status.success() {
        proftrust_testkit::skip!(
            "{t}: proftrust record failed (perf_event_open not allowed here?): {}",
            String::from_utf8_lossy(&rec.stderr).trim()
        );
        return;
    }
    let v = json(&["analyze", "granularity", file.to_str().unwrap(), "--json"]);
    let f = &v["function"];
    assert_eq!(f["base_event"], "cpu-clock");
    let sec = &f["second"];
    assert_eq!(sec["event"], "task-clock");
    let spin = sec["per_key"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key"] == "spin")
        .unwrap_or_else(|| panic!("spin in {sec}"));
    assert!(spin["intervals"].as_u64().unwrap() > 10, "{spin}");
    let rate = spin["mean_rate"].as_f64().unwrap();
    assert!(
        (0.8..1.2).contains(&rate),
        "task-clock ns per cpu-clock ns: {rate}"
    );
    let cv2 = spin["cv2"].as_f64().unwrap();
    assert!(cv2 < 0.25, "cv2 {cv2}");
    // Most base samples are in spin, in long runs of consecutive samples (R >> 1).
    let g = f["per_key"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key"] == "spin")
        .unwrap();
    assert!(g["r_mean"].as_f64().unwrap() > 5.0, "{g}");
}

#[test]
fn simulate_sweep_any_r_and_argument_errors() {
    let v = json(&[
        "simulate", "sampling", "--preset", "sweep", "--r", "0.42,2.5", "--util", "0.3", "--reps",
        "50", "--seed", "2", "--json",
    ]);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["granularity"], 42.0);
    assert_eq!(rows[1]["r"], 2.5);
    // eq. 6 at R = 0.42: 0.42 * 0.58.
    assert!((rows[0]["run_var_model"].as_f64().unwrap() - 0.42 * 0.58).abs() < 1e-12);
    assert_eq!(rows[0]["target_share"], 0.3);
    let out = proftrust(&["simulate", "sampling", "--preset", "table2", "--r", "1.5"]);
    assert_eq!(out.status.code(), Some(2));
    let out = proftrust(&["simulate", "sampling", "--preset", "sweep", "--r", "0"]);
    assert_eq!(out.status.code(), Some(2));
    // Refused when the flag is parsed (range (0, 1000], docs/processes.md).
    assert!(String::from_utf8_lossy(&out.stderr).contains("--r"));
}

/// `--interval-noise J` (seed 002 §4): on a Table preset the report states it and every
/// row's setting says `T±J`; the means stay within 0.01 of the actual shares (Table 2: 80%
/// utilisation); outside Tables 2-6 and at J >= T = 100 it is refused with status 2.
#[test]
fn simulate_interval_noise_option() {
    let v = json(&[
        "simulate",
        "sampling",
        "--preset",
        "table2",
        "--interval-noise",
        "25",
        "--reps",
        "100",
        "--seed",
        "4",
        "--json",
    ]);
    assert_eq!(v["interval_noise"], 25);
    for r in v["rows"].as_array().unwrap() {
        assert!(r["setting"].as_str().unwrap().ends_with("T±25"), "{r}");
        let (p, a) = (
            r["profiled_mean"].as_f64().unwrap(),
            r["actual_mean"].as_f64().unwrap(),
        );
        assert!((p - a).abs() < 0.01, "{r}");
    }
    // Without the flag the JSON has no interval_noise (a fixed interval).
    let v = json(&[
        "simulate", "sampling", "--preset", "table2", "--reps", "10", "--seed", "4", "--json",
    ]);
    assert!(v.get("interval_noise").is_none());
    for bad in [
        &["--preset", "aliasing", "--interval-noise", "5"][..],
        &["--preset", "table2", "--interval-noise", "100"][..],
    ] {
        let mut args = vec!["simulate", "sampling"];
        args.extend_from_slice(bad);
        let out = proftrust(&args);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--interval-noise"));
    }
}
