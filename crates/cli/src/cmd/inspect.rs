//! `proftrust inspect BINARY [--function NAME] [--dot] [--json]`: what proftrust sees in a
//! binary: functions, basic blocks, loops; with `--function`, its CFG, simple loops and
//! instructions; with `--dot`, graphviz.
//!
//! JSON contract (kept stable): top level `functions`, each with `name`, `address`, `size`,
//! `blocks` (array) and `loops` (array). Addresses are numbers (SVMAs, as `nm` and
//! `objdump` print them in hex).
//!
//! The pipeline (`proftrust_pipeline::inspect`) analyses the binary; the report and its
//! rendering (text, JSON, graphviz) are in `proftrust_report::inspect`.

use crate::util;
use proftrust_binary::DEFAULT_SIMPLE_LOOP_CAP;
use proftrust_pipeline::inspect::InspectOptions;
use std::path::PathBuf;

/// Arguments of `proftrust inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// ELF executable or shared object to inspect.
    binary: PathBuf,
    /// Only this function (raw or demangled name): its CFG, simple loops and instructions.
    #[arg(long)]
    function: Option<String>,
    /// Print graphviz `dot` (one digraph per function) instead of text.
    #[arg(long, conflicts_with = "json")]
    dot: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Most simple loops enumerated per loop (with --function; 1 to 100000).
    #[arg(long, default_value_t = DEFAULT_SIMPLE_LOOP_CAP, value_parser = crate::args::int::<usize>(1, 100_000))]
    simple_loop_cap: usize,
}

/// Runs `proftrust inspect`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let mut o = InspectOptions::default();
    o.binary = a.binary.clone();
    o.function = a.function.clone();
    o.simple_loop_cap = a.simple_loop_cap;
    let report = proftrust_pipeline::inspect::execute(&o, &util::Ui)?;
    if a.dot {
        return crate::output::write_text(None, &report.render_dot());
    }
    crate::output::write_report(&report, &crate::output::ReportTo::Stdout, a.json, 0)
}
