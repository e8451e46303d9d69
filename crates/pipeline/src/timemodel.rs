//! The time truth at the speed of an exact count (`audit --truth-weight time-model`): the
//! program counted once under QEMU with edges (`proftrust_exact::count_qemu`), then every
//! executed block timed once by `proftrust-uarch`'s dependency-aware scheduler for a real
//! core and multiplied by its exact count. Also applies to an exact file that has edges
//! (`proftrust truth` writes them by default).

use crate::error::{bail, Context, Result};
use crate::Events;
use proftrust_model::ExactProfile;
use proftrust_uarch::{model_run, Core, CoreKind, ModelOptions, ModuleCode};
use std::path::Path;

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

impl TimeModelKind {
    /// `static` or `trace`.
    pub fn name(self) -> &'static str {
        match self {
            TimeModelKind::Static => "static",
            TimeModelKind::Trace => "trace",
        }
    }
}

/// How the time-model truth is formed, as printed in reports (`truth_weight_formula`).
pub fn formula(core: &Core) -> String {
    format!(
        "cycles of an instruction = its exact count x its cost per execution in proftrust-uarch's out-of-order model of {}: each executed block timed once, after its most likely history from the exact edge counts, with register and store-to-load dependencies, micro-ops, port pressure and latencies from LLVM's scheduling model, TIP attribution of retirement cycles; plus branch mispredictions (2-bit counter / last-target predictor on the exact branch frequencies) x (resolution time + MispredictPenalty {}); every load hits L1 (no cache simulation)",
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
    /// Blocks timed.
    pub blocks: usize,
    /// Executed instructions whose form the core's table lacks.
    pub unknown: u64,
    /// Executed instructions in modules whose code could not be read (1 cycle each).
    pub uncoded: u64,
    /// Modules whose code could not be read.
    pub missing_modules: Vec<String>,
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
    let run = model_run(e, &code, core, &ModelOptions::default());
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
    Ok(summary)
}

/// A note on what the model did: `time model (Intel Golden Cove ...): 1.2e9 cycles for
/// 3.4e9 instructions (IPC 2.83), 12345 blocks, 1.2e7 mispredictions; ...`.
pub fn summary_note(core: &Core, s: &ModelSummary) -> String {
    let mut t = format!(
        "time model ({}): {:.4e} cycles for {} instructions (IPC {:.2}), {} blocks timed, {:.3e} branch mispredictions",
        core.name,
        s.cycles,
        s.instructions,
        s.instructions as f64 / s.cycles.max(1.0),
        s.blocks,
        s.mispredicts
    );
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
