//! `proftrust correct`: undo counter skid in an instruction profile (seed 000 §2).
//!
//! The work is done by `proftrust_skid::program::correct_profile` (the same entry point
//! `audit` uses): with `--solver flow` (default) the whole program is corrected at once —
//! every sampled function of the binary and the functions it calls, shared libraries
//! reached through PLT stubs as black boxes (`proftrust_skid::flow`); with `--solver lsq` or
//! `gibbs` each hot innermost loop is corrected on its own with its simple loops (seed 000
//! §2 as printed) and everything else keeps its raw estimate. Functions are named by the
//! innermost inline frame (seed 000 reports inlined functions such as `operator*` on their
//! own); code in other modules is grouped per module. Cycles are not corrected (a constant
//! skid does not bias cycle samples, seed 000 §2.1), so corrected IPC = corrected
//! instructions / sampled cycles.

use crate::util;
use anyhow::{bail, Context};
use proftrust_binary::Symbolizer;
use proftrust_model::{ExactProfile, Location, ModuleIdx, SampleSet};
use proftrust_skid::correct::{Emulation, Solver};
use proftrust_skid::program::{
    correct_profile, function_name, BoxSpread, Method, ProgramOptions, SampledProfile,
};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Solver choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SolverArg {
    /// Whole-program flow formulation (interprocedural; default).
    Flow,
    /// Per hot innermost loop: Gibbs sampling (seed 000 Algorithm 1).
    Gibbs,
    /// Per hot innermost loop: alternating non-negative least squares.
    Lsq,
}

/// Emulation of eq. 6 (per-loop solvers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EmulationArg {
    /// Each simple loop emulated on its own (eq. 6 as printed).
    PerLoop,
    /// Simple loops interleaved with probabilities F_l / sum F (skid may cross iterations).
    Mixed,
}

/// How a black box's corrected count is spread over its instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BoxSpreadArg {
    /// Evenly over its sampled instructions (code that runs straight through).
    Uniform,
    /// In proportion to its cycle samples (uniform CPIs).
    Cycles,
}

/// Arguments of `proftrust correct`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Native sample file holding both an instructions and a cycles event.
    #[arg(long, conflicts_with_all = ["instructions", "cycles"])]
    samples: Option<PathBuf>,
    /// Native sample file of the instructions event.
    #[arg(long, requires = "cycles")]
    instructions: Option<PathBuf>,
    /// Native sample file of the cycles event.
    #[arg(long, requires = "instructions")]
    cycles: Option<PathBuf>,
    /// Skid in cycles (measure it with `calibrate`); the mean when it varies.
    #[arg(long)]
    skid: f64,
    /// Width in cycles of the skid's spread around --skid (flow solver: the emulation
    /// averages over a uniform spread of this width; the default 1 suits a constant skid).
    #[arg(long, default_value_t = 1.0)]
    skid_spread: f64,
    /// The profiled binary.
    #[arg(long)]
    binary: PathBuf,
    /// Exact profile of the same run (native exact file, e.g. `vpmu --exact`) to report
    /// raw and corrected errors.
    #[arg(long)]
    truth: Option<PathBuf>,
    /// Solver.
    #[arg(long, value_enum, default_value_t = SolverArg::Flow)]
    solver: SolverArg,
    /// Emulation of eq. 6 (per-loop solvers).
    #[arg(long, value_enum, default_value_t = EmulationArg::Mixed)]
    emulation: EmulationArg,
    /// Seed of the Gibbs sampler.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Per-loop solvers: loops holding less than this share of the module's instruction
    /// samples are left alone.
    #[arg(long, default_value_t = 0.01)]
    hot_share: f64,
    /// Per-loop solvers: loops with more simple loops than this are left alone (reported).
    #[arg(long, default_value_t = 64)]
    max_simple_loops: usize,
    /// Flow solver: at most this many basic blocks are modelled (hottest functions first).
    #[arg(long, default_value_t = 3000)]
    max_blocks: usize,
    /// Flow solver: how the corrected count of a shared library reached through PLT stubs
    /// (a black box: no CFG) is spread over its instructions.
    #[arg(long, value_enum, default_value_t = BoxSpreadArg::Uniform)]
    box_spread: BoxSpreadArg,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Export the corrected profile: FORMAT:FILE (repeat), FORMAT one of pprof, firefox,
    /// speedscope, folded, flamegraph, llvm-sample, or folded-diff, flamegraph-diff (raw
    /// samples -> --truth, else -> corrected), annotate, annotate-html; FORMAT@SIDE:FILE
    /// picks the side (samples, exact, corrected). See docs/export.md.
    #[arg(long = "export", value_name = "FORMAT:FILE", value_parser = crate::cmd::export::parse_export_spec)]
    export: Vec<crate::cmd::export::ExportSpec>,
}

