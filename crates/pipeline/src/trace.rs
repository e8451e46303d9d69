//! Tracing a program under QEMU for path profiles and calling context trees (`paths`,
//! `cct`, `vpp`): the program's binary and CFGs, the timing model (the virtual PMU's
//! [`TraceCost`] with instruction classes and simulated caches), QEMU's options, and the
//! program's code as a frame-pointer unwinder needs it ([`BinaryCode`]).

use crate::error::{bail_options, Context, Error, Result};
use crate::{program, Events};
use proftrust_binary::{Binary, Frame, Symbolizer};
use proftrust_exact::{trace_qemu, QemuOptions};
use proftrust_model::{Location, Module, ModuleTable, RunOutcome, Svma};
use proftrust_paths::{
    profile_staged, CodeOracle, PathProfile, Profiler, ProfilerOptions, ProgramCfgs,
};
use proftrust_vpmu::{
    class_costs, CacheConfig, CacheGeometry, CacheStats, ClassCycles, CostTable, CycleModel,
    TraceCost,
};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Timing model of `paths` and `cct`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Timing {
    /// One cycle per instruction, no cache.
    Flat,
    /// Cycles by instruction class (iced-x86 decoding of the program), no cache.
    Class,
    /// Class cycles without memory costs plus a simulated L1D and last-level cache over the
    /// traced data addresses.
    #[default]
    CacheSim,
}

impl proftrust_model::named::Named for Timing {
    const ALL: &'static [(Self, &'static str, &'static str)] = &[
        (Timing::Flat, "flat", "One cycle per instruction, no cache"),
        (
            Timing::Class,
            "class",
            "Cycles by instruction class (iced-x86 decoding of the program), no cache",
        ),
        (
            Timing::CacheSim,
            "cache-sim",
            "Class cycles without memory costs plus a simulated L1D and last-level cache over the traced data addresses",
        ),
    ];
}
proftrust_model::named_from_str!(Timing);

/// How a program is traced: the timing model and QEMU's settings.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct TraceOptions {
    /// Timing model of the metrics per path or context. Default [`Timing::CacheSim`].
    pub timing: Timing,
    /// Cache spec under [`Timing::CacheSim`] ([`cache_config`]). Default: the defaults.
    pub cache_config: Option<String>,
    /// QEMU CPU model. Default QEMU's.
    pub cpu: Option<String>,
    /// Stop the program after this long (the trace up to then is kept). Default none.
    pub timeout: Option<Duration>,
    /// Raised to stop the program as at the timeout (the outcome is then `Interrupted`).
    /// Default none.
    pub stop: Option<proftrust_supervise::StopSignal>,
}

/// Runs `p` with `args` under QEMU and profiles its block trace with the timing model; the
/// program's output is shown when `show_output`.
pub fn trace(
    p: &Program,
    args: &[String],
    o: &TraceOptions,
    build: ProfilerOptions,
    show_output: bool,
    events: &dyn Events,
) -> Result<Traced> {
    let (timing, geometry, cycle_model) =
        timing_model(&p.path, o.timing, o.cache_config.as_deref())?;
    let mut opts = qemu_options(o.cpu.clone(), o.timeout, show_output)?;
    opts.stop = o.stop.clone();
    opts.trace_memory = geometry.is_some();
    opts.cache = plugin_cache(geometry);
    let cmd: Vec<OsString> = std::iter::once(p.path.clone().into_os_string())
        .chain(args.iter().map(OsString::from))
        .collect();
    let pb = events.task(None, "tracing under QEMU");
    let (outcome, profile, cct, cache) = if two_threads() {
        // The cost model (cache simulation) beside the trace decoding, the path and CCT
        // bookkeeping on a second thread: same results, less wall time when a core is free.
        let staged = profile_staged(&p.cfgs, build, timing, |v| trace_qemu(&cmd, &opts, v));
        let cache = staged.cost.cache_stats();
        (staged.result, staged.profile, staged.cct, cache)
    } else {
        let mut prof = Profiler::with_cost_model(&p.cfgs, build, timing);
        let outcome = trace_qemu(&cmd, &opts, &mut prof);
        let cache = prof.cost_model().cache_stats();
        let (profile, cct) = prof.finish();
        (outcome, profile, cct, cache)
    };
    let outcome = outcome.context("tracing the program under QEMU")?;
    pb.finish();
    Ok(Traced {
        profile,
        cct,
        outcome,
        cache,
        cycle_model,
    })
}

