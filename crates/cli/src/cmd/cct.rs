//! `proftrust cct [--folded FILE] [--json] [--samples FILE] -- PROGRAM ARGS`: the exact
//! calling context tree of a program (seed 003 §4) from its QEMU block trace, the gprof
//! problem measured on it, and, with `--samples`, the sampled contexts of a call-chain
//! profile (`proftrust record -g`, or perf.data from `perf record -g`)
//! compared with it.
//!
//! JSON contract (kept stable): top level `nodes`, `height`, `max_replication`, and
//! `epsilon_sampled` when samples were given; plus `avg_degree`, `call_sites`, `backedges`,
//! `gprof_epsilon`, `contexts` and `sampled`.

use crate::cmd::paths::{load_program, qemu_options};
use crate::util;
use anyhow::{bail, Context, Result};
use proftrust_binary::Symbolizer;
use proftrust_exact::trace_qemu;
use proftrust_formats::Format;
use proftrust_model::{ModuleTable, RunOutcome, SampleSet};
use proftrust_paths::{
    compare_cct, gprof_comparison, sampled_cct, FunctionMap, Profiler, ProfilerOptions,
    SampledComparison,
};
use serde::Serialize;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Arguments of `proftrust cct`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Write the exact CCT as collapsed stacks (flame-graph folded format, exclusive
    /// instructions) to FILE.
    #[arg(long, value_name = "FILE")]
    folded: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// A call-chain sample file of the same program (proftrust `record -g`, or perf.data
    /// from `perf record -g`) to compare with the exact CCT.
    #[arg(long, value_name = "FILE")]
    samples: Option<PathBuf>,
    /// Write the sampled contexts as collapsed stacks (samples) to FILE (needs --samples).
    #[arg(long, value_name = "FILE", requires = "samples")]
    sampled_folded: Option<PathBuf>,
    /// Compare contexts from the outermost frame of this function (frame-pointer unwinding
    /// cannot see libc's start-up frames); `--anchor ''` compares whole stacks.
    #[arg(long, default_value = "main")]
    anchor: String,
    /// Contexts listed in text output.
    #[arg(long, default_value_t = 15)]
    top: usize,
    /// QEMU CPU model (`qemu-x86_64 -cpu help`).
    #[arg(long)]
    cpu: Option<String>,
    /// Stop the program after this many seconds (the trace up to then is kept).
    #[arg(long, value_name = "SECS")]
    timeout: Option<f64>,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM ARGS")]
    program: Vec<String>,
}

#[derive(Serialize)]
struct JsonContext {
    stack: Vec<String>,
    instructions: u64,
    share: f64,
    gprof: f64,
}

#[derive(Serialize)]
struct JsonRecord {
    id: u32,
    parent: Option<u32>,
    procedure: String,
    site: Option<String>,
    depth: u32,
    calls: u64,
    instructions: u64,
}

#[derive(Serialize)]
struct JsonBackedge {
    from: u32,
    to: u32,
    calls: u64,
}

#[derive(Serialize)]
struct JsonReport {
    program: Vec<String>,
    outcome: Option<RunOutcome>,
    total_instructions: u64,
    nodes: usize,
    avg_degree: f64,
    height: u32,
    avg_leaf_depth: f64,
    max_replication: usize,
    max_replicated_procedure: Option<String>,
    call_sites: usize,
    backedges: usize,
    unmatched_returns: u64,
    unwound_frames: u64,
    tail_calls: u64,
    unexplained_transfers: u64,
    gprof_epsilon: f64,
    contexts: Vec<JsonContext>,
    records: Vec<JsonRecord>,
    recursion_backedges: Vec<JsonBackedge>,
    #[serde(skip_serializing_if = "Option::is_none")]
    epsilon_sampled: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sampled: Option<SampledComparison>,
    warnings: Vec<String>,
}

