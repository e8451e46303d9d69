//! `correct`: undo counter skid in an instruction profile (seed 000 §2).
//!
//! The work is done by `proftrust_skid::program::correct_profile` (the same entry point the
//! audit's `correct_skid` uses): with the flow solver (default) the whole program is
//! corrected at once — every sampled function of the binary and the functions it calls,
//! shared libraries reached through PLT stubs as black boxes; with a loop solver (`lsq`,
//! `gibbs`) each hot innermost loop is corrected on its own with its simple loops and
//! everything else keeps its raw estimate. Functions are named by the innermost inline
//! frame; code in other modules is grouped per module. Cycles are not corrected (a constant
//! skid does not bias cycle samples, seed 000 §2.1), so corrected IPC = corrected
//! instructions / sampled cycles.

use crate::error::{bail, bail_options, Context, Result};
use crate::{load, Events};
use proftrust_binary::Symbolizer;
use proftrust_model::{ExactProfile, Location, Module, ModuleIdx};
use proftrust_report::correct::{
    CorrectMetrics, CorrectReport, CorrectedBlock, CorrectedFunctionRow, CorrectedInstruction,
    CorrectedLoop, FlowSummary,
};
pub use proftrust_skid::correct::{Emulation, Solver};
pub use proftrust_skid::program::BoxSpread;
use proftrust_skid::program::{
    correct_profile, function_name, Method, ProgramCorrection, ProgramOptions, SampledProfile,
};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

/// The samples to correct.
#[derive(Debug, Clone, PartialEq)]
pub enum CorrectInput {
    /// One file with an instructions and a cycles event of one run (a `proftrust vpmu`
    /// file, perf.data of `perf record -e instructions,cycles`).
    Samples(PathBuf),
    /// Two files: instruction samples and cycle samples.
    Pair {
        /// Instruction samples.
        instructions: PathBuf,
        /// Cycle samples.
        cycles: PathBuf,
    },
}

/// Settings of [`execute`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CorrectOptions {
    /// The samples. Default: `Samples("")` (an error: give a file).
    pub input: CorrectInput,
    /// The profiled binary whose code is modelled. Default empty (an error: give it).
    pub binary: PathBuf,
    /// Skid to undo, in cycles. Default 0.
    pub skid: f64,
    /// Width of the uniform skid spread the emulation averages over, cycles. Default 1.
    pub skid_spread: f64,
    /// Exact counts to compare the raw and corrected profiles with. Default none.
    pub truth: Option<PathBuf>,
    /// The whole-program flow solver (default), or a solver of each hot loop.
    pub solver: SolverChoice,
    /// Emulation of the loop solvers. Default mixed.
    pub emulation: Emulation,
    /// Seed of the Gibbs sampler (stored in the report). Default [`crate::DEFAULT_SEED`].
    pub seed: u64,
    /// Loop solvers: loops with at least this share of the samples. Default 0.01.
    pub hot_share: f64,
    /// Loop solvers: at most this many simple loops per loop. Default 64.
    pub max_simple_loops: usize,
    /// Flow solver: at most this many basic blocks (hottest functions first). Default 3000.
    pub max_blocks: usize,
    /// Flow solver: how a black box's corrected count is spread. Default uniform.
    pub box_spread: BoxSpread,
}

/// Which solver `correct` runs: the whole-program flow formulation, or a per-loop
/// solver of seed 000 on each hot innermost loop. Named as the report and `--solver` name
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SolverChoice {
    /// The whole-program flow formulation.
    #[default]
    Flow,
    /// A loop solver on each hot loop.
    Loops(Solver),
}

impl proftrust_model::named::Named for SolverChoice {
    const ALL: &'static [(Self, &'static str, &'static str)] = &[
        (
            SolverChoice::Flow,
            "flow",
            "Whole-program flow formulation (interprocedural; default)",
        ),
        (
            SolverChoice::Loops(Solver::Gibbs),
            "gibbs",
            "Per hot innermost loop: Gibbs sampling (paper 000 Algorithm 1)",
        ),
        (
            SolverChoice::Loops(Solver::Lsq),
            "lsq",
            "Per hot innermost loop: alternating non-negative least squares",
        ),
    ];
}
proftrust_model::named_from_str!(SolverChoice);

impl Default for CorrectOptions {
    fn default() -> Self {
        CorrectOptions {
            input: CorrectInput::Samples(PathBuf::new()),
            binary: PathBuf::new(),
            skid: 0.0,
            skid_spread: 1.0,
            truth: None,
            solver: SolverChoice::Flow,
            emulation: Emulation::Mixed,
            seed: crate::DEFAULT_SEED,
            hot_share: 0.01,
            max_simple_loops: 64,
            max_blocks: 3000,
            box_spread: BoxSpread::Uniform,
        }
    }
}

