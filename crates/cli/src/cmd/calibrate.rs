//! `proftrust calibrate`: fit the skid `S` of a PMU from a kernel with a known instruction
//! mix. The arguments become [`proftrust_pipeline::calibrate::CalibrateOptions`]; the
//! report renders itself (`proftrust_report::calibrate`).

use proftrust_pipeline::calibrate::{execute, CalibrateOptions};

/// Arguments of `proftrust calibrate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Replay the kernel under the virtual PMU (no hardware PMU needed) with skid `--skid`.
    #[arg(long)]
    vpmu: bool,
    /// Skid of the virtual PMU, in cycles (only with --vpmu; 0 to 1024).
    #[arg(long, default_value_t = 37, value_parser = crate::args::int::<u64>(0, crate::args::MAX_SKID))]
    skid: u64,
    /// Cycles of the kernel's heavy load (1 to 100000).
    #[arg(long, default_value_t = 200, value_parser = crate::args::int::<u32>(1, 100_000))]
    heavy: u32,
    /// Number of one-cycle instructions after the heavy load (1 to 1000000).
    #[arg(long, default_value_t = 100, value_parser = crate::args::int::<usize>(1, 1_000_000))]
    light: usize,
    /// Instruction-event period (a prime coprime with the kernel length spreads overflows
    /// evenly); 1 to 10^12.
    #[arg(long, default_value_t = 1009, value_parser = crate::args::int::<u64>(1, 1_000_000_000_000))]
    period: u64,
    /// Passes through the kernel (1 to 10^9; passes x (light + 1) instructions are replayed,
    /// at most 10^10).
    #[arg(long, default_value_t = 200_000, value_parser = crate::args::int::<u64>(1, 1_000_000_000))]
    passes: u64,
    /// Randomise the period (T + U(0, T/8)).
    #[arg(long)]
    randomize: bool,
    #[command(flatten)]
    seed: crate::args::Seed,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs the subcommand.
pub fn run(a: Args) -> anyhow::Result<()> {
    let mut o = CalibrateOptions::default();
    (o.vpmu, o.skid, o.heavy, o.light) = (a.vpmu, a.skid, a.heavy, a.light);
    (o.period, o.passes, o.randomize, o.seed) = (a.period, a.passes, a.randomize, a.seed.seed);
    // Memory up front: the replay keeps one sample per period.
    if o.vpmu && o.instructions() <= proftrust_pipeline::calibrate::MAX_REPLAYED {
        let bytes = o.instructions() / a.period as f64
            * std::mem::size_of::<proftrust_model::Sample>() as f64;
        crate::args::check_memory(
            "--period",
            &a.period.to_string(),
            2.0 * bytes,
            4 << 30,
            |have| {
                format!(
                    "use --period {} or more",
                    (a.period as f64 * 2.0 * bytes / have).ceil() as u64 + 1
                )
            },
        )?;
    }
    let report = execute(&o)?;
    crate::output::write_report(&report, &crate::output::ReportTo::Stdout, a.json, 0)
}
