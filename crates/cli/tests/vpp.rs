//! `proftrust vpp` end to end on the bundled workload `workloads/vpp.c`, compiled at test
//! time, at a small size (scale 1: 100000 score(), 50000 lookup() and 100000 stream()
//! iterations). Oracles: the loop counts of the C source, `addr2line` for probe sites, the
//! bursty closed form for the number of timed paths, and — for the LBR source — the trace
//! source's own times of the same run (the same cache model times both).

use proftrust_exact::{trace_qemu, QemuOptions};
use proftrust_model::{BlockVisitor, Module, ModuleIdx, RunOutcome, TraceBlock, TraceEvent};
use proftrust_testkit::need;
use proftrust_vpmu::{CacheConfig, ClassCycles, CycleModel, Vpmu, VpmuEvents, VpmuOptions};
use proftrust_vpp::{lbr_timings, TracePathTimer, TraceSourceOptions};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds `workloads/vpp.c` (or `vpp_prefetch.c`) with the probe header; `probes: false`
/// compiles them out.
fn build(dir: &Path, name: &str, probes: bool) -> PathBuf {
    let out = dir.join(format!("{name}{}", if probes { "" } else { "_np" }));
    let mut c = Command::new("gcc");
    c.args(["-O2", "-g", "-fno-omit-frame-pointer"])
        .arg("-I")
        .arg(root().join("crates/probe/include"))
        .arg(root().join(format!("workloads/{name}.c")))
        .arg("-o")
        .arg(&out);
    if !probes {
        c.arg("-DPT_DISABLE");
    }
    assert!(c.status().unwrap().success(), "gcc failed on {name}.c");
    out
}

fn proftrust(args: &[&str], prog: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_proftrust"))
        .args(args)
        .arg("--")
        .args(prog)
        .output()
        .expect("run proftrust")
}

fn json(args: &[&str], prog: &[&str]) -> Value {
    let o = proftrust(args, prog);
    assert!(
        o.status.success(),
        "proftrust {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON on stdout")
}

/// 1-based line of the first `PT_FOR(` (the loop's probe site) after the line holding
/// `func`'s signature.
fn boundary_line(func: &str) -> usize {
    let src = include_str!("../../../workloads/vpp.c");
    let start = src
        .lines()
        .position(|l| l.contains(&format!("static long {func}(")))
        .unwrap();
    start
        + 1
        + src
            .lines()
            .skip(start)
            .position(|l| l.trim_start().starts_with("PT_FOR("))
            .unwrap()
}

/// Contract fields and the definitions on every path: NV = total − count × basetime.
fn check_paths(v: &Value) {
    assert!(v["seed"].is_u64());
    assert!(v["config"].is_object());
    let paths = v["paths"].as_array().unwrap();
    assert!(!paths.is_empty());
    let mut last = u64::MAX;
    for p in paths {
        for k in [
            "signature",
            "count",
            "basetime",
            "total_time",
            "net_variation",
            "share_of_time",
        ] {
            assert!(!p[k].is_null(), "path without {k}: {p}");
        }
        let (n, b, t, nv) = (
            p["count"].as_u64().unwrap(),
            p["basetime"].as_u64().unwrap(),
            p["total_time"].as_u64().unwrap(),
            p["net_variation"].as_u64().unwrap(),
        );
        assert!(n >= 2);
        assert_eq!(nv, t - n * b, "{p}");
        assert!(nv <= last, "paths are ranked by net variation");
        last = nv;
    }
    let share: f64 = paths
        .iter()
        .map(|p| p["share_of_time"].as_f64().unwrap())
        .sum();
    assert!((share - v["net_variation_share"].as_f64().unwrap()).abs() < 1e-9);
}

