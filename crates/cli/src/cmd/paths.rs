//! `proftrust paths [--function NAME] [--json] -- PROGRAM ARGS`: exact Ball-Larus path
//! profile of a program (seed 003 §2-3) from its QEMU block trace.
//!
//! JSON contract (kept stable): top level `paths`, each with `function`, `id`, `blocks`
//! (block start addresses, hex strings), `count`, `instructions`; plus `cycles`,
//! `l1_misses`, `llc_misses` (seed 003 §3, from the virtual PMU's timing model and cache
//! simulation), `class` (seed 003 §6), `source` (file:line per block), `lbr_count` with
//! `--lbr`, and top-level `functions` (per-function bookkeeping: NumPaths, degradation, lost
//! instructions), `hot` (seed 003 Tables 2 and 3), `cache`, and the totals.

use crate::trace_args::TraceArgs;
use crate::util;
use anyhow::{bail, Context, Result};
use proftrust_model::RunOutcome;
use proftrust_paths::{
    classify_hot, compare_lbr, hot_paths_covering, lbr_paths, FuncIdx, HotClass, HotMetric,
    HotOptions, HotReport, LbrComparison, LbrPaths, PathKey, PathProfile, ProfilerOptions,
    ProgramCfgs,
};
use proftrust_pipeline::trace::{source_of, Program, Traced};
use serde::Serialize;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `proftrust paths`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only paths of this function (demangled or raw name).
    #[arg(long)]
    function: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Paths listed in text output.
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// Text output: also report how many paths cover this share of the instructions.
    #[arg(long, default_value_t = 0.9)]
    cover: f64,
    /// A branch-stack sample file of the same program (`proftrust record -b`, `proftrust
    /// vpmu --lbr`, perf.data from `perf record -b`, or `perf script -F
    /// ip,sym,symoff,dso,brstack` text): reconstruct paths from its LBR stacks and compare
    /// them with the exact path profile.
    #[arg(long, value_name = "FILE")]
    lbr: Option<PathBuf>,
    /// Hot paths and procedures incur at least this share of the program's misses (seed 003
    /// §6); dense ones have a miss ratio at least the program's, sparse ones below it.
    #[arg(long, default_value_t = 0.01, value_name = "SHARE")]
    hot_share: f64,
    /// Which misses rank hot paths: `l1` (the paper's data-cache misses) or `llc`.
    #[arg(long, value_enum, default_value_t = MissArg::L1)]
    misses: MissArg,
    #[command(flatten)]
    trace: TraceArgs,
}

/// Which misses rank hot paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum MissArg {
    /// L1 data-cache misses.
    L1,
    /// Last-level cache misses.
    Llc,
}

#[derive(Serialize)]
struct JsonPath {
    function: String,
    id: u128,
    blocks: Vec<String>,
    count: u64,
    instructions: u64,
    cycles: u64,
    l1_misses: u64,
    llc_misses: u64,
    /// Seed 003 §6 class by the chosen misses: `hot` paths incur at least `--hot-share` of
    /// them, `dense` ones (hot, miss ratio >= the program's) or `sparse` (below); `cold`
    /// otherwise; absent without misses.
    #[serde(skip_serializing_if = "Option::is_none")]
    class: Option<&'static str>,
    starts_after_backedge: bool,
    ends_with_backedge_to: Option<String>,
    source: Vec<String>,
    /// With `--lbr`: occurrences of the path in the branch stacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    lbr_count: Option<u64>,
}

#[derive(Serialize)]
struct JsonFunction {
    function: String,
    num_paths: Option<u128>,
    executed_paths: usize,
    activations: u64,
    degraded: Option<String>,
    lost_transfers: u64,
    unwound: u64,
    unfinished: u64,
    lost_instructions: u64,
    path_instructions: u64,
}

#[derive(Serialize)]
struct JsonReport {
    program: Vec<String>,
    binary: String,
    outcome: Option<RunOutcome>,
    cycle_model: String,
    total_instructions: u64,
    total_cycles: u64,
    total_l1_misses: u64,
    total_llc_misses: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache: Option<JsonCache>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hot: Option<JsonHot>,
    paths: Vec<JsonPath>,
    functions: Vec<JsonFunction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lbr: Option<JsonLbr>,
    warnings: Vec<String>,
}

