//! Correcting a whole sampled profile: the entry point for `proftrust correct` and `audit`.
//!
//! Input: the instruction and cycle estimates per location of a profile
//! ([`SampledProfile`], from a [`SampleSet`] with both events), the binaries
//! ([`Symbolizer`], opened by the caller) and the skid `S`. Output: corrected instruction
//! estimates per location ([`ProgramCorrection`]), with the same total.
//!
//! Two methods ([`Method`]):
//!
//! * [`Method::Flow`] (default): the whole-program flow formulation of [`crate::flow`] over
//!   every function of the modelled modules that has samples, plus the functions they call
//!   (closure), with shared libraries reached through PLT stubs as black boxes. Skid across
//!   calls, between loop-nesting levels and out of straight-line code is modelled.
//! * [`Method::Loops`]: seed 000 §2 as printed — each hot innermost loop on its own, with its
//!   simple loops ([`crate::correct`]); everything else keeps its raw estimate.
//!
//! No files are opened and no processes started here: the caller brings the profile and the
//! opened binaries.

use crate::correct::{problem_from_cfg, solve, Emulation, Solver};
use crate::flow::{
    solve_flow, BlackBox, Callee, FlowBlock, FlowFunction, FlowGraph, FlowOptions, Successor,
};
use crate::SkidError;
use proftrust_binary::{simple_loops, Binary, Flow, Function, Instr, Symbolizer};
use proftrust_model::{
    BlockId, Cfg, EdgeKind, EventKind, Location, ModuleIdx, ModuleTable, SampleSet, Svma,
};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Instruction and cycle estimates (samples x period) per location of one profile.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampledProfile {
    /// The modules locations refer to.
    pub modules: ModuleTable,
    /// `E_i`: instruction-event estimate per location.
    pub instructions: HashMap<Location, f64>,
    /// `C_i`: cycle-event estimate per location.
    pub cycles: HashMap<Location, f64>,
    /// Mean period of the cycle samples (0 when unknown).
    pub cycle_period: f64,
}