/// Adds every function of every module's binary to `map`.
fn add_names(
    map: &mut FunctionMap,
    modules: &ModuleTable,
    extra: &[PathBuf],
    warnings: &mut Vec<String>,
) {
    let sym = Symbolizer::new(modules, extra);
    for (i, m) in modules.iter() {
        if let Some(b) = sym.binary(i) {
            for f in b.functions() {
                map.insert(m.file_name(), f.start.0, f.end().0, &f.name);
            }
        }
    }
    warnings.extend(sym.warnings());
}

/// Reads a sample file: proftrust's own or perf.data.
pub(crate) fn read_sample_file(path: &Path) -> Result<SampleSet> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read samples {}", path.display()))?;
    let s = match proftrust_formats::sniff(&bytes[..bytes.len().min(4096)]) {
        Some(Format::NativeSamples) => proftrust_formats::native::read_samples(&bytes)?,
        Some(Format::PerfData) => proftrust_formats::read_perf_data(&bytes, path)?,
        Some(other) => bail!(
            "{} is a {} file, not samples (expected a proftrust sample file or perf.data)",
            path.display(),
            other.name()
        ),
        None => bail!(
            "{}: unknown sample format (expected a proftrust sample file or perf.data)",
            path.display()
        ),
    };
    Ok(s)
}

/// Reads a sample file that must hold call chains.
fn read_samples(path: &Path) -> Result<SampleSet> {
    let s = read_sample_file(path)?;
    if !s.samples.iter().any(|x| !x.callchain.is_empty()) {
        bail!(
            "{}: no sample has a call chain; record with call graphs (`proftrust record -g` or `perf record -g`)",
            path.display()
        );
    }
    Ok(s)
}

