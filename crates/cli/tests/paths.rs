//! `proftrust paths` and `proftrust cct` end to end on C programs compiled at test time
//! (crates/paths/tests/c). Oracles: hand-derived path and call counts (see the comments in
//! the C sources), and the exact block and edge counts of `count_qemu` (inline counters and
//! edge callbacks, independent of the block trace the path profiler reads).

use proftrust_exact::{count_qemu, trace_qemu, QemuOptions};
use proftrust_model::{Location, Svma};
use proftrust_paths::{Profiler, ProfilerOptions};
use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

fn have(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn need(test: &str, tools: &[&str]) -> bool {
    for t in tools {
        if !have(t) {
            eprintln!("SKIP: {test}: {t} is not installed");
            return false;
        }
    }
    true
}

fn compile(dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../paths/tests/c")
        .join(format!("{name}.c"));
    let out = dir.join(name);
    let st = Command::new("gcc")
        .args(["-O2", "-g"])
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status()
        .expect("run gcc");
    assert!(st.success(), "gcc failed on {}", src.display());
    out
}

fn proftrust_json(args: &[&str], prog: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_proftrust"))
        .args(args)
        .arg("--")
        .arg(prog)
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