/// Virtual PMU with a 512 KiB LLC (the 4 MiB table misses it): lookup()'s two paths (flag
/// set or not) vary and rank first; every lookup() iteration is one timed path (50000).
#[test]
fn vpmu_ranks_the_memory_bound_path_first() {
    let t = "vpmu_ranks_the_memory_bound_path_first";
    if !need(t, &["gcc", "qemu-x86_64"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "vpp", false);
    let e = exe.to_str().unwrap();
    let v = json(
        &[
            "vpp",
            "--json",
            "--llc-kib",
            "512",
            "--train",
            "1 4 7",
            "--top",
            "2",
        ],
        &[e, "1", "4"],
    );
    check_paths(&v);
    let paths = v["paths"].as_array().unwrap();
    assert_eq!(paths[0]["function"], "lookup");
    assert_eq!(paths[1]["function"], "lookup");
    assert!(paths[0]["share_of_time"].as_f64().unwrap() > 0.05);
    assert_eq!(v["unit"], "cycles");
    assert_eq!(v["time_base"], "program");
    assert!(v["timed_coverage"].as_f64().unwrap() <= 1.0);
    // Executions: each of lookup()'s 50000 iterations lies on exactly one lookup() path;
    // the first is on the path from the function's entry and the last on the path that
    // returns, each executed once (so not analysed): 49998 on the paths listed.
    let lookups: u64 = paths
        .iter()
        .filter(|p| p["function"] == "lookup")
        .map(|p| p["executions"].as_u64().unwrap())
        .sum();
    assert_eq!(lookups, 49_998);
    // score() computes in registers: no variation, so it is the most frequent path but not
    // a variational one (Fig. 11: the top 2 by frequency differ from the top 2 by NV).
    let freq = v["rankings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ranking"] == "frequency")
        .unwrap();
    assert_eq!(freq["not_in_other"], 2);
    // Cache statistics came from the simulation.
    assert!(v["source_stats"]["cache"]["llc_misses"].as_u64().unwrap() > 10_000);
    // Training input (another seed): the same two paths lead (Fig. 5).
    let st = &v["stability"][0];
    assert_eq!(st["kind"], "input");
    assert_eq!(st["comparison"]["overlap"], 2);
    let c = &st["comparison"];
    assert!((c["a_top_in_b"].as_f64().unwrap() - c["b_top_in_b"].as_f64().unwrap()).abs() < 1e-12);
}

/// Forwards a trace to two visitors.
struct Tee<'a, A: BlockVisitor, B: BlockVisitor>(&'a mut A, &'a mut B);

impl<A: BlockVisitor, B: BlockVisitor> BlockVisitor for Tee<'_, A, B> {
    fn module(&mut self, idx: ModuleIdx, module: &Module) {
        self.0.module(idx, module);
        self.1.module(idx, module);
    }
    fn block(&mut self, b: &TraceBlock<'_>) {
        self.0.block(b);
        self.1.block(b);
    }
    fn end(&mut self, o: &RunOutcome) {
        self.0.end(o);
        self.1.end(o);
    }
    fn visit(&mut self, ev: &TraceEvent<'_>) {
        self.0.visit(ev);
        self.1.visit(ev);
    }
}