/// Whether [`trace`] profiles on two threads ([`profile_staged`]): when a core is free
/// (the 1-minute load average of `/proc/loadavg` at least one below the cores available);
/// `PROFTRUST_TRACE_THREADS=1` or `2` decides instead. On a busy machine the second thread
/// only adds its hand-over costs (about 10-25% more CPU time, measured on `sort`).
/// Where a traced run's caches are simulated: by the QEMU plugin, where the accesses happen
/// (the default: one outcome word per access is shipped instead of two address words, and
/// the host has no simulation left), or, with `$PROFTRUST_CACHE_SIM=host`, by the analysis
/// on the shipped addresses. Same model, same code (`proftrust-cachesim`). The plugin is the
/// cheaper in CPU time; the host can be the faster in wall time on an idle machine when QEMU
/// is the longer side of the run (floating-point code through QEMU's soft-float: on soplex
/// the simulation then lengthens QEMU's side, where on sort it shortens the analysis';
/// docs/paths.md, "Fifth round").
pub(crate) fn plugin_cache(geometry: Option<CacheGeometry>) -> Option<CacheGeometry> {
    match std::env::var("PROFTRUST_CACHE_SIM").as_deref() {
        Ok("host") => None,
        _ => geometry,
    }
}

fn two_threads() -> bool {
    match std::env::var("PROFTRUST_TRACE_THREADS").as_deref() {
        Ok("1") => return false,
        Ok("2") => return true,
        _ => {}
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok());
    cores >= 2 && load.is_some_and(|l| l + 1.0 <= cores as f64)
}

/// One traced run of the program through the [`Profiler`].
pub struct Traced {
    /// The exact path profile.
    pub profile: PathProfile,
    /// The exact calling context tree.
    pub cct: proftrust_paths::Cct,
    /// How the run ended.
    pub outcome: RunOutcome,
    /// Cache totals of the timing model (`None` without a cache).
    pub cache: Option<CacheStats>,
    /// The timing model, described for the output.
    pub cycle_model: String,
}

/// The timing model for `program`, the cache geometry the trace's data accesses must be
/// simulated with (`None`: no accesses traced), and a description for the output.
pub fn timing_model(
    program: &Path,
    arg: Timing,
    cache_config: Option<&str>,
) -> Result<(TraceCost, Option<CacheGeometry>, String)> {
    if cache_config.is_some() && arg != Timing::CacheSim {
        bail_options!(
            "--cache-config describes the simulated caches: it needs --cpi-model cache-sim"
        );
    }
    let mut classes = ClassCycles::default();
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (table, cache, what) = match arg {
        Timing::Flat => (
            CostTable::new(name),
            None,
            "flat: 1 cycle per instruction, no cache".to_string(),
        ),
        Timing::Class => (
            program_costs(program, &classes)?,
            None,
            "class: cycles by instruction class (loads 4, stores 1), no cache".to_string(),
        ),
        Timing::CacheSim => {
            // The cache supplies every memory latency.
            classes.load = 0;
            classes.store = 0;
            let c = match cache_config {
                Some(spec) => self::cache_config(spec)?,
                None => CacheConfig::default(),
            };
            let what = format!(
                "cache-sim: class cycles plus simulated caches (L1D {} KiB {}-way, LLC {} MiB {}-way, {}-byte lines; load latency {}/{}/{} cycles)",
                c.l1_size / 1024,
                c.l1_ways,
                c.llc_size / (1024 * 1024),
                c.llc_ways,
                c.line_size,
                c.l1_latency,
                c.llc_latency,
                c.memory_latency
            );
            (program_costs(program, &classes)?, Some(c), what)
        }
    };
    let geometry = cache.as_ref().map(CacheConfig::geometry);
    Ok((
        TraceCost::new(
            {
                let mut model = CycleModel::flat(1);
                model.tables.push(table);
                model
            },
            cache,
        ),
        geometry,
        what,
    ))
}

