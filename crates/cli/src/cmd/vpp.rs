//! `proftrust vpp [--source vpmu|lbr|probe] [--top N] [--json] ... -- PROGRAM ARGS`:
//! variational path profiling (seed 004).
//!
//! Times acyclic paths, ranks them by net variation (total time − executions × fastest
//! time), and checks how stable the ranking is. Sources:
//!
//! * `vpmu` (default): the program runs under QEMU with its data accesses traced; the
//!   virtual PMU's timer (class costs + simulated L1D/LLC) times every instruction and the
//!   Ball-Larus path profiler cuts the run into paths (proftrust-vpp `TracePathTimer`);
//! * `lbr`: branch stacks with cycle counts — a perf.data (`perf record -b`), `perf script
//!   -F ...,brstack` text or proftrust sample file (`--lbr-file`), or, without a file, the
//!   virtual PMU's LBR stacks of a traced run;
//! * `probe`: the program, built with `proftrust_probe.h` (or the Rust crate), runs natively
//!   and times its own paths with the TSC and bursty tracing (`--probe-file` reads an
//!   existing file instead).
//!
//! JSON contract (kept stable): `paths`, each with `signature`, `count`, `basetime`,
//! `total_time`, `net_variation`, `share_of_time`; top level `seed` and `config`; more
//! fields are documented in docs/vpp.md. The pipeline (`proftrust_pipeline::vpp`) runs it;
//! the report and its rendering are in `proftrust_report::vpp`.

use crate::util;
use anyhow::{Context, Result};
use proftrust_pipeline::vpp::{VppOptions, VppSource};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `proftrust vpp`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where the path timings come from.
    #[arg(long, value_parser = crate::args::named::<VppSource>(), default_value_t = VppSource::Vpmu)]
    source: VppSource,
    /// Paths listed (and used for the stability and hot-path comparisons).
    #[arg(long, default_value_t = 10, value_parser = crate::args::int::<usize>(1, 100_000))]
    top: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Write the delta histograms of the top paths (paper 004 Figs. 2 and 6) as SVG.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Paths in the delta histograms.
    #[arg(long, default_value_t = 5, value_parser = crate::args::int::<usize>(1, 1000))]
    histogram_paths: usize,
    /// Bins of the delta histograms (1 to 10000).
    #[arg(long, default_value_t = 40, value_parser = crate::args::int::<usize>(1, 10_000))]
    bins: usize,
    /// Paths need at least this many timed samples (paper 004 §5.1: two).
    #[arg(long, default_value_t = 2, value_parser = crate::args::int::<u64>(1, 1_000_000_000))]
    min_samples: u64,
    /// Leave out timed samples longer than this (in the source's unit, before the bias is
    /// subtracted): a path preempted while timed measures the scheduler, not the path.
    #[arg(long, value_name = "T", value_parser = crate::args::int::<u64>(1, u64::MAX / 2))]
    max_time: Option<u64>,
    /// Bursty tracing nCheck: path boundaries passed between timed bursts (0 = time every
    /// path). Default: 0 for vpmu, 10000 for probe (paper 004 §4.1).
    #[arg(long, value_name = "N", value_parser = crate::args::int::<u64>(0, 1_000_000_000_000))]
    n_check: Option<u64>,
    /// Bursty tracing nInstr: paths timed per burst (paper 004 §4.2: 1).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = crate::args::int::<u64>(1, 1_000_000_000))]
    n_instr: u64,
    /// Jitter every nCheck reset by U(0, nCheck/8) (against aliasing).
    #[arg(long)]
    randomize: bool,
    #[command(flatten)]
    seed: crate::args::Seed,
    /// vpmu/lbr: QEMU CPU model.
    #[arg(long)]
    cpu: Option<String>,
    /// Stop the program after this many seconds (at most 30 days).
    #[arg(long, value_name = "SECS", value_parser = crate::args::timeout)]
    timeout: Option<Duration>,
    #[command(flatten)]
    cache: crate::flag_groups::VppCache,
    /// lbr: a perf.data (`perf record -b`), `perf script -F ...,brstack` text or proftrust
    /// sample file of the same program; without it the virtual PMU's LBR stacks are used.
    #[arg(long, value_name = "FILE")]
    lbr_file: Option<PathBuf>,
    /// lbr without a file: instructions between the virtual PMU's samples (each with a
    /// 32-entry stack).
    #[arg(long, default_value_t = 1009, value_parser = crate::args::int::<u64>(16, 1_000_000_000_000))]
    lbr_period: u64,
    #[command(flatten)]
    probe: crate::flag_groups::VppProbe,
    /// Also run with these arguments as the training input (whitespace-separated) and
    /// compare self- and cross-trained top paths on the main run (paper 004 §5.3.2, Fig. 5).
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    train: Option<String>,
    /// The program and its arguments (the reference input).
    #[arg(last = true, value_name = "PROGRAM ARGS")]
    program: Vec<String>,
}

/// Runs `proftrust vpp`.
pub fn run(a: Args) -> Result<()> {
    // Fail on a bad output path before the (slow) run.
    crate::output::check_opt(a.svg.as_ref()).context("--svg")?;
    let mut o = VppOptions::default();
    o.command = a.program.clone();
    o.source = a.source;
    o.top = a.top;
    // JSON lists every path; text the top ones.
    o.limit = (!a.json).then_some(a.top);
    o.svg = a.svg.is_some();
    (o.histogram_paths, o.bins) = (a.histogram_paths, a.bins);
    (o.min_samples, o.max_time) = (a.min_samples, a.max_time);
    (o.n_check, o.n_instr, o.randomize, o.seed) = (a.n_check, a.n_instr, a.randomize, a.seed.seed);
    (o.cpu, o.timeout) = (a.cpu.clone(), a.timeout);
    (o.lbr_file, o.lbr_period) = (a.lbr_file.clone(), a.lbr_period);
    a.cache.apply(&mut o);
    a.probe.apply(&mut o);
    o.train = a
        .train
        .as_ref()
        .map(|t| t.split_whitespace().map(String::from).collect());
    o.show_output = !a.json;
    o.stop = Some(crate::interrupt::install());
    let report = proftrust_pipeline::vpp::execute(&o, &util::Ui)?;
    if let (Some(path), Some(svg)) = (&a.svg, &report.svg) {
        crate::output::write(path, |w| Ok(w.write_all(svg.as_bytes())?))?;
    }
    crate::output::write_report(&report, &crate::output::ReportTo::Stdout, a.json, a.top)?;
    if let Some(svg) = a.svg.as_ref().filter(|_| !a.json) {
        println!("\ndelta histograms: {}", svg.display());
    }
    Ok(())
}
