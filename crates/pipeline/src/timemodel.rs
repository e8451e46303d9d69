//! The time truth at the speed of an exact count (`audit --truth-weight time-model`): the
//! program counted once under QEMU with edges (`proftrust_exact::count_qemu`), then every
//! executed block timed once by `proftrust-uarch`'s dependency-aware scheduler for a real
//! core and multiplied by its exact count. Also applies to an exact file that has edges
//! (`proftrust truth` writes them by default).

use crate::error::{bail, Context, Result};
use crate::Events;
use proftrust_model::ExactProfile;
use proftrust_model::{BlockVisitor, Location, Module, ModuleIdx, TraceBlock};
use proftrust_uarch::{model_run_with_misses, Core, CoreKind, ModelOptions, ModuleCode};
use std::ffi::OsString;
use std::path::Path;

/// The data caches `--time-caches` simulates, and what a miss costs beyond an L1 hit.
///
/// Geometry: the core of this project's measurement host and of LLVM's `sapphirerapids`
/// model (Golden Cove, server variant): L1D 48 KiB 12-way, L2 2 MiB 16-way, 64-byte lines
/// (`lscpu`; the cache simulation's second level stands for the L2 and everything beyond
/// it is "memory"). Latencies beyond the L1 hit (which LLVM's table already charges, 5
/// cycles): measured on that host with `scripts/cache-latency.c` (a random pointer chase,
/// one load per line, 20 M loads per size), converted to cycles with the L1 chase as the 5-cycle
/// unit: 16 KiB 1.72 ns per load (= 5 cycles), 512 KiB 6.2 ns (18 cycles: L2), 8 MiB
/// 178 ns (517 cycles: the L3 of a shared virtual machine, TLB misses included; 64 MiB 306
/// ns). So an L2 hit costs 13 cycles more than an L1 hit and a miss beyond L2 510 more
/// (docs/audit.md, "Cache misses").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheCosts {
    /// What the plugin simulates.
    pub geometry: proftrust_cachesim::Geometry,
    /// Cycles beyond an L1 hit of a load served by the second level.
    pub second: f64,
    /// Cycles beyond an L1 hit of a load served beyond it.
    pub memory: f64,
}

impl Default for CacheCosts {
    fn default() -> Self {
        CacheCosts {
            geometry: proftrust_cachesim::Geometry {
                line_size: 64,
                l1_size: 48 * 1024,
                l1_ways: 12,
                llc_size: 2 * 1024 * 1024,
                llc_ways: 16,
            },
            second: 13.0,
            memory: 510.0,
        }
    }
}

/// Per instruction of an exact profile: executions seen in the trace, and its loads served
/// by the second level and beyond.
struct MissCounter<'a> {
    exact: &'a ExactProfile,
    /// Trace module index -> the exact profile's.
    modules: Vec<Option<ModuleIdx>>,
    /// Per trace block key: the exact index of each of its instructions.
    keys: Vec<Option<Box<[Option<usize>]>>>,
    execs: Vec<u64>,
    second: Vec<u64>,
    memory: Vec<u64>,
    loads: u64,
}

impl MissCounter<'_> {
    fn indices(&self, b: &TraceBlock<'_>) -> Box<[Option<usize>]> {
        let m = b
            .module
            .and_then(|m| self.modules.get(m.0 as usize).copied().flatten());
        b.instructions
            .iter()
            .map(|&a| {
                let loc = Location { module: m, svma: a };
                self.exact
                    .instructions
                    .binary_search_by_key(&loc, |i| i.loc)
                    .ok()
            })
            .collect()
    }
}

