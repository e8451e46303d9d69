//! `proftrust calibrate`: fit the skid `S` of a PMU from a kernel with a known instruction mix.
//!
//! The kernel is one simple loop: one load of `--heavy` cycles followed by `--light`
//! one-cycle instructions. Its instruction samples follow `D(S, c)` (seed 000 eq. 2); the fit
//! picks the `S` whose distribution matches (proftrust-skid `calibrate`). Fitting a real PMU
//! needs hardware instruction events; without them the command says so and fails, unless
//! `--vpmu` replays the kernel under the virtual PMU with a known skid to show the fit
//! recovers it.

use anyhow::{bail, Context};
use proftrust_model::{
    BlockVisitor, Module, ModuleIdx, RunOutcome, Svma, TraceBlock, TraceEnd, TraceEvent,
};
use proftrust_skid::calibrate::{fit_skid, kernel_cpi};
use proftrust_vpmu::{CostTable, CycleModel, SkidDist, StaticCost, Vpmu, VpmuEvents, VpmuOptions};

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
    /// Seed of the virtual PMU's random choices.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Most instructions a `--vpmu` calibration replays (~17 minutes).
const MAX_REPLAYED: f64 = 1e10;

/// Runs the subcommand.
pub fn run(a: Args) -> anyhow::Result<()> {
    if !a.vpmu {
        let pmu = std::path::Path::new("/sys/bus/event_source/devices/cpu").exists();
        if pmu {
            bail!(
                "calibrating a hardware PMU is not supported by this build (it needs precise \
                 instruction sampling of a pinned kernel); run `proftrust calibrate --vpmu` to \
                 check the fit on the virtual PMU"
            );
        }
        bail!(
            "calibration needs a hardware PMU and this machine has none \
             (/sys/bus/event_source/devices/cpu is missing; perf_event_open offers only \
             software events here, which have no instruction-level skid to fit)\n\
             hint: run `proftrust calibrate --vpmu` to check the fit on the virtual PMU with a known skid"
        );
    }
    // Time and memory up front: the replay runs ~10^7 instructions a second, and keeps
    // one sample per period.
    let instructions = a.passes as f64 * (a.light as f64 + 1.0);
    if instructions > MAX_REPLAYED {
        bail!(
            "--passes {} x (--light {} + 1) = {instructions:.3e} instructions to replay, ~{} at 10^7 a second (at most {MAX_REPLAYED:e}); lower --passes or --light",
            a.passes,
            a.light,
            crate::args::human_seconds(instructions / 1e7)
        );
    }
    let bytes =
        instructions / a.period as f64 * std::mem::size_of::<proftrust_model::Sample>() as f64;
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
    let n = a.light + 1;
    // The kernel as a module of 4-byte instructions at 0x1000.
    let addrs: Vec<Svma> = (0..n).map(|k| Svma(0x1000 + 4 * k as u64)).collect();
    let mut table = CostTable::new("calibration-kernel");
    for (k, s) in addrs.iter().enumerate() {
        let cycles = if k == 0 { a.heavy } else { 1 };
        table.costs.insert(s.0, StaticCost { cycles, len: 4 });
    }
    let mut model = CycleModel::flat(1);
    model.tables.push(table);
    let mut opts = VpmuOptions::default();
    opts.instruction_period = a.period;
    opts.randomize = a.randomize;
    opts.skid = SkidDist::Constant(a.skid);
    opts.seed = a.seed;
    opts.events = VpmuEvents {
        instructions: true,
        cycles: false,
    };
    opts.exact = false;
    let mut v = Vpmu::new(opts, model).context("cannot set up the virtual PMU")?;
    let m = Module::new("calibration-kernel");
    v.visit(&TraceEvent::Module {
        idx: ModuleIdx(0),
        module: &m,
    });
    for _ in 0..a.passes {
        v.block(&TraceBlock {
            tid: 1,
            module: Some(ModuleIdx(0)),
            instructions: &addrs,
            end: TraceEnd::Other,
            mem: &[],
            key: None,
        });
    }
    v.end(&RunOutcome::Exited { code: 0 });
    let (set, _) = v.finish();
    let mut hist = vec![0.0; n];
    for s in &set.samples {
        let k = ((s.ip.svma.0 - 0x1000) / 4) as usize;
        if let Some(h) = hist.get_mut(k) {
            *h += 1.0;
        }
    }
    let cpi = kernel_cpi(a.heavy as u64, a.light);
    let max = cpi.iter().sum::<f64>();
    let fit = fit_skid(&cpi, &hist, max, 1.0).context("cannot fit the skid")?;
    if a.json {
        let j = serde_json::json!({
            "backend": "vpmu",
            "true_skid": a.skid,
            "fitted_skid": fit.skid,
            "fitted_skid_high": fit.skid_high,
            "residual": fit.residual,
            "samples": fit.samples,
            "kernel": {"heavy_cycles": a.heavy, "light_instructions": a.light},
            "period": a.period,
            "randomize": a.randomize,
            "seed": a.seed,
        });
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        println!(
            "kernel: 1 load of {} cycles + {} one-cycle instructions; virtual PMU, period {}{}, seed {}",
            a.heavy,
            a.light,
            a.period,
            if a.randomize { " randomised" } else { "" },
            a.seed
        );
        println!("samples: {}", fit.samples);
        if fit.skid == fit.skid_high {
            println!("fitted skid: {} cycles (true: {})", fit.skid, a.skid);
        } else {
            println!(
                "fitted skid: {} .. {} cycles (equally good; true: {})",
                fit.skid, fit.skid_high, a.skid
            );
        }
        println!("residual: {:.3e}", fit.residual);
    }
    Ok(())
}
