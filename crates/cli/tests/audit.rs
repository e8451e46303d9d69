//! End-to-end tests of `proftrust audit` on a bundled workload, against independent oracles:
//! `perf report --stdio` sample counts for the same perf.data, `callgrind_annotate` totals
//! for the same callgrind file, headless Chromium for the HTML report. Tests needing a tool
//! that is absent print `SKIP: <test>: <reason>` and return.

use proftrust_model::{BuildId, EventDesc, EventKind, Location, Module, Sample, SampleSet};
use proftrust_testkit::{have, skip_test};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const BIN: &str = env!("CARGO_BIN_EXE_proftrust");

/// Workload size of the fixture runs: the same input for samples and truth.
const SIZE: &str = "5";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Files made once for all tests: the workloads (gcc -O2 -g from workloads/*.c), a perf.data
/// of omnet and a callgrind file of omnet.
struct Fixture {
    _dir: tempfile::TempDir,
    bin_dir: PathBuf,
    perf_data: Option<PathBuf>,
    callgrind: Option<PathBuf>,
}

fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        if !have("gcc") {
            return None;
        }
        let dir = tempfile::tempdir().ok()?;
        let bin_dir = dir.path().join("bin");
        let st = Command::new("bash")
            .arg(repo().join("workloads/build.sh"))
            .arg(&bin_dir)
            .output()
            .ok()?;
        assert!(
            st.status.success(),
            "workloads/build.sh failed: {}",
            String::from_utf8_lossy(&st.stderr)
        );
        let omnet = bin_dir.join("omnet");
        let perf_data = dir.path().join("perf.data");
        let perf_ok = have("perf")
            && Command::new("perf")
                .args(["record", "-q", "-e", "cpu-clock", "-c", "20011", "-o"])
                .arg(&perf_data)
                .arg(&omnet)
                .arg(SIZE)
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
        let cg = dir.path().join("callgrind.out");
        let cg_ok = have("valgrind")
            && Command::new("valgrind")
                .args([
                    "--tool=callgrind",
                    "--dump-instr=yes",
                    "--collect-jumps=yes",
                    "-q",
                ])
                .arg(format!("--callgrind-out-file={}", cg.display()))
                .arg(&omnet)
                .arg(SIZE)
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
        Some(Fixture {
            _dir: dir,
            bin_dir,
            perf_data: perf_ok.then_some(perf_data),
            callgrind: cg_ok.then_some(cg),
        })
    })
    .as_ref()
}

fn audit(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(BIN)
        .arg("audit")
        .args(args)
        .output()
        .expect("run proftrust")
}

fn os<S: AsRef<std::ffi::OsStr> + ?Sized>(s: &S) -> &std::ffi::OsStr {
    s.as_ref()
}

fn json_of(o: &Output) -> Value {
    assert!(
        o.status.success(),
        "audit failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("audit --json prints JSON")
}

/// `perf report --stdio -n --sort sym --dsos NAME`: symbol -> samples.
fn perf_report_counts(perf_data: &Path, dso: &str) -> BTreeMap<String, u64> {
    let o = Command::new("perf")
        .args([
            "report", "--stdio", "-n", "--sort", "sym", "--dsos", dso, "-i",
        ])
        .arg(perf_data)
        .output()
        .expect("perf report");
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let t = line.trim();
        if t.starts_with('#') || t.is_empty() {
            continue;
        }
        // "93.41%          3176  [.] chase"
        let mut it = t.split_whitespace();
        let (Some(pct), Some(n), Some(kind)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if !pct.ends_with('%') || kind != "[.]" {
            continue;
        }
        let name = it.collect::<Vec<_>>().join(" ");
        *m.entry(name).or_default() += n.parse::<u64>().expect("sample count");
    }
    m
}

/// `callgrind_annotate` self totals of `object`: function name -> Ir. callgrind_annotate
/// prints one line per (source file, function); the `[object]` suffix is left off the lines
/// of a function's inlined files, so an object-less line belongs to the object its function
/// is printed with elsewhere. Functions valgrind could not name appear as `???:0x...`; they
/// and `_start` as `(below main)`; they are returned under the key `"???"`, summed.
fn callgrind_annotate_totals(cg: &Path, object: &Path) -> BTreeMap<String, u64> {
    let o = Command::new("callgrind_annotate")
        .arg("--threshold=100")
        .arg(cg)
        .output()
        .expect("callgrind_annotate");
    let text = String::from_utf8_lossy(&o.stdout);
    let obj = format!("[{}]", object.display());
    // (function key, object if printed, Ir)
    let mut rows: Vec<(String, Option<String>, u64)> = Vec::new();
    for line in text.lines() {
        // "1,620,006 (12.96%)  /work/main/workloads/omnet.c:chase [/tmp/x/omnet]"
        let t = line.trim();
        let Some((num, rest)) = t.split_once(' ') else {
            continue;
        };
        let Ok(n) = num.replace(',', "").parse::<u64>() else {
            continue;
        };
        let Some((_, rest)) = rest.trim_start().split_once(")  ") else {
            continue;
        };
        if rest.contains("PROGRAM TOTALS") {
            continue;
        }
        let (loc, object_part) = match rest.rsplit_once(" [") {
            Some((l, o)) => (l, Some(format!("[{o}"))),
            None => (rest, None),
        };
        let func = loc.rsplit_once(':').map(|x| x.1).unwrap_or(loc);
        // valgrind's own names: `???:0x...` (no symbol it trusts) and `(below main)`.
        let key = if loc.starts_with("???:0x") || func == "(below main)" {
            "???"
        } else {
            func
        };
        rows.push((key.to_string(), object_part, n));
    }
    let in_object: BTreeSet<String> = rows
        .iter()
        .filter(|(_, o, _)| o.as_deref() == Some(obj.as_str()))
        .map(|(k, _, _)| k.clone())
        .collect();
    let mut m = BTreeMap::new();
    for (key, object_part, n) in rows {
        let ours = match object_part {
            Some(o) => o == obj,
            None => in_object.contains(&key),
        };
        if ours {
            *m.entry(key).or_default() += n;
        }
    }
    m
}

#[test]
fn sample_counts_equal_perf_report_and_exact_counts_equal_callgrind_annotate() {
    let name = "sample_counts_equal_perf_report_and_exact_counts_equal_callgrind_annotate";
    let Some(f) = fixture() else {
        return skip_test(name, "gcc not installed");
    };
    let (Some(pd), Some(cg)) = (&f.perf_data, &f.callgrind) else {
        return skip_test(
            name,
            "perf record (cpu-clock) or valgrind unavailable on this machine",
        );
    };
    if !have("callgrind_annotate") {
        return skip_test(name, "callgrind_annotate not installed");
    }
    let omnet = f.bin_dir.join("omnet");
    let o = audit(&[
        os("--samples"),
        pd.as_os_str(),
        os("--truth"),
        cg.as_os_str(),
        os("--binary"),
        omnet.as_os_str(),
        os("--json"),
    ]);
    let j = json_of(&o);
    let funcs = j["functions"].as_array().expect("functions");
    let ours = |field: &str| -> BTreeMap<String, u64> {
        funcs
            .iter()
            .map(|x| {
                (
                    x["name"].as_str().unwrap().to_string(),
                    x[field].as_u64().unwrap(),
                )
            })
            .filter(|(_, v)| *v > 0)
            .collect()
    };

    // Oracle 1: perf report's per-symbol sample counts for the omnet DSO.
    let perf = perf_report_counts(pd, "omnet");
    assert!(!perf.is_empty(), "perf report printed no omnet symbol");
    // perf 6.1 counts the PLT under `_init` (see `perf_counts_under_init`).
    let mut mine = ours("samples");
    let plt: Vec<String> = mine
        .keys()
        .filter(|k| proftrust_testkit::perf_counts_under_init(k, perf.contains_key(*k)))
        .cloned()
        .collect();
    for k in plt {
        let n = mine.remove(&k).unwrap();
        *mine.entry("_init".to_string()).or_default() += n;
    }
    assert_eq!(mine, perf, "per-function samples vs perf report");
    assert_eq!(
        j["metrics"]["samples"].as_u64().unwrap(),
        perf.values().sum::<u64>()
    );

    // Oracle 2: callgrind_annotate's per-function self Ir for the omnet object.
    let cga = callgrind_annotate_totals(cg, &omnet);
    let exact = ours("exact_instructions");
    assert!(exact.contains_key("chase") && exact.contains_key("build.constprop.0"));
    // Every function callgrind names has exactly our count; the ones it leaves unnamed
    // (`???:0x...`, e.g. `__do_global_dtors_aux`) add up to exactly our remainder.
    let mut unnamed_by_callgrind = 0;
    for (fname, n) in &exact {
        match cga.get(fname) {
            Some(c) => assert_eq!(c, n, "exact instructions of {fname} vs callgrind_annotate"),
            None => unnamed_by_callgrind += n,
        }
    }
    assert_eq!(
        cga.get("???").copied().unwrap_or(0),
        unnamed_by_callgrind,
        "instructions in functions callgrind_annotate does not name"
    );
    assert_eq!(
        cga.values().sum::<u64>(),
        exact.values().sum::<u64>(),
        "omnet object total vs callgrind_annotate"
    );
    assert_eq!(
        j["metrics"]["instructions"].as_u64().unwrap(),
        exact.values().sum::<u64>()
    );
}

#[test]
fn json_contract_fields_and_ranges() {
    let name = "json_contract_fields_and_ranges";
    let Some(f) = fixture() else {
        return skip_test(name, "gcc not installed");
    };
    let (Some(pd), Some(cg)) = (&f.perf_data, &f.callgrind) else {
        return skip_test(name, "perf record or valgrind unavailable");
    };
    let omnet = f.bin_dir.join("omnet");
    let j = json_of(&audit(&[
        os("--samples"),
        pd.as_os_str(),
        os("--truth"),
        cg.as_os_str(),
        os("--binary"),
        omnet.as_os_str(),
        os("--json"),
    ]));
    assert!(j["config"]["seed"].is_u64());
    assert!(j["config"]["tool_versions"].is_object());
    assert_eq!(j["config"]["truth_weight"], "instructions");
    for k in [
        "nrmse_sr",
        "sc",
        "od",
        "epsilon_function",
        "epsilon_inline",
        "epsilon_block",
        "epsilon_instruction",
        "kendall_tau",
        "top10_overlap",
        "coverage",
    ] {
        assert!(j["metrics"].get(k).is_some(), "metrics.{k} missing");
    }
    for k in [
        "epsilon_function",
        "epsilon_inline",
        "epsilon_block",
        "epsilon_instruction",
        "sc",
    ] {
        let v = j["metrics"][k].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&v), "{k} = {v}");
    }
    // finer granularity can only see more mis-attribution
    let ef = j["metrics"]["epsilon_function"].as_f64().unwrap();
    let ei = j["metrics"]["epsilon_instruction"].as_f64().unwrap();
    assert!(ei >= ef - 1e-12, "instruction {ei} < function {ef}");
    let mut share_sum = 0.0;
    for x in j["functions"].as_array().unwrap() {
        for k in [
            "name",
            "samples",
            "sampled_share",
            "ci_low",
            "ci_high",
            "exact_instructions",
            "exact_share",
        ] {
            assert!(x.get(k).is_some(), "functions[].{k} missing");
        }
        let (lo, s, hi) = (
            x["ci_low"].as_f64().unwrap(),
            x["sampled_share"].as_f64().unwrap(),
            x["ci_high"].as_f64().unwrap(),
        );
        assert!(lo <= s && s <= hi, "{x}");
        share_sum += x["exact_share"].as_f64().unwrap();
    }
    assert!((share_sum - 1.0).abs() < 1e-9);
    // the warning about cpu-clock vs instructions is there
    let cpi = j["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["kind"] == "cpi")
        .unwrap_or_else(|| panic!("{}", j["warnings"]));
    assert!(cpi["message"].as_str().unwrap().contains("CPI"), "{cpi}");
}

#[test]
fn html_report_renders_in_headless_chromium() {
    let name = "html_report_renders_in_headless_chromium";
    let Some(f) = fixture() else {
        return skip_test(name, "gcc not installed");
    };
    let (Some(pd), Some(cg)) = (&f.perf_data, &f.callgrind) else {
        return skip_test(name, "perf record or valgrind unavailable");
    };
    let chromium = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .any(|c| have(c));
    if !chromium {
        return skip_test(name, "chromium not installed (apt-get install -y chromium)");
    }
    let omnet = f.bin_dir.join("omnet");
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let o = audit(&[
        os("--samples"),
        pd.as_os_str(),
        os("--truth"),
        cg.as_os_str(),
        os("--binary"),
        omnet.as_os_str(),
        os("--html"),
        html.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let check = Command::new("bash")
        .arg(repo().join("scripts/html-check.sh"))
        .arg(&html)
        .args(["plot-functions", "plot-instructions"])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "html-check failed: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}

/// Writes a native sample file with `n` samples at `svma` in module `m`.
fn write_samples(path: &Path, m: Module, svma: u64, n: usize) {
    let mut s = SampleSet::default();
    let idx = s.modules.intern(m);
    s.events.push(EventDesc {
        name: "cpu-clock".into(),
        kind: EventKind::CpuClock,
        config: Default::default(),
    });
    for _ in 0..n {
        s.samples.push(Sample {
            event: 0,
            pid: 1,
            tid: 1,
            time: 0,
            cpu: 0,
            period: 1000,
            ip: Location::new(idx, svma),
            callchain: vec![],
            branches: vec![],
        });
    }
    let f = std::fs::File::create(path).unwrap();
    proftrust_formats::native::write_samples(std::io::BufWriter::new(f), &s).unwrap();
}

fn assert_refused(o: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
    assert!(
        o.stdout.is_empty(),
        "no numbers may be printed on refusal: {}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn bad_inputs_are_refused_with_clear_messages() {
    let name = "bad_inputs_are_refused_with_clear_messages";
    let Some(f) = fixture() else {
        return skip_test(name, "gcc not installed");
    };
    let Some(cg) = &f.callgrind else {
        return skip_test(name, "valgrind unavailable");
    };
    let omnet = f.bin_dir.join("omnet");
    let dir = tempfile::tempdir().unwrap();

    // 1. samples from another build of omnet (build-id differs)
    let p = dir.path().join("otherbuild.ptsamp");
    let mut m = Module::new(omnet.display().to_string());
    m.build_id = Some(BuildId(vec![0xde, 0xad, 0xbe, 0xef]));
    write_samples(&p, m, 0x1200, 10);
    let o = audit(&[
        os("--samples"),
        p.as_os_str(),
        os("--truth"),
        cg.as_os_str(),
        os("--binary"),
        omnet.as_os_str(),
        os("--json"),
    ]);
    assert_refused(&o, "another build of omnet");
    assert_refused(&o, "deadbeef");

    // 2. samples and truth from different programs
    let p = dir.path().join("hmmer.ptsamp");
    let hmmer = f.bin_dir.join("hmmer");
    write_samples(&p, Module::new(hmmer.display().to_string()), 0x1200, 10);
    let o = audit(&[
        os("--samples"),
        p.as_os_str(),
        os("--truth"),
        cg.as_os_str(),
        os("--binary"),
        omnet.as_os_str(),
    ]);
    assert_refused(&o, "samples contain nothing from omnet");

    // 3. no samples in the binary (all in libc)
    let p = dir.path().join("libc.ptsamp");
    let mut s = SampleSet::default();
    s.modules.intern(Module::new(omnet.display().to_string()));
    let libc = s
        .modules
        .intern(Module::new("/usr/lib/x86_64-linux-gnu/libc.so.6"));
    s.events.push(EventDesc {
        name: "cpu-clock".into(),
        kind: EventKind::CpuClock,
        config: Default::default(),
    });
    for _ in 0..7 {
        s.samples.push(Sample {
            event: 0,
            pid: 1,
            tid: 1,
            time: 0,
            cpu: 0,
            period: 1,
            ip: Location::new(libc, 0x28000),
            callchain: vec![],
            branches: vec![],
        });
    }
    let file = std::fs::File::create(&p).unwrap();
    proftrust_formats::native::write_samples(std::io::BufWriter::new(file), &s).unwrap();
    let o = audit(&[
        os("--samples"),
        p.as_os_str(),
        os("--truth"),
        cg.as_os_str(),
        os("--binary"),
        omnet.as_os_str(),
    ]);
    assert_refused(
        &o,
        "no samples in omnet: all 7 samples lie in other modules",
    );

    // 4. empty profile
    let p = dir.path().join("empty.ptsamp");
    write_samples(&p, Module::new(omnet.display().to_string()), 0x1200, 0);
    let o = audit(&[
        os("--samples"),
        p.as_os_str(),
        os("--truth"),
        cg.as_os_str(),
        os("--binary"),
        omnet.as_os_str(),
    ]);
    assert_refused(&o, "empty");

    // 5. a truth file given as samples
    let o = audit(&[
        os("--samples"),
        cg.as_os_str(),
        os("--truth"),
        cg.as_os_str(),
        os("--binary"),
        omnet.as_os_str(),
    ]);
    assert_refused(
        &o,
        "this is a callgrind out file, and samples are needed here",
    );
}

#[test]
fn record_mode_with_sweep_on_a_bundled_workload() {
    let name = "record_mode_with_sweep_on_a_bundled_workload";
    if !have("gcc") || !have("valgrind") {
        return skip_test(name, "gcc or valgrind not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("sweep.html");
    let o = Command::new(BIN)
        .env("PROFTRUST_WORKLOAD_DIR", dir.path().join("wl"))
        .args([
            "audit",
            "--workload",
            "mcf",
            "--size",
            "4",
            "--backend",
            "callgrind",
            "--period",
            "100003",
            "--sweep",
            "64K,256K,512M",
            "--json",
            "-o",
            "-",
            "--html",
        ])
        .arg(&html)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    if !o.status.success()
        && (err.contains("perf_event_paranoid") || err.contains("Permission denied"))
    {
        return skip_test(name, "perf_event_open not permitted here");
    }
    let j = json_of(&o);
    assert_eq!(j["config"]["seed"], 1);
    assert_eq!(j["config"]["period"], 100003);
    let sweep = j["sweep"].as_array().unwrap();
    // two periods, each fixed and randomised; 512M is not recorded: the 64K points' samples
    // x period predict far fewer than 100 samples there (minimum evidence).
    assert_eq!(sweep.len(), 4);
    assert_eq!(sweep[0]["period"], 65536);
    assert_eq!(sweep[1]["randomized"], true);
    assert_eq!(sweep[3]["period"], 262144);
    let n64k = sweep[0]["samples"].as_f64().unwrap();
    assert!(
        n64k * 65536.0 / 536_870_912.0 < 100.0,
        "{n64k} samples at 64K"
    );
    let warnings = j["warnings"].to_string();
    assert!(warnings.contains("536870912 not recorded"), "{warnings}");
    // Points under 100 samples carry no metrics (noise), the others carry both ODs.
    for p in sweep {
        let few = p["samples"].as_u64().unwrap() < 100;
        assert_eq!(p["od"].is_null(), few, "{p}");
        assert_eq!(p["od_prose"].is_null(), few, "{p}");
    }
    let names: Vec<&str> = j["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(names.iter().any(|n| n.starts_with("scan")), "{names:?}");
    let h = std::fs::read_to_string(&html).unwrap();
    assert!(h.contains("id=\"plot-sweep\"") && h.contains("id=\"plot-sweep-od\""));
}

/// `--correct-skid` on virtual-PMU samples of omnet (skid 30 cycles, dependent loads of 200
/// cycles): the raw instruction samples put a large share on the wrong inlined function and
/// instruction; the corrected profile, compared with the same exact counts (QEMU's, written
/// by the virtual PMU), meets the issue's goals (function and inline epsilon at most 1.6%,
/// instruction epsilon at most 5%). cpu-clock samples cannot be corrected: a clear refusal.
#[test]
fn correct_skid_beside_raw_on_virtual_pmu_samples() {
    let name = "correct_skid_beside_raw_on_virtual_pmu_samples";
    let Some(f) = fixture() else {
        return skip_test(name, "gcc not installed");
    };
    if !have("qemu-x86_64") {
        return skip_test(name, "qemu-user not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let (samples, exact) = (dir.path().join("s"), dir.path().join("e"));
    let omnet = f.bin_dir.join("omnet");
    let o = Command::new(BIN)
        .args(["-q", "vpmu", "--skid", "30", "--period", "1009"])
        .args([
            "--cpi-model",
            "cache",
            "--heavy-load",
            "200",
            "--seed",
            "1",
            "-o",
        ])
        .arg(&samples)
        .arg("--exact")
        .arg(&exact)
        .arg("--")
        .arg(&omnet)
        .arg("1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = audit(&[
        os("--samples"),
        samples.as_os_str(),
        os("--truth"),
        exact.as_os_str(),
        os("--binary"),
        omnet.as_os_str(),
        os("--correct-skid"),
        os("30"),
        os("--json"),
    ]);
    let j = json_of(&o);
    assert_eq!(j["config"]["event"], "instructions:vpmu");
    let raw = &j["metrics"];
    let cor = &j["corrected"]["metrics"];
    let v = |m: &Value, k: &str| m[k].as_f64().unwrap();
    assert!(v(raw, "epsilon_inline") > 0.05, "{raw}");
    assert!(v(raw, "epsilon_instruction") > 0.1, "{raw}");
    assert!(v(cor, "epsilon_function") <= 0.016, "{cor}");
    assert!(v(cor, "epsilon_inline") <= 0.016, "{cor}");
    assert!(v(cor, "epsilon_instruction") <= 0.05, "{cor}");
    let shares: f64 = j["corrected"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["corrected_share"].as_f64().unwrap())
        .sum();
    assert!((shares - 1.0).abs() < 1e-9, "{shares}");

    let Some(pd) = &f.perf_data else {
        return skip_test(name, "perf record unavailable for the refusal case");
    };
    let o = audit(&[
        os("--samples"),
        pd.as_os_str(),
        os("--truth"),
        exact.as_os_str(),
        os("--binary"),
        omnet.as_os_str(),
        os("--correct-skid"),
        os("30"),
    ]);
    assert_refused(&o, "needs instruction and cycle samples");
}

/// The defaults agree: `vpmu` without `--skid` skids 30 cycles, and `audit --correct-skid`
/// without a value undoes 30 cycles, so the pair lowers epsilon (a `vpmu` default of 0 made
/// the corrected profile worse than the raw one). The note names the skid and the CPI model
/// in words, not as Rust values (`Constant(30)`, `Class`).
#[test]
fn default_vpmu_skid_and_correct_skid_agree() {
    let name = "default_vpmu_skid_and_correct_skid_agree";
    let Some(f) = fixture() else {
        return skip_test(name, "gcc not installed");
    };
    if !have("qemu-x86_64") {
        return skip_test(name, "qemu-user not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let (samples, exact) = (dir.path().join("s"), dir.path().join("e"));
    let omnet = f.bin_dir.join("omnet");
    let o = Command::new(BIN)
        .args(["vpmu", "--period", "1009", "--cpi-model", "cache"])
        .args(["--heavy-load", "200", "--seed", "1", "-o"])
        .arg(&samples)
        .arg("--exact")
        .arg(&exact)
        .arg("--")
        .arg(&omnet)
        .arg("1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("virtual PMU: skid 30 cycles, period 1009, cpi model cache, seed 1"),
        "{err}"
    );
    let o = audit(&[
        os("--samples"),
        samples.as_os_str(),
        os("--truth"),
        exact.as_os_str(),
        os("--binary"),
        omnet.as_os_str(),
        os("--correct-skid"),
        os("--json"),
    ]);
    let j = json_of(&o);
    let v = |m: &Value, k: &str| m[k].as_f64().unwrap();
    let (raw, cor) = (&j["metrics"], &j["corrected"]["metrics"]);
    assert!(v(raw, "epsilon_instruction") > 0.1, "raw {raw}");
    assert!(
        v(cor, "epsilon_instruction") < v(raw, "epsilon_instruction") / 2.0,
        "raw {raw} corrected {cor}"
    );
    assert_eq!(
        j["corrected"]["skid"].as_f64(),
        Some(30.0),
        "{}",
        j["corrected"]
    );
}

/// `--sweep` records the program once per point, and its output is shown once (by the main
/// recording), not once per point; the sweep's period column and plot axis give the unit
/// (cpu-clock periods are nanoseconds).
#[test]
fn sweep_shows_the_programs_output_once_and_the_period_unit() {
    let name = "sweep_shows_the_programs_output_once_and_the_period_unit";
    if !have("gcc") || !have("qemu-x86_64") {
        return skip_test(name, "gcc or qemu-user not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("hello.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\nint main(void){volatile unsigned long s=0;\
         for(unsigned long i=0;i<30000000UL;i++)s+=i*i;\
         printf(\"hello-from-prog %lu\\n\",s%7);return 0;}\n",
    )
    .unwrap();
    let bin = dir.path().join("hello");
    assert!(Command::new("gcc")
        .args(["-O1", "-g", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap()
        .success());
    let html = dir.path().join("s.html");
    let o = Command::new(BIN)
        .args(["audit", "--backend", "qemu", "--sweep", "1M,2M", "--html"])
        .arg(&html)
        .arg("--")
        .arg(&bin)
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    if !o.status.success() && (err.contains("perf_event_paranoid") || err.contains("Permission")) {
        return skip_test(name, "perf_event_open not permitted here");
    }
    assert!(o.status.success(), "{err}");
    let shown = out.matches("hello-from-prog").count() + err.matches("hello-from-prog").count();
    assert_eq!(shown, 1, "stdout:\n{out}\nstderr:\n{err}");
    // The program's output alone on stdout; the report on stderr (it runs the program).
    assert!(
        out.starts_with("hello-from-prog") && out.lines().count() == 1,
        "{out}"
    );
    assert!(err.contains("period (ns)"), "{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("sampling period (ns)"));
}

/// `--time-caches` (issue 34): a random pointer chase over 8 MiB (each load beyond the
/// simulated 2 MiB L2, on the chase's dependency chain) beside a loop of independent adds
/// doing the same number of iterations. Without caches the chase costs LLVM's 5-cycle load
/// per step; with them its misses add their 510 cycles per step on the chain, so its share
/// of the modelled time goes above 95% (oracle: 5 vs ~2 cycles per iteration without,
/// ~515 vs ~2 with). A wrong use of the flag is refused.
#[test]
fn time_caches_charge_a_chase() {
    if !proftrust_testkit::need("time_caches_charge_a_chase", &["gcc", "qemu-x86_64"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("chase.c");
    std::fs::write(
        &src,
        r#"#include <stdlib.h>
#define N (1 << 17)
struct node { struct node *next; char pad[56]; };
__attribute__((noinline)) long chase(struct node *p, long n) {
    for (long i = 0; i < n; i++) p = p->next;
    return (long)p;
}
__attribute__((noinline)) long adds(long n) {
    long a = 0, b = 0;
    for (long i = 0; i < n; i++) { a += i; b ^= i; __asm__ volatile("" : "+r"(a), "+r"(b)); }
    return a + b;
}
int main(void) {
    struct node *v = malloc(sizeof(struct node) * N);
    long *perm = malloc(sizeof(long) * N);
    for (long i = 0; i < N; i++) perm[i] = i;
    unsigned s = 12345;
    for (long i = N - 1; i > 0; i--) { s = s * 1103515245u + 12345u; long j = s % (i + 1); long t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    for (long i = 0; i < N; i++) v[perm[i]].next = &v[perm[(i + 1) % N]];
    return (int)((chase(&v[0], 1000000) + adds(1000000)) & 1);
}
"#,
    )
    .unwrap();
    let exe = dir.path().join("chase");
    let st = Command::new("gcc")
        .args(["-O2", "-g", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    let share = |caches: bool| -> f64 {
        let mut c = Command::new(BIN);
        // -o -: the report on stdout (the program's stdout, if any, goes to stderr).
        c.args([
            "-q",
            "audit",
            "--truth-weight",
            "time-model",
            "--json",
            "-o",
            "-",
        ]);
        if caches {
            c.arg("--time-caches");
        }
        let out = c.arg("--").arg(&exe).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: Value = serde_json::from_slice(&out.stdout).unwrap();
        let f = j["functions"].as_array().unwrap();
        let w = |name: &str| {
            f.iter()
                .find(|r| r["name"] == name)
                .and_then(|r| r["exact_weight"].as_f64())
                .unwrap_or(0.0)
        };
        w("chase") / (w("chase") + w("adds"))
    };
    let (hit, miss) = (share(false), share(true));
    assert!(hit > 0.5 && hit < 0.85, "chase share without caches {hit}");
    assert!(miss > 0.95, "chase share with caches {miss}");
    let out = Command::new(BIN)
        .args(["audit", "--time-caches", "--"])
        .arg(&exe)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--truth-weight time-model"), "{err}");
}
