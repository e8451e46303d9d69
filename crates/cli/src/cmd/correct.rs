//! `proftrust correct`: undo counter skid in an instruction profile (seed 000 §2).
//!
//! Per hot innermost loop of the binary: its simple loops (`proftrust_binary::simple_loops`),
//! the sampled instruction and cycle estimates of its instructions (samples x period), and the
//! skid `S` make a `proftrust_skid::correct::LoopProblem`; the solver's `E_i(F)` replace the
//! raw instruction estimates of the loop. Everything outside corrected loops keeps its raw
//! estimate. Functions are named by the innermost inline frame (seed 000 reports inlined
//! functions such as `operator*` on their own); code in other modules is grouped per module.
//! Cycles are not corrected (a constant skid does not bias cycle samples in a periodic loop,
//! seed 000 §2.1), so corrected IPC = corrected instructions / sampled cycles.

use crate::util;
use anyhow::{bail, Context};
use proftrust_binary::{simple_loops, Binary};
use proftrust_model::{EventKind, ExactProfile, Location, SampleSet, Svma};
use proftrust_skid::correct::{problem_from_cfg, solve, Emulation, Solver};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Solver choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SolverArg {
    /// Gibbs sampling (seed 000 Algorithm 1).
    Gibbs,
    /// Alternating non-negative least squares.
    Lsq,
}

/// Emulation of eq. 6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EmulationArg {
    /// Each simple loop emulated on its own (eq. 6 as printed).
    PerLoop,
    /// Simple loops interleaved with probabilities F_l / sum F (skid may cross iterations).
    Mixed,
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
    /// Skid in cycles (measure it with `calibrate`).
    #[arg(long)]
    skid: f64,
    /// The profiled binary.
    #[arg(long)]
    binary: PathBuf,
    /// Exact profile of the same run (native exact file, e.g. `vpmu --exact`) to report
    /// raw and corrected errors.
    #[arg(long)]
    truth: Option<PathBuf>,
    /// Solver.
    #[arg(long, value_enum, default_value_t = SolverArg::Lsq)]
    solver: SolverArg,
    /// Emulation of eq. 6.
    #[arg(long, value_enum, default_value_t = EmulationArg::Mixed)]
    emulation: EmulationArg,
    /// Seed of the Gibbs sampler.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Loops holding less than this share of the module's instruction samples are left alone.
    #[arg(long, default_value_t = 0.01)]
    hot_share: f64,
    /// Loops with more simple loops than this are left alone (reported).
    #[arg(long, default_value_t = 64)]
    max_simple_loops: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
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

/// Estimates keyed by (module file name, SVMA), and their total.
type Estimates = (HashMap<(String, u64), f64>, f64);