impl BlockVisitor for MissCounter<'_> {
    fn module(&mut self, idx: ModuleIdx, module: &Module) {
        let k = idx.0 as usize;
        if self.modules.len() <= k {
            self.modules.resize(k + 1, None);
        }
        self.modules[k] = self
            .exact
            .modules
            .iter()
            .find(|(_, m)| m.path == module.path)
            .map(|(i, _)| i)
            .or_else(|| self.exact.modules.find_same_binary(module));
    }

    fn block(&mut self, b: &TraceBlock<'_>) {
        let fresh;
        let idx: &[Option<usize>] = match b.key {
            Some(k) => {
                let k = k as usize;
                if self.keys.len() <= k {
                    self.keys.resize(k + 1, None);
                }
                if self.keys[k].is_none() {
                    self.keys[k] = Some(self.indices(b));
                }
                self.keys[k].as_deref().expect("just set")
            }
            None => {
                fresh = self.indices(b);
                &fresh
            }
        };
        for i in idx.iter().flatten() {
            self.execs[*i] += 1;
        }
        for a in b.mem.iter().filter(|a| !a.store) {
            self.loads += 1;
            let Some(Some(i)) = idx.get(usize::from(a.insn)) else {
                continue;
            };
            match a.level {
                Some(proftrust_cachesim::LLC) => self.second[*i] += 1,
                Some(l) if l >= proftrust_cachesim::MEMORY => self.memory[*i] += 1,
                _ => {}
            }
        }
    }
}

/// What [`miss_latencies`] saw.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MissSummary {
    /// Loads traced.
    pub loads: u64,
    /// Loads served by the second level.
    pub second: u64,
    /// Loads served beyond it.
    pub memory: u64,
}

/// Per instruction of `e` (an exact count of `cmd`), its mean load latency beyond an L1 hit
/// in cycles per execution: `cmd` traced once more under QEMU with the plugin simulating the
/// data caches of `costs.geometry` (`QemuOptions::cache`), each load's level counted per
/// instruction, times [`CacheCosts::second`] or [`CacheCosts::memory`], over the
/// instruction's executions in that trace.
pub fn miss_latencies(
    e: &ExactProfile,
    cmd: &[OsString],
    qemu: &proftrust_exact::QemuOptions,
    costs: &CacheCosts,
    events: &dyn Events,
) -> Result<(Vec<f64>, MissSummary)> {
    let n = e.instructions.len();
    let mut v = MissCounter {
        exact: e,
        modules: Vec::new(),
        keys: Vec::new(),
        execs: vec![0; n],
        second: vec![0; n],
        memory: vec![0; n],
        loads: 0,
    };
    let o = proftrust_exact::QemuOptions {
        trace_memory: true,
        cache: Some(costs.geometry),
        cache_with_addresses: false,
        ..qemu.clone()
    };
    let pb = events.task(None, "simulating the data caches (qemu trace)");
    let outcome = proftrust_exact::trace_qemu(cmd, &o, &mut v)
        .context("the cache simulation's trace under QEMU failed")?;
    pb.finish();
    if let proftrust_model::RunOutcome::Interrupted { .. } = outcome {
        bail!("the cache simulation's trace was {outcome}");
    }
    let miss = (0..n)
        .map(|i| {
            if v.execs[i] == 0 {
                0.0
            } else {
                (v.second[i] as f64 * costs.second + v.memory[i] as f64 * costs.memory)
                    / v.execs[i] as f64
            }
        })
        .collect();
    let summary = MissSummary {
        loads: v.loads,
        second: v.second.iter().sum(),
        memory: v.memory.iter().sum(),
    };
    Ok((miss, summary))
}

/// Which time model `--truth-weight time-model` uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeModelKind {
    /// Per-block costs from `proftrust-uarch`'s dependency-aware scheduler, times the exact
    /// counts of a QEMU run with edges (this module). Default.
    #[default]
    Static,
    /// The virtual PMU's replay of the whole block trace with simulated caches (the older
    /// model: TIP on `proftrust-vpmu`'s out-of-order approximation; minutes per run).
    Trace,
}

