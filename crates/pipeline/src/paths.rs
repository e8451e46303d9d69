//! `paths`: the exact Ball-Larus path profile of a program (seed 003 §2-3) from its QEMU
//! block trace, with the timing model's cycles and cache misses per path, seed 003 §6's
//! hot/dense/sparse classification, and, given a branch-stack sample file, the paths its LBR
//! stacks show compared with the exact ones.

use crate::error::{bail, bail_options, Context, Result};
use crate::trace::{self, source_of, Program, TraceOptions, Traced};
use crate::Events;
use proftrust_paths::{
    classify_hot, compare_lbr, hot_paths_covering, lbr_paths, FuncIdx, HotClass, HotMetric,
    HotOptions, HotReport, LbrPaths, PathKey, PathProfile, ProfilerOptions, ProgramCfgs,
};
pub use proftrust_report::paths::{
    ClassRow, HotProcedure, HotTables, PathFunction, PathRow, PathsCache, PathsLbr, PathsReport,
};
use std::collections::HashMap;
use std::path::PathBuf;

/// Which misses rank hot paths (seed 003 §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Misses {
    /// L1 data-cache misses (the paper's data-cache misses).
    #[default]
    L1,
    /// Last-level cache misses.
    Llc,
}

impl proftrust_model::named::Named for Misses {
    const ALL: &'static [(Self, &'static str, &'static str)] = &[
        (Misses::L1, "l1", "L1 data-cache misses"),
        (Misses::Llc, "llc", "Last-level cache misses"),
    ];
}
proftrust_model::named_from_str!(Misses);

impl Misses {
    fn metric(self) -> HotMetric {
        match self {
            Misses::L1 => HotMetric::L1Misses,
            Misses::Llc => HotMetric::LlcMisses,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Misses::L1 => "L1D misses",
            Misses::Llc => "LLC misses",
        }
    }
}

/// What a hot path has a large share of (seed 003 §6 reads the misses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HotBy {
    /// The modelled cycles: hot means a large share of the time.
    #[default]
    Cycles,
    /// The instructions executed.
    Instructions,
    /// The misses of [`PathsOptions::misses`] (the paper's reading).
    Misses,
}

impl proftrust_model::named::Named for HotBy {
    const ALL: &'static [(Self, &'static str, &'static str)] = &[
        (HotBy::Cycles, "cycles", "Modelled cycles"),
        (HotBy::Instructions, "instructions", "Instructions"),
        (HotBy::Misses, "misses", "The misses of --misses"),
    ];
}
proftrust_model::named_from_str!(HotBy);

/// Settings of [`execute`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PathsOptions {
    /// The program and its arguments. Default empty (an error: give one).
    pub command: Vec<String>,
    /// Only paths of this function (demangled or raw name). Default all.
    pub function: Option<String>,
    /// A branch-stack sample file of the same program: reconstruct paths from its LBR
    /// stacks and compare them with the exact profile. Default none.
    pub lbr: Option<PathBuf>,
    /// Hot paths and procedures have at least this share of the program's `hot_by`, in
    /// (0, 1]. Default 0.01.
    pub hot_share: f64,
    /// What hot paths have `hot_share` of. Default [`HotBy::Cycles`].
    pub hot_by: HotBy,
    /// Which misses rank hot paths. Default [`Misses::L1`].
    pub misses: Misses,
    /// Count the paths that cover this share of the instructions on paths. Default 0.9.
    pub cover: f64,
    /// Paths listed in the report, most frequent first. Default all.
    pub limit: Option<usize>,
    /// Timing model and QEMU's settings. Default [`TraceOptions::default`].
    pub trace: TraceOptions,
    /// Let the program's output through. Default false.
    pub show_output: bool,
}

impl Default for PathsOptions {
    fn default() -> Self {
        PathsOptions {
            command: Vec::new(),
            function: None,
            lbr: None,
            hot_share: 0.01,
            hot_by: HotBy::Cycles,
            misses: Misses::L1,
            cover: 0.9,
            limit: None,
            trace: TraceOptions::default(),
            show_output: false,
        }
    }
}