/// What a correction produced besides its report, for exports ([`execute_with_data`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CorrectData {
    /// The modules the locations refer to (the samples' modules).
    pub modules: proftrust_model::ModuleTable,
    /// The corrected instruction estimate per location.
    pub corrected: HashMap<Location, f64>,
    /// The truth, when `truth` was given.
    pub truth: Option<ExactProfile>,
}

/// Corrects the samples and returns the report. Notes and progress go to `events`.
pub fn execute(a: &CorrectOptions, events: &dyn Events) -> Result<CorrectReport> {
    execute_with_data(a, events).map(|(r, _)| r)
}

/// [`execute`], also returning the corrected profile.
pub fn execute_with_data(
    a: &CorrectOptions,
    events: &dyn Events,
) -> Result<(CorrectReport, CorrectData)> {
    if !(a.skid.is_finite() && a.skid >= 0.0) {
        bail_options!("--skid must be a number of cycles >= 0");
    }
    if !(a.skid_spread.is_finite() && a.skid_spread >= 0.0) {
        bail_options!("--skid-spread must be a number of cycles >= 0");
    }
    let profile = read_profile(a, events)?;
    if !a.binary.is_file() {
        bail!(
            "cannot open the binary {}: no such file",
            a.binary.display()
        );
    }
    let sym = Symbolizer::new(&profile.modules, std::slice::from_ref(&a.binary));
    let bname = a
        .binary
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let modelled = modelled_modules(a, &profile, &sym)?;
    let truth = read_truth(a, &profile, &modelled)?;
    let opts = program_options(a, &modelled);
    let pb = events.task(None, "correcting");
    let cor = crate::with_big_stack(|| correct_profile(&profile, &sym, &opts))?
        .with_context(|| format!("cannot correct the profile of {bname}"))?;
    pb.finish();
    let mut names = Namer {
        sym: &sym,
        modelled: &modelled,
        names: HashMap::new(),
    };
    let totals = Totals::new(&cor, &profile, truth.as_ref(), &mut names);
    let report = CorrectReport {
        binary: a.binary.display().to_string(),
        skid: a.skid,
        solver: a.solver.to_string(),
        emulation: proftrust_model::named::Named::name(a.emulation).to_string(),
        seed: a.seed,
        functions: totals.rows(),
        loops: loops(&cor),
        flow: cor.flow.as_ref().map(|f| FlowSummary {
            functions: f.functions.clone(),
            boxes: f.boxes.clone(),
            blocks: f.blocks,
            phi_start: f.phi_start,
            phi: f.phi,
            iterations: f.iterations,
            converged: f.converged,
            max_conservation_error: f.max_conservation_error,
        }),
        blocks: blocks(&cor),
        instructions: changed_instructions(&cor, &mut names),
        skipped: cor.skipped.clone(),
        metrics: match truth {
            Some(_) => Some(totals.metrics(&cor)?),
            None => None,
        },
    };
    let data = CorrectData {
        modules: profile.modules.clone(),
        corrected: cor.corrected,
        truth,
    };
    Ok((report, data))
}

/// The samples of `a.input`: one file of instructions and cycles, or a pair of files.
fn read_profile(a: &CorrectOptions, events: &dyn Events) -> Result<SampledProfile> {
    let read = |p: &PathBuf| load::samples(p, std::slice::from_ref(&a.binary), events);
    Ok(match &a.input {
        CorrectInput::Samples(p) => SampledProfile::from_sample_set(&read(p)?)
            .with_context(|| format!("{}", p.display()))?,
        CorrectInput::Pair {
            instructions: i,
            cycles: c,
        } => SampledProfile::from_sample_sets(&read(i)?, &read(c)?)
            .with_context(|| format!("{} and {}", i.display(), c.display()))?,
    })
}

/// The profile's modules that are `--binary` (an error naming the symbolizer's warnings
/// when none is).
fn modelled_modules(
    a: &CorrectOptions,
    profile: &SampledProfile,
    sym: &Symbolizer,
) -> Result<Vec<ModuleIdx>> {
    let modelled: Vec<ModuleIdx> = profile
        .modules
        .iter()
        .filter(|(i, _)| {
            sym.binary(*i)
                .is_some_and(|b| b.path() == a.binary.as_path())
        })
        .map(|(i, _)| i)
        .collect();
    if modelled.is_empty() {
        let w = sym.warnings().join("; ");
        bail!(
            "no module of the profile is {} (modules are matched by build-id, else file \
             name; is --binary the profiled program?){}",
            a.binary.display(),
            if w.is_empty() {
                String::new()
            } else {
                format!(": {w}")
            }
        );
    }
    Ok(modelled)
}

