//! `proftrust paths [--function NAME] [--json] -- PROGRAM ARGS`: exact Ball-Larus path
//! profile of a program (seed 003 §2-3) from its QEMU block trace
//! (`proftrust_pipeline::paths`; the report and its rendering are in
//! `proftrust_report::paths`).
//!
//! JSON contract (kept stable): top level `paths`, each with `function`, `id`, `blocks`
//! (block start addresses, hex strings), `count`, `instructions`; plus `cycles`,
//! `l1_misses`, `llc_misses` (seed 003 §3, from the virtual PMU's timing model and cache
//! simulation), `class` (seed 003 §6), `source` (file:line per block), `lbr_count` with
//! `--lbr`, and top-level `functions` (per-function bookkeeping: NumPaths, degradation, lost
//! instructions), `hot` (seed 003 Tables 2 and 3), `cache`, and the totals.

use crate::trace_args::TraceArgs;
use crate::util;
use anyhow::Result;
use proftrust_pipeline::paths::{HotBy, Misses, PathsOptions};
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
    /// Paths listed in text output (1 to 1000000).
    #[arg(long, default_value_t = 20, value_parser = crate::args::int::<usize>(1, 1_000_000))]
    top: usize,
    /// Text output: also report how many paths cover this share of the instructions (above
    /// 0, at most 1).
    #[arg(long, default_value_t = 0.9, value_parser = crate::args::positive_share)]
    cover: f64,
    /// A branch-stack sample file of the same program (`proftrust record -b`, `proftrust
    /// vpmu --lbr`, perf.data from `perf record -b`, or `perf script -F
    /// ip,sym,symoff,dso,brstack` text): reconstruct paths from its LBR stacks and compare
    /// them with the exact path profile.
    #[arg(long, value_name = "FILE")]
    lbr: Option<PathBuf>,
    /// Hot paths and procedures have at least this share of the program's cycles (or what
    /// --hot-by names; paper 003 §6); dense ones have a miss ratio at least the program's,
    /// sparse ones below it; the rest are cold.
    #[arg(long, default_value_t = 0.01, value_name = "SHARE", value_parser = crate::args::positive_share)]
    hot_share: f64,
    /// What hot paths have a large share of: `cycles` (the modelled time), `instructions`,
    /// or `misses` (paper 003's reading: the misses of --misses).
    #[arg(long, value_parser = crate::args::named::<HotBy>(), default_value_t = HotBy::Cycles)]
    hot_by: HotBy,
    /// Which misses the dense/sparse ratio counts: `l1` (the paper's data-cache misses) or
    /// `llc`.
    #[arg(long, value_parser = crate::args::named::<Misses>(), default_value_t = Misses::L1)]
    misses: Misses,
    #[command(flatten)]
    trace: TraceArgs,
}

/// Runs `proftrust paths`.
pub fn run(mut a: Args) -> Result<()> {
    let mut o = PathsOptions::default();
    o.command = a.trace.command()?;
    o.function = a.function.clone();
    o.lbr = a.lbr.clone();
    o.hot_share = a.hot_share;
    o.hot_by = a.hot_by;
    o.misses = a.misses;
    o.cover = a.cover;
    // JSON lists every path; text only `--top` (source lines are looked up per listed path).
    o.limit = (!a.json).then_some(a.top);
    o.trace = a.trace.options();
    o.show_output = !a.json;
    let report = proftrust_pipeline::paths::execute(&o, &util::Ui)?;
    crate::output::write_report(&report, &crate::output::ReportTo::Stdout, a.json, a.top)
}