fn event_of(set: &SampleSet, kind: EventKind, what: &str) -> Result<u16, SkidError> {
    set.events
        .iter()
        .position(|e| e.kind == kind)
        .map(|e| e as u16)
        .ok_or_else(|| SkidError::Profile {
            what: format!(
                "the profile has no {what} event (events: {}); skid correction needs \
                 instruction and cycle samples of the same run (`proftrust record -e \
                 instructions,cycles` on a machine with a PMU, or `proftrust vpmu`)",
                set.events
                    .iter()
                    .map(|e| e.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}

/// Sums the periods of event `ev` per location; returns the mean period.
fn sum_event(
    set: &SampleSet,
    ev: u16,
    map: &mut HashMap<Location, f64>,
    remap: impl Fn(Location) -> Location,
) -> f64 {
    let (mut n, mut tot) = (0u64, 0.0);
    for s in set.samples.iter().filter(|s| s.event == ev) {
        *map.entry(remap(s.ip)).or_insert(0.0) += s.period as f64;
        n += 1;
        tot += s.period as f64;
    }
    if n > 0 {
        tot / n as f64
    } else {
        0.0
    }
}

impl SampledProfile {
    /// From one sample set holding an instructions event and a cycles event (the first of
    /// each kind is used).
    pub fn from_sample_set(set: &SampleSet) -> Result<SampledProfile, SkidError> {
        let ei = event_of(set, EventKind::Instructions, "instructions")?;
        let ec = event_of(set, EventKind::Cycles, "cycles")?;
        let mut p = SampledProfile {
            modules: set.modules.clone(),
            ..SampledProfile::default()
        };
        sum_event(set, ei, &mut p.instructions, |l| l);
        p.cycle_period = sum_event(set, ec, &mut p.cycles, |l| l);
        Ok(p)
    }

    /// From an instructions set and a cycles set of the same run: the cycle samples'
    /// modules are matched to the instruction set's by build-id, else file name.
    pub fn from_sample_sets(
        instructions: &SampleSet,
        cycles: &SampleSet,
    ) -> Result<SampledProfile, SkidError> {
        let ei = event_of(instructions, EventKind::Instructions, "instructions")?;
        let ec = event_of(cycles, EventKind::Cycles, "cycles")?;
        let mut p = SampledProfile {
            modules: instructions.modules.clone(),
            ..SampledProfile::default()
        };
        sum_event(instructions, ei, &mut p.instructions, |l| l);
        let mut map: HashMap<ModuleIdx, ModuleIdx> = HashMap::new();
        for (i, m) in cycles.modules.iter() {
            let j = p
                .modules
                .find_same_binary(m)
                .unwrap_or_else(|| p.modules.intern(m.clone()));
            map.insert(i, j);
        }
        p.cycle_period = sum_event(cycles, ec, &mut p.cycles, |l| Location {
            module: l.module.and_then(|m| map.get(&m).copied()),
            svma: l.svma,
        });
        Ok(p)
    }

    /// Total instruction estimate.
    pub fn total_instructions(&self) -> f64 {
        self.instructions.values().sum()
    }
}

/// How to correct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Method {
    /// Whole-program flow formulation ([`crate::flow`]). Default.
    #[default]
    Flow,
    /// Each hot innermost loop on its own (seed 000 §2 as printed).
    Loops {
        /// Solver.
        solver: Solver,
        /// Emulation of eq. 6.
        emulation: Emulation,
    },
}

/// How the corrected count of a black box is spread over its instructions (the model has
/// no CFG for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BoxSpread {
    /// Evenly over its sampled instructions: right for code that runs straight through (a
    /// library routine such as `exp`). Default.
    #[default]
    Uniform,
    /// In proportion to cycle samples (instruction samples without any): right when its
    /// CPIs are uniform, weighted toward slow instructions otherwise.
    Cycles,
}

impl proftrust_model::named::Named for BoxSpread {
    const ALL: &'static [(Self, &'static str, &'static str)] = &[
        (
            BoxSpread::Uniform,
            "uniform",
            "Evenly over its sampled instructions (code that runs straight through)",
        ),
        (
            BoxSpread::Cycles,
            "cycles",
            "In proportion to its cycle samples (uniform CPIs)",
        ),
    ];
}
proftrust_model::named_from_str!(BoxSpread);

/// Options of [`correct_profile`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ProgramOptions {
    /// Skid `S` in cycles. Default 0 (nothing to correct; give the measured skid).
    pub skid: f64,
    /// Method. Default [`Method::Flow`].
    pub method: Method,
    /// Modules whose code is modelled with CFGs. Default `None`: every module whose binary
    /// the symbolizer found and which is not a shared library (the program).
    pub modules: Option<Vec<ModuleIdx>>,
    /// Flow: functions with less than this share of the module's samples (instruction and
    /// cycle estimates together) are not modelled unless a modelled function calls them.
    /// Default 0 (every function with a sample).
    pub min_function_share: f64,
    /// Flow: at most this many basic blocks are modelled (the hottest functions first,
    /// then the functions they call). Default 3000.
    pub max_blocks: usize,
    /// Flow solver options.
    pub flow: FlowOptions,
    /// Flow: how a black box's corrected count is spread over its instructions. Default
    /// [`BoxSpread::Uniform`].
    pub box_spread: BoxSpread,
    /// Loops: a loop with less than this share of its module's instruction samples is left
    /// alone. Default 0.01.
    pub hot_share: f64,
    /// Loops: a loop with more simple loops than this is left alone (reported). Default 64.
    pub max_simple_loops: usize,
    /// Loops: seed of the Gibbs sampler. Default 0.
    pub seed: u64,
}

impl Default for ProgramOptions {
    fn default() -> Self {
        ProgramOptions {
            skid: 0.0,
            method: Method::Flow,
            modules: None,
            min_function_share: 0.0,
            max_blocks: 3000,
            flow: FlowOptions::default(),
            box_spread: BoxSpread::Uniform,
            hot_share: 0.01,
            max_simple_loops: 64,
            seed: 0,
        }
    }
}

/// One corrected loop ([`Method::Loops`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoopReport {
    /// Function (symbol) name.
    pub function: String,
    /// Header address.
    pub header: Svma,
    /// Blocks.
    pub blocks: usize,
    /// Simple loops.
    pub simple_loops: usize,
    /// `F` per simple loop.
    pub frequencies: Vec<f64>,
    /// `phi` of the raw fit.
    pub phi_start: f64,
    /// `phi` at the solution.
    pub phi: f64,
    /// Iterations (sweeps) run.
    pub iterations: usize,
    /// Whether the convergence rule was met.
    pub converged: bool,
}

/// Summary of a flow solve ([`Method::Flow`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowReport {
    /// Modelled functions, by symbol name.
    pub functions: Vec<String>,
    /// Black boxes (module file names).
    pub boxes: Vec<String>,
    /// Modelled blocks.
    pub blocks: usize,
    /// `phi` of the raw fit.
    pub phi_start: f64,
    /// `phi` at the solution.
    pub phi: f64,
    /// Outer iterations.
    pub iterations: usize,
    /// Whether the convergence rule was met.
    pub converged: bool,
    /// Largest relative conservation violation.
    pub max_conservation_error: f64,
}

/// One corrected block.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlockReport {
    /// Module of the block.
    #[serde(skip)]
    pub module: ModuleIdx,
    /// Function (symbol) name.
    pub function: String,
    /// First instruction.
    pub start: Svma,
    /// Instructions.
    pub instructions: usize,
    /// Raw instruction estimate of the block (sum over its instructions).
    pub raw: f64,
    /// Corrected (executions x instructions).
    pub corrected: f64,
}