/// Per-location estimates (sum of periods) of the first event of `kind` in `set`.
fn estimates(set: &SampleSet, kind: EventKind, file: &Path) -> anyhow::Result<Estimates> {
    let ev = set
        .events
        .iter()
        .position(|e| e.kind == kind)
        .with_context(|| {
            format!(
                "{} has no {kind:?} event (events: {})",
                file.display(),
                set.events
                    .iter()
                    .map(|e| e.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })? as u16;
    let mut m = HashMap::new();
    let mut total = 0.0;
    for s in set.samples.iter().filter(|s| s.event == ev) {
        let name = module_name(&set.modules, s.ip);
        *m.entry((name, s.ip.svma.0)).or_insert(0.0) += s.period as f64;
        total += s.period as f64;
    }
    Ok((m, total))
}

fn module_name(t: &proftrust_model::ModuleTable, l: Location) -> String {
    l.module
        .and_then(|m| t.get(m))
        .map(|m| m.file_name().to_string())
        .unwrap_or_else(|| "[unknown]".into())
}

/// Runs the subcommand.
pub fn run(a: Args) -> anyhow::Result<()> {
    if !(a.skid.is_finite() && a.skid >= 0.0) {
        bail!("--skid must be a number of cycles >= 0");
    }
    let (isets, csets) = match (&a.samples, &a.instructions, &a.cycles) {
        (Some(p), _, _) => {
            let s = read_samples(p)?;
            (
                estimates(&s, EventKind::Instructions, p)?,
                estimates(&s, EventKind::Cycles, p)?,
            )
        }
        (None, Some(i), Some(c)) => (
            estimates(&read_samples(i)?, EventKind::Instructions, i)?,
            estimates(&read_samples(c)?, EventKind::Cycles, c)?,
        ),
        _ => bail!("give --samples FILE, or --instructions FILE and --cycles FILE"),
    };
    let (raw_i, _total_i) = isets;
    let (raw_c, _total_c) = csets;
    let bin = Binary::open(&a.binary)
        .with_context(|| format!("cannot open the binary {}", a.binary.display()))?;
    let bname = a
        .binary
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let in_bin = |k: &(String, u64)| k.0 == bname;
    let module_total: f64 = raw_i
        .iter()
        .filter(|(k, _)| in_bin(k))
        .map(|(_, v)| v)
        .sum();
    if module_total == 0.0 {
        bail!(
            "no instruction samples fall in {} (sample modules are named by file name; \
             is --binary the profiled program?)",
            bname
        );
    }
    let solver = match a.solver {
        SolverArg::Gibbs => Solver::Gibbs,
        SolverArg::Lsq => Solver::Lsq,
    };
    let emulation = match a.emulation {
        EmulationArg::PerLoop => Emulation::PerLoop,
        EmulationArg::Mixed => Emulation::Mixed,
    };
    let mut corrected: HashMap<(String, u64), f64> = raw_i.clone();
    let mut loops_out = Vec::new();
    let mut instrs_out = Vec::new();
    let mut blocks_out = Vec::new();
    let mut skipped = Vec::new();
    // Functions of the binary with samples.
    let mut fsamples: BTreeMap<u64, f64> = BTreeMap::new();
    for ((m, a0), v) in &raw_i {
        if m == &bname {
            if let Some(f) = bin.function_at(Svma(*a0)) {
                *fsamples.entry(f.start.0).or_insert(0.0) += v;
            }
        }
    }
    let pb = util::progress(Some(fsamples.len() as u64), "correcting loops");
    for (&start, &fs) in &fsamples {
        pb.inc(1);
        if fs < a.hot_share * module_total {
            continue;
        }
        let Some(f) = bin.function_at(Svma(start)) else {
            continue;
        };
        let cfg = match bin.cfg(f) {
            Ok(c) => c,
            Err(e) => {
                skipped.push(format!("{}: no CFG ({e})", f.name));
                continue;
            }
        };
        for lp in &cfg.loops {
            if cfg.loops.iter().any(|o| o.parent == Some(lp.id)) {
                continue; // innermost loops only
            }
            let key = |s: Svma| (bname.clone(), s.0);
            let lsum: f64 = lp
                .blocks
                .iter()
                .flat_map(|b| cfg.block(*b).instructions.iter())
                .map(|s| raw_i.get(&key(*s)).copied().unwrap_or(0.0))
                .sum();
            if lsum < a.hot_share * module_total {
                continue;
            }
            let header = cfg.block(lp.header).start;
            let sl = match simple_loops(&cfg, lp, a.max_simple_loops) {
                Ok(s) => s,
                Err(e) => {
                    skipped.push(format!("{} loop at {header}: {e}", f.name));
                    continue;
                }
            };
            let prob = problem_from_cfg(
                &cfg,
                lp,
                &sl,
                a.skid,
                |s| raw_i.get(&key(s)).copied().unwrap_or(0.0),
                |s| raw_c.get(&key(s)).copied().unwrap_or(0.0),
            )
            .with_context(|| format!("loop at {header} in {}", f.name))?;
            let sol = solve(&prob.problem, solver, emulation, a.seed)
                .with_context(|| format!("cannot correct the loop at {header} in {}", f.name))?;
            for (k, addr) in prob.addresses.iter().enumerate() {
                corrected.insert(key(*addr), sol.instructions[k]);
                instrs_out.push(InstrOut {
                    address: format!("{addr}"),
                    function: f.name.clone(),
                    raw: prob.problem.sampled_instructions[k],
                    corrected: sol.instructions[k],
                });
            }
            let mut at = 0;
            for (bi, b) in prob.blocks.iter().enumerate() {
                let n = prob.problem.block_sizes[bi];
                blocks_out.push(BlockOut {
                    function: f.name.clone(),
                    start: format!("{}", cfg.block(*b).start),
                    raw: prob.problem.sampled_instructions[at..at + n].iter().sum(),
                    corrected: sol.instructions[at..at + n].iter().sum(),
                });
                at += n;
            }
            loops_out.push(LoopOut {
                function: f.name.clone(),
                header: format!("{header}"),
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
    pb.finish_and_clear();
    // Function naming: innermost inline frame in the binary, module name elsewhere.
    let mut names: HashMap<(String, u64), String> = HashMap::new();
    let mut name_of = |k: &(String, u64)| -> String {
        if let Some(n) = names.get(k) {
            return n.clone();
        }
        let n = if k.0 == bname {
            let frames = bin.frames(Svma(k.1));
            match frames.first() {
                Some(fr) => fr.function.clone(),
                None => bin
                    .function_at(Svma(k.1))
                    .map(|f| f.name.clone())
                    .unwrap_or_else(|| format!("[{}]", k.0)),
            }
        } else {
            format!("[{}]", k.0)
        };
        names.insert(k.clone(), n.clone());
        n
    };
    let mut per_fn: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new();
    for (k, v) in &raw_i {
        per_fn.entry(name_of(k)).or_default().0 += v;
    }
    for (k, v) in &corrected {
        per_fn.entry(name_of(k)).or_default().1 += v;
    }
    for (k, v) in &raw_c {
        per_fn.entry(name_of(k)).or_default().2 += v;
    }
    // Truth.
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
    let mut true_fn: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut true_instr: HashMap<(String, u64), u64> = HashMap::new();
    if let Some(t) = &truth {
        let cyc = t.extra_cost_names.iter().position(|n| n == "cycles");
        for (i, ic) in t.instructions.iter().enumerate() {
            let k = (module_name(&t.modules, ic.loc), ic.loc.svma.0);
            let e = true_fn.entry(name_of(&k)).or_default();
            e.0 += ic.count;
            if let Some(c) = cyc {
                e.1 += t
                    .extra_costs
                    .get(i)
                    .and_then(|v| v.get(c))
                    .copied()
                    .unwrap_or(0);
            }
            *true_instr.entry(k).or_default() += ic.count;
        }
    }
    let ipc = |i: f64, c: f64| (c > 0.0).then(|| i / c);
    let functions: Vec<FunctionOut> = {
        let mut v: Vec<FunctionOut> = per_fn
            .iter()
            .map(|(n, &(r, c, cy))| {
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
        let ti = || true_instr.iter().map(|(k, v)| (k.clone(), *v));
        let eir = proftrust_metrics::epsilon(raw_i.iter().map(|(k, v)| (k.clone(), r(*v))), ti())?;
        let eic =
            proftrust_metrics::epsilon(corrected.iter().map(|(k, v)| (k.clone(), r(*v))), ti())?;
        Some(serde_json::json!({
            "epsilon_function_raw": efr,
            "epsilon_function_corrected": efc,
            "epsilon_instruction_raw": eir,
            "epsilon_instruction_corrected": eic,
        }))
    } else {
        None
    };
    if a.json {
        let mut j = serde_json::json!({
            "binary": a.binary.display().to_string(),
            "skid": a.skid,
            "solver": format!("{:?}", solver).to_lowercase(),
            "emulation": format!("{emulation:?}"),
            "seed": a.seed,
            "functions": functions,
            "loops": loops_out,
            "blocks": blocks_out,
            "instructions": instrs_out,
            "skipped": skipped,
        });
        if let Some(m) = metrics {
            j["metrics"] = m;
        }
        println!("{}", serde_json::to_string_pretty(&j)?);
        return Ok(());
    }
    println!(
        "skid {} cycles, solver {:?}, seed {}; {} loop(s) corrected",
        a.skid,
        solver,
        a.seed,
        loops_out.len()
    );
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
    for s in &skipped {
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
