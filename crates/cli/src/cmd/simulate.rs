//! `proftrust simulate`: sampling-theory simulations (seed 002).

use crate::util;
use clap::{Args as ClapArgs, Subcommand};
use proftrust_pipeline::simulate::{execute, Preset, SimulateOptions};
use std::path::PathBuf;

/// Arguments of `proftrust simulate`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, Subcommand)]
enum What {
    /// Running-state simulation of sampling (paper 002): the paper's Tables 2-6, aliasing,
    /// self-time fragmentation and Wilson-interval coverage.
    Sampling(SamplingArgs),
}

#[derive(Debug, ClapArgs)]
struct SamplingArgs {
    /// Which experiment.
    #[arg(long, value_parser = crate::args::named::<Preset>())]
    preset: Preset,
    /// Repetitions of the profiling per cell (1 or more; a count whose shares would not fit
    /// in the available memory is refused with the estimate).
    #[arg(long, default_value_t = 1000, value_parser = crate::args::int::<u64>(1, u64::MAX))]
    reps: u64,
    #[command(flatten)]
    seed: crate::args::Seed,
    /// Worker threads (0 = all cores; at most 1024).
    #[arg(long, default_value_t = 0, value_parser = crate::args::int::<usize>(0, 1024))]
    threads: usize,
    /// `--preset sweep`: R = granularity / interval values, comma-separated (T = 100, so R
    /// has a resolution of 0.01). Default: 0.1,0.25,0.3,0.5,0.75,0.9,1,1.25,1.5,2,2.8,3.3,
    /// 4.5,5,7.7,10.
    #[arg(long = "r", value_delimiter = ',', value_name = "R,...", value_parser = crate::args::ratio)]
    r_values: Vec<f64>,
    /// `--preset sweep`: utilisation of the task (the rest is idle time), above 0 and
    /// below 1.
    #[arg(long, default_value_t = 0.5, value_parser = crate::args::utilisation)]
    util: f64,
    /// Tables 2-6 (`table2`..`table6`, `all`): noise on the sampling interval, each interval
    /// `T ± U{0..J}` with T = 100 (seed 002 §4: "we add random noise into the sampling
    /// interval"). 0 (default) = a fixed interval with a random start, the setting of eq. 2.
    #[arg(long, default_value_t = 0, value_name = "J", value_parser = crate::args::int::<u64>(0, 99))]
    interval_noise: u64,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Write the output to this file instead of stdout.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

/// Runs `proftrust simulate`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.what {
        What::Sampling(a) => sampling(a),
    }
}

fn sampling(a: SamplingArgs) -> anyhow::Result<()> {
    crate::output::check_opt(a.output.as_ref())?;
    let mut o = SimulateOptions::default();
    (o.preset, o.reps, o.seed, o.threads) = (a.preset, a.reps, a.seed.seed, a.threads);
    (o.r_values, o.util, o.interval_noise) = (a.r_values.clone(), a.util, a.interval_noise);
    util::note(format_args!("seed {}", o.seed));
    let bytes = o.estimated_memory();
    crate::args::check_memory("--reps", &a.reps.to_string(), bytes, 4 << 30, |have| {
        format!(
            "use --reps {} or less",
            ((have / bytes) * a.reps as f64).floor().max(1.0) as u64
        )
    })?;
    let rep = execute(&o, &util::Ui)?;
    let to = crate::output::ReportTo::output(a.output.as_deref());
    crate::output::write_report(&rep, &to, a.json, 0)
}