/// The corrected profile.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgramCorrection {
    /// Skid used.
    pub skid: f64,
    /// Method used.
    pub method: Method,
    /// Seed (Gibbs).
    pub seed: u64,
    /// The modules that were modelled.
    pub modules: Vec<ModuleIdx>,
    /// Raw instruction estimate per location (a copy of the input).
    pub raw: HashMap<Location, f64>,
    /// Corrected instruction estimate per location: corrected where modelled, raw elsewhere.
    /// Modelled instructions without samples appear with their corrected estimate.
    pub corrected: HashMap<Location, f64>,
    /// Corrected blocks.
    pub blocks: Vec<BlockReport>,
    /// Corrected loops ([`Method::Loops`]).
    pub loops: Vec<LoopReport>,
    /// Flow solve summary ([`Method::Flow`]).
    pub flow: Option<FlowReport>,
    /// What was left alone and why.
    pub skipped: Vec<String>,
}

/// Instruction counts of one function, raw and corrected.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionCounts {
    /// Innermost inline frame's function name in a modelled binary, `[file]` for other modules.
    pub name: String,
    /// Raw instruction estimate.
    pub raw_instructions: f64,
    /// Corrected instruction estimate.
    pub corrected_instructions: f64,
}

/// The name seed 000 reports a location under: in a modelled module the innermost inline
/// frame's function (an inlined function counts on its own; the symbol when there is no
/// debug info; `MODULE!sub_ADDR` for a function recovered from an FDE; the address,
/// `prog+0x1234`, outside any function); `[file]` for the other modules (black boxes).
pub fn function_name(sym: &Symbolizer, modelled: &[ModuleIdx], loc: Location) -> String {
    if loc.module.is_some_and(|m| modelled.contains(&m)) {
        // A function recovered from an FDE has one frame named `MODULE!sub_ADDR`; code in
        // no function keeps its address (`prog+0x1234`), never a module-wide row.
        return match sym.frames(loc).first() {
            Some(fr) => fr.function.clone(),
            None => sym.function_name(loc),
        };
    }
    match loc.module.and_then(|m| sym.modules().get(m)) {
        Some(m) => m.bracketed_name(),
        None => "[unknown]".into(),
    }
}

impl ProgramCorrection {
    /// Raw and corrected instruction estimates per function (see [`function_name`]), by
    /// raw estimate, largest first.
    pub fn by_function(&self, sym: &Symbolizer) -> Vec<FunctionCounts> {
        let mut names: HashMap<Location, String> = HashMap::new();
        let mut acc: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        let mut name = |l: Location| -> String {
            names
                .entry(l)
                .or_insert_with(|| function_name(sym, &self.modules, l))
                .clone()
        };
        for (l, v) in &self.raw {
            acc.entry(name(*l)).or_default().0 += v;
        }
        for (l, v) in &self.corrected {
            acc.entry(name(*l)).or_default().1 += v;
        }
        let mut v: Vec<FunctionCounts> = acc
            .into_iter()
            .map(|(name, (r, c))| FunctionCounts {
                name,
                raw_instructions: r,
                corrected_instructions: c,
            })
            .collect();
        v.sort_by(|a, b| b.raw_instructions.total_cmp(&a.raw_instructions));
        v
    }
}

/// Modules modelled by default: found, not a shared library.
fn modelled_modules(p: &SampledProfile, sym: &Symbolizer, opts: &ProgramOptions) -> Vec<ModuleIdx> {
    match &opts.modules {
        Some(m) => m.clone(),
        None => p
            .modules
            .iter()
            .filter(|(i, _)| sym.binary(*i).is_some_and(|b| !b.is_shared_object()))
            .map(|(i, _)| i)
            .collect(),
    }
}