/// Runs `proftrust cct`.
pub fn run(a: Args) -> Result<()> {
    let p = load_program(&a.program[0])?;
    // Read the samples first: a bad file fails before the (slow) trace.
    let samples = a.samples.as_deref().map(read_samples).transpose()?;
    let opts = qemu_options(a.cpu.clone(), a.timeout, !a.json)?;
    let cmd: Vec<OsString> = std::iter::once(p.path.clone().into_os_string())
        .chain(a.program[1..].iter().map(OsString::from))
        .collect();
    let pb = util::progress(None, "tracing under QEMU");
    let mut prof = Profiler::new(
        &p.cfgs,
        ProfilerOptions {
            paths: false,
            cct: true,
        },
    );
    let outcome = trace_qemu(&cmd, &opts, &mut prof).context("tracing the program under QEMU")?;
    pb.finish_and_clear();
    let (_, cct) = prof.finish();
    let mut warnings = p.warnings.clone();
    let mut names = FunctionMap::default();
    add_names(
        &mut names,
        &cct.modules,
        std::slice::from_ref(&p.path),
        &mut warnings,
    );
    if let Some(s) = &samples {
        add_names(
            &mut names,
            &s.modules,
            std::slice::from_ref(&p.path),
            &mut warnings,
        );
    }
    let names = names.finish();
    let stats = cct.stats();
    let gprof = gprof_comparison(&cct, &names).context("comparing with gprof's assumption")?;
    let total: u64 = cct.nodes().iter().map(|n| n.instructions).sum();
    let anchor = (!a.anchor.is_empty()).then_some(a.anchor.as_str());
    let sampled = match &samples {
        Some(s) => {
            let sc = sampled_cct(s, &names, None);
            if let Some(f) = &a.sampled_folded {
                util::write_atomically(f, |w| Ok(sc.write_folded(w)?))?;
            }
            let exact = cct.context_instructions(&names, None);
            Some(compare_cct(&sc, &exact, anchor).context("comparing sampled and exact contexts")?)
        }
        None => None,
    };
    if let Some(f) = &a.folded {
        util::write_atomically(f, |w| Ok(cct.write_folded(&names, w)?))?;
    }
    let contexts: Vec<JsonContext> = gprof
        .contexts
        .iter()
        .map(|c| JsonContext {
            stack: c.stack.clone(),
            instructions: c.exact,
            share: c.exact as f64 / total.max(1) as f64,
            gprof: c.gprof,
        })
        .collect();
    let out = std::io::stdout();
    let mut w = out.lock();
    if a.json {
        let rep = JsonReport {
            program: a.program.clone(),
            outcome: Some(outcome),
            total_instructions: total,
            nodes: stats.nodes,
            avg_degree: stats.avg_degree,
            height: stats.height,
            avg_leaf_depth: stats.avg_leaf_depth,
            max_replication: stats.max_replication,
            max_replicated_procedure: stats
                .max_replicated_procedure
                .map(|l| names.name(&cct.modules, l)),
            call_sites: stats.call_sites,
            backedges: stats.backedges,
            unmatched_returns: cct.unmatched_returns,
            unwound_frames: cct.unwound_frames,
            tail_calls: cct.tail_calls,
            unexplained_transfers: cct.unexplained_transfers,
            gprof_epsilon: gprof.epsilon,
            contexts,
            records: cct
                .nodes()
                .iter()
                .skip(1)
                .map(|n| JsonRecord {
                    id: n.id.0,
                    parent: n.parent.map(|p| p.0),
                    procedure: names.name(&cct.modules, n.procedure),
                    site: n.site.map(|s| format!("{:#x}", s.svma.0)),
                    depth: n.depth,
                    calls: n.calls,
                    instructions: n.instructions,
                })
                .collect(),
            recursion_backedges: cct
                .backedges()
                .into_iter()
                .map(|(f, t, c)| JsonBackedge {
                    from: f.0,
                    to: t.0,
                    calls: c,
                })
                .collect(),
            epsilon_sampled: sampled.as_ref().map(|s| s.epsilon),
            sampled,
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
        "CCT: {} records, height {} (average leaf depth {:.1}), average degree {:.2}, max replication {} ({}), {} call sites, {} recursion backedges",
        stats.nodes,
        stats.height,
        stats.avg_leaf_depth,
        stats.avg_degree,
        stats.max_replication,
        stats
            .max_replicated_procedure
            .map(|l| names.name(&cct.modules, l))
            .unwrap_or_default(),
        stats.call_sites,
        stats.backedges
    )?;
    writeln!(
        w,
        "unmatched returns {}, unwound frames {}, tail calls {}, unexplained transfers {}",
        cct.unmatched_returns, cct.unwound_frames, cct.tail_calls, cct.unexplained_transfers
    )?;
    writeln!(
        w,
        "gprof's equal-cost-per-call assumption misplaces {:.2}% of the instructions across contexts",
        gprof.epsilon * 100.0
    )?;
    writeln!(
        w,
        "\n{:>12} {:>7} {:>12}  context",
        "instructions", "share", "gprof"
    )?;
    for c in contexts.iter().take(a.top) {
        writeln!(
            w,
            "{:>12} {:>6.2}% {:>12.0}  {}",
            c.instructions,
            c.share * 100.0,
            c.gprof,
            c.stack.join(";")
        )?;
    }
    if let Some(s) = &sampled {
        writeln!(
            w,
            "\nsampled contexts: epsilon {:.4}, {} exact / {} sampled contexts, {} missed ({:.2}% of instructions), {} spurious, {} inside their 95% Wilson interval",
            s.epsilon,
            s.exact_contexts,
            s.sampled_contexts,
            s.missed,
            s.missed_share * 100.0,
            s.spurious,
            s.within_ci
        )?;
        writeln!(
            w,
            "{:>8} {:>7} {:>17} {:>7}  context",
            "samples", "share", "95% CI", "exact"
        )?;
        for c in s.contexts.iter().take(a.top) {
            writeln!(
                w,
                "{:>8} {:>6.2}% [{:>6.2}, {:>6.2}] {:>6.2}%  {}",
                c.samples,
                c.share * 100.0,
                c.ci.0 * 100.0,
                c.ci.1 * 100.0,
                c.exact_share * 100.0,
                c.stack.join(";")
            )?;
        }
    }
    Ok(())
}
