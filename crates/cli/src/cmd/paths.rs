//! `proftrust paths [--function NAME] [--json] -- PROGRAM ARGS`: exact Ball-Larus path
//! profile of a program (seed 003 §2-3) from its QEMU block trace.
//!
//! JSON contract (kept stable): top level `paths`, each with `function`, `id`, `blocks`
//! (block start addresses, hex strings), `count`, `instructions`; plus `cycles`,
//! `mem_events`, `source` (file:line per block), and top-level `functions` (per-function
//! bookkeeping: NumPaths, degradation, lost instructions) and `total_instructions`.

use crate::util;
use anyhow::{bail, Context, Result};
use proftrust_binary::Binary;
use proftrust_exact::{trace_qemu, QemuOptions};
use proftrust_model::{Module, RunOutcome, Svma};
use proftrust_paths::{
    compare_lbr, hot_paths_covering, lbr_paths, FuncIdx, HotMetric, LbrComparison, LbrPaths,
    PathProfile, Profiler, ProfilerOptions, ProgramCfgs,
};
use serde::Serialize;
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `proftrust paths`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only paths of this function (demangled or raw name).
    #[arg(long)]
    function: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Paths listed in text output.
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// Text output: also report how many paths cover this share of the instructions.
    #[arg(long, default_value_t = 0.9)]
    cover: f64,
    /// QEMU CPU model (`qemu-x86_64 -cpu help`).
    #[arg(long)]
    cpu: Option<String>,
    /// Stop the program after this many seconds (the trace up to then is kept).
    #[arg(long, value_name = "SECS")]
    timeout: Option<f64>,
    /// A branch-stack sample file of the same program (`proftrust record -b`, `proftrust
    /// vpmu --lbr`, perf.data from `perf record -b`, or `perf script -F
    /// ip,sym,symoff,dso,brstack` text): reconstruct paths from its LBR stacks and compare
    /// them with the exact path profile.
    #[arg(long, value_name = "FILE")]
    lbr: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM ARGS")]
    program: Vec<String>,
}

/// The program's binary, its functions' CFGs (numbered), and warnings.
pub(crate) struct Program {
    pub path: PathBuf,
    pub binary: Binary,
    pub cfgs: ProgramCfgs,
    pub warnings: Vec<String>,
}

/// Finds `prog` (a path, or a name on `PATH`).
pub(crate) fn resolve(prog: &str) -> Result<PathBuf> {
    if prog.contains('/') {
        let p = PathBuf::from(prog);
        if !p.is_file() {
            bail!("{prog}: no such file (give the program's path, or a name on PATH)");
        }
        return Ok(p);
    }
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            let c = d.join(prog);
            if c.is_file() {
                return Ok(c);
            }
        }
    }
    bail!("{prog}: not found on PATH (give the program's path)")
}

