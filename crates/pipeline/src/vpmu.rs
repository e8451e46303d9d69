//! `vpmu`: run a program under QEMU, replay its exact block trace through the virtual PMU
//! (`proftrust-vpmu`) and return the skid-affected samples a hardware PMU would have taken
//! (and, on request, the exact counts with modelled costs).

use crate::error::{bail_options, Context, Result};
use crate::{program, trace, Events};
use proftrust_model::named::Named as _;
use proftrust_model::{ExactProfile, RunOutcome, SampleSet};
use proftrust_vpmu::{
    CacheConfig, ClassCycles, CostTable, CycleModel, Vpmu, VpmuEvents, VpmuOptions,
};
pub use proftrust_vpmu::{PmuMode, RobConfig, SkidDist};
use std::ffi::OsString;
use std::time::Duration;

/// The default skid of `proftrust vpmu` and of `audit --correct-skid` without a value, in
/// cycles: 30. Seed 000 gives no number ("the skid cycle duration S can be measured for a
/// specific machine", §2.2): 30 cycles is the order of the interrupt-delivery delay of a
/// non-precise counter overflow, the skid every benchmark and check of this project uses
/// (docs/skid.md), and what `proftrust calibrate --vpmu` recovers. Measure your PMU's with
/// `proftrust calibrate` and pass `--skid`.
pub const DEFAULT_SKID: u64 = 30;

/// How a skid reads in a note: `30 cycles`, `uniform from 20 to 40 cycles`, `normal with
/// mean 30 and standard deviation 5 cycles`.
pub fn describe_skid(s: &SkidDist) -> String {
    match s {
        SkidDist::Constant(c) => format!("{c} cycles"),
        SkidDist::Uniform { lo, hi } => format!("uniform from {lo} to {hi} cycles"),
        SkidDist::Normal { mean, sd } => {
            format!("normal with mean {mean} and standard deviation {sd} cycles")
        }
        #[allow(unreachable_patterns)]
        other => format!("{} cycles on average", other.mean()),
    }
}

/// Per-instruction cycle model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CpiModel {
    /// Every instruction takes [`VpmuRunOptions::cpi`] cycles.
    Flat,
    /// Cycles by instruction class (iced-x86 decoding of the program's code).
    #[default]
    Class,
    /// The class table plus heavy loads: dependent loads take
    /// [`VpmuRunOptions::heavy_load`] cycles.
    Cache,
    /// The class table without memory costs, plus a simulated L1D + last-level cache on the
    /// program's traced data accesses.
    CacheSim,
}

impl proftrust_model::named::Named for CpiModel {
    const ALL: &'static [(Self, &'static str, &'static str)] = &[
        (CpiModel::Flat, "flat", "Every instruction takes `--cpi` cycles"),
        (CpiModel::Class, "class", "Cycles by instruction class (iced-x86 decoding of the program's code)"),
        (CpiModel::Cache, "cache", "The class table plus heavy loads: dependent loads (address register produced by a load: pointer chasing, indirect indexing) take `--heavy-load` cycles (a per-address rule standing in for cache misses; see `cache-sim` for a simulation)"),
        (CpiModel::CacheSim, "cache-sim", "The class table without memory costs, plus a simulated L1D + last-level cache on the program's real data accesses (traced by QEMU): each load costs the latency of the level that holds its line (defaults: 32 KiB 8-way L1D 4 cycles, 8 MiB 16-way LLC 40 cycles, memory 200 cycles, 64-byte lines; stores 1 cycle). Slower to trace"),
    ];
}
proftrust_model::named_from_str!(CpiModel);