/// Corrects a profile (module doc). Errors name the problem: no samples in the modelled
/// modules, an invalid skid.
pub fn correct_profile(
    p: &SampledProfile,
    sym: &Symbolizer,
    opts: &ProgramOptions,
) -> Result<ProgramCorrection, SkidError> {
    if !(opts.skid.is_finite() && opts.skid >= 0.0) {
        return Err(SkidError::InvalidSkid { skid: opts.skid });
    }
    let modules = modelled_modules(p, sym, opts);
    // The model decodes the modelled binaries' code: another architecture's is refused in
    // one line (its functions and lines are named all the same, by `read` and `audit`).
    for m in &modules {
        if let Some(b) = sym.binary(*m) {
            b.require_x86_64("skid correction")
                .map_err(|e| SkidError::Profile {
                    what: e.to_string(),
                })?;
        }
    }
    let in_modelled = |l: &Location| l.module.is_some_and(|m| modules.contains(&m));
    let modelled_total: f64 = p
        .instructions
        .iter()
        .filter(|(l, _)| in_modelled(l))
        .map(|(_, v)| v)
        .sum();
    if modelled_total <= 0.0 {
        let names: Vec<String> = modules
            .iter()
            .filter_map(|m| p.modules.get(*m).map(|x| x.file_name().to_string()))
            .collect();
        return Err(SkidError::Profile {
            what: format!(
                "no instruction samples fall in the modelled module(s) [{}]; pass the \
                 profiled program's binary (modules are matched by build-id, else file name)",
                names.join(", ")
            ),
        });
    }
    let mut out = ProgramCorrection {
        skid: opts.skid,
        method: opts.method,
        seed: opts.seed,
        modules: modules.clone(),
        raw: p.instructions.clone(),
        corrected: p.instructions.clone(),
        blocks: Vec::new(),
        loops: Vec::new(),
        flow: None,
        skipped: Vec::new(),
    };
    match opts.method {
        Method::Flow => correct_flow(p, sym, &modules, opts, &mut out)?,
        Method::Loops { solver, emulation } => {
            for &m in &modules {
                if let Some(bin) = sym.binary(m) {
                    correct_loops(p, m, bin, solver, emulation, opts, &mut out)?;
                }
            }
        }
    }
    Ok(out)
}

fn est(map: &HashMap<Location, f64>, m: ModuleIdx, a: Svma) -> f64 {
    map.get(&Location::new(m, a.0)).copied().unwrap_or(0.0)
}

/// Seed 000 §2 per hot innermost loop (what `correct` did before the flow method).
fn correct_loops(
    p: &SampledProfile,
    m: ModuleIdx,
    bin: &Binary,
    solver: Solver,
    emulation: Emulation,
    opts: &ProgramOptions,
    out: &mut ProgramCorrection,
) -> Result<(), SkidError> {
    let module_total: f64 = p
        .instructions
        .iter()
        .filter(|(l, _)| l.module == Some(m))
        .map(|(_, v)| v)
        .sum();
    let mut fsamples: BTreeMap<u64, f64> = BTreeMap::new();
    for (l, v) in &p.instructions {
        if l.module == Some(m) {
            if let Some(f) = bin.function_at(l.svma) {
                *fsamples.entry(f.start.0).or_insert(0.0) += v;
            }
        }
    }
    for (&start, &fs) in &fsamples {
        if fs < opts.hot_share * module_total {
            continue;
        }
        let Some(f) = bin.function_at(Svma(start)) else {
            continue;
        };
        let cfg = match bin.cfg(f) {
            Ok(c) => c,
            Err(e) => {
                out.skipped.push(format!("{}: no CFG ({e})", f.name));
                continue;
            }
        };
        for lp in &cfg.loops {
            if cfg.loops.iter().any(|o| o.parent == Some(lp.id)) {
                continue; // innermost loops only
            }
            let lsum: f64 = lp
                .blocks
                .iter()
                .flat_map(|b| cfg.block(*b).instructions.iter())
                .map(|s| est(&p.instructions, m, *s))
                .sum();
            if lsum < opts.hot_share * module_total {
                continue;
            }
            let header = cfg.block(lp.header).start;
            let sl = match simple_loops(&cfg, lp, opts.max_simple_loops) {
                Ok(s) => s,
                Err(e) => {
                    out.skipped
                        .push(format!("{} loop at {header}: {e}", f.name));
                    continue;
                }
            };
            let prob = problem_from_cfg(
                &cfg,
                lp,
                &sl,
                opts.skid,
                |s| est(&p.instructions, m, s),
                |s| est(&p.cycles, m, s),
            )?;
            let sol = solve(&prob.problem, solver, emulation, opts.seed)?;
            for (k, addr) in prob.addresses.iter().enumerate() {
                out.corrected
                    .insert(Location::new(m, addr.0), sol.instructions[k]);
            }
            let mut at = 0;
            for (bi, b) in prob.blocks.iter().enumerate() {
                let n = prob.problem.block_sizes[bi];
                out.blocks.push(BlockReport {
                    module: m,
                    function: f.name.clone(),
                    start: cfg.block(*b).start,
                    instructions: n,
                    raw: prob.problem.sampled_instructions[at..at + n].iter().sum(),
                    corrected: sol.instructions[at..at + n].iter().sum(),
                });
                at += n;
            }
            out.loops.push(LoopReport {
                function: f.name.clone(),
                header,
                blocks: prob.blocks.len(),
                simple_loops: sl.len(),
                frequencies: sol.frequencies.clone(),
                phi_start: sol.phi_start,
                phi: sol.phi,
                iterations: sol.iterations,
                converged: sol.converged,
            });
        }
    }
    Ok(())
}

