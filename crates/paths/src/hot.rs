//! Hot, cold, dense and sparse paths and procedures (seed 003 §6).
//!
//! Seed 003 §6 (numbers lost in the extraction; the reading chosen): *hot* paths are the
//! intraprocedural paths that each incur at least a threshold share of the program's cache
//! misses (the paper's tables use a small percentage, "a threshold parameter controls the
//! number of hot paths"; default here 1%); the others are *cold*. What a path is hot *by* is
//! [`HotOptions::hot_by`]: the paper's reading is the misses ([`HotMetric::L1Misses`]); the
//! default is the modelled cycles, so that "hot" means what a reader of a path listing takes
//! it to mean (a large share of the time: a path with most of the instructions and no misses
//! is hot, not cold), and dense/sparse still tell the paper's miss behaviour apart. A hot
//! path is *dense* when
//! its miss ratio (misses per executed instruction) is at least the program average — its
//! misses are packed into few instructions (poor locality) — and *sparse* otherwise: it is
//! hot only because it executes heavily ("sparse paths incur a large number of misses
//! because they execute heavily"). Procedures are classified the same way on their summed
//! paths, and the average number of distinct paths each executed is reported ("path/proc").

use crate::funcs::FuncIdx;
use crate::profile::{PathKey, PathMetrics, PathProfile};
use crate::Error;
use serde::Serialize;
use std::collections::BTreeMap;

/// Which per-path metric a ranking uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum HotMetric {
    /// Completed executions.
    Count,
    /// Instructions.
    Instructions,
    /// Modelled cycles.
    Cycles,
    /// Modelled L1 data-cache misses (the paper's data-cache misses: UltraSPARC's D-cache is
    /// its first level).
    L1Misses,
    /// Modelled last-level cache misses.
    LlcMisses,
}

impl HotMetric {
    /// The metric in words (`L1D misses`).
    pub fn name(self) -> &'static str {
        match self {
            HotMetric::Count => "executions",
            HotMetric::Instructions => "instructions",
            HotMetric::Cycles => "cycles",
            HotMetric::L1Misses => "L1D misses",
            HotMetric::LlcMisses => "LLC misses",
        }
    }
    /// The metric's value in `m`.
    pub fn of(self, m: &PathMetrics) -> u64 {
        match self {
            HotMetric::Count => m.count,
            HotMetric::Instructions => m.instructions,
            HotMetric::Cycles => m.cycles,
            HotMetric::L1Misses => m.l1_misses,
            HotMetric::LlcMisses => m.llc_misses,
        }
    }
}

/// Options of [`classify_hot`].
#[derive(Debug, Clone, Copy)]
pub struct HotOptions {
    /// A path (procedure) is hot when it incurs at least this share of the program's
    /// `metric`. Default 0.01.
    pub hot_share: f64,
    /// What a path must have `hot_share` of to be hot. Default [`HotMetric::Cycles`] (the
    /// paper: the misses, `metric`).
    pub hot_by: HotMetric,
    /// The event counted against instructions for the miss ratio. Default
    /// [`HotMetric::L1Misses`].
    pub metric: HotMetric,
    /// Dense when `ratio >= dense_factor × program ratio`. Default 1.0.
    pub dense_factor: f64,
}

impl Default for HotOptions {
    fn default() -> Self {
        HotOptions {
            hot_share: 0.01,
            hot_by: HotMetric::Cycles,
            metric: HotMetric::L1Misses,
            dense_factor: 1.0,
        }
    }
}

/// Class of a path or procedure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum HotClass {
    /// Below the hot threshold (of [`HotOptions::hot_by`]).
    Cold,
    /// Hot with a miss ratio at least the program average.
    Dense,
    /// Hot with a miss ratio below the program average.
    Sparse,
}

/// One procedure of the classification.
#[derive(Debug, Clone, Serialize)]
pub struct ProcSummary {
    /// Function.
    pub func: FuncIdx,
    /// Distinct paths executed.
    pub paths_executed: usize,
    /// Summed metrics.
    pub metrics: PathMetrics,
    /// Class.
    pub class: HotClass,
}