/// The truth, read and checked before the (slow) correction: it must count the corrected
/// binary, the same check `audit` makes.
fn read_truth(
    a: &CorrectOptions,
    profile: &SampledProfile,
    modelled: &[ModuleIdx],
) -> Result<Option<ExactProfile>> {
    let Some(p) = &a.truth else { return Ok(None) };
    let t = load::exact(p, std::slice::from_ref(&a.binary))?;
    let scope: Vec<Module> = modelled
        .iter()
        .filter_map(|&m| profile.modules.get(m).cloned())
        .collect();
    proftrust_metrics::check_same_program(&t, &scope)
        .with_context(|| format!("--truth {}", p.display()))?;
    Ok(Some(t))
}

/// The correction's options from the command's.
fn program_options(a: &CorrectOptions, modelled: &[ModuleIdx]) -> ProgramOptions {
    let mut opts = ProgramOptions::default();
    opts.skid = a.skid;
    opts.method = match a.solver {
        SolverChoice::Flow => Method::Flow,
        SolverChoice::Loops(solver) => Method::Loops {
            solver,
            emulation: a.emulation,
        },
    };
    opts.modules = Some(modelled.to_vec());
    opts.hot_share = a.hot_share;
    opts.max_simple_loops = a.max_simple_loops;
    opts.max_blocks = a.max_blocks;
    opts.flow.skid_spread = a.skid_spread;
    opts.box_spread = a.box_spread;
    opts.seed = a.seed;
    opts
}

/// Function names of locations, looked up once each.
struct Namer<'a> {
    sym: &'a Symbolizer,
    modelled: &'a [ModuleIdx],
    names: HashMap<Location, String>,
}

impl Namer<'_> {
    fn name(&mut self, l: Location) -> String {
        let (sym, modelled) = (self.sym, self.modelled);
        self.names
            .entry(l)
            .or_insert_with(|| function_name(sym, modelled, l))
            .clone()
    }
}

/// The per-function sums of the correction and of the truth.
struct Totals {
    /// (raw instructions, corrected instructions, cycles) per function.
    per_fn: BTreeMap<String, (f64, f64, f64)>,
    /// (instructions, cycles) per function of the truth.
    true_fn: BTreeMap<String, (u64, u64)>,
    /// The truth's instructions per location.
    true_instr: HashMap<Location, u64>,
}

impl Totals {
    fn new(
        cor: &ProgramCorrection,
        profile: &SampledProfile,
        truth: Option<&ExactProfile>,
        names: &mut Namer<'_>,
    ) -> Totals {
        // Summed in address order: a hash map's order would change the last bits of the
        // sums from run to run.
        let sorted = |m: &HashMap<Location, f64>| -> Vec<(Location, f64)> {
            let mut v: Vec<(Location, f64)> = m.iter().map(|(l, x)| (*l, *x)).collect();
            v.sort_by_key(|(l, _)| *l);
            v
        };
        let mut per_fn: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new();
        for (l, v) in sorted(&cor.raw) {
            per_fn.entry(names.name(l)).or_default().0 += v;
        }
        for (l, v) in sorted(&cor.corrected) {
            per_fn.entry(names.name(l)).or_default().1 += v;
        }
        for (l, v) in sorted(&profile.cycles) {
            per_fn.entry(names.name(l)).or_default().2 += v;
        }
        let mut totals = Totals {
            per_fn,
            true_fn: BTreeMap::new(),
            true_instr: HashMap::new(),
        };
        if let Some(t) = truth {
            totals.add_truth(t, profile, names);
        }
        totals
    }

    /// The truth's instructions and cycles, by function and location (its modules matched
    /// to the profile's).
    fn add_truth(&mut self, t: &ExactProfile, profile: &SampledProfile, names: &mut Namer<'_>) {
        let cyc = t.extra_cost_names.iter().position(|n| n == "cycles");
        let mut mmap: HashMap<ModuleIdx, Option<ModuleIdx>> = HashMap::new();
        for (i, ic) in t.instructions.iter().enumerate() {
            let module = ic.loc.module.and_then(|m| {
                *mmap.entry(m).or_insert_with(|| {
                    t.modules
                        .get(m)
                        .and_then(|x| profile.modules.find_same_binary(x))
                })
            });
            let l = Location {
                module,
                svma: ic.loc.svma,
            };
            let e = self.true_fn.entry(names.name(l)).or_default();
            e.0 += ic.count;
            if let Some(c) = cyc {
                e.1 += t
                    .extra_costs
                    .get(i)
                    .and_then(|v| v.get(c))
                    .copied()
                    .unwrap_or(0);
            }
            *self.true_instr.entry(l).or_default() += ic.count;
        }
    }

