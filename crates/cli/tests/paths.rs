//! `proftrust paths` and `proftrust cct` end to end on C programs compiled at test time
//! (crates/paths/tests/c). Oracles: hand-derived path and call counts (see the comments in
//! the C sources), and the exact block and edge counts of `count_qemu` (inline counters and
//! edge callbacks, independent of the block trace the path profiler reads).

use proftrust_exact::{count_qemu, trace_qemu, QemuOptions};
use proftrust_model::{Location, Svma};
use proftrust_paths::{Profiler, ProfilerOptions};
use proftrust_testkit::need;
use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

fn compile(dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../paths/tests/c");
    proftrust_testkit::compile_c(dir, &src, name, &["-fno-omit-frame-pointer"])
}

fn proftrust_json(args: &[&str], prog: &Path) -> Value {
    proftrust_json_args(args, prog, &[])
}

fn proftrust_json_args(args: &[&str], prog: &Path, prog_args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_proftrust"))
        .args(args)
        .arg("--")
        .arg(prog)
        .args(prog_args)
        .output()
        .expect("run proftrust");
    assert!(
        out.status.success(),
        "proftrust {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// classify()'s four paths run 53, 27, 13 and 7 times (hand-derived in branches.c).
#[test]
fn paths_of_classify_match_hand_derived_counts() {
    if !need(
        "paths_of_classify_match_hand_derived_counts",
        &["gcc", "qemu-x86_64"],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "branches");
    let v = proftrust_json(&["paths", "--function", "classify", "--json"], &bin);
    let paths = v["paths"].as_array().unwrap();
    assert!(paths.iter().all(|p| p["function"] == "classify"));
    let mut counts: Vec<u64> = paths.iter().map(|p| p["count"].as_u64().unwrap()).collect();
    counts.sort_unstable();
    assert_eq!(counts, vec![7, 13, 27, 53]);
    let mut ids: Vec<u64> = paths.iter().map(|p| p["id"].as_u64().unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 4);
    let f = v["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["function"] == "classify")
        .unwrap();
    assert_eq!(f["activations"], 100);
    assert_eq!(f["lost_instructions"], 0);
    assert!(ids.iter().all(|&i| i < f["num_paths"].as_u64().unwrap()));
    // Every path starts at classify's entry block and ends by returning.
    let first: Vec<&str> = paths
        .iter()
        .map(|p| p["blocks"][0].as_str().unwrap())
        .collect();
    assert!(first.windows(2).all(|w| w[0] == w[1]));
    assert!(paths.iter().all(|p| p["ends_with_backedge_to"].is_null()));
    assert!(paths
        .iter()
        .all(|p| p["source"][0].as_str().unwrap().starts_with("branches.c:")));
}

/// Path counts from the trace, summed per static block and per branch edge, equal the exact
/// block and edge counts of `count_qemu`; path instructions equal the exact instruction
/// counts of each function.
#[test]
fn path_counts_sum_to_exact_block_and_edge_counts() {
    let t = "path_counts_sum_to_exact_block_and_edge_counts";
    if !need(t, &["gcc", "qemu-x86_64"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "branches");
    let b = proftrust_binary::Binary::open(&bin).unwrap();
    let cfgs: Vec<_> = ["classify", "main"]
        .iter()
        .map(|n| b.cfg(b.function_by_name(n).unwrap()).unwrap())
        .collect();
    let module = proftrust_model::Module {
        path: bin.to_string_lossy().into_owned(),
        build_id: b.build_id().cloned(),
        load_bias: 0,
    };
    let program = proftrust_paths::ProgramCfgs::new(module, cfgs);
    let cmd = vec![OsString::from(&bin)];
    let opts = QemuOptions {
        show_output: false,
        ..Default::default()
    };
    let mut prof = Profiler::new(&program, ProfilerOptions::default());
    trace_qemu(&cmd, &opts, &mut prof).unwrap();
    let (pp, _) = prof.finish();
    let mut exact = count_qemu(&cmd, &opts).unwrap();
    exact.normalize();
    let m = exact
        .modules
        .find_by_file_name(bin.file_name().unwrap().to_str().unwrap())
        .expect("program module in the exact profile");
    let mut exact_edges: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for e in &exact.edges {
        if e.from.module == Some(m) && e.to.module == Some(m) {
            *exact_edges.entry((e.from.svma.0, e.to.svma.0)).or_insert(0) += e.count;
        }
    }
    let classify = program.find("classify").unwrap();
    let cfg = program.cfg(classify);
    let num = program.numbering(classify).unwrap();
    let mut block_runs: BTreeMap<u32, u64> = BTreeMap::new();
    let mut edge_runs: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    let mut instr = 0;
    for (k, pm) in pp.paths.iter().filter(|(k, _)| k.func == classify) {
        let r = num.regenerate(k.id).unwrap();
        for bl in &r.blocks {
            *block_runs.entry(bl.0).or_insert(0) += pm.count;
        }
        for w in r.blocks.windows(2) {
            let from = cfg.block(w[0]).last().0;
            let to = cfg.block(w[1]).start.0;
            *edge_runs.entry((from, to)).or_insert(0) += pm.count;
        }
        instr += pm.instructions;
    }
    assert_eq!(pp.functions[classify.0 as usize].lost_instructions, 0);
    for bl in &cfg.blocks {
        let want = exact.count_at(Location {
            module: Some(m),
            svma: bl.start,
        });
        assert_eq!(
            block_runs.get(&bl.id.0).copied().unwrap_or(0),
            want,
            "executions of block {:#x}",
            bl.start.0
        );
    }
    // Every edge the exact run saw between two instructions of classify that is a taken
    // branch or a block boundary equals the path-derived count.
    let in_f = |a: u64| cfg.block_at(Svma(a)).is_some();
    let mut checked = 0;
    for (&(from, to), &c) in &exact_edges {
        if in_f(from) && in_f(to) && cfg.blocks.iter().any(|bl| bl.start.0 == to) {
            assert_eq!(
                edge_runs.get(&(from, to)).copied().unwrap_or(0),
                c,
                "edge {from:#x} -> {to:#x}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 2, "only {checked} edges checked");
    let lo = cfg.blocks.first().unwrap().start;
    let hi = cfg.blocks.last().unwrap().end;
    let exact_instr: u64 = exact
        .instructions
        .iter()
        .filter(|i| i.loc.module == Some(m) && i.loc.svma >= lo && i.loc.svma < hi)
        .map(|i| i.count)
        .sum();
    assert_eq!(instr, exact_instr);
}

/// Records and recursion backedges of recursion.c (hand-derived in its comments).
#[test]
fn cct_of_recursive_programs_matches_hand_derived_calls() {
    let t = "cct_of_recursive_programs_matches_hand_derived_calls";
    if !need(t, &["gcc", "qemu-x86_64"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "recursion");
    let folded = dir.path().join("exact.folded");
    let v = proftrust_json(
        &["cct", "--json", "--folded", folded.to_str().unwrap()],
        &bin,
    );
    let recs = v["records"].as_array().unwrap();
    let named = |n: &str| -> Vec<&Value> { recs.iter().filter(|r| r["procedure"] == n).collect() };
    let id_of = |r: &Value| r["id"].as_u64().unwrap();
    let back = v["recursion_backedges"].as_array().unwrap();
    let back_calls = |from: u64, to: u64| -> u64 {
        back.iter()
            .filter(|b| b["from"] == from && b["to"] == to)
            .map(|b| b["calls"].as_u64().unwrap())
            .sum()
    };
    let main = named("main");
    assert_eq!(main.len(), 1);
    let main_id = id_of(main[0]);
    // fib: one record under main, 176 recursive calls folded into it.
    let fib = named("fib");
    assert_eq!(fib.len(), 1);
    assert_eq!(fib[0]["parent"], main_id);
    assert_eq!(fib[0]["calls"], 1);
    assert_eq!(back_calls(id_of(fib[0]), id_of(fib[0])), 176);
    // is_even from two call sites in main: two records.
    let ev = named("is_even");
    assert_eq!(ev.len(), 2);
    assert!(ev.iter().all(|r| r["parent"] == main_id && r["calls"] == 1));
    let od = named("is_odd");
    assert_eq!(od.len(), 2);
    let mut pairs: Vec<(u64, u64)> = od
        .iter()
        .map(|o| {
            let parent = o["parent"].as_u64().unwrap();
            assert!(ev.iter().any(|e| id_of(e) == parent));
            (o["calls"].as_u64().unwrap(), back_calls(id_of(o), parent))
        })
        .collect();
    pairs.sort_unstable();
    assert_eq!(pairs, vec![(2, 2), (4, 3)]);
    // deep: one record, 5 recursive calls; the longjmp unwinds at least its 6 activations.
    let deep = named("deep");
    assert_eq!(deep.len(), 1);
    assert_eq!(back_calls(id_of(deep[0]), id_of(deep[0])), 5);
    assert!(
        v["unwound_frames"].as_u64().unwrap() >= 6,
        "{}",
        v["unwound_frames"]
    );
    assert_eq!(v["nodes"].as_u64().unwrap() as usize, recs.len());
    assert!(v["height"].as_u64().unwrap() >= 2);
    assert!(v["max_replication"].as_u64().unwrap() >= 2);
    // The folded export holds main's contexts.
    let text = std::fs::read_to_string(&folded).unwrap();
    assert!(text
        .lines()
        .any(|l| l.ends_with(|c: char| c.is_ascii_digit()) && l.contains(";main;fib ")));
    assert!(text.lines().any(|l| l.contains(";main;is_even;is_odd ")));
}

fn records_named<'a>(v: &'a Value, name: &str) -> Vec<&'a Value> {
    v["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["procedure"] == name)
        .collect()
}

fn context<'a>(contexts: &'a Value, tail: &[&str]) -> &'a Value {
    contexts
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            let st: Vec<&str> = c["stack"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_str().unwrap())
                .collect();
            st.ends_with(tail) && st.len() >= tail.len()
        })
        .unwrap_or_else(|| panic!("no context ending in {tail:?}"))
}

/// contexts.c under QEMU (counts hand-derived in its comments, REPS = 3): the indirect call
/// site in dispatch has three callees in one slot; work has one record per calling context;
/// gprof's call-count split of work's cost is measured against the exact split; the exact
/// instructions of work's two contexts add up to count_qemu's per-instruction counts of
/// work (an independent oracle: inline counters, not the block trace).
#[test]
fn cct_of_contexts_c_indirect_calls_and_the_gprof_problem() {
    let t = "cct_of_contexts_c_indirect_calls_and_the_gprof_problem";
    if !need(t, &["gcc", "qemu-x86_64"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "contexts");
    let v = proftrust_json_args(&["cct", "--json"], &bin, &["3"]);
    let id = |r: &Value| r["id"].as_u64().unwrap();
    let dispatch = records_named(&v, "dispatch");
    assert_eq!(dispatch.len(), 1);
    assert_eq!(dispatch[0]["calls"], 900);
    let mut sites = Vec::new();
    for op in ["op_add", "op_mul", "op_xor"] {
        let r = records_named(&v, op);
        assert_eq!(r.len(), 1, "{op}");
        assert_eq!(r[0]["calls"], 300, "{op}");
        assert_eq!(r[0]["parent"], id(dispatch[0]), "{op}");
        sites.push(r[0]["site"].as_str().unwrap().to_string());
    }
    assert!(
        sites.windows(2).all(|w| w[0] == w[1]),
        "one call site: {sites:?}"
    );
    let heavy = records_named(&v, "heavy");
    let light = records_named(&v, "light");
    assert_eq!((heavy.len(), light.len()), (1, 1));
    let work = records_named(&v, "work");
    assert_eq!(work.len(), 2);
    let under = |p: &Value| {
        *work
            .iter()
            .find(|w| w["parent"] == id(p))
            .expect("work under its caller")
    };
    let (wh, wl) = (under(heavy[0]), under(light[0]));
    assert_eq!(wh["calls"], 15);
    assert_eq!(wl["calls"], 3000);
    let (ih, il) = (
        wh["instructions"].as_u64().unwrap(),
        wl["instructions"].as_u64().unwrap(),
    );
    // Same 30000 iterations each; light adds 2985 more call overheads.
    assert!(ih < il && 2 * ih > il, "heavy;work {ih} light;work {il}");
    // gprof: work's cost split by call counts, 15 / 3015 to heavy.
    let c = &v["contexts"];
    let gh = context(c, &["main", "heavy", "work"]);
    assert_eq!(gh["instructions"].as_u64().unwrap(), ih);
    let want = (ih + il) as f64 * 15.0 / 3015.0;
    assert!(
        (gh["gprof"].as_f64().unwrap() - want).abs() < 1e-6 * want,
        "{gh}"
    );
    assert!(
        v["gprof_epsilon"].as_f64().unwrap() > 0.2,
        "{}",
        v["gprof_epsilon"]
    );
    // Independent oracle: count_qemu's exact counts of work's instructions.
    let b = proftrust_binary::Binary::open(&bin).unwrap();
    let f = b.function_by_name("work").unwrap();
    let opts = QemuOptions {
        show_output: false,
        ..Default::default()
    };
    let mut exact = count_qemu(&[OsString::from(&bin), OsString::from("3")], &opts).unwrap();
    exact.normalize();
    let m = exact
        .modules
        .find_by_file_name("contexts")
        .expect("program module");
    let work_exact: u64 = exact
        .instructions
        .iter()
        .filter(|i| i.loc.module == Some(m) && f.contains(i.loc.svma))
        .map(|i| i.count)
        .sum();
    assert_eq!(ih + il, work_exact);
}

fn record_or_skip(t: &str, args: &[&str]) -> bool {
    let out = Command::new(env!("CARGO_BIN_EXE_proftrust"))
        .args(args)
        .output()
        .expect("run proftrust");
    if !out.status.success() {
        proftrust_testkit::skip!(
            "{t}: proftrust record failed (perf_event_open not allowed here?): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return false;
    }
    true
}

/// The sampled CCT of a native `proftrust record -g` run of contexts.c (REPS = 10000) against
/// the exact CCT of a short run (REPS = 5; shares within main do not depend on REPS). work
/// is a frameless leaf: without the repair its samples would all sit in main;work, a context
/// that does not exist. With it, both of work's contexts are found, their sampled shares are
/// close to the exact ones, and far from gprof's call-count split.
#[test]
fn sampled_cct_of_a_record_g_run_repairs_frameless_leaves() {
    let t = "sampled_cct_of_a_record_g_run_repairs_frameless_leaves";
    if !need(t, &["gcc", "qemu-x86_64"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "contexts");
    let file = dir.path().join("ctx.ptsamp");
    let (b, f) = (bin.to_str().unwrap(), file.to_str().unwrap());
    if !record_or_skip(
        t,
        &[
            "record", "-g", "-c", "100000", "--seed", "1", "-o", f, "--", b, "10000",
        ],
    ) {
        return;
    }
    let folded = dir.path().join("sampled.folded");
    let v = proftrust_json_args(
        &[
            "cct",
            "--json",
            "--samples",
            f,
            "--sampled-folded",
            folded.to_str().unwrap(),
        ],
        &bin,
        &["5"],
    );
    let s = &v["sampled"];
    let n: u64 = s["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["samples"].as_u64().unwrap())
        .sum();
    assert!(n > 500, "{n} samples within main");
    assert!(
        v["sampled_frames_repaired"].as_u64().unwrap() > n / 2,
        "repaired {}",
        v["sampled_frames_repaired"]
    );
    assert!(
        v["epsilon_sampled"].as_f64().unwrap() < 0.15,
        "{}",
        v["epsilon_sampled"]
    );
    let total = v["total_instructions"].as_u64().unwrap() as f64;
    for tail in [["main", "heavy", "work"], ["main", "light", "work"]] {
        let c = context(&s["contexts"], &tail);
        let (sh, ex) = (
            c["share"].as_f64().unwrap(),
            c["exact_share"].as_f64().unwrap(),
        );
        assert!((sh - ex).abs() < 0.1, "{tail:?}: sampled {sh} exact {ex}");
    }
    // gprof gives heavy;work 5/1005 of work: the sampled share is an order of magnitude above.
    let gprof = context(&v["contexts"], &["main", "heavy", "work"])["gprof"]
        .as_f64()
        .unwrap()
        / total;
    let sh = context(&s["contexts"], &["main", "heavy", "work"])["share"]
        .as_f64()
        .unwrap();
    assert!(sh > 10.0 * gprof, "sampled {sh} gprof {gprof}");
    assert!(
        context(&s["contexts"], &["main", "heavy", "work"])["samples"]
            .as_u64()
            .unwrap()
            > 0
    );
    let spurious = s["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["samples"].as_u64().unwrap() > 0 && c["exact_share"] == 0.0)
        .map(|c| c["samples"].as_u64().unwrap())
        .sum::<u64>();
    assert!(
        spurious * 50 < n,
        "{spurious} samples in contexts that do not exist"
    );
    // The sampled folded export holds every sample once, the repaired contexts included.
    let text = std::fs::read_to_string(&folded).unwrap();
    let mut in_file = 0u64;
    let mut heavy_work = 0u64;
    for l in text.lines() {
        let (st, c) = l.rsplit_once(' ').expect("`stack count` lines");
        let c: u64 = c.parse().unwrap();
        in_file += c;
        if st.ends_with(";main;heavy;work") {
            heavy_work += c;
        }
    }
    assert!(in_file >= n, "folded {in_file} samples, {n} within main");
    assert_eq!(
        heavy_work,
        context(&s["contexts"], &["main", "heavy", "work"])["samples"]
            .as_u64()
            .unwrap()
    );
}

/// The same comparison from `perf record -g` (perf.data) and from its `perf script` text.
#[test]
fn sampled_cct_from_perf_data_and_perf_script() {
    let t = "sampled_cct_from_perf_data_and_perf_script";
    if !need(t, &["gcc", "qemu-x86_64", "perf"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "contexts");
    let data = dir.path().join("perf.data");
    let rec = Command::new("perf")
        .args([
            "record",
            "-q",
            "-g",
            "-e",
            "cpu-clock",
            "-c",
            "100000",
            "-o",
        ])
        .arg(&data)
        .arg(&bin)
        .arg("10000")
        .output()
        .expect("run perf");
    if !rec.status.success() {
        proftrust_testkit::skip!(
            "{t}: perf record failed: {}",
            String::from_utf8_lossy(&rec.stderr).trim()
        );
        return;
    }
    let script = Command::new("perf")
        .args([
            "script",
            "-F",
            "comm,tid,time,event,ip,sym,symoff,dso",
            "-i",
        ])
        .arg(&data)
        .output()
        .expect("run perf script");
    assert!(script.status.success());
    let text = dir.path().join("perf.txt");
    std::fs::write(&text, &script.stdout).unwrap();
    let mut eps = Vec::new();
    for f in [&data, &text] {
        let v = proftrust_json_args(
            &["cct", "--json", "--samples", f.to_str().unwrap()],
            &bin,
            &["5"],
        );
        let e = v["epsilon_sampled"].as_f64().unwrap();
        assert!(e < 0.15, "{}: epsilon {e}", f.display());
        let c = context(&v["sampled"]["contexts"], &["main", "light", "work"]);
        assert!(c["samples"].as_u64().unwrap() > 100, "{}: {c}", f.display());
        eps.push(e);
    }
    // The text holds the same samples and chains as the perf.data it was printed from.
    assert!((eps[0] - eps[1]).abs() < 0.02, "{eps:?}");
}

/// LBR stacks from the virtual PMU: the four paths of classify are all seen, in the order of
/// their exact counts (53, 27, 13, 7); the same stacks written as `perf script -F
/// ...,brstack` text (runtime addresses of a PIE loaded at 0x555555554000, as perf prints
/// them) give exactly the same per-path LBR counts.
#[test]
fn lbr_paths_from_vpmu_stacks_and_perf_script_brstack() {
    let t = "lbr_paths_from_vpmu_stacks_and_perf_script_brstack";
    if !need(t, &["gcc", "qemu-x86_64"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "branches");
    let raw = dir.path().join("lbr-all.ptsamp");
    let out = Command::new(env!("CARGO_BIN_EXE_proftrust"))
        .args(["-q", "vpmu", "--skid", "0", "--lbr", "--period", "31", "-o"])
        .arg(&raw)
        .arg("--")
        .arg(&bin)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Keep samples whose ip and branches all lie in the program (what `perf script` prints
    // with symbols for one dso).
    let mut set = proftrust_formats::native::read_samples(&std::fs::read(&raw).unwrap()).unwrap();
    let m = set.modules.find_by_file_name("branches").unwrap();
    set.samples.retain(|s| {
        s.ip.module == Some(m)
            && !s.branches.is_empty()
            && s.branches
                .iter()
                .all(|b| b.from.module == Some(m) && b.to.module == Some(m))
    });
    assert!(set.samples.len() > 50, "{} samples", set.samples.len());
    let native = dir.path().join("lbr.ptsamp");
    let mut buf = Vec::new();
    proftrust_formats::native::write_samples(&mut buf, &set).unwrap();
    std::fs::write(&native, buf).unwrap();
    let b = proftrust_binary::Binary::open(&bin).unwrap();
    const BIAS: u64 = 0x5555_5555_4000;
    let mut text = String::new();
    for (i, s) in set.samples.iter().enumerate() {
        let f = b.function_at(s.ip.svma).expect("ip in a function");
        let ev = &set.events[s.event as usize].name;
        text.push_str(&format!(
            "branches 4242/4242 {}.{:06}: {}: {:x} {}+{:#x} ({}) ",
            1000 + i / 1000,
            i % 1000,
            ev,
            s.ip.svma.0 + BIAS,
            f.raw_name,
            s.ip.svma.0 - f.start.0,
            bin.display()
        ));
        let br: Vec<String> = s
            .branches
            .iter()
            .map(|x| {
                format!(
                    "{:#x}/{:#x}/P/-/-/{}",
                    x.from.svma.0 + BIAS,
                    x.to.svma.0 + BIAS,
                    x.cycles
                )
            })
            .collect();
        text.push_str(&br.join(" "));
        text.push('\n');
    }
    let script = dir.path().join("lbr.txt");
    std::fs::write(&script, text).unwrap();
    let counts = |file: &Path| -> BTreeMap<u64, (u64, u64)> {
        let v = proftrust_json(
            &[
                "paths",
                "--function",
                "classify",
                "--json",
                "--lbr",
                file.to_str().unwrap(),
            ],
            &bin,
        );
        assert!(v["lbr"]["comparison"].is_object(), "{}", v["lbr"]);
        v["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["id"].as_u64().unwrap(),
                    (
                        p["count"].as_u64().unwrap(),
                        p["lbr_count"].as_u64().unwrap(),
                    ),
                )
            })
            .collect()
    };
    let a = counts(&native);
    let mut by_count: Vec<(u64, u64)> = a.values().copied().collect();
    by_count.sort_unstable();
    assert_eq!(
        by_count.iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![7, 13, 27, 53]
    );
    assert!(
        by_count.windows(2).all(|w| w[0].1 < w[1].1),
        "LBR counts follow the exact counts: {by_count:?}"
    );
    assert!(by_count[0].1 > 0);
    assert_eq!(counts(&script), a, "perf script brstack vs native stacks");
}

/// Hardware metrics per path (seed 003 §3) from the virtual PMU's cache simulation, against
/// the misses hand-derived in mempaths.c: step's load path misses L1D on every one of its
/// 16384 loads and the LLC on the first 8192 (first touches); its arithmetic path misses
/// nothing. Seed 003 §6 read as the paper does (`--hot-by misses`): the load path is the one
/// hot path and it is dense. `--cpi-model flat` gives the same paths and counts with no misses
/// and no classes.
#[test]
fn paths_carry_simulated_cache_misses_and_seed_003_classes() {
    let t = "paths_carry_simulated_cache_misses_and_seed_003_classes";
    if !need(t, &["gcc", "qemu-x86_64"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "mempaths");
    let v = proftrust_json(&["paths", "--json", "--hot-by", "misses"], &bin);
    assert!(v["cycle_model"].as_str().unwrap().starts_with("cache-sim"));
    let step: Vec<&Value> = v["paths"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["function"] == "step")
        .collect();
    assert_eq!(step.len(), 2);
    let load = step
        .iter()
        .find(|p| p["l1_misses"].as_u64().unwrap() > 0)
        .expect("the load path");
    let arith = step
        .iter()
        .find(|p| p["l1_misses"] == 0)
        .expect("the arithmetic path");
    assert_eq!(load["count"], 16384);
    assert_eq!(arith["count"], 16384);
    assert_eq!(load["l1_misses"], 16384);
    assert_eq!(load["llc_misses"], 8192);
    assert_eq!(arith["llc_misses"], 0);
    // The misses' latencies alone (CacheConfig defaults: memory 200, LLC 40 cycles).
    let cyc = load["cycles"].as_u64().unwrap();
    assert!(cyc >= 8192 * 200 + 8192 * 40, "load path cycles {cyc}");
    assert!(arith["cycles"].as_u64().unwrap() < 10 * 16384);
    assert_eq!(load["class"], "dense");
    assert_eq!(arith["class"], "cold");
    let hot = &v["hot"];
    let row = |class: &str| {
        hot["paths"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["class"] == class)
            .unwrap()
            .clone()
    };
    assert_eq!(row("hot")["num"], 1);
    assert_eq!(row("dense")["num"], 1);
    assert_eq!(row("sparse")["num"], 0);
    assert!(row("dense")["miss_share"].as_f64().unwrap() > 0.99);
    let procs = hot["hot_procedures"].as_array().unwrap();
    assert_eq!(procs.len(), 1);
    assert_eq!(procs[0]["function"], "step");
    assert_eq!(procs[0]["paths_executed"], 2);
    // The cache totals cover at least the path misses.
    assert!(v["cache"]["l1_misses"].as_u64().unwrap() >= 16384);
    let flat = proftrust_json(&["paths", "--json", "--cpi-model", "flat"], &bin);
    assert!(flat["hot"].is_null());
    let fs: Vec<(u64, u64)> = flat["paths"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["function"] == "step")
        .map(|p| {
            (
                p["count"].as_u64().unwrap(),
                p["l1_misses"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(fs, vec![(16384, 0), (16384, 0)]);
}

/// On the bundled workloads (scale 1): for every function of the program whose instructions
/// all lie on complete paths, the executions of each static block summed from its path
/// profile (regenerated block sequences x counts) equal count_qemu's exact execution count of
/// the block's first instruction (QEMU inline counters, independent of the block trace).
#[test]
fn path_counts_match_exact_block_counts_on_bundled_workloads() {
    let t = "path_counts_match_exact_block_counts_on_bundled_workloads";
    if !need(t, &["gcc", "qemu-x86_64"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut functions_checked = 0;
    for w in ["mcf", "hmmer"] {
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../workloads")
            .join(format!("{w}.c"));
        let bin = dir.path().join(w);
        let st = Command::new("gcc")
            .args(["-O2", "-g", "-fno-omit-frame-pointer", "-o"])
            .arg(&bin)
            .arg(&src)
            .arg("-lm")
            .status()
            .unwrap();
        assert!(st.success(), "gcc {w}");
        let b = proftrust_binary::Binary::open(&bin).unwrap();
        let cfgs: Vec<_> = b.functions().iter().filter_map(|f| b.cfg(f).ok()).collect();
        let module = proftrust_model::Module {
            path: bin.to_string_lossy().into_owned(),
            build_id: b.build_id().cloned(),
            load_bias: 0,
        };
        let program = proftrust_paths::ProgramCfgs::new(module, cfgs);
        let cmd = vec![OsString::from(&bin), OsString::from("1")];
        let opts = QemuOptions {
            show_output: false,
            ..Default::default()
        };
        let mut prof = Profiler::new(
            &program,
            ProfilerOptions {
                paths: true,
                cct: false,
            },
        );
        trace_qemu(&cmd, &opts, &mut prof).unwrap();
        let (pp, _) = prof.finish();
        let mut exact = count_qemu(&cmd, &opts).unwrap();
        exact.normalize();
        let m = exact.modules.find_by_file_name(w).expect("program module");
        let mut per_block: BTreeMap<(u32, u32), u64> = BTreeMap::new();
        for (k, pm) in &pp.paths {
            let r = program.numbering(k.func).unwrap().regenerate(k.id).unwrap();
            for bl in r.blocks {
                *per_block.entry((k.func.0, bl.0)).or_insert(0) += pm.count;
            }
        }
        for (f, cfg) in program.iter() {
            let st = &pp.functions[f.0 as usize];
            if st.activations == 0 || st.lost_instructions > 0 || st.num_paths.is_none() {
                continue;
            }
            for bl in &cfg.blocks {
                let want = exact.count_at(Location {
                    module: Some(m),
                    svma: bl.start,
                });
                let got = per_block.get(&(f.0, bl.id.0)).copied().unwrap_or(0);
                assert_eq!(got, want, "{w}: {} block {:#x}", cfg.function, bl.start.0);
            }
            functions_checked += 1;
        }
    }
    assert!(
        functions_checked >= 10,
        "only {functions_checked} functions"
    );
}

/// C++ exceptions under QEMU (exceptions.cc, counts hand-derived in its comments): the
/// unwinding does not corrupt the tree (one main, thrower's recursion folded, no unexplained
/// transfer) and the paths cut by the throw are counted as unwound, in the hot and in the
/// cold part of thrower.
#[test]
fn cct_and_paths_survive_cxx_exceptions_and_cold_parts() {
    let t = "cct_and_paths_survive_cxx_exceptions_and_cold_parts";
    if !need(t, &["g++", "qemu-x86_64"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../paths/tests/c/exceptions.cc");
    let bin = dir.path().join("exceptions");
    let st = Command::new("g++")
        .args(["-O2", "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success(), "g++ failed");
    let v = proftrust_json(&["cct", "--json", "--cpi-model", "flat"], &bin);
    assert_eq!(v["unexplained_transfers"], 0);
    assert!(
        v["unwound_frames"].as_u64().unwrap() >= 15,
        "{}",
        v["unwound_frames"]
    );
    let main = records_named(&v, "main");
    assert_eq!(main.len(), 1, "one record of main");
    let main_id = main[0]["id"].as_u64().unwrap();
    let thrower = records_named(&v, "thrower(int)");
    assert_eq!(thrower.len(), 1);
    assert_eq!(thrower[0]["parent"], main_id);
    assert_eq!(thrower[0]["calls"], 3);
    let tid = thrower[0]["id"].as_u64().unwrap();
    let back: u64 = v["recursion_backedges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["from"] == tid && b["to"] == tid)
        .map(|b| b["calls"].as_u64().unwrap())
        .sum();
    assert_eq!(back, 12);
    let leaf = records_named(&v, "leaf(int)");
    assert_eq!(leaf.len(), 1);
    assert_eq!(
        (leaf[0]["parent"].as_u64(), leaf[0]["calls"].as_u64()),
        (Some(main_id), Some(3))
    );
    let p = proftrust_json(&["paths", "--json", "--cpi-model", "flat"], &bin);
    let f = |name: &str| {
        p["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["function"] == name)
            .cloned()
    };
    let hot = f("thrower(int)").expect("thrower in functions");
    assert_eq!(hot["activations"], 15);
    match f("thrower(int) [clone .cold]") {
        // GCC split the throw into the cold part (GCC 12 at -O2 does).
        Some(cold) => {
            assert_eq!(hot["unwound"], 12);
            assert_eq!(cold["activations"], 3);
            assert_eq!(cold["unwound"], 3);
        }
        None => assert_eq!(hot["unwound"], 15),
    }
}

/// The classes mean what a reader of the listing takes them to mean: on the golden `tiny`
/// (cache simulation by default), every path with at least 1% of the modelled cycles is hot
/// (`dense` or `sparse`), the rest `cold`, checked against the cycles the report itself
/// lists; `walk`'s pointer chase (255 of the 259 L1D misses) is the one dense path. With
/// `--hot-by misses` (the paper's reading) the miss-free `leaf` path with 17.79% of the
/// instructions is cold, as before.
#[test]
fn hot_paths_are_those_with_a_large_share_of_the_cycles() {
    if !need(
        "hot_paths_are_those_with_a_large_share_of_the_cycles",
        &["qemu-x86_64"],
    ) {
        return;
    }
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/fixtures/tiny");
    let v = proftrust_json(&["paths", "--json"], &tiny);
    let paths = v["paths"].as_array().unwrap();
    let total: u64 = paths.iter().map(|p| p["cycles"].as_u64().unwrap()).sum();
    assert_eq!(v["hot"]["hot_by"], "cycles");
    let mut dense = Vec::new();
    for p in paths {
        let c = p["cycles"].as_u64().unwrap();
        let class = p["class"].as_str().unwrap();
        if c as f64 >= 0.01 * total as f64 {
            assert!(class == "dense" || class == "sparse", "{p}");
        } else {
            assert_eq!(class, "cold", "{p}");
        }
        if class == "dense" {
            dense.push((
                p["function"].as_str().unwrap().to_string(),
                p["l1_misses"].clone(),
            ));
        }
    }
    assert_eq!(dense, vec![("walk".to_string(), Value::from(255))]);
    let top = paths
        .iter()
        .max_by_key(|p| p["instructions"].as_u64().unwrap())
        .unwrap();
    assert_eq!(top["class"], "sparse", "{top}");

    let v = proftrust_json(&["paths", "--json", "--hot-by", "misses"], &tiny);
    let leaf = v["paths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["function"] == "leaf" && p["id"] == 4)
        .unwrap();
    assert_eq!(leaf["l1_misses"], 0);
    assert_eq!(leaf["class"], "cold", "{leaf}");
}