/// Result of [`classify_hot`].
#[derive(Debug, Clone, Serialize)]
pub struct HotReport {
    /// Program-wide `metric / instructions`.
    pub program_ratio: f64,
    /// Every executed path with its class, largest metric first.
    pub paths: Vec<(PathKey, PathMetrics, HotClass)>,
    /// Every executed procedure with its class, largest metric first.
    pub procedures: Vec<ProcSummary>,
}

impl HotReport {
    /// (number, instruction share, metric share) of the paths in `class`.
    pub fn path_summary(&self, class: HotClass, opts: &HotOptions) -> (usize, f64, f64) {
        let ti: u64 = self.paths.iter().map(|p| p.1.instructions).sum();
        let tm: u64 = self.paths.iter().map(|p| opts.metric.of(&p.1)).sum();
        let sel: Vec<_> = self.paths.iter().filter(|p| p.2 == class).collect();
        let i: u64 = sel.iter().map(|p| p.1.instructions).sum();
        let m: u64 = sel.iter().map(|p| opts.metric.of(&p.1)).sum();
        (sel.len(), ratio(i, ti), ratio(m, tm))
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn class(m: &PathMetrics, total: u64, prog: f64, o: &HotOptions) -> HotClass {
    let h = o.hot_by.of(m);
    if (h as f64) < o.hot_share * total as f64 || h == 0 {
        HotClass::Cold
    } else if ratio(o.metric.of(m), m.instructions) >= o.dense_factor * prog {
        HotClass::Dense
    } else {
        HotClass::Sparse
    }
}

/// Classifies paths and procedures (see the module doc).
pub fn classify_hot(p: &PathProfile, opts: &HotOptions) -> Result<HotReport, Error> {
    let total: u64 = p.paths.values().map(|m| opts.metric.of(m)).sum();
    let hot_total: u64 = p.paths.values().map(|m| opts.hot_by.of(m)).sum();
    let ins: u64 = p.paths.values().map(|m| m.instructions).sum();
    if total == 0 || ins == 0 {
        return Err(Error::Empty {
            what: "hot path classification",
            why: format!(
                "no {} on complete paths (the flat CPI model has no cache misses: use a cache simulation)",
                opts.metric.name()
            ),
        });
    }
    let prog = ratio(total, ins);
    let mut paths: Vec<_> = p
        .paths
        .iter()
        .map(|(k, m)| (*k, *m, class(m, hot_total, prog, opts)))
        .collect();
    paths.sort_by(|a, b| {
        opts.metric
            .of(&b.1)
            .cmp(&opts.metric.of(&a.1))
            .then(a.0.cmp(&b.0))
    });
    let mut procs: BTreeMap<FuncIdx, (usize, PathMetrics)> = BTreeMap::new();
    for (k, m) in &p.paths {
        let e = procs.entry(k.func).or_default();
        e.0 += 1;
        e.1.add(m);
    }
    let mut procedures: Vec<ProcSummary> = procs
        .into_iter()
        .map(|(func, (n, m))| ProcSummary {
            func,
            paths_executed: n,
            metrics: m,
            class: class(&m, hot_total, prog, opts),
        })
        .collect();
    procedures.sort_by(|a, b| {
        opts.metric
            .of(&b.metrics)
            .cmp(&opts.metric.of(&a.metrics))
            .then(a.func.cmp(&b.func))
    });
    Ok(HotReport {
        program_ratio: prog,
        paths,
        procedures,
    })
}

/// The fewest paths, largest `metric` first (ties by key), whose summed metric reaches
/// `share` of the total over all complete paths.
pub fn hot_paths_covering(
    p: &PathProfile,
    metric: HotMetric,
    share: f64,
) -> Vec<(PathKey, PathMetrics)> {
    let total: u64 = p.paths.values().map(|m| metric.of(m)).sum();
    let mut v: Vec<(PathKey, PathMetrics)> = p.paths.iter().map(|(k, m)| (*k, *m)).collect();
    v.sort_by(|a, b| metric.of(&b.1).cmp(&metric.of(&a.1)).then(a.0.cmp(&b.0)));
    let target = share.clamp(0.0, 1.0) * total as f64;
    let mut acc = 0u64;
    let mut out = Vec::new();
    for x in v {
        if acc as f64 >= target || metric.of(&x.1) == 0 {
            break;
        }
        acc += metric.of(&x.1);
        out.push(x);
    }
    out
}