#[derive(Debug, Serialize)]
struct FunctionOut {
    name: String,
    raw_instructions: f64,
    corrected_instructions: f64,
    cycles: f64,
    raw_ipc: Option<f64>,
    corrected_ipc: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    true_instructions: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    true_ipc: Option<f64>,
}

#[derive(Debug, Serialize)]
struct LoopOut {
    function: String,
    header: String,
    blocks: usize,
    simple_loops: usize,
    frequencies: Vec<f64>,
    phi_start: f64,
    phi: f64,
    iterations: usize,
    converged: bool,
}

#[derive(Debug, Serialize)]
struct InstrOut {
    address: String,
    function: String,
    raw: f64,
    corrected: f64,
}

#[derive(Debug, Serialize)]
struct BlockOut {
    function: String,
    start: String,
    raw: f64,
    corrected: f64,
}

fn read_samples(p: &Path) -> anyhow::Result<SampleSet> {
    let b = std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?;
    proftrust_formats::native::read_samples(&b)
        .with_context(|| format!("{} is not a proftrust sample file", p.display()))
}

/// Runs the subcommand.
pub fn run(a: Args) -> anyhow::Result<()> {
    if !(a.skid.is_finite() && a.skid >= 0.0) {
        bail!("--skid must be a number of cycles >= 0");
    }
    if !(a.skid_spread.is_finite() && a.skid_spread >= 0.0) {
        bail!("--skid-spread must be a number of cycles >= 0");
    }
    let profile = match (&a.samples, &a.instructions, &a.cycles) {
        (Some(p), _, _) => SampledProfile::from_sample_set(&read_samples(p)?)
            .with_context(|| format!("{}", p.display()))?,
        (None, Some(i), Some(c)) => {
            SampledProfile::from_sample_sets(&read_samples(i)?, &read_samples(c)?)
                .with_context(|| format!("{} and {}", i.display(), c.display()))?
        }
        _ => bail!("give --samples FILE, or --instructions FILE and --cycles FILE"),
    };
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
    let method = match a.solver {
        SolverArg::Flow => Method::Flow,
        s => Method::Loops {
            solver: if s == SolverArg::Gibbs {
                Solver::Gibbs
            } else {
                Solver::Lsq
            },
            emulation: match a.emulation {
                EmulationArg::PerLoop => Emulation::PerLoop,
                EmulationArg::Mixed => Emulation::Mixed,
            },
        },
    };
    let mut opts = ProgramOptions::default();
    opts.skid = a.skid;
    opts.method = method;
    opts.modules = Some(modelled.clone());
    opts.hot_share = a.hot_share;
    opts.max_simple_loops = a.max_simple_loops;
    opts.max_blocks = a.max_blocks;
    opts.flow.skid_spread = a.skid_spread;
    opts.box_spread = match a.box_spread {
        BoxSpreadArg::Uniform => BoxSpread::Uniform,
        BoxSpreadArg::Cycles => BoxSpread::Cycles,
    };
    opts.seed = a.seed;
    let pb = util::progress(None, "correcting");
    let cor = correct_profile(&profile, &sym, &opts)
        .with_context(|| format!("cannot correct the profile of {bname}"))?;
    pb.finish_and_clear();
    // Names.
    let mut names: HashMap<Location, String> = HashMap::new();
    let mut name_of = |l: Location| -> String {
        names
            .entry(l)
            .or_insert_with(|| function_name(&sym, &modelled, l))
            .clone()
    };
    // Summed in address order: a hash map's order would change the last bits of the sums
    // from run to run.
    let sorted = |m: &HashMap<Location, f64>| -> Vec<(Location, f64)> {
        let mut v: Vec<(Location, f64)> = m.iter().map(|(l, x)| (*l, *x)).collect();
        v.sort_by_key(|(l, _)| *l);
        v
    };
    let mut per_fn: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new();
    for (l, v) in sorted(&cor.raw) {
        per_fn.entry(name_of(l)).or_default().0 += v;
    }
    for (l, v) in sorted(&cor.corrected) {
        per_fn.entry(name_of(l)).or_default().1 += v;
    }
    for (l, v) in sorted(&profile.cycles) {
        per_fn.entry(name_of(l)).or_default().2 += v;
    }
    // Truth, mapped onto the profile's modules.
    let truth: Option<ExactProfile> = match &a.truth {
        Some(p) => {
            let b = std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?;
            Some(
                proftrust_formats::native::read_exact(&b)
                    .with_context(|| format!("{} is not a proftrust exact file", p.display()))?,
            )
        }
        None => None,
    };
    if !a.export.is_empty() {
        let raw = a
            .samples
            .as_deref()
            .or(a.instructions.as_deref())
            .context("no sample file")?;
        crate::cmd::export::correct_exports(
            &a.export,
            &read_samples(raw)?,
            &profile.modules,
            &cor.corrected,
            truth.as_ref(),
            std::slice::from_ref(&a.binary),
        )?;
    }
    let mut true_fn: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut true_instr: HashMap<Location, u64> = HashMap::new();
    if let Some(t) = &truth {
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
            let e = true_fn.entry(name_of(l)).or_default();
            e.0 += ic.count;
            if let Some(c) = cyc {
                e.1 += t
                    .extra_costs
                    .get(i)
                    .and_then(|v| v.get(c))
                    .copied()
                    .unwrap_or(0);
            }
            *true_instr.entry(l).or_default() += ic.count;
        }
    }
    let ipc = |i: f64, c: f64| (c > 0.0).then(|| i / c);
    let functions: Vec<FunctionOut> = {
        let mut keys: Vec<&String> = per_fn.keys().collect();
        keys.extend(true_fn.keys().filter(|k| !per_fn.contains_key(*k)));
        let mut v: Vec<FunctionOut> = keys
            .into_iter()
            .map(|n| {
                let (r, c, cy) = per_fn.get(n).copied().unwrap_or_default();
                let t = true_fn.get(n);
                FunctionOut {
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
    };
    let metrics = if truth.is_some() {
        let r = |x: f64| x.round().max(0.0) as u64;
        let eps = |s: Vec<(String, u64)>| {
            proftrust_metrics::epsilon(s, true_fn.iter().map(|(k, v)| (k.clone(), v.0)))
        };
        let efr = eps(per_fn.iter().map(|(k, v)| (k.clone(), r(v.0))).collect())?;
        let efc = eps(per_fn.iter().map(|(k, v)| (k.clone(), r(v.1))).collect())?;
        let ti = || true_instr.iter().map(|(k, v)| (*k, *v));
        let eir = proftrust_metrics::epsilon(cor.raw.iter().map(|(k, v)| (*k, r(*v))), ti())?;
        let eic = proftrust_metrics::epsilon(cor.corrected.iter().map(|(k, v)| (*k, r(*v))), ti())?;
        Some(serde_json::json!({
            "epsilon_function_raw": efr,
            "epsilon_function_corrected": efc,
            "epsilon_instruction_raw": eir,
            "epsilon_instruction_corrected": eic,
        }))
    } else {
        None
    };
    let solver_name = match a.solver {
        SolverArg::Flow => "flow",
        SolverArg::Gibbs => "gibbs",
        SolverArg::Lsq => "lsq",
    };
    let loops_out: Vec<LoopOut> = cor
        .loops
        .iter()
        .map(|l| LoopOut {
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
        .collect();
    if a.json {
        let blocks: Vec<BlockOut> = cor
            .blocks
            .iter()
            .map(|b| BlockOut {
                function: b.function.clone(),
                start: format!("{}", b.start),
                raw: b.raw,
                corrected: b.corrected,
            })
            .collect();
        let mut instrs: Vec<(Location, f64, f64)> = cor
            .corrected
            .iter()
            .filter(|(l, _)| l.module.is_some_and(|m| modelled.contains(&m)))
            .map(|(l, c)| (*l, cor.raw.get(l).copied().unwrap_or(0.0), *c))
            .filter(|(_, r, c)| r != c)
            .collect();
        instrs.sort_by_key(|x| x.0);
        let instrs: Vec<InstrOut> = instrs
            .into_iter()
            .map(|(l, r, c)| InstrOut {
                address: format!("{}", l.svma),
                function: name_of(l),
                raw: r,
                corrected: c,
            })
            .collect();
        let mut j = serde_json::json!({
            "binary": a.binary.display().to_string(),
            "skid": a.skid,
            "solver": solver_name,
            "emulation": format!("{:?}", a.emulation),
            "seed": a.seed,
            "functions": functions,
            "loops": loops_out,
            "flow": cor.flow,
            "blocks": blocks,
            "instructions": instrs,
            "skipped": cor.skipped,
        });
        if let Some(m) = metrics {
            j["metrics"] = m;
        }
        println!("{}", serde_json::to_string_pretty(&j)?);
        return Ok(());
    }
    match &cor.flow {
        Some(f) => println!(
            "skid {} cycles, solver flow: {} function(s), {} block(s), black boxes [{}]; phi \
             {:.3e} -> {:.3e} ({} iterations{})",
            a.skid,
            f.functions.len(),
            f.blocks,
            f.boxes.join(", "),
            f.phi_start,
            f.phi,
            f.iterations,
            if f.converged { "" } else { ", not converged" }
        ),
        None => println!(
            "skid {} cycles, solver {}, seed {}; {} loop(s) corrected",
            a.skid,
            solver_name,
            a.seed,
            loops_out.len()
        ),
    }
    for l in &loops_out {
        println!(
            "  loop {} in {}: {} blocks, {} simple loops, phi {:.3e} -> {:.3e} ({} iterations{})",
            l.header,
            l.function,
            l.blocks,
            l.simple_loops,
            l.phi_start,
            l.phi,
            l.iterations,
            if l.converged { "" } else { ", not converged" }
        );
    }
    for s in &cor.skipped {
        println!("  skipped: {s}");
    }
    let fmt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.3}"));
    println!(
        "{:<32} {:>14} {:>14} {:>8} {:>8} {:>14} {:>8}",
        "function", "raw instr", "corrected", "raw IPC", "corr IPC", "true instr", "true IPC"
    );
    for f in &functions {
        println!(
            "{:<32} {:>14.0} {:>14.0} {:>8} {:>8} {:>14} {:>8}",
            f.name,
            f.raw_instructions,
            f.corrected_instructions,
            fmt(f.raw_ipc),
            fmt(f.corrected_ipc),
            f.true_instructions.map_or("-".into(), |v| v.to_string()),
            fmt(f.true_ipc)
        );
    }
    if let Some(m) = metrics {
        println!(
            "epsilon function: raw {:.4} corrected {:.4}; instruction: raw {:.4} corrected {:.4}",
            m["epsilon_function_raw"].as_f64().unwrap_or(f64::NAN),
            m["epsilon_function_corrected"].as_f64().unwrap_or(f64::NAN),
            m["epsilon_instruction_raw"].as_f64().unwrap_or(f64::NAN),
            m["epsilon_instruction_corrected"]
                .as_f64()
                .unwrap_or(f64::NAN),
        );
    }
    Ok(())
}
