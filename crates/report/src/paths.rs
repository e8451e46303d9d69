//! The report of `paths` (exact Ball-Larus path profile, seed 003 §2-3 and §6): its data,
//! which is the `--json` document (keys in field order), and the text table.

use crate::quote_name;
use proftrust_model::RunOutcome;
use proftrust_paths::LbrComparison;
use serde::Serialize;
use std::fmt::Write as _;

/// What `paths` found. Serialised, it is the `--json` contract (docs/paths.md); the
/// `#[serde(skip)]` fields feed the text report only.
#[derive(Debug, Clone, Serialize)]
pub struct PathsReport {
    /// The program and its arguments.
    pub program: Vec<String>,
    /// The traced binary.
    pub binary: String,
    /// How the run ended.
    pub outcome: Option<RunOutcome>,
    /// The timing model, described.
    pub cycle_model: String,
    /// Instructions traced in all.
    pub total_instructions: u64,
    /// Modelled cycles in all.
    pub total_cycles: u64,
    /// Modelled L1D misses in all.
    pub total_l1_misses: u64,
    /// Modelled last-level cache misses in all.
    pub total_llc_misses: u64,
    /// Cache totals of the timing model (absent without a simulated cache).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<PathsCache>,
    /// Seed 003 §6 classification (absent without misses).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hot: Option<HotTables>,
    /// The paths, most frequent first.
    pub paths: Vec<PathRow>,
    /// Per executed function: numbering and what fell off paths.
    pub functions: Vec<PathFunction>,
    /// The branch-stack comparison, with an LBR file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lbr: Option<PathsLbr>,
    /// Warnings about the binary and the trace.
    pub warnings: Vec<crate::Warning>,
    /// Executed paths (of the selected function, if one was).
    #[serde(skip)]
    pub executed_paths: usize,
    /// Instructions on complete paths (of the selected function, if one was).
    #[serde(skip)]
    pub instructions_on_paths: u64,
    /// The share of the instructions on paths that [`PathsReport::cover_paths`] cover.
    #[serde(skip)]
    pub cover: f64,
    /// How many of the most instruction-heavy paths cover [`PathsReport::cover`].
    #[serde(skip)]
    pub cover_paths: usize,
    /// Which misses rank hot paths (`L1D misses`, `LLC misses`).
    #[serde(skip)]
    pub misses: String,
}

/// One path.
#[derive(Debug, Clone, Serialize)]
pub struct PathRow {
    /// Its function.
    pub function: String,
    /// Ball-Larus path id.
    pub id: u128,
    /// Start addresses of its blocks (hex).
    pub blocks: Vec<String>,
    /// Completed executions.
    pub count: u64,
    /// Instructions.
    pub instructions: u64,
    /// Modelled cycles.
    pub cycles: u64,
    /// Modelled L1D misses.
    pub l1_misses: u64,
    /// Modelled last-level cache misses.
    pub llc_misses: u64,
    /// Seed 003 §6 class by the chosen misses: `hot` paths incur at least the hot share of
    /// them, `dense` ones (hot, miss ratio >= the program's) or `sparse` (below); `cold`
    /// otherwise; absent without misses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// The path starts at a loop header after a backedge.
    pub starts_after_backedge: bool,
    /// The path ends with a backedge to this header (hex).
    pub ends_with_backedge_to: Option<String>,
    /// `file:line` of each block.
    pub source: Vec<String>,
    /// With an LBR file: occurrences of the path in the branch stacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lbr_count: Option<u64>,
}

/// Per-function bookkeeping of the path profiler.
#[derive(Debug, Clone, Serialize)]
pub struct PathFunction {
    /// Name.
    pub function: String,
    /// NumPaths of its numbering (absent when not numbered).
    pub num_paths: Option<u128>,
    /// Distinct paths executed.
    pub executed_paths: usize,
    /// Calls.
    pub activations: u64,
    /// Why it is not fully numbered.
    pub degraded: Option<String>,
    /// Transfers that left its CFG.
    pub lost_transfers: u64,
    /// Frames unwound without a return.
    pub unwound: u64,
    /// Paths cut by the end of the run.
    pub unfinished: u64,
    /// Instructions off complete paths.
    pub lost_instructions: u64,
    /// Instructions on complete paths.
    pub path_instructions: u64,
}