/// One row of seed 003's Table 2 (paths) or Table 3 (procedures).
#[derive(Serialize)]
struct JsonClassRow {
    class: &'static str,
    /// Paths (procedures) in the class.
    num: usize,
    /// Their share of the instructions on complete paths.
    instruction_share: f64,
    /// Their share of the misses on complete paths.
    miss_share: f64,
    /// Procedures only: distinct paths executed per procedure.
    #[serde(skip_serializing_if = "Option::is_none")]
    paths_per_procedure: Option<f64>,
}

#[derive(Serialize)]
struct JsonHotProcedure {
    function: String,
    class: &'static str,
    paths_executed: usize,
    instructions: u64,
    misses: u64,
    miss_ratio: f64,
}

/// Seed 003 §6: hot/cold, dense/sparse paths and procedures by miss ratio.
#[derive(Serialize)]
struct JsonHot {
    misses: &'static str,
    hot_share: f64,
    /// Misses per instruction over all complete paths.
    program_miss_ratio: f64,
    paths: Vec<JsonClassRow>,
    procedures: Vec<JsonClassRow>,
    hot_procedures: Vec<JsonHotProcedure>,
}

#[derive(Serialize)]
struct JsonCache {
    accesses: u64,
    loads: u64,
    l1_misses: u64,
    llc_misses: u64,
}

fn class_name(c: HotClass) -> &'static str {
    match c {
        HotClass::Cold => "cold",
        HotClass::Dense => "dense",
        HotClass::Sparse => "sparse",
    }
}