/// A function chosen for the flow model.
struct Modelled<'b> {
    module: ModuleIdx,
    bin: &'b Binary,
    func: Function,
    cfg: Cfg,
    instrs: HashMap<Svma, Instr>,
}

/// The module that exports `sym_name` among the profile's other modules with samples.
fn box_module(
    p: &SampledProfile,
    sym: &Symbolizer,
    modelled: &[ModuleIdx],
    with_samples: &HashSet<ModuleIdx>,
    sym_name: &str,
) -> Option<ModuleIdx> {
    let mut cands: Vec<ModuleIdx> = p
        .modules
        .iter()
        .map(|(i, _)| i)
        .filter(|i| !modelled.contains(i) && with_samples.contains(i))
        .collect();
    cands.sort();
    cands.into_iter().find(|&i| {
        sym.binary(i)
            .is_some_and(|b| b.function_by_name(sym_name).is_some())
    })
}

/// A modelled function of a [`ProgramGraph`].
#[derive(Debug, Clone, PartialEq)]
pub struct ModelledFunction {
    /// Its module.
    pub module: ModuleIdx,
    /// Symbol name.
    pub name: String,
    /// Instruction addresses per block, in [`FlowFunction::blocks`] order.
    pub blocks: Vec<Vec<Svma>>,
}

/// The flow graph of a profile and how it maps back to locations.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgramGraph {
    /// The graph ([`crate::flow`]).
    pub graph: FlowGraph,
    /// Per graph function: module, name, instruction addresses.
    pub functions: Vec<ModelledFunction>,
    /// Module of each black box.
    pub box_modules: Vec<ModuleIdx>,
    /// Modelled blocks.
    pub blocks: usize,
    /// Functions left out, and why.
    pub skipped: Vec<String>,
}

/// Builds the flow graph of a profile (the first half of [`correct_profile`] with
/// [`Method::Flow`]): every function of `modules` with samples (see
/// [`ProgramOptions::min_function_share`]) and, transitively, the functions they call or
/// tail-call, within [`ProgramOptions::max_blocks`]; modules reached through PLT stubs as
/// black boxes (the module among the profile's others, with samples, whose binary defines
/// the stub's symbol).
///
/// External callers: `main`, functions without a modelled caller, and — when a function
/// was left out — every function get an unknown count of calls from outside the model.
/// Otherwise a function is entered exactly as often as its modelled call sites run: calls
/// from functions without a single sample are taken to be negligible, and calls through
/// function pointers are not seen.
pub fn program_graph(
    p: &SampledProfile,
    sym: &Symbolizer,
    modules: &[ModuleIdx],
    opts: &ProgramOptions,
) -> Result<ProgramGraph, SkidError> {
    let seeds = sampled_functions(p, sym, modules, opts);
    let closure = Closure::of(sym, seeds, opts.max_blocks);
    if closure.chosen.is_empty() {
        return Err(SkidError::Profile {
            what: format!(
                "no function of the modelled modules could be modelled ({})",
                closure.skipped.join("; ")
            ),
        });
    }
    let (boxes, plt_box) = black_boxes(p, sym, modules, &closure.chosen);
    // 4. The flow graph.
    let mut graph = FlowGraph {
        functions: Vec::with_capacity(closure.chosen.len()),
        boxes: boxes.iter().map(|(_, b)| b.clone()).collect(),
        cycle_period: p.cycle_period,
    };
    for (k, md) in closure.chosen.iter().enumerate() {
        graph
            .functions
            .push(closure.flow_function(p, md, plt_box.get(&k).copied()));
    }
    let Closure {
        chosen,
        blocks,
        skipped,
        ..
    } = closure;
    Ok(ProgramGraph {
        graph,
        functions: chosen
            .iter()
            .map(|md| ModelledFunction {
                module: md.module,
                name: md.func.name.clone(),
                blocks: md
                    .cfg
                    .blocks
                    .iter()
                    .map(|b| b.instructions.clone())
                    .collect(),
            })
            .collect(),
        box_modules: boxes.iter().map(|(m, _)| *m).collect(),
        blocks,
        skipped,
    })
}