/// Opens the program's binary and builds the CFG of every function.
pub(crate) fn load_program(prog: &str) -> Result<Program> {
    let path = resolve(prog)?;
    let binary = Binary::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
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
    let mut warnings: Vec<String> = binary.warnings().to_vec();
    if failed > 0 {
        warnings.push(format!(
            "{failed} function(s) have no CFG and get no paths (first: {})",
            first_err.unwrap_or_default()
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
pub(crate) fn qemu_options(
    cpu: Option<String>,
    timeout: Option<f64>,
    show_output: bool,
) -> Result<QemuOptions> {
    let timeout = match timeout {
        Some(s) if !(s > 0.0 && s.is_finite()) => {
            bail!("--timeout {s}: must be a positive number of seconds")
        }
        Some(s) => Some(Duration::from_secs_f64(s)),
        None => None,
    };
    Ok(QemuOptions {
        cpu,
        timeout,
        show_output,
        ..Default::default()
    })
}

#[derive(Serialize)]
struct JsonPath {
    function: String,
    id: u128,
    blocks: Vec<String>,
    count: u64,
    instructions: u64,
    cycles: u64,
    mem_events: u64,
    starts_after_backedge: bool,
    ends_with_backedge_to: Option<String>,
    source: Vec<String>,
    /// With `--lbr`: occurrences of the path in the branch stacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    lbr_count: Option<u64>,
}

#[derive(Serialize)]
struct JsonFunction {
    function: String,
    num_paths: Option<u128>,
    executed_paths: usize,
    activations: u64,
    degraded: Option<String>,
    lost_transfers: u64,
    unwound: u64,
    unfinished: u64,
    lost_instructions: u64,
    path_instructions: u64,
}

#[derive(Serialize)]
struct JsonReport {
    program: Vec<String>,
    binary: String,
    outcome: Option<RunOutcome>,
    cycle_model: &'static str,
    total_instructions: u64,
    paths: Vec<JsonPath>,
    functions: Vec<JsonFunction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lbr: Option<JsonLbr>,
    warnings: Vec<String>,
}

#[derive(Serialize)]
struct JsonLbr {
    samples: u64,
    ranges: u64,
    broken: u64,
    comparison: Option<LbrComparison>,
    error: Option<String>,
}

/// Source line of an address: innermost inline frame, `file:line`.
pub(crate) fn source_of(b: &Binary, a: Svma) -> String {
    match b.frames(a).first() {
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

/// Rows of the path listing, most frequent first; `limit` rows at most (source lines are
/// looked up once per block).
fn path_rows(
    p: &Program,
    prof: &PathProfile,
    only: Option<FuncIdx>,
    limit: usize,
    lbr: Option<&LbrPaths>,
) -> Vec<JsonPath> {
    let mut rows: Vec<_> = prof
        .paths
        .iter()
        .filter(|(k, _)| only.is_none_or(|f| f == k.func))
        .collect();
    rows.sort_by(|a, b| b.1.count.cmp(&a.1.count).then(a.0.cmp(b.0)));
    let mut sources: HashMap<u64, String> = HashMap::new();
    rows.into_iter()
        .take(limit)
        .filter_map(|(k, m)| {
            let cfg = p.cfgs.cfg(k.func);
            let n = p.cfgs.numbering(k.func).ok()?;
            let r = n.regenerate(k.id).ok()?;
            let source = r
                .blocks
                .iter()
                .map(|b| {
                    let a = cfg.block(*b).start;
                    sources
                        .entry(a.0)
                        .or_insert_with(|| source_of(&p.binary, a))
                        .clone()
                })
                .collect();
            Some(JsonPath {
                function: cfg.function.clone(),
                id: k.id,
                blocks: r
                    .blocks
                    .iter()
                    .map(|b| format!("{:#x}", cfg.block(*b).start.0))
                    .collect(),
                count: m.count,
                instructions: m.instructions,
                cycles: m.cycles,
                mem_events: m.mem_events,
                starts_after_backedge: r.starts_after_backedge,
                ends_with_backedge_to: r
                    .ends_with_backedge_to
                    .map(|h| format!("{:#x}", cfg.block(h).start.0)),
                source,
                lbr_count: lbr.map(|l| l.paths.get(k).copied().unwrap_or(0)),
            })
        })
        .collect()
}

/// Runs `proftrust paths`.
pub fn run(a: Args) -> Result<()> {
    let p = load_program(&a.program[0])?;
    let only = match &a.function {
        Some(name) => Some(
            p.cfgs
                .find(name)
                .or_else(|| {
                    p.binary
                        .function_by_name(name)
                        .and_then(|f| p.cfgs.function_at_entry(f.start))
                })
                .with_context(|| {
                    format!(
                        "--function {name}: no such function with a CFG in {}",
                        p.path.display()
                    )
                })?,
        ),
        None => None,
    };
    // Read the LBR file first: a bad file fails before the (slow) trace.
    let lbr: Option<LbrPaths> = match &a.lbr {
        Some(f) => {
            let set = crate::cmd::cct::read_sample_file(f, std::slice::from_ref(&p.path))?;
            if !set.samples.iter().any(|s| !s.branches.is_empty()) {
                bail!(
                    "{}: no sample has a branch stack; record with `proftrust record -b` or `perf record -b` (needs a PMU with LBR)",
                    f.display()
                );
            }
            Some(lbr_paths(&set, &p.cfgs))
        }
        None => None,
    };
    let opts = qemu_options(a.cpu.clone(), a.timeout, !a.json)?;
    let cmd: Vec<OsString> = std::iter::once(p.path.clone().into_os_string())
        .chain(a.program[1..].iter().map(OsString::from))
        .collect();
    let pb = util::progress(None, "tracing under QEMU");
    let mut prof = Profiler::new(
        &p.cfgs,
        ProfilerOptions {
            paths: true,
            cct: false,
        },
    );
    let outcome = trace_qemu(&cmd, &opts, &mut prof).context("tracing the program under QEMU")?;
    pb.finish_and_clear();
    let (profile, _) = prof.finish();
    let mut warnings = p.warnings.clone();
    if profile.paths.is_empty() {
        warnings.push(format!(
            "no complete path was recorded in {} (did the trace reach it?)",
            p.path.display()
        ));
    }
    let rows = path_rows(
        &p,
        &profile,
        only,
        if a.json { usize::MAX } else { a.top },
        lbr.as_ref(),
    );
    let executed = profile
        .paths
        .keys()
        .filter(|k| only.is_none_or(|f| f == k.func))
        .count();
    let on_paths: u64 = profile
        .paths
        .iter()
        .filter(|(k, _)| only.is_none_or(|f| f == k.func))
        .map(|(_, m)| m.instructions)
        .sum();
    let lbr = lbr.map(|l| {
        let (comparison, error) = match compare_lbr(&l, &profile) {
            Ok(c) => (Some(c), None),
            Err(e) => (None, Some(e.to_string())),
        };
        JsonLbr {
            samples: l.samples,
            ranges: l.ranges,
            broken: l.broken,
            comparison,
            error,
        }
    });
    let functions: Vec<JsonFunction> = profile
        .functions
        .iter()
        .enumerate()
        .filter(|(i, f)| f.activations > 0 && only.is_none_or(|o| o.0 as usize == *i))
        .map(|(i, f)| JsonFunction {
            function: f.function.clone(),
            num_paths: f.num_paths,
            executed_paths: profile
                .paths
                .keys()
                .filter(|k| k.func.0 as usize == i)
                .count(),
            activations: f.activations,
            degraded: f.degraded.clone(),
            lost_transfers: f.lost_transfers,
            unwound: f.unwound,
            unfinished: f.unfinished,
            lost_instructions: f.lost_instructions,
            path_instructions: f.path_instructions,
        })
        .collect();
    let out = std::io::stdout();
    let mut w = out.lock();
    if a.json {
        let rep = JsonReport {
            program: a.program.clone(),
            binary: p.path.display().to_string(),
            outcome: Some(outcome),
            cycle_model: "flat (1 cycle per instruction)",
            total_instructions: profile.total_instructions,
            paths: rows,
            functions,
            lbr,
            warnings,
        };
        serde_json::to_writer_pretty(&mut w, &rep)?;
        writeln!(w)?;
        return Ok(());
    }
    for x in &warnings {
        util::note(format!("warning: {x}"));
    }
    writeln!(
        w,
        "{} paths executed, {} instructions on complete paths of {} ({} traced in all)",
        executed,
        on_paths,
        p.path.display(),
        profile.total_instructions
    )?;
    let cover = hot_paths_covering(&profile, HotMetric::Instructions, a.cover);
    writeln!(
        w,
        "{} path(s) cover {:.0}% of the instructions on paths",
        cover.len(),
        a.cover * 100.0
    )?;
    writeln!(
        w,
        "\n{:>10} {:>12} {:>7}  {:<24} {:>6}  blocks (source)",
        "count", "instructions", "share", "function", "id"
    )?;
    for r in &rows {
        let src: Vec<&str> = r.source.iter().map(String::as_str).collect();
        writeln!(
            w,
            "{:>10} {:>12} {:>6.2}%  {:<24} {:>6}  {}{}{} ({})",
            r.count,
            r.instructions,
            100.0 * r.instructions as f64 / on_paths.max(1) as f64,
            r.function,
            r.id,
            if r.starts_after_backedge { "↺ " } else { "" },
            r.blocks.join(" "),
            if r.ends_with_backedge_to.is_some() {
                " ↺"
            } else {
                ""
            },
            src.join(" ")
        )?;
    }
    if let Some(l) = &lbr {
        match (&l.comparison, &l.error) {
            (Some(c), _) => writeln!(
                w,
                "\nLBR: {} stacks, {} distinct paths seen of {} executed; epsilon {:.4}; exact share never seen {:.2}%; top-10 overlap {:.0}%",
                l.samples,
                c.lbr_paths,
                c.exact_paths,
                c.epsilon,
                c.missed_share * 100.0,
                c.top10_overlap * 100.0
            )?,
            (None, e) => writeln!(
                w,
                "\nLBR: {} stacks, no comparison: {}",
                l.samples,
                e.as_deref().unwrap_or("?")
            )?,
        }
    }
    let degraded: Vec<&JsonFunction> = functions
        .iter()
        .filter(|f| {
            f.lost_instructions > 0 || f.lost_transfers > 0 || f.unwound > 0 || f.unfinished > 0
        })
        .collect();
    let flagged: Vec<&str> = functions
        .iter()
        .filter(|f| f.degraded.is_some())
        .map(|f| f.function.as_str())
        .collect();
    if !flagged.is_empty() {
        writeln!(
            w,
            "\n{} executed function(s) not fully numbered (unresolved indirect jump or too many paths; see --json `degraded`): {}",
            flagged.len(),
            flagged.join(", ")
        )?;
    }
    if !degraded.is_empty() {
        writeln!(w, "\nnot fully on paths:")?;
        for f in degraded {
            writeln!(
                w,
                "  {}: {} instructions off paths (lost transfers {}, unwound {}, unfinished {}){}",
                f.function,
                f.lost_instructions,
                f.lost_transfers,
                f.unwound,
                f.unfinished,
                f.degraded
                    .as_ref()
                    .map(|d| format!("; {d}"))
                    .unwrap_or_default()
            )?;
        }
    }
    Ok(())
}
