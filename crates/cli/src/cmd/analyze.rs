//! `proftrust analyze granularity FILE [--json] [--svg-dir DIR]`: running granularity,
//! sampling-interval distribution and second-event variance of real samples (seed 002
//! §5.1, Figs. 6-9), per module and per function.
//!
//! JSON contract: `file`, `format`, `module` and `function` (each a
//! `proftrust_sim::granularity::GranularityReport`: `intervals`, `interval_hist`, `runs`,
//! `run_hist`, `per_key` with `key`, `samples`, `runs`, `run_ns`, `r_mean`, and `second`
//! when a second event was recorded).
//!
//! The pipeline (`proftrust_pipeline::analyze`) runs the analysis; the report is
//! `proftrust_report::analyze`.

use crate::util;
use anyhow::{bail, Context};
use clap::{Args as ClapArgs, Subcommand};
use proftrust_pipeline::analyze::GranularityRunOptions;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `proftrust analyze`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, Subcommand)]
enum What {
    /// Running granularity per module and function from consecutive samples, the
    /// distribution of sampling intervals, and the per-module variance of a second event
    /// (paper 002 Figs. 6-9).
    Granularity(GranArgs),
}

#[derive(Debug, ClapArgs)]
struct GranArgs {
    /// perf.data or proftrust sample file.
    file: PathBuf,
    /// A binary of the profile for function names (matched by build-id, else file name);
    /// repeat for several.
    #[arg(long = "binary")]
    binaries: Vec<PathBuf>,
    /// Index of the base (sampling) event.
    #[arg(long, default_value_t = 0)]
    base_event: u16,
    /// Index of the second event (default: event 1 when the file has two or more events).
    #[arg(long)]
    second_event: Option<u16>,
    /// Rows per table.
    #[arg(long, default_value_t = 20, value_parser = crate::args::int::<usize>(1, 1_000_000))]
    top: usize,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Write SVG histograms (intervals, run granularity, second-event proportions and
    /// variances) into this directory.
    #[arg(long)]
    svg_dir: Option<PathBuf>,
    /// Write the output to this file instead of stdout.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

/// Runs `proftrust analyze`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.what {
        What::Granularity(a) => granularity(a),
    }
}

fn granularity(a: GranArgs) -> anyhow::Result<()> {
    crate::output::check_opt(a.output.as_ref())?;
    // The plot directory (created when missing) before the analysis.
    if let Some(d) = &a.svg_dir {
        if d.exists() && !d.is_dir() {
            bail!("--svg-dir {}: not a directory", d.display());
        }
        std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    let mut o = GranularityRunOptions::default();
    o.file = a.file.clone();
    o.binaries = a.binaries.clone();
    (o.base_event, o.second_event) = (a.base_event, a.second_event);
    o.top = a.top;
    o.svg = a.svg_dir.is_some();
    let report = proftrust_pipeline::analyze::granularity(&o, &util::Ui)?;
    if let Some(dir) = &a.svg_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for (name, svg) in &report.plots {
            let p = dir.join(name);
            crate::output::write(&p, |w| {
                w.write_all(svg.as_bytes())
                    .with_context(|| format!("cannot write {}", p.display()))
            })?;
        }
        util::note(format_args!("SVG plots written to {}", dir.display()));
    }
    let to = crate::output::ReportTo::output(a.output.as_deref());
    crate::output::write_report(&report, &to, a.json, a.top)
}