/// Step 1 of [`program_graph`]: the functions with samples (at least
/// [`ProgramOptions::min_function_share`] of their module's) of `modules`, hottest first.
fn sampled_functions(
    p: &SampledProfile,
    sym: &Symbolizer,
    modules: &[ModuleIdx],
    opts: &ProgramOptions,
) -> Vec<(ModuleIdx, u64)> {
    let mut fweight: HashMap<(ModuleIdx, u64), f64> = HashMap::new();
    let mut module_weight: HashMap<ModuleIdx, f64> = HashMap::new();
    for (l, v) in p.instructions.iter().chain(p.cycles.iter()) {
        let Some(m) = l.module else { continue };
        if !modules.contains(&m) {
            continue;
        }
        *module_weight.entry(m).or_default() += v;
        if let Some(f) = sym.binary(m).and_then(|b| b.function_at(l.svma)) {
            *fweight.entry((m, f.start.0)).or_default() += v;
        }
    }
    let mut seeds: Vec<((ModuleIdx, u64), f64)> = fweight
        .iter()
        .filter(|(k, v)| **v > 0.0 && **v >= opts.min_function_share * module_weight[&k.0])
        .map(|(k, v)| (*k, *v))
        .collect();
    seeds.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    seeds.into_iter().map(|(k, _)| k).collect()
}

/// Step 2 of [`program_graph`]: the functions modelled, the sampled ones and their closure
/// over direct calls and tail calls, within the block budget.
struct Closure<'b> {
    chosen: Vec<Modelled<'b>>,
    /// (module, start) -> index in `chosen`.
    index: HashMap<(ModuleIdx, u64), usize>,
    /// Modelled blocks.
    blocks: usize,
    /// A function was left out (every function then has external callers).
    dropped: bool,
    skipped: Vec<String>,
}

impl<'b> Closure<'b> {
    fn of(sym: &'b Symbolizer, seeds: Vec<(ModuleIdx, u64)>, max_blocks: usize) -> Self {
        let mut c = Closure {
            chosen: Vec::new(),
            index: HashMap::new(),
            blocks: 0,
            dropped: false,
            skipped: Vec::new(),
        };
        let mut queue: std::collections::VecDeque<(ModuleIdx, u64)> = seeds.into();
        while let Some((m, start)) = queue.pop_front() {
            if c.index.contains_key(&(m, start)) {
                continue;
            }
            let Some(bin) = sym.binary(m) else { continue };
            let Some(f) = bin.function_at(Svma(start)).filter(|f| f.start.0 == start) else {
                continue;
            };
            let Some(md) = c.model(m, bin, f, max_blocks) else {
                c.dropped = true;
                continue;
            };
            // Callees, in address order (the model's function order is deterministic).
            let mut by_addr: Vec<&Instr> = md.instrs.values().collect();
            by_addr.sort_by_key(|i| i.addr);
            for ins in by_addr {
                let t = match ins.flow {
                    Flow::Call | Flow::Jump => ins.target,
                    _ => None,
                };
                if let Some(t) = t {
                    if !f.contains(t) {
                        if let Some(g) = bin.function_at(t).filter(|g| g.start == t) {
                            queue.push_back((m, g.start.0));
                        }
                    }
                }
            }
            c.index.insert((m, start), c.chosen.len());
            c.chosen.push(md);
        }
        c
    }

