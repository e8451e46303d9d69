//! `proftrust vpmu`: run a program under QEMU, replay its exact block trace through the
//! virtual PMU (proftrust-vpmu) and write the skid-affected samples a hardware PMU would
//! have taken, as an ordinary native sample file (`read`, `audit`, `correct` take it as is).

use crate::util;
use anyhow::{bail, Context};
use proftrust_vpmu::{
    CacheConfig, ClassCycles, CostTable, CycleModel, SkidDist, Vpmu, VpmuEvents, VpmuOptions,
};
use std::ffi::OsString;
use std::path::PathBuf;

/// Per-instruction cycle model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CpiModelArg {
    /// Every instruction takes `--cpi` cycles.
    Flat,
    /// Cycles by instruction class (iced-x86 decoding of the program's code).
    Class,
    /// The class table plus heavy loads: dependent loads (address register produced by a
    /// load: pointer chasing, indirect indexing) take `--heavy-load` cycles (a per-address
    /// rule standing in for cache misses; see `cache-sim` for a simulation).
    Cache,
    /// The class table without memory costs, plus a simulated L1D + last-level cache on the
    /// program's real data accesses (traced by QEMU): each load costs the latency of the
    /// level that holds its line (defaults: 32 KiB 8-way L1D 4 cycles, 8 MiB 16-way LLC 40
    /// cycles, memory 200 cycles, 64-byte lines; stores 1 cycle). Slower to trace.
    CacheSim,
}

/// Arguments of `proftrust vpmu`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Constant skid in cycles.
    #[arg(long, default_value_t = 0)]
    skid: u64,
    /// Skid distribution instead of a constant: `uniform:LO:HI` or `normal:MEAN:SD` (cycles).
    #[arg(long, value_name = "DIST")]
    skid_dist: Option<String>,
    /// Sampling period of both events (instructions, cycles); a prime is best.
    #[arg(long, default_value_t = 10007)]
    period: u64,
    /// Cycle-event period when it should differ from --period.
    #[arg(long)]
    cycle_period: Option<u64>,
    /// Randomise periods: T + U(0, T/8).
    #[arg(long)]
    randomize: bool,
    /// Seed of the random choices (printed and stored in the file).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Per-instruction cycle model.
    #[arg(long, value_enum, default_value_t = CpiModelArg::Class)]
    cpi_model: CpiModelArg,
    /// CPI of the flat model (and of instructions outside the program's code).
    #[arg(long, default_value_t = 1)]
    cpi: u32,
    /// Cache geometry and latencies under `--cpi-model cache-sim`, as comma-separated
    /// `key=value`: `l1=SIZE:WAYS:LATENCY`, `llc=SIZE:WAYS:LATENCY`, `mem=CYCLES`,
    /// `line=BYTES`, `store=CYCLES` (SIZE in bytes, or with a K/M suffix). Unnamed keys keep
    /// their defaults: `l1=32K:8:4,llc=8M:16:40,mem=200,line=64,store=1`.
    #[arg(long, value_name = "SPEC")]
    cache_config: Option<String>,
    /// Cycles of a heavy load under `--cpi-model cache`.
    #[arg(long, default_value_t = 200)]
    heavy_load: u32,
    /// Per-address latency: `0xSVMA=CYCLES` (module-relative address in the program); repeat.
    #[arg(long, value_name = "ADDR=CYCLES")]
    latency: Vec<String>,
    /// Record LBR stacks (last 32 taken branches) with every sample.
    #[arg(long)]
    lbr: bool,
    /// Also write the exact per-instruction counts and modelled cycles (native exact file).
    #[arg(long, value_name = "FILE")]
    exact: Option<PathBuf>,
    /// Output sample file.
    #[arg(short, long)]
    output: PathBuf,
    /// Stop the program after this many seconds.
    #[arg(long)]
    timeout: Option<f64>,
    /// Program and its arguments.
    #[command(flatten)]
    wl: crate::workload::WorkloadArgs,
    #[arg(last = true, required_unless_present = "workload")]
    command: Vec<OsString>,
}

fn parse_dist(s: &str) -> anyhow::Result<SkidDist> {
    let parts: Vec<&str> = s.split(':').collect();
    let num = |x: &str| -> anyhow::Result<f64> {
        x.parse::<f64>()
            .with_context(|| format!("--skid-dist {s:?}: {x:?} is not a number"))
    };
    match parts.as_slice() {
        ["uniform", lo, hi] => Ok(SkidDist::Uniform {
            lo: num(lo)? as u64,
            hi: num(hi)? as u64,
        }),
        ["normal", m, sd] => Ok(SkidDist::Normal {
            mean: num(m)?,
            sd: num(sd)?,
        }),
        ["constant", s0] => Ok(SkidDist::Constant(num(s0)? as u64)),
        _ => bail!("--skid-dist {s:?}: expected uniform:LO:HI, normal:MEAN:SD or constant:S"),
    }
}