    /// One row per function of either side, by raw instructions (largest first).
    fn rows(&self) -> Vec<CorrectedFunctionRow> {
        let ipc = |i: f64, c: f64| (c > 0.0).then(|| i / c);
        let mut keys: Vec<&String> = self.per_fn.keys().collect();
        keys.extend(
            self.true_fn
                .keys()
                .filter(|k| !self.per_fn.contains_key(*k)),
        );
        let mut v: Vec<CorrectedFunctionRow> = keys
            .into_iter()
            .map(|n| {
                let (r, c, cy) = self.per_fn.get(n).copied().unwrap_or_default();
                let t = self.true_fn.get(n);
                CorrectedFunctionRow {
                    name: n.clone(),
                    raw_instructions: r,
                    corrected_instructions: c,
                    cycles: cy,
                    raw_ipc: ipc(r, cy),
                    corrected_ipc: ipc(c, cy),
                    true_instructions: t.map(|x| x.0),
                    true_ipc: t.and_then(|x| (x.1 > 0).then(|| x.0 as f64 / x.1 as f64)),
                }
            })
            .collect();
        v.sort_by(|a, b| b.raw_instructions.total_cmp(&a.raw_instructions));
        v
    }

    /// ε against the truth, per function and per instruction, before and after.
    fn metrics(&self, cor: &ProgramCorrection) -> Result<CorrectMetrics> {
        let r = |x: f64| x.round().max(0.0) as u64;
        let eps = |s: Vec<(String, u64)>| {
            proftrust_metrics::epsilon(s, self.true_fn.iter().map(|(k, v)| (k.clone(), v.0)))
        };
        let efr = eps(self
            .per_fn
            .iter()
            .map(|(k, v)| (k.clone(), r(v.0)))
            .collect())?;
        let efc = eps(self
            .per_fn
            .iter()
            .map(|(k, v)| (k.clone(), r(v.1)))
            .collect())?;
        let ti = || self.true_instr.iter().map(|(k, v)| (*k, *v));
        let eir = proftrust_metrics::epsilon(cor.raw.iter().map(|(k, v)| (*k, r(*v))), ti())?;
        let eic = proftrust_metrics::epsilon(cor.corrected.iter().map(|(k, v)| (*k, r(*v))), ti())?;
        Ok(CorrectMetrics {
            epsilon_function_raw: efr,
            epsilon_function_corrected: efc,
            epsilon_instruction_raw: eir,
            epsilon_instruction_corrected: eic,
        })
    }
}

/// The loops a loop solver corrected.
fn loops(cor: &ProgramCorrection) -> Vec<CorrectedLoop> {
    cor.loops
        .iter()
        .map(|l| CorrectedLoop {
            function: l.function.clone(),
            header: format!("{}", l.header),
            blocks: l.blocks,
            simple_loops: l.simple_loops,
            frequencies: l.frequencies.clone(),
            phi_start: l.phi_start,
            phi: l.phi,
            iterations: l.iterations,
            converged: l.converged,
        })
        .collect()
}

/// The corrected blocks.
fn blocks(cor: &ProgramCorrection) -> Vec<CorrectedBlock> {
    cor.blocks
        .iter()
        .map(|b| CorrectedBlock {
            function: b.function.clone(),
            start: format!("{}", b.start),
            raw: b.raw,
            corrected: b.corrected,
        })
        .collect()
}

/// The instructions of the modelled modules whose estimate the correction changed, in
/// address order.
fn changed_instructions(
    cor: &ProgramCorrection,
    names: &mut Namer<'_>,
) -> Vec<CorrectedInstruction> {
    let mut instrs: Vec<(Location, f64, f64)> = cor
        .corrected
        .iter()
        .filter(|(l, _)| l.module.is_some_and(|m| names.modelled.contains(&m)))
        .map(|(l, c)| (*l, cor.raw.get(l).copied().unwrap_or(0.0), *c))
        .filter(|(_, r, c)| r != c)
        .collect();
    instrs.sort_by_key(|x| x.0);
    instrs
        .into_iter()
        .map(|(l, r, c)| CorrectedInstruction {
            address: format!("{}", l.svma),
            function: names.name(l),
            raw: r,
            corrected: c,
        })
        .collect()
}