/// One traced run feeds both the trace source and the virtual PMU's LBR (same cache model):
/// every time the LBR source reconstructs for a path is a time the trace source measured
/// for that path, and it sees no more instances than there are.
#[test]
fn lbr_times_are_trace_times() {
    let t = "lbr_times_are_trace_times";
    if !need(t, &["gcc", "qemu-x86_64"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "vpp", false);
    let b = proftrust_binary::Binary::open(&exe).unwrap();
    let cfgs: Vec<_> = b.functions().iter().filter_map(|f| b.cfg(f).ok()).collect();
    let module = Module {
        path: exe.to_string_lossy().into_owned(),
        build_id: b.build_id().cloned(),
        load_bias: 0,
    };
    let cfgs = proftrust_paths::ProgramCfgs::new(module, cfgs);
    let mut classes = ClassCycles::default();
    classes.load = 0;
    classes.store = 0;
    let mut table = proftrust_vpmu::CostTable::new("vpp_np");
    let data = std::fs::read(&exe).unwrap();
    {
        use object::{Object, ObjectSection, SectionKind};
        let f = object::File::parse(&*data).unwrap();
        for s in f.sections().filter(|s| s.kind() == SectionKind::Text) {
            let part =
                proftrust_vpmu::class_costs("vpp_np", s.data().unwrap(), s.address(), &classes);
            table.costs.extend(part.costs);
        }
    }
    let mut model = CycleModel::default();
    model.tables.push(table);
    let mut cache = CacheConfig::default();
    cache.llc_size = 256 * 1024;
    let mut trace = TracePathTimer::new(
        &cfgs,
        proftrust_vpmu::TraceCost::new(model.clone(), Some(cache.clone())),
        TraceSourceOptions::default(),
    );
    let mut o = VpmuOptions::default();
    o.instruction_period = 997;
    o.events = VpmuEvents {
        instructions: true,
        cycles: false,
    };
    o.lbr = true;
    o.exact = false;
    o.cache = Some(cache);
    let mut vpmu = Vpmu::new(o, model).unwrap();
    let qo = QemuOptions {
        trace_memory: true,
        show_output: false,
        ..QemuOptions::default()
    };
    let cmd = vec![exe.clone().into_os_string(), "1".into(), "2".into()];
    let outcome = trace_qemu(&cmd, &qo, &mut Tee(&mut trace, &mut vpmu)).unwrap();
    assert_eq!(outcome, RunOutcome::Exited { code: 0 });
    let tr = trace.finish();
    let (set, _) = vpmu.finish();
    let (lbr, st) = lbr_timings(&set, &cfgs);
    assert!(st.timed > 50_000, "{st:?}");
    assert_eq!(st.collisions, 0);
    let mut checked = 0u64;
    for (sig, times) in lbr.iter() {
        let exact = tr
            .timings
            .get(sig)
            .unwrap_or_else(|| panic!("LBR path {sig} never seen by the trace source"));
        let seen: std::collections::BTreeMap<u64, u64> = exact.iter().collect();
        for (t, _) in times.iter() {
            assert!(
                seen.contains_key(&t),
                "LBR time {t} of {sig} is not among the trace's times {seen:?}"
            );
        }
        checked += times.count();
    }
    assert_eq!(checked, st.timed);
    // lookup() varies in both views.
    let top = proftrust_vpp::analyze(&lbr, &proftrust_vpp::AnalysisOptions::default());
    assert_eq!(lbr.info[&top.paths[0].signature].function, "lookup");
}

/// The probe source natively: the boundary count is the C source's loop count (250000 at
/// scale 1), the timed paths follow the bursty closed form, every signature's entry is a
/// probe site addr2line places on a PT_FOR line, lookup() leads, and the SVG is
/// written.
#[test]
fn probe_source_end_to_end() {
    let t = "probe_source_end_to_end";
    if !need(t, &["gcc", "addr2line"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "vpp", true);
    let svg = dir.path().join("deltas.svg");
    let v = json(
        &[
            "vpp",
            "--source",
            "probe",
            "--json",
            "--n-check",
            "100",
            "--top",
            "3",
            "--svg",
            svg.to_str().unwrap(),
        ],
        &[exe.to_str().unwrap(), "1", "64"],
    );
    check_paths(&v);
    let st = &v["source_stats"];
    assert_eq!(st["boundaries"], 250_000);
    assert_eq!(
        st["timed_paths"].as_u64().unwrap(),
        proftrust_probe::expected_timed(250_000, 100, 1)
    );
    assert_eq!(v["unit"], "ticks");
    // Shares of the run's ticks (seed 004 Fig. 3), the timed-path shares beside them.
    assert_eq!(v["time_base"], "program");
    let b = &v["bias"];
    let bias = b["subtracted"].as_u64().unwrap();
    assert!(bias > 0);
    assert_eq!(v["config"]["bias_subtracted"].as_u64().unwrap(), bias);
    // The bias is the mean of the calibration inside the band around the median.
    let (median, tol) = (
        b["median"].as_u64().unwrap(),
        b["tolerance"].as_u64().unwrap(),
    );
    assert!(bias.abs_diff(median) <= tol, "{b}");
    // Both calibrations were written (start-up and exit) and the cheaper one is used.
    assert!(b["other_median"].is_u64(), "{b}");
    assert!(
        b["calibration"] == "start" || b["calibration"] == "exit",
        "{b}"
    );
    // The timer's resolution divides every calibration percentile.
    let q = v["timer_resolution"].as_u64().unwrap();
    assert_eq!(b["resolution"].as_u64().unwrap(), q);
    for k in ["min", "p10", "median", "p90", "max"] {
        assert_eq!(
            b[k].as_u64().unwrap() % q,
            b["min"].as_u64().unwrap() % q,
            "{k}"
        );
    }
    let mut share = 0.0;
    for p in v["paths"].as_array().unwrap() {
        assert!(p["resolved"].is_boolean(), "{p}");
        let (s, st) = (
            p["share_of_time"].as_f64().unwrap(),
            p["share_of_timed"].as_f64().unwrap(),
        );
        assert!(
            s <= st + 1e-12,
            "a share of the run is at most the share of the timed paths: {p}"
        );
        share += s;
    }
    assert!(share <= 1.0 + 1e-9, "shares of the run add up to {share}");
    // Every entry lies on a PT_FOR line (the return address of the probed copy's call).
    let lines = [
        boundary_line("score"),
        boundary_line("lookup"),
        boundary_line("stream"),
    ];
    let paths = v["paths"].as_array().unwrap();
    let mut seen_lines = Vec::new();
    for p in paths {
        let sig = p["signature"].as_str().unwrap();
        let entry =
            u64::from_str_radix(sig.split('-').next().unwrap().trim_start_matches("0x"), 16)
                .unwrap();
        let o = Command::new("addr2line")
            .args(["-i", "-e"])
            .arg(&exe)
            .arg(format!("{:#x}", entry - 1))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        let outer = text.lines().last().unwrap().to_string();
        // `file:line`, possibly followed by ` (discriminator N)`.
        let line: usize = outer
            .rsplit(':')
            .next()
            .and_then(|x| x.split_whitespace().next())
            .and_then(|x| x.parse().ok())
            .unwrap_or_else(|| panic!("addr2line said {outer:?}"));
        assert!(outer.contains("vpp.c:"), "{outer}");
        assert!(lines.contains(&line), "entry {sig} at {outer}, not a probe");
        assert_eq!(p["source"], format!("vpp.c:{line}"));
        seen_lines.push(line);
    }
    assert_eq!(seen_lines[0], boundary_line("lookup"), "lookup() leads");
    // A resolved path has a basetime of at least one timer step and a net variation below
    // its total time (the old reading floored every basetime to 0, so NV = total). Whether
    // lookup()'s fastest executions (a table entry in cache: a few cycles) stand out from
    // the probe's own jitter depends on the CPU and its timer: on this project's machine
    // they mostly do (basetime 19-84 ticks, TSC steps of 26); where they do not, the path
    // must say so (`resolved: false`) rather than claim a basetime.
    let diag = format!("timer resolution {q}, bias {b}");
    for p in paths {
        let (base, total, nv) = (
            p["basetime"].as_u64().unwrap(),
            p["total_time"].as_u64().unwrap(),
            p["net_variation"].as_u64().unwrap(),
        );
        assert!(nv <= total, "{p}; {diag}");
        if p["resolved"] == true {
            assert!(
                base >= q.min(total / p["count"].as_u64().unwrap()),
                "{p}; {diag}"
            );
            assert!(nv < total, "{p}; {diag}");
        }
    }
    let top = &paths[0];
    if top["resolved"] == true {
        assert!(top["basetime"].as_u64().unwrap() > 0, "{top}; {diag}");
    } else {
        eprintln!(
            "probe_source_end_to_end: NOTE: lookup()'s basetime is below this machine's probe resolution ({diag}); checked that it is flagged unresolved: {top}"
        );
    }
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_eq!(s.matches("<polyline").count(), paths.len().min(5));
    assert!(s.contains("lookup") || s.contains(&format!("vpp.c:{}", boundary_line("lookup"))));
}

/// A light and a heavy run (one busy background thread): both are analysed and compared;
/// the shares are shares and the text output names the comparison.
#[test]
fn probe_load_comparison_runs_both() {
    let t = "probe_load_comparison_runs_both";
    if !need(t, &["gcc"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "vpp", true);
    let e = exe.to_str().unwrap();
    let v = json(
        &[
            "vpp",
            "--source",
            "probe",
            "--json",
            "--n-check",
            "200",
            "--compare-load",
            "1",
            "--top",
            "3",
        ],
        &[e, "1", "16"],
    );
    let st = &v["stability"][0];
    assert_eq!(st["kind"], "load");
    for k in ["a_top_in_a", "b_top_in_a", "b_top_in_b", "a_top_in_b"] {
        let x = st["comparison"][k].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&x), "{k} = {x}");
    }
    assert!(st["a"]["samples"].as_u64().unwrap() > 100);
    assert!(st["b"]["samples"].as_u64().unwrap() > 100);
    assert!(st["comparison"]["overlap"].as_u64().unwrap() <= 3);
    // No load thread is left behind: proftrust has exited, and so have its threads.
    let o = proftrust(
        &["vpp", "--source", "probe", "--n-check", "200", "--top", "2"],
        &[e, "1", "16"],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(
        text.contains("net variation:") && text.contains("rank"),
        "{text}"
    );
}

fn fails_with(args: &[&str], prog: &[&str], needle: &str) {
    let o = proftrust(args, prog);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: expected {needle:?} in {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// Bad input: clear errors, status 2, no output file.
#[test]
fn bad_input_is_refused_clearly() {
    let t = "bad_input_is_refused_clearly";
    if !need(t, &["gcc"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A program without probes writes no probe file.
    fails_with(
        &["vpp", "--source", "probe"],
        &["true"],
        "wrote no probe file",
    );
    // A probed program killed before exit() writes none either.
    let src = dir.path().join("crash.c");
    std::fs::write(
        &src,
        "#include <stdlib.h>\n#include \"proftrust_probe.h\"\nint main(void){for(int i=0;i<1000;i++){PT_BOUNDARY();}abort();}\n",
    )
    .unwrap();
    let crash = dir.path().join("crash");
    assert!(Command::new("gcc")
        .arg("-I")
        .arg(root().join("crates/probe/include"))
        .arg(&src)
        .arg("-o")
        .arg(&crash)
        .status()
        .unwrap()
        .success());
    let svg = dir.path().join("never.svg");
    fails_with(
        &["vpp", "--source", "probe", "--svg", svg.to_str().unwrap()],
        &[crash.to_str().unwrap()],
        "before writing its probe file",
    );
    assert!(!svg.exists());
    // A probe file cut short.
    let cut = dir.path().join("cut.txt");
    std::fs::write(&cut, "proftrust-probe 1\npid 1\ns 0x10 0 - 5\n").unwrap();
    fails_with(
        &[
            "vpp",
            "--source",
            "probe",
            "--probe-file",
            cut.to_str().unwrap(),
        ],
        &[],
        "cut short",
    );
    // Not a probe file.
    fails_with(
        &[
            "vpp",
            "--source",
            "probe",
            "--probe-file",
            src.to_str().unwrap(),
        ],
        &[],
        "not a proftrust probe file",
    );
    // Options that do not fit the source.
    fails_with(&["vpp", "--load", "2"], &["true"], "need --source probe");
    fails_with(&["vpp"], &[], "give the program");
    fails_with(
        &[
            "vpp",
            "--source",
            "lbr",
            "--lbr-file",
            src.to_str().unwrap(),
        ],
        &["true"],
        "unknown file format",
    );
    fails_with(
        &["vpp", "--source", "probe", "--compare-load", "100"],
        &["true"],
        "1 to 64",
    );
}

/// Branch stacks recorded to a file by `proftrust vpmu --lbr` and the same stacks as
/// `perf script` brstack text (`proftrust read --script`). The text's brstack entries name
/// no module (module-relative addresses, as the reader takes addresses below 4 GiB), so
/// entries inside libc cannot be placed and walks through them are lost; the program's own
/// loops are read identically: the top path agrees exactly, every path of the text is a
/// path of the sample file, seen no more often.
#[test]
fn lbr_file_sample_and_perf_script_text_agree() {
    let t = "lbr_file_sample_and_perf_script_text_agree";
    if !need(t, &["gcc", "qemu-x86_64"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "vpp", false);
    let e = exe.to_str().unwrap();
    let samples = dir.path().join("s.samples");
    let o = proftrust(
        &[
            "vpmu",
            "--skid",
            "0",
            "--lbr",
            "--cpi-model",
            "cache-sim",
            "--period",
            "997",
            "-o",
            samples.to_str().unwrap(),
        ],
        &[e, "1", "2"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(env!("CARGO_BIN_EXE_proftrust"))
        .args(["read", "--script"])
        .arg(&samples)
        .output()
        .unwrap();
    assert!(o.status.success());
    let text = dir.path().join("s.txt");
    std::fs::write(&text, &o.stdout).unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("/-/-/"));
    let key = |v: &Value| -> Vec<(String, u64, u64, u64)> {
        v["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["signature"].as_str().unwrap().to_string(),
                    p["count"].as_u64().unwrap(),
                    p["basetime"].as_u64().unwrap(),
                    p["total_time"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let a = json(
        &[
            "vpp",
            "--source",
            "lbr",
            "--json",
            "--lbr-file",
            samples.to_str().unwrap(),
        ],
        &[e],
    );
    let b = json(
        &[
            "vpp",
            "--source",
            "lbr",
            "--json",
            "--lbr-file",
            text.to_str().unwrap(),
        ],
        &[e],
    );
    check_paths(&a);
    check_paths(&b);
    let (ka, kb) = (key(&a), key(&b));
    assert_eq!(ka[0], kb[0]);
    for x in &kb {
        let y = ka
            .iter()
            .find(|y| y.0 == x.0)
            .unwrap_or_else(|| panic!("{x:?} not in the sample file's paths"));
        assert!(x.1 <= y.1 && x.2 >= y.2, "{x:?} vs {y:?}");
    }
    let timed = |v: &Value| v["source_stats"]["lbr"]["timed"].as_u64().unwrap();
    assert!(
        timed(&b) * 10 >= timed(&a) * 9,
        "{} vs {}",
        timed(&b),
        timed(&a)
    );
    assert!(a["source_stats"]["lbr"]["timed"].as_u64().unwrap() > 1000);
    assert!(a["paths"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["function"] == "lookup"));
}