/// Seed 003 Tables 2 and 3 from a classification.
fn hot_tables(h: &HotReport, o: &HotOptions, cfgs: &ProgramCfgs, misses: &'static str) -> JsonHot {
    let ins: u64 = h.paths.iter().map(|p| p.1.instructions).sum();
    let mis: u64 = h.paths.iter().map(|p| o.metric.of(&p.1)).sum();
    let share = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let groups: [(&'static str, &[HotClass]); 4] = [
        ("hot", &[HotClass::Dense, HotClass::Sparse]),
        ("cold", &[HotClass::Cold]),
        ("dense", &[HotClass::Dense]),
        ("sparse", &[HotClass::Sparse]),
    ];
    let paths = groups
        .iter()
        .map(|(name, cl)| {
            let sel: Vec<_> = h.paths.iter().filter(|p| cl.contains(&p.2)).collect();
            JsonClassRow {
                class: name,
                num: sel.len(),
                instruction_share: share(sel.iter().map(|p| p.1.instructions).sum(), ins),
                miss_share: share(sel.iter().map(|p| o.metric.of(&p.1)).sum(), mis),
                paths_per_procedure: None,
            }
        })
        .collect();
    let procedures = groups
        .iter()
        .map(|(name, cl)| {
            let sel: Vec<_> = h
                .procedures
                .iter()
                .filter(|p| cl.contains(&p.class))
                .collect();
            let n = sel.len();
            JsonClassRow {
                class: name,
                num: n,
                instruction_share: share(sel.iter().map(|p| p.metrics.instructions).sum(), ins),
                miss_share: share(sel.iter().map(|p| o.metric.of(&p.metrics)).sum(), mis),
                paths_per_procedure: Some(if n == 0 {
                    0.0
                } else {
                    sel.iter().map(|p| p.paths_executed).sum::<usize>() as f64 / n as f64
                }),
            }
        })
        .collect();
    let hot_procedures = h
        .procedures
        .iter()
        .filter(|p| p.class != HotClass::Cold)
        .map(|p| JsonHotProcedure {
            function: cfgs.cfg(p.func).function.clone(),
            class: class_name(p.class),
            paths_executed: p.paths_executed,
            instructions: p.metrics.instructions,
            misses: o.metric.of(&p.metrics),
            miss_ratio: share(o.metric.of(&p.metrics), p.metrics.instructions),
        })
        .collect();
    JsonHot {
        misses,
        hot_share: o.hot_share,
        program_miss_ratio: h.program_ratio,
        paths,
        procedures,
        hot_procedures,
    }
}

#[derive(Serialize)]
struct JsonLbr {
    samples: u64,
    ranges: u64,
    broken: u64,
    comparison: Option<LbrComparison>,
    error: Option<String>,
}

/// Source line of an address: innermost inline frame, `file:line`.
/// Rows of the path listing, most frequent first; `limit` rows at most (source lines are
/// looked up once per block).
fn path_rows(
    p: &Program,
    prof: &PathProfile,
    only: Option<FuncIdx>,
    limit: usize,
    lbr: Option<&LbrPaths>,
    classes: Option<&HashMap<PathKey, &'static str>>,
) -> Vec<JsonPath> {
    let mut rows: Vec<_> = prof
        .paths
        .iter()
        .filter(|(k, _)| only.is_none_or(|f| f == k.func))
        .collect();
    rows.sort_by(|a, b| b.1.count.cmp(&a.1.count).then(a.0.cmp(b.0)));
    let mut sources: HashMap<u64, String> = HashMap::new();
    rows.into_iter()
        .take(limit)
        .filter_map(|(k, m)| {
            let cfg = p.cfgs.cfg(k.func);
            let n = p.cfgs.numbering(k.func).ok()?;
            let r = n.regenerate(k.id).ok()?;
            let source = r
                .blocks
                .iter()
                .map(|b| {
                    let a = cfg.block(*b).start;
                    sources
                        .entry(a.0)
                        .or_insert_with(|| source_of(&p.binary, a))
                        .clone()
                })
                .collect();
            Some(JsonPath {
                function: cfg.function.clone(),
                id: k.id,
                blocks: r
                    .blocks
                    .iter()
                    .map(|b| format!("{:#x}", cfg.block(*b).start.0))
                    .collect(),
                count: m.count,
                instructions: m.instructions,
                cycles: m.cycles,
                l1_misses: m.l1_misses,
                llc_misses: m.llc_misses,
                class: classes.and_then(|c| c.get(k).copied()),
                starts_after_backedge: r.starts_after_backedge,
                ends_with_backedge_to: r
                    .ends_with_backedge_to
                    .map(|h| format!("{:#x}", cfg.block(h).start.0)),
                source,
                lbr_count: lbr.map(|l| l.paths.get(k).copied().unwrap_or(0)),
            })
        })
        .collect()
}

/// Runs `proftrust paths`.
pub fn run(mut a: Args) -> Result<()> {
    let p = a.trace.load()?;
    let only = match &a.function {
        Some(name) => Some(
            p.cfgs
                .find(name)
                .or_else(|| {
                    p.binary
                        .function_by_name(name)
                        .and_then(|f| p.cfgs.function_at_entry(f.start))
                })
                .with_context(|| {
                    format!(
                        "--function {name}: no such function with a CFG in {}",
                        p.path.display()
                    )
                })?,
        ),
        None => None,
    };
    // Read the LBR file first: a bad file fails before the (slow) trace.
    let lbr: Option<LbrPaths> = match &a.lbr {
        Some(f) => {
            let set =
                proftrust_pipeline::load::samples(f, std::slice::from_ref(&p.path), &util::Ui)?;
            if !set.samples.iter().any(|s| !s.branches.is_empty()) {
                bail!(
                    "{}: no sample has a branch stack; record with `proftrust record -b` or `perf record -b` (needs a PMU with LBR)",
                    f.display()
                );
            }
            Some(lbr_paths(&set, &p.cfgs))
        }
        None => None,
    };
    if !(a.hot_share > 0.0 && a.hot_share <= 1.0) {
        bail!("--hot-share {}: must be in (0, 1]", a.hot_share);
    }
    let Traced {
        profile,
        outcome,
        cache,
        cycle_model,
        ..
    } = a.trace.trace(
        &p,
        ProfilerOptions {
            paths: true,
            cct: false,
        },
        !a.json,
    )?;
    let hot_opts = HotOptions {
        hot_share: a.hot_share,
        metric: match a.misses {
            MissArg::L1 => HotMetric::L1Misses,
            MissArg::Llc => HotMetric::LlcMisses,
        },
        ..Default::default()
    };
    // Seed 003 §6 needs misses; without a cache there are none and no classes.
    let hot: Option<HotReport> = classify_hot(&profile, &hot_opts).ok();
    let hot_classes: Option<HashMap<PathKey, &'static str>> = hot.as_ref().map(|h| {
        h.paths
            .iter()
            .map(|(k, _, c)| (*k, class_name(*c)))
            .collect()
    });
    let mut warnings = p.warnings.clone();
    if profile.paths.is_empty() {
        warnings.push(format!(
            "no complete path was recorded in {} (did the trace reach it?)",
            p.path.display()
        ));
    }
    let rows = path_rows(
        &p,
        &profile,
        only,
        if a.json { usize::MAX } else { a.top },
        lbr.as_ref(),
        hot_classes.as_ref(),
    );
    let executed = profile
        .paths
        .keys()
        .filter(|k| only.is_none_or(|f| f == k.func))
        .count();
    let on_paths: u64 = profile
        .paths
        .iter()
        .filter(|(k, _)| only.is_none_or(|f| f == k.func))
        .map(|(_, m)| m.instructions)
        .sum();
    let lbr = lbr.map(|l| {
        let (comparison, error) = match compare_lbr(&l, &profile) {
            Ok(c) => (Some(c), None),
            Err(e) => (None, Some(e.to_string())),
        };
        JsonLbr {
            samples: l.samples,
            ranges: l.ranges,
            broken: l.broken,
            comparison,
            error,
        }
    });
    let functions: Vec<JsonFunction> = profile
        .functions
        .iter()
        .enumerate()
        .filter(|(i, f)| f.activations > 0 && only.is_none_or(|o| o.0 as usize == *i))
        .map(|(i, f)| JsonFunction {
            function: f.function.clone(),
            num_paths: f.num_paths,
            executed_paths: profile
                .paths
                .keys()
                .filter(|k| k.func.0 as usize == i)
                .count(),
            activations: f.activations,
            degraded: f.degraded.clone(),
            lost_transfers: f.lost_transfers,
            unwound: f.unwound,
            unfinished: f.unfinished,
            lost_instructions: f.lost_instructions,
            path_instructions: f.path_instructions,
        })
        .collect();
    let misses_name = match a.misses {
        MissArg::L1 => "L1D misses",
        MissArg::Llc => "LLC misses",
    };
    let hot_json = hot
        .as_ref()
        .map(|h| hot_tables(h, &hot_opts, &p.cfgs, misses_name));
    let out = std::io::stdout();
    let mut w = out.lock();
    if a.json {
        let rep = JsonReport {
            program: a.trace.program.clone(),
            binary: p.path.display().to_string(),
            outcome: Some(outcome),
            cycle_model,
            total_instructions: profile.total_instructions,
            total_cycles: profile.total_cycles,
            total_l1_misses: profile.total_l1_misses,
            total_llc_misses: profile.total_llc_misses,
            cache: cache.map(|c| JsonCache {
                accesses: c.accesses,
                loads: c.loads,
                l1_misses: c.l1_misses,
                llc_misses: c.llc_misses,
            }),
            hot: hot_json,
            paths: rows,
            functions,
            lbr,
            warnings,
        };
        serde_json::to_writer_pretty(&mut w, &rep)?;
        writeln!(w)?;
        return Ok(());
    }
    for x in &warnings {
        util::note(format!("warning: {x}"));
    }
    writeln!(
        w,
        "{} paths executed, {} instructions on complete paths of {} ({} traced in all)",
        executed,
        on_paths,
        p.path.display(),
        profile.total_instructions
    )?;
    let cover = hot_paths_covering(&profile, HotMetric::Instructions, a.cover);
    writeln!(
        w,
        "{} path(s) cover {:.0}% of the instructions on paths",
        cover.len(),
        a.cover * 100.0
    )?;
    writeln!(w, "timing: {cycle_model}")?;
    if let Some(c) = &cache {
        writeln!(
            w,
            "cache simulation: {} data accesses ({} loads), {} L1D misses, {} LLC misses",
            c.accesses, c.loads, c.l1_misses, c.llc_misses
        )?;
    }
    writeln!(
        w,
        "\n{:>10} {:>12} {:>7} {:>12} {:>9} {:>8} {:>6}  {:<24} {:>6}  blocks (source)",
        "count",
        "instructions",
        "share",
        "cycles",
        "L1D miss",
        "LLC miss",
        "class",
        "function",
        "id"
    )?;
    for r in &rows {
        let src: Vec<&str> = r.source.iter().map(String::as_str).collect();
        writeln!(
            w,
            "{:>10} {:>12} {:>6.2}% {:>12} {:>9} {:>8} {:>6}  {:<24} {:>6}  {}{}{} ({})",
            r.count,
            r.instructions,
            100.0 * r.instructions as f64 / on_paths.max(1) as f64,
            r.cycles,
            r.l1_misses,
            r.llc_misses,
            r.class.unwrap_or("-"),
            r.function,
            r.id,
            if r.starts_after_backedge { "↺ " } else { "" },
            r.blocks.join(" "),
            if r.ends_with_backedge_to.is_some() {
                " ↺"
            } else {
                ""
            },
            src.join(" ")
        )?;
    }
    match &hot_json {
        Some(h) => {
            writeln!(
                w,
                "\nseed 003 §6 by {}: hot = at least {:.1}% of them; dense = hot with a miss ratio >= the program's ({:.3e} per instruction), sparse = below",
                h.misses,
                h.hot_share * 100.0,
                h.program_miss_ratio
            )?;
            writeln!(
                w,
                "{:<8} {:>7} {:>8} {:>8}   {:>10} {:>10} {:>8}",
                "", "paths", "inst", "misses", "procedures", "paths/proc", "misses"
            )?;
            for (pr, pc) in h.paths.iter().zip(&h.procedures) {
                writeln!(
                    w,
                    "{:<8} {:>7} {:>7.1}% {:>7.1}%   {:>10} {:>10.1} {:>7.1}%",
                    pr.class,
                    pr.num,
                    pr.instruction_share * 100.0,
                    pr.miss_share * 100.0,
                    pc.num,
                    pc.paths_per_procedure.unwrap_or(0.0),
                    pc.miss_share * 100.0
                )?;
            }
            for hp in h.hot_procedures.iter().take(a.top) {
                writeln!(
                    w,
                    "  {:<6} {:<30} {:>4} paths {:>12} instructions {:>10} misses ({:.4}/instruction)",
                    hp.class,
                    hp.function,
                    hp.paths_executed,
                    hp.instructions,
                    hp.misses,
                    hp.miss_ratio
                )?;
            }
        }
        None => writeln!(
            w,
            "\nno {} on complete paths: no hot/dense/sparse classification (seed 003 §6 needs `--cpi-model cache-sim`)",
            misses_name
        )?,
    }
    if let Some(l) = &lbr {
        match (&l.comparison, &l.error) {
            (Some(c), _) => writeln!(
                w,
                "\nLBR: {} stacks, {} distinct paths seen of {} executed; epsilon {:.4}; exact share never seen {:.2}%; top-10 overlap {:.0}%",
                l.samples,
                c.lbr_paths,
                c.exact_paths,
                c.epsilon,
                c.missed_share * 100.0,
                c.top10_overlap * 100.0
            )?,
            (None, e) => writeln!(
                w,
                "\nLBR: {} stacks, no comparison: {}",
                l.samples,
                e.as_deref().unwrap_or("?")
            )?,
        }
    }
    let degraded: Vec<&JsonFunction> = functions
        .iter()
        .filter(|f| {
            f.lost_instructions > 0 || f.lost_transfers > 0 || f.unwound > 0 || f.unfinished > 0
        })
        .collect();
    let flagged: Vec<&str> = functions
        .iter()
        .filter(|f| f.degraded.is_some())
        .map(|f| f.function.as_str())
        .collect();
    if !flagged.is_empty() {
        writeln!(
            w,
            "\n{} executed function(s) not fully numbered (unresolved indirect jump or too many paths; see --json `degraded`): {}",
            flagged.len(),
            flagged.join(", ")
        )?;
    }
    if !degraded.is_empty() {
        writeln!(w, "\nnot fully on paths:")?;
        for f in degraded {
            writeln!(
                w,
                "  {}: {} instructions off paths (lost transfers {}, unwound {}, unfinished {}){}",
                f.function,
                f.lost_instructions,
                f.lost_transfers,
                f.unwound,
                f.unfinished,
                f.degraded
                    .as_ref()
                    .map(|d| format!("; {d}"))
                    .unwrap_or_default()
            )?;
        }
    }
    Ok(())
}
