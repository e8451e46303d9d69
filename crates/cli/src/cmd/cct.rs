//! `proftrust cct [--folded FILE] [--json] [--samples FILE] -- PROGRAM ARGS`: the exact
//! calling context tree of a program (seed 003 §4) from its QEMU block trace, the gprof
//! problem measured on it, and, with `--samples`, the sampled contexts of a call-chain
//! profile (`proftrust record -g`, or perf.data from `perf record -g`)
//! compared with it (`proftrust_pipeline::cct`; the report and its rendering are in
//! `proftrust_report::cct`).
//!
//! JSON contract (kept stable): top level `nodes`, `height`, `max_replication`, and
//! `epsilon_sampled` when samples were given; plus `avg_degree`, `call_sites`, `backedges`,
//! `gprof_epsilon`, `contexts` and `sampled`.

use crate::trace_args::TraceArgs;
use crate::util;
use anyhow::{Context, Result};
use proftrust_pipeline::cct::{CctOptions, FoldedMetric};
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `proftrust cct`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Write the exact CCT as collapsed stacks (flame-graph folded format, exclusive
    /// `--folded-metric`) to FILE.
    #[arg(long, value_name = "FILE")]
    folded: Option<PathBuf>,
    /// Weight of the folded stacks: instructions, or cycles / l1-misses / llc-misses of the
    /// timing model.
    #[arg(long, value_parser = crate::args::named::<FoldedMetric>(), default_value_t = FoldedMetric::Instructions)]
    folded_metric: FoldedMetric,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// A call-chain sample file of the same program (proftrust `record -g`, perf.data from
    /// `perf record -g`, or `perf script` text of one) to compare with the exact CCT.
    #[arg(long, value_name = "FILE")]
    samples: Option<PathBuf>,
    /// Write the sampled contexts as collapsed stacks (samples) to FILE (needs --samples).
    #[arg(long, value_name = "FILE", requires = "samples")]
    sampled_folded: Option<PathBuf>,
    /// Compare contexts from the outermost frame of this function (frame-pointer unwinding
    /// cannot see libc's start-up frames); `--anchor ''` compares whole stacks.
    #[arg(long, default_value = "main")]
    anchor: String,
    /// Contexts listed in text output (1 to 1000000).
    #[arg(long, default_value_t = 15, value_parser = crate::args::int::<usize>(1, 1_000_000))]
    top: usize,
    #[command(flatten)]
    trace: TraceArgs,
}

/// Runs `proftrust cct`.
pub fn run(mut a: Args) -> Result<()> {
    crate::output::check_opt(a.folded.as_ref()).context("--folded")?;
    crate::output::check_opt(a.sampled_folded.as_ref()).context("--sampled-folded")?;
    let mut o = CctOptions::default();
    o.command = a.trace.command()?;
    o.samples = a.samples.clone();
    o.anchor = (!a.anchor.is_empty()).then(|| a.anchor.clone());
    o.folded = a.folded.as_ref().map(|_| a.folded_metric);
    o.sampled_folded = a.sampled_folded.is_some();
    o.trace = a.trace.options();
    o.show_output = !a.json;
    let report = proftrust_pipeline::cct::execute(&o, &util::Ui)?;
    for (file, data) in [
        (&a.sampled_folded, &report.sampled_folded),
        (&a.folded, &report.folded),
    ] {
        if let (Some(f), Some(data)) = (file, data) {
            crate::output::write(f, |w| Ok(w.write_all(data)?))?;
        }
    }
    crate::output::write_report(&report, &crate::output::ReportTo::Stdout, a.json, a.top)
}