/// Runs the subcommand.
pub fn run(mut a: Args) -> anyhow::Result<()> {
    a.command = a.wl.command(std::mem::take(&mut a.command), None)?;
    let skid = match &a.skid_dist {
        Some(d) => parse_dist(d)?,
        None => SkidDist::Constant(a.skid),
    };
    let prog = proftrust_pipeline::program::find(&a.command[0])?;
    let mut model = CycleModel::flat(a.cpi);
    let mut classes = ClassCycles::default();
    classes.heavy_load = (a.cpi_model == CpiModelArg::Cache).then_some(a.heavy_load);
    let mut table = match a.cpi_model {
        CpiModelArg::Flat => {
            let name = prog
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            CostTable::new(name)
        }
        CpiModelArg::Class | CpiModelArg::Cache => {
            proftrust_pipeline::trace::program_costs(&prog, &classes)?
        }
        CpiModelArg::CacheSim => {
            // The cache supplies every memory latency.
            classes.load = 0;
            classes.store = 0;
            proftrust_pipeline::trace::program_costs(&prog, &classes)?
        }
    };
    if a.cpi_model == CpiModelArg::Flat {
        for c in table.costs.values_mut() {
            c.cycles = a.cpi;
        }
    }
    for l in &a.latency {
        let (addr, cyc) = l
            .split_once('=')
            .with_context(|| format!("--latency {l:?}: expected 0xADDR=CYCLES"))?;
        let addr = u64::from_str_radix(addr.trim_start_matches("0x"), 16)
            .with_context(|| format!("--latency {l:?}: {addr:?} is not a hex address"))?;
        let cyc: u32 = cyc
            .parse()
            .with_context(|| format!("--latency {l:?}: {cyc:?} is not a cycle count"))?;
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
        instructions: true,
        cycles: true,
    };
    opts.lbr = a.lbr;
    opts.exact = a.exact.is_some();
    let cache_sim = a.cpi_model == CpiModelArg::CacheSim;
    if a.cache_config.is_some() && !cache_sim {
        bail!("--cache-config applies to --cpi-model cache-sim only");
    }
    opts.cache = match (&a.cache_config, cache_sim) {
        (Some(spec), _) => Some(proftrust_pipeline::trace::cache_config(spec)?),
        (None, true) => Some(CacheConfig::default()),
        (None, false) => None,
    };
    let mut v = Vpmu::new(opts, model).context("cannot set up the virtual PMU")?;
    let qo = proftrust_exact::QemuOptions {
        timeout: a.timeout.map(std::time::Duration::from_secs_f64),
        trace_memory: cache_sim,
        ..proftrust_exact::QemuOptions::default()
    };
    util::note(format!(
        "virtual PMU: skid {skid:?} cycles, period {}{}, cpi model {:?}, seed {}",
        a.period,
        if a.randomize { " randomised" } else { "" },
        a.cpi_model,
        a.seed
    ));
    let pb = util::progress(None, "tracing under QEMU");
    let outcome = proftrust_exact::trace_qemu(&a.command, &qo, &mut v)
        .context("cannot trace the program under QEMU")?;
    pb.finish_and_clear();
    if let Some(c) = v.cache_stats() {
        util::note(format!(
            "cache simulation: {} data accesses ({} loads), {} L1D misses, {} LLC misses",
            c.accesses, c.loads, c.l1_misses, c.llc_misses
        ));
    }
    let (mut set, exact) = v.finish();
    set.command = a
        .command
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    util::note(format!(
        "{} samples ({} instruction, {} cycle); program {:?}",
        set.samples.len(),
        set.count_for_event(0),
        set.count_for_event(1),
        outcome
    ));
    util::write_atomically(&a.output, |w| {
        proftrust_formats::native::write_samples(w, &set)
            .with_context(|| format!("cannot write {}", a.output.display()))
    })?;
    if let (Some(p), Some(mut e)) = (&a.exact, exact) {
        e.command = set.command.clone();
        util::write_atomically(p, |w| {
            proftrust_formats::native::write_exact(w, &e)
                .with_context(|| format!("cannot write {}", p.display()))
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_config_specs() {
        let c = proftrust_pipeline::trace::cache_config("l1=4K:4:3,llc=64K:8:30,mem=250,store=2")
            .unwrap();
        assert_eq!((c.l1_size, c.l1_ways, c.l1_latency), (4096, 4, 3));
        assert_eq!((c.llc_size, c.llc_ways, c.llc_latency), (65536, 8, 30));
        assert_eq!(
            (c.memory_latency, c.store_latency, c.line_size),
            (250, 2, 64)
        );
        assert_eq!(
            proftrust_pipeline::trace::cache_config("").unwrap(),
            CacheConfig::default()
        );
        assert_eq!(
            proftrust_pipeline::trace::cache_config("llc=8M:16:40")
                .unwrap()
                .llc_size,
            8 << 20
        );
        for bad in [
            "l1=4K:4",
            "l1=4X:4:3",
            "size=3",
            "line=48",
            "l1=100:4:3",
            "mem",
        ] {
            assert!(
                proftrust_pipeline::trace::cache_config(bad).is_err(),
                "{bad}"
            );
        }
    }
}