impl proftrust_model::named::Named for TimeModelKind {
    const ALL: &'static [(Self, &'static str, &'static str)] = &[
        (
            TimeModelKind::Static,
            "static",
            "Each executed block timed once by a dependency-aware out-of-order model of a real core (LLVM's scheduling model: latencies, micro-ops, ports; register and store-to-load dependencies; a 2-bit branch predictor on the exact branch frequencies), times its exact count from one QEMU run with edges. Every load hits L1",
        ),
        (
            TimeModelKind::Trace,
            "trace",
            "The whole QEMU block trace replayed through the virtual PMU's out-of-order model with simulated caches (TIP attribution; minutes per run)",
        ),
    ];
}
proftrust_model::named_from_str!(TimeModelKind);

impl TimeModelKind {
    /// `static` or `trace` (its [`Named`](proftrust_model::named::Named) name).
    pub fn name(self) -> &'static str {
        proftrust_model::named::Named::name(self)
    }
}

/// How the time-model truth is formed, as printed in reports (`truth_weight_formula`).
pub fn formula(core: &Core, caches: bool, branches: bool) -> String {
    let loads = if caches {
        "data-cache misses from a simulation of the run's loads (L1D 48 KiB, L2 2 MiB; +13 cycles from L2, +510 beyond) as each load's mean extra latency in the scheduler"
    } else {
        "every load hits L1 (no cache simulation)"
    };
    let predictor = if branches {
        "counted per branch by a TAGE / ITTAGE-like / return-stack predictor the QEMU plugin ran on the actual branch outcomes"
    } else {
        "2-bit counter / last-target predictor on the exact branch frequencies"
    };
    format!(
        "cycles of an instruction = its exact count x its cost per execution in proftrust-uarch's out-of-order model of {}: each executed block timed once, after its most likely history from the exact edge counts, with register and store-to-load dependencies, micro-ops, port pressure and latencies from LLVM's scheduling model, at most one taken branch per cycle, TIP attribution of retirement cycles; plus branch mispredictions ({predictor}) x (resolution time + MispredictPenalty {}); {loads}",
        core.name, core.mispredict_penalty
    )
}

/// What [`add_time_column`] did, for notes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelSummary {
    /// Modelled cycles of the whole run.
    pub cycles: f64,
    /// Executed instructions.
    pub instructions: u64,
    /// Expected branch mispredictions.
    pub mispredicts: f64,
    /// The mispredictions were counted by the plugin's predictor on the actual outcomes
    /// (the profile has `proftrust_model::BRANCH_MISSES_COLUMN`), not estimated from
    /// frequencies.
    pub simulated_branches: bool,
    /// Blocks timed.
    pub blocks: usize,
    /// Executed instructions whose form the core's table lacks.
    pub unknown: u64,
    /// Executed instructions in modules whose code could not be read (1 cycle each).
    pub uncoded: u64,
    /// Modules whose code could not be read.
    pub missing_modules: Vec<String>,
    /// Cycles the data-cache misses added (`--time-caches`; 0 without).
    pub miss_cycles: f64,
}

/// Reads the executable sections of the ELF file at `path`.
fn module_code(path: &Path) -> Option<ModuleCode> {
    use object::{Object, ObjectSection, SectionKind};
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let sections = file
        .sections()
        .filter(|s| s.kind() == SectionKind::Text)
        .filter_map(|s| Some((s.address(), s.data().ok()?.to_vec())))
        .collect::<Vec<_>>();
    (!sections.is_empty()).then(|| ModuleCode::new(sections))
}