/// One row of seed 003's Table 2 (paths) or Table 3 (procedures).
#[derive(Debug, Clone, Serialize)]
pub struct ClassRow {
    /// `hot`, `cold`, `dense` or `sparse`.
    pub class: String,
    /// Paths (procedures) in the class.
    pub num: usize,
    /// Their share of the instructions on complete paths.
    pub instruction_share: f64,
    /// Their share of the misses on complete paths.
    pub miss_share: f64,
    /// Procedures only: distinct paths executed per procedure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paths_per_procedure: Option<f64>,
}

/// A hot procedure.
#[derive(Debug, Clone, Serialize)]
pub struct HotProcedure {
    /// Name.
    pub function: String,
    /// `dense` or `sparse`.
    pub class: String,
    /// Distinct paths executed.
    pub paths_executed: usize,
    /// Instructions on its paths.
    pub instructions: u64,
    /// Misses on its paths.
    pub misses: u64,
    /// Misses per instruction.
    pub miss_ratio: f64,
}

/// Seed 003 §6: hot/cold, dense/sparse paths and procedures by miss ratio.
#[derive(Debug, Clone, Serialize)]
pub struct HotTables {
    /// What hot paths have a large share of (`cycles`, `instructions`, `L1D misses`).
    pub hot_by: String,
    /// Which misses (`L1D misses`, `LLC misses`).
    pub misses: String,
    /// The hot share.
    pub hot_share: f64,
    /// Misses per instruction over all complete paths.
    pub program_miss_ratio: f64,
    /// Table 2: paths per class.
    pub paths: Vec<ClassRow>,
    /// Table 3: procedures per class.
    pub procedures: Vec<ClassRow>,
    /// The hot procedures.
    pub hot_procedures: Vec<HotProcedure>,
}

/// Cache totals of the timing model.
#[derive(Debug, Clone, Serialize)]
pub struct PathsCache {
    /// Data accesses.
    pub accesses: u64,
    /// Loads among them.
    pub loads: u64,
    /// L1D misses.
    pub l1_misses: u64,
    /// Last-level cache misses.
    pub llc_misses: u64,
}

/// Paths reconstructed from branch stacks.
#[derive(Debug, Clone, Serialize)]
pub struct PathsLbr {
    /// Samples with a branch stack.
    pub samples: u64,
    /// Fall-through ranges walked.
    pub ranges: u64,
    /// Ranges that did not follow the CFG.
    pub broken: u64,
    /// Against the exact profile.
    pub comparison: Option<LbrComparison>,
    /// Why there is no comparison.
    pub error: Option<String>,
}

impl PathsReport {
    /// The JSON document (keys in field order), pretty-printed, without a final newline.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }

    /// The text report: totals, the `top` most frequent paths, seed 003 §6's tables, the
    /// LBR comparison and the functions not fully on paths. Warnings are not included.
    pub fn render_text(&self, top: usize) -> String {
        let mut w = String::new();
        // An abnormal end is said in the report itself, not only on stderr.
        if let Some(x) = self
            .outcome
            .as_ref()
            .and_then(|o| o.sentence("the program", "the paths"))
        {
            _ = writeln!(w, "warning: {x}");
        }
        _ = writeln!(
            w,
            "{} paths executed, {} instructions on complete paths of {} ({} traced in all)",
            self.executed_paths, self.instructions_on_paths, self.binary, self.total_instructions
        );
        _ = writeln!(
            w,
            "{} path(s) cover {:.0}% of the instructions on paths",
            self.cover_paths,
            self.cover * 100.0
        );
        _ = writeln!(w, "timing: {}", self.cycle_model);
        if let Some(c) = &self.cache {
            _ = writeln!(
                w,
                "cache simulation: {} data accesses ({} loads), {} L1D misses, {} LLC misses",
                c.accesses, c.loads, c.l1_misses, c.llc_misses
            );
        }
        _ = writeln!(
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
        );
        for r in self.paths.iter().take(top) {
            _ = writeln!(
                w,
                "{:>10} {:>12} {:>6.2}% {:>12} {:>9} {:>8} {:>6}  {:<24} {:>6}  {}{}{} ({})",
                r.count,
                r.instructions,
                100.0 * r.instructions as f64 / self.instructions_on_paths.max(1) as f64,
                r.cycles,
                r.l1_misses,
                r.llc_misses,
                r.class.as_deref().unwrap_or("-"),
                quote_name(&r.function),
                r.id,
                if r.starts_after_backedge { "↺ " } else { "" },
                r.blocks.join(" "),
                if r.ends_with_backedge_to.is_some() {
                    " ↺"
                } else {
                    ""
                },
                r.source
                    .iter()
                    .map(|x| quote_name(x))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
        match &self.hot {
            Some(h) => self.render_hot(&mut w, h, top),
            None => {
                _ = writeln!(
                    w,
                    "\nno {} on complete paths: no hot/dense/sparse classification (paper 003 §6 needs `--cpi-model cache-sim`)",
                    self.misses
                );
            }
        }
        if let Some(l) = &self.lbr {
            _ = match (&l.comparison, &l.error) {
                (Some(c), _) => writeln!(
                    w,
                    "\nLBR: {} stacks, {} distinct paths seen of {} executed; epsilon {:.4}; exact share never seen {:.2}%; top-10 overlap {:.0}%",
                    l.samples,
                    c.lbr_paths,
                    c.exact_paths,
                    c.epsilon,
                    c.missed_share * 100.0,
                    c.top10_overlap * 100.0
                ),
                (None, e) => writeln!(
                    w,
                    "\nLBR: {} stacks, no comparison: {}",
                    l.samples,
                    e.as_deref().unwrap_or("?")
                ),
            };
        }
        self.render_degraded(&mut w);
        w
    }

    fn render_hot(&self, w: &mut String, h: &HotTables, top: usize) {
        _ = writeln!(
            w,
            "\nclasses (paper 003 §6): hot = at least {:.1}% of the {}; dense = hot with at least the program's {} per instruction ({:.3e}), sparse = hot with fewer; cold = the rest",
            h.hot_share * 100.0,
            h.hot_by,
            h.misses,
            h.program_miss_ratio
        );
        _ = writeln!(
            w,
            "{:<8} {:>7} {:>8} {:>8}   {:>10} {:>10} {:>8}",
            "", "paths", "inst", "misses", "procedures", "paths/proc", "misses"
        );
        for (pr, pc) in h.paths.iter().zip(&h.procedures) {
            _ = writeln!(
                w,
                "{:<8} {:>7} {:>7.1}% {:>7.1}%   {:>10} {:>10.1} {:>7.1}%",
                pr.class,
                pr.num,
                pr.instruction_share * 100.0,
                pr.miss_share * 100.0,
                pc.num,
                pc.paths_per_procedure.unwrap_or(0.0),
                pc.miss_share * 100.0
            );
        }
        for hp in h.hot_procedures.iter().take(top) {
            _ = writeln!(
                w,
                "  {:<6} {:<30} {:>4} paths {:>12} instructions {:>10} misses ({:.4}/instruction)",
                hp.class,
                quote_name(&hp.function),
                hp.paths_executed,
                hp.instructions,
                hp.misses,
                hp.miss_ratio
            );
        }
    }

    fn render_degraded(&self, w: &mut String) {
        let flagged: Vec<std::borrow::Cow<'_, str>> = self
            .functions
            .iter()
            .filter(|f| f.degraded.is_some())
            .map(|f| quote_name(&f.function))
            .collect();
        if !flagged.is_empty() {
            _ = writeln!(
                w,
                "\n{} executed function(s) not fully numbered (unresolved indirect jump or too many paths; see --json `degraded`): {}",
                flagged.len(),
                flagged.join(", ")
            );
        }
        let degraded: Vec<&PathFunction> = self
            .functions
            .iter()
            .filter(|f| {
                f.lost_instructions > 0 || f.lost_transfers > 0 || f.unwound > 0 || f.unfinished > 0
            })
            .collect();
        if !degraded.is_empty() {
            _ = writeln!(w, "\nnot fully on paths:");
            for f in degraded {
                _ = writeln!(
                    w,
                    "  {}: {} instructions off paths (lost transfers {}, unwound {}, unfinished {}){}",
                    quote_name(&f.function),
                    f.lost_instructions,
                    f.lost_transfers,
                    f.unwound,
                    f.unfinished,
                    f.degraded
                        .as_ref()
                        .map(|d| format!("; {d}"))
                        .unwrap_or_default()
                );
            }
        }
    }
}
