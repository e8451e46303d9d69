//! `proftrust vpmu`: run a program under QEMU, replay its exact block trace through the
//! virtual PMU (proftrust-vpmu) and write the skid-affected samples a hardware PMU would
//! have taken, as an ordinary native sample file (`read`, `audit`, `correct` take it as is).

use crate::util;
use anyhow::Context;
use proftrust_pipeline::vpmu::{CpiModel, PmuMode, RobConfig, SkidDist, VpmuRunOptions};
use std::ffi::OsString;
use std::path::PathBuf;

/// Arguments of `proftrust vpmu`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// PMU mode: timing model and attribution rule.
    #[arg(long, value_parser = crate::args::named::<PmuMode>(), default_value_t = PmuMode::InOrder)]
    mode: PmuMode,
    /// Reorder-buffer entries of the out-of-order modes (1 to 4096; dispatch and commit
    /// width 4).
    #[arg(long, default_value_t = 224, value_parser = crate::args::int::<u32>(1, 4096))]
    rob: u32,
    /// Constant skid in cycles (0 to 4096). The default 30 is the order of a non-precise
    /// counter overflow's interrupt delay and what `audit --correct-skid` assumes without a
    /// value; measure your PMU's with `proftrust calibrate` (docs/skid.md).
    #[arg(long, default_value_t = proftrust_pipeline::vpmu::DEFAULT_SKID, value_parser = crate::args::int::<u64>(0, crate::args::MAX_SKID))]
    skid: u64,
    /// Skid distribution instead of a constant: `uniform:LO:HI` or `normal:MEAN:SD` (cycles).
    #[arg(long, value_name = "DIST", value_parser = crate::args::skid_dist)]
    skid_dist: Option<SkidDist>,
    /// Sampling period of both events (instructions, cycles); a prime is best. 16 to 10^12;
    /// samples beyond what memory holds are refused (the error names a period that fits).
    #[arg(long, default_value_t = 10007, value_parser = crate::args::int::<u64>(16, 1_000_000_000_000))]
    period: u64,
    /// Cycle-event period when it should differ from --period (16 to 10^12).
    #[arg(long, value_parser = crate::args::int::<u64>(16, 1_000_000_000_000))]
    cycle_period: Option<u64>,
    /// Randomise periods: T + U(0, T/8).
    #[arg(long)]
    randomize: bool,
    #[command(flatten)]
    seed: crate::args::Seed,
    /// Per-instruction cycle model.
    #[arg(long, value_parser = crate::args::named::<CpiModel>(), default_value_t = CpiModel::Class)]
    cpi_model: CpiModel,
    /// CPI of the flat model (and of instructions outside the program's code), 1 to 100000.
    #[arg(long, default_value_t = 1, value_parser = crate::args::int::<u32>(1, 100_000))]
    cpi: u32,
    /// Cache geometry and latencies under `--cpi-model cache-sim`, as comma-separated
    /// `key=value`: `l1=SIZE:WAYS:LATENCY`, `llc=SIZE:WAYS:LATENCY`, `mem=CYCLES`,
    /// `line=BYTES`, `store=CYCLES` (SIZE in bytes, or with a K/M suffix). Unnamed keys keep
    /// their defaults: `l1=32K:8:4,llc=8M:16:40,mem=200,line=64,store=1`.
    #[arg(long, value_name = "SPEC")]
    cache_config: Option<String>,
    /// Cycles of a heavy load under `--cpi-model cache`, 1 to 100000.
    #[arg(long, default_value_t = 200, value_parser = crate::args::int::<u32>(1, 100_000))]
    heavy_load: u32,
    /// Per-address latency: `0xSVMA=CYCLES` (module-relative address in the program); repeat.
    #[arg(long, value_name = "ADDR=CYCLES", value_parser = crate::args::latency)]
    latency: Vec<(u64, u32)>,
    /// Record LBR stacks (last 32 taken branches) with every sample.
    #[arg(long)]
    lbr: bool,
    /// Also write the exact per-instruction counts and modelled cycles (native exact file).
    #[arg(long, value_name = "FILE")]
    exact: Option<PathBuf>,
    /// Output sample file (`-` for standard output).
    #[arg(short, long)]
    output: PathBuf,
    /// Stop the program after this many seconds (at most 30 days); the samples so far are
    /// written.
    #[arg(long, value_name = "SECS", value_parser = crate::args::timeout)]
    timeout: Option<std::time::Duration>,
    /// Program and its arguments.
    #[command(flatten)]
    wl: crate::workload::WorkloadArgs,
    #[arg(last = true, required_unless_present = "workload")]
    command: Vec<OsString>,
}

/// Runs the subcommand.
pub fn run(mut a: Args) -> anyhow::Result<()> {
    crate::output::check(&a.output)?;
    crate::output::check_opt(a.exact.as_ref())?;
    let mut o = VpmuRunOptions::default();
    o.command = a.wl.command(std::mem::take(&mut a.command), None)?;
    o.skid = a.skid_dist.unwrap_or(SkidDist::Constant(a.skid));
    o.mode = a.mode;
    o.rob = RobConfig {
        entries: a.rob,
        ..RobConfig::default()
    };
    o.period = a.period;
    o.cycle_period = a.cycle_period;
    o.randomize = a.randomize;
    o.seed = a.seed.seed;
    o.cpi_model = a.cpi_model;
    o.cpi = a.cpi;
    o.cache_config = a.cache_config.clone();
    o.heavy_load = a.heavy_load;
    o.latency = a.latency.clone();
    o.lbr = a.lbr;
    o.exact = a.exact.is_some();
    o.timeout = a.timeout;
    o.stop = Some(crate::interrupt::install());
    // Memory bound: the samples kept, each with its LBR stack when asked.
    let per_sample = std::mem::size_of::<proftrust_model::Sample>()
        + if a.lbr {
            proftrust_vpmu::LBR_DEPTH * std::mem::size_of::<proftrust_model::Branch>()
        } else {
            0
        };
    o.max_samples =
        Some(crate::args::available_memory().unwrap_or(4 << 30) / 2 / per_sample as u64);
    let r = proftrust_pipeline::vpmu::execute(&o, &util::Ui)?;
    crate::output::write(&a.output, |w| {
        proftrust_formats::native::write_samples(w, &r.samples)
            .with_context(|| format!("cannot write {}", a.output.display()))
    })?;
    if let (Some(p), Some(e)) = (&a.exact, &r.exact) {
        crate::output::write(p, |w| {
            proftrust_formats::native::write_exact(w, e)
                .with_context(|| format!("cannot write {}", p.display()))
        })?;
    }
    util::note_outcome(
        Some(&r.outcome),
        &format!("the samples in {}", a.output.display()),
    );
    Ok(())
}