/// Settings of [`execute`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct VpmuRunOptions {
    /// Program and arguments. Default empty (an error: give one).
    pub command: Vec<OsString>,
    /// Skid in cycles. Default constant [`DEFAULT_SKID`] (30).
    pub skid: SkidDist,
    /// Timing model and attribution rule (docs/skid.md, "PMU modes"). Default
    /// [`PmuMode::InOrder`], the original in-order model.
    pub mode: PmuMode,
    /// Reorder buffer of the out-of-order modes. Default [`RobConfig::default`] (224
    /// entries, width 4).
    pub rob: RobConfig,
    /// Sample the instruction and cycle events. Default true; false with
    /// [`VpmuRunOptions::exact`] only times and counts (the time truth of `audit`).
    pub sample: bool,
    /// Instruction-event period. Default 10007.
    pub period: u64,
    /// Cycle-event period. Default: [`VpmuRunOptions::period`].
    pub cycle_period: Option<u64>,
    /// Randomise the periods (seed 001 §4). Default false.
    pub randomize: bool,
    /// Seed of every random draw (stored in the sample file). Default [`crate::DEFAULT_SEED`].
    pub seed: u64,
    /// Cycle model. Default [`CpiModel::Class`].
    pub cpi_model: CpiModel,
    /// CPI of the flat model. Default 1.
    pub cpi: u32,
    /// Cache spec under [`CpiModel::CacheSim`] (`trace::cache_config`). Default: defaults.
    pub cache_config: Option<String>,
    /// Cycles of a heavy load under [`CpiModel::Cache`]. Default 200.
    pub heavy_load: u32,
    /// Cycles of given instructions (SVMA, cycles), overriding the model. Default none.
    pub latency: Vec<(u64, u32)>,
    /// LBR-like branch stacks on every sample. Default false.
    pub lbr: bool,
    /// Also return the exact counts with modelled costs. Default false.
    pub exact: bool,
    /// Stop the program after this long. Default none.
    pub timeout: Option<Duration>,
    /// Raised to stop the program as at the timeout (the samples so far are returned, the
    /// outcome says `Interrupted`). Default none.
    pub stop: Option<proftrust_supervise::StopSignal>,
    /// Keep at most this many samples; a run that takes more is an error naming a period
    /// that fits. Default none.
    pub max_samples: Option<u64>,
}

impl Default for VpmuRunOptions {
    fn default() -> Self {
        VpmuRunOptions {
            command: Vec::new(),
            skid: SkidDist::Constant(DEFAULT_SKID),
            mode: PmuMode::InOrder,
            rob: RobConfig::default(),
            sample: true,
            period: 10007,
            cycle_period: None,
            randomize: false,
            seed: crate::DEFAULT_SEED,
            cpi_model: CpiModel::Class,
            cpi: 1,
            cache_config: None,
            heavy_load: 200,
            latency: Vec::new(),
            lbr: false,
            exact: false,
            timeout: None,
            stop: None,
            max_samples: None,
        }
    }
}

/// What the virtual PMU produced.
#[derive(Debug, Clone)]
pub struct VpmuRun {
    /// The samples (events `instructions:vpmu` and `cycles:vpmu`).
    pub samples: SampleSet,
    /// Exact counts with modelled costs, when asked for.
    pub exact: Option<ExactProfile>,
    /// How the program ended.
    pub outcome: RunOutcome,
}