    /// Function `f` of module `m` with its CFG and instructions, within the budget; `None`
    /// (the reason in `skipped`) when it cannot be modelled.
    fn model(
        &mut self,
        m: ModuleIdx,
        bin: &'b Binary,
        f: &Function,
        max_blocks: usize,
    ) -> Option<Modelled<'b>> {
        let cfg = match bin.cfg(f) {
            Ok(c) => c,
            Err(e) => {
                self.skipped.push(format!("{}: no CFG ({e})", f.name));
                return None;
            }
        };
        if self.blocks + cfg.blocks.len() > max_blocks {
            self.skipped.push(format!(
                "{}: over the budget of {} modelled blocks (raw estimates kept)",
                f.name, max_blocks
            ));
            return None;
        }
        let instrs: HashMap<Svma, Instr> = match bin.instructions(f) {
            Ok(v) => v.into_iter().map(|i| (i.addr, i)).collect(),
            Err(e) => {
                self.skipped
                    .push(format!("{}: cannot decode ({e})", f.name));
                return None;
            }
        };
        self.blocks += cfg.blocks.len();
        Some(Modelled {
            module: m,
            bin,
            func: f.clone(),
            cfg,
            instrs,
        })
    }

    /// The modelled function at `t` of `m`'s binary, else unknown.
    fn callee_at(&self, m: ModuleIdx, bin: &Binary, t: Svma) -> Callee {
        match bin
            .function_at(t)
            .filter(|g| g.start == t)
            .and_then(|g| self.index.get(&(m, g.start.0)))
        {
            Some(&k) => Callee::Function(k),
            None => Callee::Unknown,
        }
    }

    /// Step 4 of [`program_graph`]: one modelled function in the flow graph; `plt_box`:
    /// the black box its indirect jump reaches when it is a PLT stub.
    fn flow_function(
        &self,
        p: &SampledProfile,
        md: &Modelled<'_>,
        plt_box: Option<usize>,
    ) -> FlowFunction {
        let m = md.module;
        let mut fblocks = Vec::with_capacity(md.cfg.blocks.len());
        for b in &md.cfg.blocks {
            let mut calls = Vec::new();
            for (j, a) in b.instructions.iter().enumerate() {
                if let Some(ins) = md.instrs.get(a) {
                    match ins.flow {
                        Flow::Call => {
                            let cl = ins
                                .target
                                .map_or(Callee::Unknown, |t| self.callee_at(m, md.bin, t));
                            calls.push((j, cl));
                        }
                        Flow::IndirectCall => calls.push((j, Callee::Indirect)),
                        _ => {}
                    }
                }
            }
            let last = md.instrs.get(&b.last());
            let successors = md
                .cfg
                .successors(b.id)
                .map(|e| self.successor(md, e.kind, e.to, last, plt_box))
                .collect();
            fblocks.push(FlowBlock {
                sampled_instructions: b
                    .instructions
                    .iter()
                    .map(|a| est(&p.instructions, m, *a))
                    .collect(),
                sampled_cycles: b
                    .instructions
                    .iter()
                    .map(|a| est(&p.cycles, m, *a))
                    .collect(),
                calls,
                successors,
            });
        }
        FlowFunction {
            name: md.func.name.clone(),
            blocks: fblocks,
            external_callers: self.dropped || md.func.name == "main",
            loops: md
                .cfg
                .loops
                .iter()
                .map(|lp| lp.blocks.iter().map(|b| b.0 as usize).collect())
                .collect(),
        }
    }

    /// A CFG edge as a flow successor: a block, a return, a tail call (direct, or through
    /// a PLT stub's indirect jump to its black box), else leaving the model.
    fn successor(
        &self,
        md: &Modelled<'_>,
        kind: EdgeKind,
        to: Option<BlockId>,
        last: Option<&Instr>,
        plt_box: Option<usize>,
    ) -> Successor {
        match (kind, to) {
            (_, Some(t)) => Successor::Block(t.0 as usize),
            (EdgeKind::Return, None) => Successor::Return,
            (EdgeKind::Exit, None) => match last {
                Some(ins) if ins.flow == Flow::Jump => match ins.target {
                    Some(t) => match self.callee_at(md.module, md.bin, t) {
                        Callee::Unknown => Successor::Leave,
                        c => Successor::TailCall(c),
                    },
                    None => Successor::Leave,
                },
                Some(ins) if ins.flow == Flow::IndirectJump => match plt_box {
                    Some(x) => Successor::TailCall(Callee::Box(x)),
                    None => Successor::TailCall(Callee::Unknown),
                },
                _ => Successor::Leave,
            },
            _ => Successor::Leave,
        }
    }
}