/// Adds the time model's columns to an exact profile with edges: `tip_cycles`
/// (`proftrust_metrics::TIME_MODEL_COLUMN`, each instruction's modelled cycles, rounded) and
/// `mispredicts` (expected branch mispredictions). Each module's code is read from
/// `locate(path)` (the module's binary on this machine), or its recorded path.
pub fn add_time_column(
    e: &mut ExactProfile,
    core: &Core,
    miss: &[f64],
    locate: &dyn Fn(&proftrust_model::Module) -> Option<std::path::PathBuf>,
    events: &dyn Events,
) -> Result<ModelSummary> {
    if e.edges.is_empty() && e.instructions.len() > 1 {
        bail!("the exact profile has no edges: the time model needs the block-to-block edge counts (count again with `proftrust truth` without --no-edges, or QEMU's backend)");
    }
    e.normalize();
    let mut summary = ModelSummary::default();
    let code: Vec<Option<ModuleCode>> = e
        .modules
        .iter()
        .map(|(_, m)| {
            if m.path.starts_with('[') {
                return None;
            }
            let c = locate(m)
                .as_deref()
                .and_then(module_code)
                .or_else(|| module_code(Path::new(&m.path)));
            if c.is_none() {
                summary.missing_modules.push(m.path.clone());
            }
            c
        })
        .collect();
    let pb = events.task(None, "timing the blocks (time model)");
    let run = model_run_with_misses(e, &code, core, &ModelOptions::default(), miss);
    pb.finish();
    let col = proftrust_metrics::TIME_MODEL_COLUMN.to_string();
    let names = &mut e.extra_cost_names;
    let (ti, mi) = (
        names.iter().position(|n| *n == col).unwrap_or_else(|| {
            names.push(col.clone());
            names.len() - 1
        }),
        names
            .iter()
            .position(|n| n == "mispredicts")
            .unwrap_or_else(|| {
                names.push("mispredicts".into());
                names.len() - 1
            }),
    );
    let width = names.len();
    e.extra_costs.resize(e.instructions.len(), Vec::new());
    for (k, row) in e.extra_costs.iter_mut().enumerate() {
        row.resize(width, 0);
        row[ti] = run.cycles[k].round() as u64;
        row[mi] = run.mispredicts[k].round() as u64;
    }
    summary.cycles = run.cycles.iter().sum();
    summary.mispredicts = run.mispredicts.iter().sum();
    summary.instructions = e.total_instructions;
    summary.blocks = run.blocks;
    summary.unknown = run.unknown_executions;
    summary.uncoded = run.uncoded_executions;
    summary.miss_cycles = run.miss_cycles;
    summary.simulated_branches = run.simulated_branches;
    Ok(summary)
}

/// A note on what the model did: `time model (Intel Golden Cove ...): 1.2e9 cycles for
/// 3.4e9 instructions (IPC 2.83), 12345 blocks, 1.2e7 mispredictions; ...`.
pub fn summary_note(core: &Core, s: &ModelSummary) -> String {
    let mut t = format!(
        "time model ({}): {:.4e} cycles for {} instructions (IPC {:.2}), {} blocks timed, {:.3e} branch mispredictions ({})",
        core.name,
        s.cycles,
        s.instructions,
        s.instructions as f64 / s.cycles.max(1.0),
        s.blocks,
        s.mispredicts,
        if s.simulated_branches {
            "counted by the plugin's TAGE/ITTAGE-like predictor on the actual outcomes"
        } else {
            "estimated from branch frequencies"
        }
    );
    if s.miss_cycles > 0.0 {
        t.push_str(&format!(
            "; data-cache misses add {:.4e} cycles ({:.1}%)",
            s.miss_cycles,
            100.0 * s.miss_cycles / s.cycles.max(1.0)
        ));
    }
    if s.unknown > 0 {
        t.push_str(&format!(
            "; {} executions ({:.3}%) of forms LLVM's table lacks, taken as 1 micro-op of latency 1",
            s.unknown,
            100.0 * s.unknown as f64 / s.instructions.max(1) as f64
        ));
    }
    if s.uncoded > 0 {
        t.push_str(&format!(
            "; {} executions ({:.3}%) in modules whose code could not be read ({}), 1 cycle each",
            s.uncoded,
            100.0 * s.uncoded as f64 / s.instructions.max(1) as f64,
            s.missing_modules.join(", ")
        ));
    }
    t
}

/// The core named by `--core` (`sapphirerapids`, `znver4`).
pub fn core_named(name: &str) -> Result<Core> {
    let kind = CoreKind::parse(name).with_context(|| {
        format!("--core {name:?}: the modelled cores are sapphirerapids (Intel Golden Cove) and znver4 (AMD Zen 4)")
    })?;
    Ok(Core::new(kind))
}