/// The program's binary, its functions' CFGs (numbered), and warnings.
pub struct Program {
    /// Where it is.
    pub path: PathBuf,
    /// The binary.
    pub binary: Binary,
    /// The CFG of every function that has one, numbered for Ball-Larus paths.
    pub cfgs: ProgramCfgs,
    /// Functions without a CFG, binary warnings.
    pub warnings: Vec<proftrust_model::Warning>,
}

/// Opens the program's binary and builds the CFG of every function.
pub fn load_program(prog: &str) -> Result<Program> {
    let path = program::find(prog)?;
    let binary = Binary::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
    binary
        .require_x86_64("paths, calling-context trees and variational path profiles")
        .context("cannot trace this program")?;
    let mut cfgs = Vec::new();
    let mut failed = 0usize;
    let mut first_err = None;
    for f in binary.functions() {
        match binary.cfg(f) {
            Ok(c) => cfgs.push(c),
            Err(e) => {
                failed += 1;
                first_err.get_or_insert_with(|| format!("{}: {e}", f.name));
            }
        }
    }
    let mut warnings = crate::warnings::all_symbols(binary.warnings().iter().cloned());
    if failed > 0 {
        warnings.push(proftrust_model::Warning::new(
            proftrust_model::WarningKind::Cfg,
            format!(
                "{failed} function(s) have no CFG and get no paths (first: {})",
                first_err.unwrap_or_default()
            ),
        ));
    }
    let module = Module {
        path: path.to_string_lossy().into_owned(),
        build_id: binary.build_id().cloned(),
        load_bias: 0,
    };
    let cfgs = ProgramCfgs::new(module, cfgs);
    Ok(Program {
        path,
        binary,
        cfgs,
        warnings,
    })
}

/// QEMU options from the shared flags.
pub fn qemu_options(
    cpu: Option<String>,
    timeout: Option<Duration>,
    show_output: bool,
) -> Result<QemuOptions> {
    Ok(QemuOptions {
        cpu,
        timeout,
        show_output,
        ..Default::default()
    })
}

/// `file:line` of the innermost frame at `a` (`?` parts when unknown).
pub fn source_of(b: &Binary, a: Svma) -> String {
    frame_line(b.frames(a).first())
}

/// `file:line` (file name only) of an inline frame; `?` parts when unknown, `?` without one.
pub fn frame_line(f: Option<&Frame>) -> String {
    match f {
        Some(f) => format!(
            "{}:{}",
            f.file
                .as_deref()
                .map_or("?", |p| p.rsplit('/').next().unwrap_or(p)),
            f.line.map_or("?".to_string(), |l| l.to_string())
        ),
        None => "?".to_string(),
    }
}