/// Step 3 of [`program_graph`]: black boxes, the modules reached through the PLT stubs
/// of `chosen`, with their samples; and each stub's box (by index in `chosen`).
fn black_boxes(
    p: &SampledProfile,
    sym: &Symbolizer,
    modules: &[ModuleIdx],
    chosen: &[Modelled<'_>],
) -> (Vec<(ModuleIdx, BlackBox)>, HashMap<usize, usize>) {
    let with_samples: HashSet<ModuleIdx> = p
        .instructions
        .iter()
        .chain(p.cycles.iter())
        .filter(|(_, v)| **v > 0.0)
        .filter_map(|(l, _)| l.module)
        .collect();
    let mut box_of_module: BTreeMap<ModuleIdx, usize> = BTreeMap::new();
    let mut plt_box: HashMap<usize, usize> = HashMap::new();
    for (k, md) in chosen.iter().enumerate() {
        if let Some(name) = md.func.name.strip_suffix("@plt") {
            if let Some(bm) = box_module(p, sym, modules, &with_samples, name) {
                let n = box_of_module.len();
                let b = *box_of_module.entry(bm).or_insert(n);
                plt_box.insert(k, b);
            }
        }
    }
    let mut boxes: Vec<(ModuleIdx, BlackBox)> = box_of_module
        .keys()
        .map(|&m| {
            let name = p
                .modules
                .get(m)
                .map(|x| x.file_name().to_string())
                .unwrap_or_default();
            (
                m,
                BlackBox {
                    name,
                    sampled_instructions: 0.0,
                    sampled_cycles: 0.0,
                },
            )
        })
        .collect();
    boxes.sort_by_key(|(m, _)| box_of_module[m]);
    for (l, v) in &p.instructions {
        if let Some(b) = l.module.and_then(|m| box_of_module.get(&m)) {
            boxes[*b].1.sampled_instructions += v;
        }
    }
    for (l, v) in &p.cycles {
        if let Some(b) = l.module.and_then(|m| box_of_module.get(&m)) {
            boxes[*b].1.sampled_cycles += v;
        }
    }
    (boxes, plt_box)
}

fn correct_flow(
    p: &SampledProfile,
    sym: &Symbolizer,
    modules: &[ModuleIdx],
    opts: &ProgramOptions,
    out: &mut ProgramCorrection,
) -> Result<(), SkidError> {
    let pg = program_graph(p, sym, modules, opts)?;
    out.skipped.extend(pg.skipped.iter().cloned());
    let graph = &pg.graph;
    let sol = solve_flow(graph, opts.skid, &opts.flow)?;
    // 5. Back to locations.
    for (k, md) in pg.functions.iter().enumerate() {
        for (bi, b) in md.blocks.iter().enumerate() {
            let x = sol.block_counts[k][bi];
            let mut raw = 0.0;
            for a in b {
                let l = Location::new(md.module, a.0);
                raw += p.instructions.get(&l).copied().unwrap_or(0.0);
                if x > 0.0 || out.corrected.contains_key(&l) {
                    out.corrected.insert(l, x);
                }
            }
            out.blocks.push(BlockReport {
                module: md.module,
                function: md.name.clone(),
                start: b.first().copied().unwrap_or(Svma(0)),
                instructions: b.len(),
                raw,
                corrected: x * b.len() as f64,
            });
        }
    }
    for (bi, (m, bx)) in pg.box_modules.iter().zip(&graph.boxes).enumerate() {
        let y = sol.box_counts[bi];
        // Within a black box nothing is known about the path (module doc of `flow`):
        // spread its corrected count over its sampled instructions (see `BoxSpread`).
        let mut keys: Vec<Location> = p
            .instructions
            .iter()
            .chain(p.cycles.iter())
            .filter(|(l, v)| l.module == Some(*m) && **v > 0.0)
            .map(|(l, _)| *l)
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        keys.sort();
        let (src, tot): (Option<&HashMap<Location, f64>>, f64) = match opts.box_spread {
            BoxSpread::Uniform => (None, keys.len() as f64),
            BoxSpread::Cycles if bx.sampled_cycles > 0.0 => (Some(&p.cycles), bx.sampled_cycles),
            BoxSpread::Cycles => (Some(&p.instructions), bx.sampled_instructions),
        };
        if tot <= 0.0 {
            continue;
        }
        for l in keys {
            let w = src.map_or(1.0, |m| m.get(&l).copied().unwrap_or(0.0));
            out.corrected.insert(l, y * w / tot);
        }
    }
    out.flow = Some(FlowReport {
        functions: pg.functions.iter().map(|m| m.name.clone()).collect(),
        boxes: graph.boxes.iter().map(|b| b.name.clone()).collect(),
        blocks: pg.blocks,
        phi_start: sol.phi_start,
        phi: sol.phi,
        iterations: sol.iterations,
        converged: sol.converged,
        max_conservation_error: sol.max_conservation_error,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proftrust_model::{EventDesc, Module, Sample, SamplingConfig};

    fn set(kinds: &[EventKind]) -> SampleSet {
        let mut s = SampleSet::default();
        let m = s.modules.intern(Module::new("/x/prog"));
        for (k, kind) in kinds.iter().enumerate() {
            s.events.push(EventDesc {
                name: format!("{kind:?}"),
                kind: *kind,
                config: SamplingConfig::default(),
            });
            for (a, period) in [(0x10u64, 100u64), (0x14, 100), (0x10, 50)] {
                s.samples.push(Sample {
                    event: k as u16,
                    pid: 1,
                    tid: 1,
                    time: 0,
                    cpu: 0,
                    period: period * (k as u64 + 1),
                    ip: Location::new(m, a),
                    callchain: Vec::new(),
                    branches: Vec::new(),
                });
            }
        }
        s
    }

    /// Estimates are sums of periods per location; the mean cycle period is kept.
    #[test]
    fn sampled_profile_sums_periods() {
        let p =
            SampledProfile::from_sample_set(&set(&[EventKind::Instructions, EventKind::Cycles]))
                .unwrap();
        let m = p.modules.find_by_file_name("prog").unwrap();
        assert_eq!(p.instructions[&Location::new(m, 0x10)], 150.0);
        assert_eq!(p.instructions[&Location::new(m, 0x14)], 100.0);
        assert_eq!(p.cycles[&Location::new(m, 0x10)], 300.0);
        // Cycle periods 200, 200, 100.
        assert!((p.cycle_period - 500.0 / 3.0).abs() < 1e-9);
        assert_eq!(p.total_instructions(), 250.0);
    }

    /// A profile without a cycles event cannot be corrected: the error says what is missing
    /// and how to get it.
    #[test]
    fn profile_without_cycles_is_a_clear_error() {
        let e = SampledProfile::from_sample_set(&set(&[EventKind::Instructions])).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("no cycles event"), "{msg}");
        assert!(msg.contains("instructions,cycles"), "{msg}");
    }
}