/// Runs the program under the virtual PMU. Notes and progress go to `events`.
pub fn execute(a: &VpmuRunOptions, events: &dyn Events) -> Result<VpmuRun> {
    let Some(first) = a.command.first() else {
        bail_options!("give the program to run");
    };
    let skid = a.skid;
    let prog = program::find(first)?;
    let mut model = CycleModel::flat(a.cpi);
    let mut classes = ClassCycles::default();
    classes.heavy_load = (a.cpi_model == CpiModel::Cache).then_some(a.heavy_load);
    let mut table = match a.cpi_model {
        CpiModel::Flat => {
            let name = prog
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            CostTable::new(name)
        }
        CpiModel::Class | CpiModel::Cache => trace::program_costs(&prog, &classes)?,
        CpiModel::CacheSim => {
            // The cache supplies every memory latency.
            classes.load = 0;
            classes.store = 0;
            trace::program_costs(&prog, &classes)?
        }
    };
    if a.cpi_model == CpiModel::Flat {
        for c in table.costs.values_mut() {
            c.cycles = a.cpi;
        }
    }
    for &(addr, cyc) in &a.latency {
        table.set(addr, cyc);
    }
    model.tables.push(table);
    let mut opts = VpmuOptions::default();
    opts.instruction_period = a.period;
    opts.cycle_period = a.cycle_period.unwrap_or(a.period);
    opts.randomize = a.randomize;
    opts.skid = skid;
    opts.seed = a.seed;
    opts.events = VpmuEvents {
        instructions: a.sample,
        cycles: a.sample,
    };
    opts.mode = a.mode;
    opts.rob = a.rob;
    opts.lbr = a.lbr;
    opts.exact = a.exact;
    opts.max_samples = a.max_samples;
    let cache_sim = a.cpi_model == CpiModel::CacheSim;
    if a.cache_config.is_some() && !cache_sim {
        bail_options!("--cache-config applies to --cpi-model cache-sim only");
    }
    opts.cache = match (&a.cache_config, cache_sim) {
        (Some(spec), _) => Some(trace::cache_config(spec)?),
        (None, true) => Some(CacheConfig::default()),
        (None, false) => None,
    };
    let geometry = crate::trace::plugin_cache(opts.cache.as_ref().map(CacheConfig::geometry));
    let mut v = Vpmu::new(opts, model).context("cannot set up the virtual PMU")?;
    let qo = proftrust_exact::QemuOptions {
        timeout: a.timeout,
        trace_memory: cache_sim,
        cache: geometry,
        stop: a.stop.clone(),
        ..proftrust_exact::QemuOptions::default()
    };
    // The in-order mode (the default) keeps its original note.
    let mode = if a.mode.out_of_order() {
        format!(
            "mode {} (out-of-order model: ROB {} entries, width {}), ",
            a.mode.name(),
            a.rob.entries,
            a.rob.width
        )
    } else {
        String::new()
    };
    // PEBS, IBS and TIP have no skid parameter.
    let skid_text = match a.mode {
        PmuMode::InOrder | PmuMode::Interrupt => format!("skid {}, ", describe_skid(&skid)),
        PmuMode::Pebs | PmuMode::Ibs | PmuMode::Tip => String::new(),
    };
    events.note(&format!(
        "virtual PMU: {mode}{skid_text}period {}{}, cpi model {}, seed {}",
        a.period,
        if a.randomize { " randomised" } else { "" },
        a.cpi_model.name(),
        a.seed
    ));
    let pb = events.task(None, "tracing under QEMU");
    let outcome = proftrust_exact::trace_qemu(&a.command, &qo, &mut v)
        .context("cannot trace the program under QEMU")?;
    pb.finish();
    if let Some(c) = v.cache_stats() {
        events.note(&format!(
            "cache simulation: {} data accesses ({} loads), {} L1D misses, {} LLC misses",
            c.accesses, c.loads, c.l1_misses, c.llc_misses
        ));
    }
    if let (Some(max), true) = (a.max_samples, v.dropped_samples() > 0) {
        let taken = max + v.dropped_samples();
        bail_options!(
            "--period {} gave {taken} samples, more than the {max} that fit in half the available memory; use --period {} or more",
            a.period,
            (a.period as u128 * taken as u128 / max.max(1) as u128 + 1)
        );
    }
    let (mut set, mut exact) = v.finish();
    set.command = a
        .command
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    // Any other end gets its own warning line (`RunOutcome::warning`); a clean exit is said here.
    let ended = match outcome {
        RunOutcome::Exited { code: 0 } => format!("; the program {outcome}"),
        _ => String::new(),
    };
    events.note(&format!(
        "{} samples ({} instruction, {} cycle){ended}",
        set.samples.len(),
        set.count_for_event(0),
        set.count_for_event(1),
    ));
    if let Some(e) = exact.as_mut() {
        e.command = set.command.clone();
    }
    Ok(VpmuRun {
        samples: set,
        exact,
        outcome,
    })
}