/// Traces the program and builds its path profile report. Notes and progress go to
/// `events`; warnings are in the report.
pub fn execute(o: &PathsOptions, events: &dyn Events) -> Result<PathsReport> {
    let Some(prog) = o.command.first() else {
        bail_options!("give the program to run");
    };
    let p = trace::load_program(prog)?;
    let only = select_function(&p, o.function.as_deref())?;
    // Read the LBR file first: a bad file fails before the (slow) trace.
    let lbr = o
        .lbr
        .as_ref()
        .map(|f| read_lbr(&p, f, events))
        .transpose()?;
    if !(o.hot_share > 0.0 && o.hot_share <= 1.0) {
        bail_options!("--hot-share {}: must be in (0, 1]", o.hot_share);
    }
    let build = ProfilerOptions {
        paths: true,
        cct: false,
    };
    let Traced {
        profile,
        outcome,
        cache,
        cycle_model,
        ..
    } = trace::trace(&p, &o.command[1..], &o.trace, build, o.show_output, events)?;
    let hot_opts = HotOptions {
        hot_share: o.hot_share,
        hot_by: match o.hot_by {
            HotBy::Cycles => HotMetric::Cycles,
            HotBy::Instructions => HotMetric::Instructions,
            HotBy::Misses => o.misses.metric(),
        },
        metric: o.misses.metric(),
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
    warnings.extend(outcome.warning("the program", "the paths"));
    if profile.paths.is_empty() {
        warnings.push(proftrust_model::Warning::new(
            proftrust_model::WarningKind::FewSamples,
            format!(
                "no complete path was recorded in {} (did the trace reach it?)",
                p.path.display()
            ),
        ));
    }
    let selected = |k: &PathKey| only.is_none_or(|f| f == k.func);
    let paths = path_rows(
        &p,
        &profile,
        only,
        o.limit.unwrap_or(usize::MAX),
        lbr.as_ref(),
        hot_classes.as_ref(),
    );
    let lbr = lbr.map(|l| {
        let (comparison, error) = match compare_lbr(&l, &profile) {
            Ok(c) => (Some(c), None),
            Err(e) => (None, Some(e.to_string())),
        };
        PathsLbr {
            samples: l.samples,
            ranges: l.ranges,
            broken: l.broken,
            comparison,
            error,
        }
    });
    Ok(PathsReport {
        program: o.command.clone(),
        binary: p.path.display().to_string(),
        outcome: Some(outcome),
        cycle_model,
        total_instructions: profile.total_instructions,
        total_cycles: profile.total_cycles,
        total_l1_misses: profile.total_l1_misses,
        total_llc_misses: profile.total_llc_misses,
        cache: cache.map(|c| PathsCache {
            accesses: c.accesses,
            loads: c.loads,
            l1_misses: c.l1_misses,
            llc_misses: c.llc_misses,
        }),
        hot: hot
            .as_ref()
            .map(|h| hot_tables(h, &hot_opts, &p.cfgs, o.misses.name())),
        paths,
        functions: function_rows(&profile, only),
        lbr,
        warnings,
        executed_paths: profile.paths.keys().filter(|k| selected(k)).count(),
        instructions_on_paths: profile
            .paths
            .iter()
            .filter(|(k, _)| selected(k))
            .map(|(_, m)| m.instructions)
            .sum(),
        cover: o.cover,
        cover_paths: hot_paths_covering(&profile, HotMetric::Instructions, o.cover).len(),
        misses: o.misses.name().to_string(),
    })
}

/// The function `--function` names (by CFG name, or by symbol at a CFG's entry).
fn select_function(p: &Program, name: Option<&str>) -> Result<Option<FuncIdx>> {
    let Some(name) = name else {
        return Ok(None);
    };
    let f = p
        .cfgs
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
        })?;
    Ok(Some(f))
}

/// The paths of a branch-stack sample file.
fn read_lbr(p: &Program, f: &std::path::Path, events: &dyn Events) -> Result<LbrPaths> {
    let set = crate::load::samples(f, std::slice::from_ref(&p.path), events)?;
    if !set.samples.iter().any(|s| !s.branches.is_empty()) {
        bail!(
            "{}: no sample has a branch stack; record with `proftrust record -b` or `perf record -b` (needs a PMU with LBR)",
            f.display()
        );
    }
    Ok(lbr_paths(&set, &p.cfgs))
}

impl HotBy {
    /// As `--hot-by` spells it.
    pub fn name(self) -> &'static str {
        match self {
            HotBy::Cycles => "cycles",
            HotBy::Instructions => "instructions",
            HotBy::Misses => "misses",
        }
    }
}

fn class_name(c: HotClass) -> &'static str {
    match c {
        HotClass::Cold => "cold",
        HotClass::Dense => "dense",
        HotClass::Sparse => "sparse",
    }
}

/// Per executed function (the selected one only, if any): the profiler's bookkeeping.
fn function_rows(profile: &PathProfile, only: Option<FuncIdx>) -> Vec<PathFunction> {
    profile
        .functions
        .iter()
        .enumerate()
        .filter(|(i, f)| f.activations > 0 && only.is_none_or(|o| o.0 as usize == *i))
        .map(|(i, f)| PathFunction {
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
        .collect()
}

/// Seed 003 Tables 2 and 3 from a classification.
fn hot_tables(h: &HotReport, o: &HotOptions, cfgs: &ProgramCfgs, misses: &str) -> HotTables {
    let ins: u64 = h.paths.iter().map(|p| p.1.instructions).sum();
    let mis: u64 = h.paths.iter().map(|p| o.metric.of(&p.1)).sum();
    let share = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let groups: [(&str, &[HotClass]); 4] = [
        ("hot", &[HotClass::Dense, HotClass::Sparse]),
        ("cold", &[HotClass::Cold]),
        ("dense", &[HotClass::Dense]),
        ("sparse", &[HotClass::Sparse]),
    ];
    let paths = groups
        .iter()
        .map(|(name, cl)| {
            let sel: Vec<_> = h.paths.iter().filter(|p| cl.contains(&p.2)).collect();
            ClassRow {
                class: name.to_string(),
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
            ClassRow {
                class: name.to_string(),
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
        .map(|p| HotProcedure {
            function: cfgs.cfg(p.func).function.clone(),
            class: class_name(p.class).to_string(),
            paths_executed: p.paths_executed,
            instructions: p.metrics.instructions,
            misses: o.metric.of(&p.metrics),
            miss_ratio: share(o.metric.of(&p.metrics), p.metrics.instructions),
        })
        .collect();
    HotTables {
        hot_by: o.hot_by.name().to_string(),
        misses: misses.to_string(),
        hot_share: o.hot_share,
        program_miss_ratio: h.program_ratio,
        paths,
        procedures,
        hot_procedures,
    }
}

/// Rows of the path listing, most frequent first; `limit` rows at most (source lines are
/// looked up once per block).
fn path_rows(
    p: &Program,
    prof: &PathProfile,
    only: Option<FuncIdx>,
    limit: usize,
    lbr: Option<&LbrPaths>,
    classes: Option<&HashMap<PathKey, &'static str>>,
) -> Vec<PathRow> {
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
            Some(PathRow {
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
                class: classes.and_then(|c| c.get(k).map(|s| s.to_string())),
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