/// A cache geometry from a spec `l1=SIZE:WAYS:LATENCY,llc=SIZE:WAYS:LATENCY,mem=CYCLES,
/// line=BYTES,store=CYCLES` (the `--cache-config` flag) on top of the defaults; unnamed keys
/// keep theirs.
pub fn cache_config(spec: &str) -> Result<CacheConfig> {
    let mut c = CacheConfig::default();
    let size = |x: &str| -> Result<u32> {
        let (num, mul) = match x.char_indices().last() {
            Some((i, 'K' | 'k')) => (&x[..i], 1024),
            Some((i, 'M' | 'm')) => (&x[..i], 1024 * 1024),
            _ => (x, 1),
        };
        num.parse::<u32>()
            .ok()
            .and_then(|n| n.checked_mul(mul))
            .ok_or_else(|| Error::Options(format!("--cache-config {spec:?}: {x:?} is not a size")))
    };
    let num = |x: &str| -> Result<u32> {
        x.parse::<u32>()
            .with_context(|| format!("--cache-config {spec:?}: {x:?} is not a number"))
    };
    for part in spec.split(',').filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| {
            Error::Options(format!(
                "--cache-config {spec:?}: {part:?} is not key=value"
            ))
        })?;
        match k {
            "l1" | "llc" => {
                let f: Vec<&str> = v.split(':').collect();
                let [sz, ways, lat] = f[..] else {
                    bail_options!("--cache-config {spec:?}: {k}={v} should be SIZE:WAYS:LATENCY");
                };
                let (sz, ways, lat) = (size(sz)?, num(ways)?, num(lat)?);
                if k == "l1" {
                    (c.l1_size, c.l1_ways, c.l1_latency) = (sz, ways, lat);
                } else {
                    (c.llc_size, c.llc_ways, c.llc_latency) = (sz, ways, lat);
                }
            }
            "mem" => c.memory_latency = num(v)?,
            "line" => c.line_size = num(v)?,
            "store" => c.store_latency = num(v)?,
            _ => bail_options!(
                "--cache-config {spec:?}: unknown key {k:?} (known: l1, llc, mem, line, store)"
            ),
        }
    }
    c.check()
        .with_context(|| format!("--cache-config {spec:?}"))?;
    Ok(c)
}

/// Class-based cost table of the program's executable sections.
pub fn program_costs(path: &Path, t: &ClassCycles) -> Result<CostTable> {
    use object::{Object, ObjectSection, SectionKind};
    let data = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let file = object::File::parse(&*data)
        .with_context(|| format!("{} is not an ELF file this tool can read", path.display()))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut table = CostTable::new(name.clone());
    for s in file.sections() {
        if s.kind() != SectionKind::Text {
            continue;
        }
        let bytes = s
            .data()
            .with_context(|| format!("cannot read a code section of {}", path.display()))?;
        let part = class_costs(&name, bytes, s.address(), t);
        table.merge(part);
    }
    Ok(table)
}

/// The program's code as [`CodeOracle`] needs it: direct call targets and frame-pointer
/// prologues, read from the binaries the symbolizer found for the sample set's modules.
pub struct BinaryCode<'a> {
    sym: &'a Symbolizer,
}

impl<'a> BinaryCode<'a> {
    /// The code of the binaries `sym` found.
    pub fn new(sym: &'a Symbolizer) -> Self {
        BinaryCode { sym }
    }
}

impl CodeOracle for BinaryCode<'_> {
    /// The direct call before the return address (`Binary::direct_call_before`).
    fn direct_call_target(&self, _: &ModuleTable, ret: Location) -> Option<Location> {
        let m = ret.module?;
        let target = self.sym.binary(m)?.direct_call_before(ret.svma)?;
        Some(Location {
            module: Some(m),
            svma: target,
        })
    }

    /// The frame-pointer prologue (`Binary::frame_established`).
    fn frame_established(&self, _: &ModuleTable, at: Location) -> Option<bool> {
        self.sym.binary(at.module?)?.frame_established(at.svma)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_config_specs() {
        let c = cache_config("l1=4K:4:3,llc=64K:8:30,mem=250,store=2").unwrap();
        assert_eq!((c.l1_size, c.l1_ways, c.l1_latency), (4096, 4, 3));
        assert_eq!((c.llc_size, c.llc_ways, c.llc_latency), (65536, 8, 30));
        assert_eq!(
            (c.memory_latency, c.store_latency, c.line_size),
            (250, 2, 64)
        );
        assert_eq!(cache_config("").unwrap(), CacheConfig::default());
        assert_eq!(cache_config("llc=8M:16:40").unwrap().llc_size, 8 << 20);
        for bad in [
            "l1=4K:4",
            "l1=4X:4:3",
            "size=3",
            "line=48",
            "l1=100:4:3",
            "mem",
        ] {
            assert!(cache_config(bad).is_err(), "{bad}");
        }
    }
}
