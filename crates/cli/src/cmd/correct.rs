//! `proftrust correct`: undo counter skid in an instruction profile (seed 000 §2). The
//! arguments become [`proftrust_pipeline::correct::CorrectOptions`]; the report is
//! `proftrust_report::correct::CorrectReport`.

use crate::util;
use proftrust_pipeline::correct::{
    BoxSpread, CorrectInput, CorrectOptions, Emulation, SolverChoice,
};
use std::path::PathBuf;

/// Arguments of `proftrust correct`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Native sample file holding both an instructions and a cycles event.
    #[arg(long, conflicts_with_all = ["instructions", "cycles"])]
    samples: Option<PathBuf>,
    /// Native sample file of the instructions event.
    #[arg(long, requires = "cycles")]
    instructions: Option<PathBuf>,
    /// Native sample file of the cycles event.
    #[arg(long, requires = "instructions")]
    cycles: Option<PathBuf>,
    /// Skid in cycles (measure it with `calibrate`); the mean when it varies. 0 to 1024.
    #[arg(long, value_parser = crate::args::skid)]
    skid: f64,
    /// Width in cycles of the skid's spread around --skid (flow solver: the emulation
    /// averages over a uniform spread of this width; the default 1 suits a constant skid).
    #[arg(long, default_value_t = 1.0, value_parser = crate::args::spread)]
    skid_spread: f64,
    /// The profiled binary.
    #[arg(long)]
    binary: PathBuf,
    /// Exact profile of the same run (native exact file, e.g. `vpmu --exact`) to report
    /// raw and corrected errors.
    #[arg(long)]
    truth: Option<PathBuf>,
    /// Solver.
    #[arg(long, value_parser = crate::args::named::<SolverChoice>(), default_value_t = SolverChoice::Flow)]
    solver: SolverChoice,
    /// Emulation of eq. 6 (per-loop solvers).
    #[arg(long, value_parser = crate::args::named::<Emulation>(), default_value_t = Emulation::Mixed)]
    emulation: Emulation,
    #[command(flatten)]
    seed: crate::args::Seed,
    /// Per-loop solvers: loops holding less than this share of the module's instruction
    /// samples are left alone (a share from 0 to 1).
    #[arg(long, default_value_t = 0.01, value_parser = crate::args::share)]
    hot_share: f64,
    /// Per-loop solvers: loops with more simple loops than this are left alone (reported);
    /// 1 to 4096.
    #[arg(long, default_value_t = 64, value_parser = crate::args::int::<usize>(1, 4096))]
    max_simple_loops: usize,
    /// Flow solver: at most this many basic blocks are modelled (hottest functions first);
    /// 1 to 100000.
    #[arg(long, default_value_t = 3000, value_parser = crate::args::int::<usize>(1, 100_000))]
    max_blocks: usize,
    /// Flow solver: how the corrected count of a shared library reached through PLT stubs
    /// (a black box: no CFG) is spread over its instructions.
    #[arg(long, value_parser = crate::args::named::<BoxSpread>(), default_value_t = BoxSpread::Uniform)]
    box_spread: BoxSpread,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Export the corrected profile: FORMAT:FILE (repeat), FORMAT one of pprof, firefox,
    /// speedscope, folded, flamegraph, llvm-sample, or folded-diff, flamegraph-diff (raw
    /// samples -> --truth, else -> corrected), annotate, annotate-html; FORMAT@SIDE:FILE
    /// picks the side (samples, exact, corrected). See docs/export.md.
    #[arg(long = "export", value_name = "FORMAT:FILE", value_parser = proftrust_pipeline::export::parse_export_spec)]
    export: Vec<proftrust_pipeline::export::ExportSpec>,
}

/// Runs the subcommand.
pub fn run(a: Args) -> anyhow::Result<()> {
    crate::output::check_exports(&a.export)?;
    let mut o = CorrectOptions::default();
    o.input = match (&a.samples, &a.instructions, &a.cycles) {
        (Some(p), _, _) => CorrectInput::Samples(p.clone()),
        (None, Some(i), Some(c)) => CorrectInput::Pair {
            instructions: i.clone(),
            cycles: c.clone(),
        },
        _ => anyhow::bail!("give --samples FILE, or --instructions FILE and --cycles FILE"),
    };
    o.binary = a.binary.clone();
    o.skid = a.skid;
    o.skid_spread = a.skid_spread;
    o.truth = a.truth.clone();
    o.solver = a.solver;
    o.emulation = a.emulation;
    o.seed = a.seed.seed;
    o.hot_share = a.hot_share;
    o.max_simple_loops = a.max_simple_loops;
    o.max_blocks = a.max_blocks;
    o.box_spread = a.box_spread;
    let (report, data) = proftrust_pipeline::correct::execute_with_data(&o, &util::Ui)?;
    if !a.export.is_empty() {
        let raw = a.samples.as_deref().or(a.instructions.as_deref());
        let binaries = std::slice::from_ref(&a.binary);
        let sides = proftrust_pipeline::export::correct_sides(raw, &data, binaries, &util::Ui)?;
        crate::output::write_exports(&a.export, &sides.sides())?;
    }
    crate::output::write_report(&report, &crate::output::ReportTo::Stdout, a.json, 0)?;
    Ok(())
}
