//! `proftrust cct [--folded FILE] [--json] [--samples FILE] -- PROGRAM ARGS`: the exact
//! calling context tree of a program (seed 003 §4) from its QEMU block trace, the gprof
//! problem measured on it, and, with `--samples`, the sampled contexts of a call-chain
//! profile (`proftrust record -g`, or perf.data from `perf record -g`)
//! compared with it.
//!
//! JSON contract (kept stable): top level `nodes`, `height`, `max_replication`, and
//! `epsilon_sampled` when samples were given; plus `avg_degree`, `call_sites`, `backedges`,
//! `gprof_epsilon`, `contexts` and `sampled`.

use crate::trace_args::TraceArgs;
use crate::util;
use anyhow::{bail, Context, Result};
use proftrust_binary::Symbolizer;
use proftrust_model::{ModuleTable, RunOutcome, SampleSet};
use proftrust_paths::{
    compare_cct, gprof_comparison, sampled_cct_with, FunctionMap, ProfilerOptions,
    SampledComparison,
};
use proftrust_pipeline::trace::{BinaryCode, Traced};
use proftrust_report::quote_name;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Arguments of `proftrust cct`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Write the exact CCT as collapsed stacks (flame-graph folded format, exclusive
    /// `--folded-metric`) to FILE.
    #[arg(long, value_name = "FILE")]
    folded: Option<PathBuf>,
    /// Weight of the folded stacks: instructions, or cycles / l1-misses / llc-misses of the
    /// timing model.
    #[arg(long, value_enum, default_value_t = FoldedMetric::Instructions)]
    folded_metric: FoldedMetric,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// A call-chain sample file of the same program (proftrust `record -g`, perf.data from
    /// `perf record -g`, or `perf script` text of one) to compare with the exact CCT.
    #[arg(long, value_name = "FILE")]
    samples: Option<PathBuf>,
    /// Write the sampled contexts as collapsed stacks (samples) to FILE (needs --samples).
    #[arg(long, value_name = "FILE", requires = "samples")]
    sampled_folded: Option<PathBuf>,
    /// Compare contexts from the outermost frame of this function (frame-pointer unwinding
    /// cannot see libc's start-up frames); `--anchor ''` compares whole stacks.
    #[arg(long, default_value = "main")]
    anchor: String,
    /// Contexts listed in text output (1 to 1000000).
    #[arg(long, default_value_t = 15, value_parser = crate::args::int::<usize>(1, 1_000_000))]
    top: usize,
    #[command(flatten)]
    trace: TraceArgs,
}

/// Weight of the folded export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FoldedMetric {
    /// Exclusive instructions.
    Instructions,
    /// Exclusive modelled cycles.
    Cycles,
    /// Exclusive modelled L1D misses.
    L1Misses,
    /// Exclusive modelled last-level cache misses.
    LlcMisses,
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
    cycles: u64,
    l1_misses: u64,
    llc_misses: u64,
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
    cycle_model: String,
    total_instructions: u64,
    total_cycles: u64,
    total_l1_misses: u64,
    total_llc_misses: u64,
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
    /// Samples whose missing caller (no frame at the sampled address) was restored from the
    /// direct call at their first return address.
    #[serde(skip_serializing_if = "Option::is_none")]
    sampled_frames_repaired: Option<u64>,
    /// Samples whose missing caller could not be restored (indirect call).
    #[serde(skip_serializing_if = "Option::is_none")]
    sampled_frames_unrepaired: Option<u64>,
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

/// Reads a sample file that must hold call chains.
fn read_samples(path: &Path, binaries: &[PathBuf]) -> Result<SampleSet> {
    let s = proftrust_pipeline::load::samples(path, binaries, &util::Ui)?;
    if !s.samples.iter().any(|x| !x.callchain.is_empty()) {
        bail!(
            "{}: no sample has a call chain; record with call graphs (`proftrust record -g` or `perf record -g`)",
            path.display()
        );
    }
    Ok(s)
}

/// Runs `proftrust cct`.
pub fn run(mut a: Args) -> Result<()> {
    crate::output::check_opt(a.folded.as_ref()).context("--folded")?;
    crate::output::check_opt(a.sampled_folded.as_ref()).context("--sampled-folded")?;
    let p = a.trace.load()?;
    // Read the samples first: a bad file fails before the (slow) trace.
    let samples = a
        .samples
        .as_deref()
        .map(|f| read_samples(f, std::slice::from_ref(&p.path)))
        .transpose()?;
    let Traced {
        cct,
        outcome,
        cycle_model,
        ..
    } = a.trace.trace(
        &p,
        ProfilerOptions {
            paths: false,
            cct: true,
        },
        !a.json,
    )?;
    let mut warnings = p.warnings.clone();
    warnings.extend(proftrust_report::outcome_warning(&outcome, "the contexts"));
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
    let gprof = match gprof_comparison(&cct, &names) {
        // A run cut short before anything reached the trace (a fatal signal loses QEMU's
        // trace buffers; an interrupt at the start): say so instead of failing.
        Err(proftrust_paths::Error::Empty { .. })
            if !matches!(outcome, RunOutcome::Exited { code: 0 }) =>
        {
            warnings.push("the trace holds no instruction".into());
            proftrust_paths::GprofComparison {
                epsilon: 0.0,
                contexts: Vec::new(),
            }
        }
        r => r.context("comparing with gprof's assumption")?,
    };
    let total: u64 = cct.nodes().iter().map(|n| n.instructions).sum();
    let anchor = (!a.anchor.is_empty()).then_some(a.anchor.as_str());
    let sampled = match &samples {
        Some(s) => {
            let sym = Symbolizer::new(&s.modules, std::slice::from_ref(&p.path));
            let sc = sampled_cct_with(s, &names, None, &BinaryCode::new(&sym));
            if sc.repaired > 0 || sc.unrepaired > 0 {
                util::note(format!(
                    "{} sample(s) fell where their function had no frame (frameless leaf, prologue or epilogue): caller restored from the direct call at the first return address for {}, not restorable for {} (indirect call, or code without frame pointers)",
                    sc.repaired + sc.unrepaired,
                    sc.repaired,
                    sc.unrepaired
                ));
            }
            if let Some(f) = &a.sampled_folded {
                crate::output::write(f, |w| Ok(sc.write_folded(w)?))?;
            }
            let exact = cct.context_instructions(&names, None);
            let c =
                compare_cct(&sc, &exact, anchor).context("comparing sampled and exact contexts")?;
            Some((c, sc.repaired, sc.unrepaired))
        }
        None => None,
    };
    let (sampled, repaired) = match sampled {
        Some((c, r, u)) => (Some(c), Some((r, u))),
        None => (None, None),
    };
    if let Some(f) = &a.folded {
        let metric = a.folded_metric;
        crate::output::write(f, |w| {
            Ok(cct.write_folded_by(&names, w, |n| match metric {
                FoldedMetric::Instructions => n.instructions,
                FoldedMetric::Cycles => n.cycles,
                FoldedMetric::L1Misses => n.l1_misses,
                FoldedMetric::LlcMisses => n.llc_misses,
            })?)
        })?;
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
            program: a.trace.program.clone(),
            outcome: Some(outcome),
            cycle_model,
            total_instructions: total,
            total_cycles: cct.nodes().iter().map(|n| n.cycles).sum(),
            total_l1_misses: cct.nodes().iter().map(|n| n.l1_misses).sum(),
            total_llc_misses: cct.nodes().iter().map(|n| n.llc_misses).sum(),
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
                    cycles: n.cycles,
                    l1_misses: n.l1_misses,
                    llc_misses: n.llc_misses,
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
            sampled_frames_repaired: repaired.map(|x| x.0),
            sampled_frames_unrepaired: repaired.map(|x| x.1),
            warnings,
        };
        serde_json::to_writer_pretty(&mut w, &rep)?;
        writeln!(w)?;
        return Ok(());
    }
    for x in &warnings {
        util::note(format!("warning: {x}"));
    }
    if let Some(x) = proftrust_report::outcome_warning(&outcome, "the contexts") {
        writeln!(w, "warning: {x}")?;
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
            .map(|l| quote_name(&names.name(&cct.modules, l)).into_owned())
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
    writeln!(w, "timing: {cycle_model}")?;
    let cyc = cct.context_metric(&names, None, |n| n.cycles);
    let l1 = cct.context_metric(&names, None, |n| n.l1_misses);
    writeln!(
        w,
        "\n{:>12} {:>7} {:>12} {:>12} {:>9}  context",
        "instructions", "share", "gprof", "cycles", "L1D miss"
    )?;
    for c in contexts.iter().take(a.top) {
        writeln!(
            w,
            "{:>12} {:>6.2}% {:>12.0} {:>12} {:>9}  {}",
            c.instructions,
            c.share * 100.0,
            c.gprof,
            cyc.get(&c.stack).copied().unwrap_or(0),
            l1.get(&c.stack).copied().unwrap_or(0),
            quote_name(&c.stack.join(";"))
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
        if anchor.is_some() {
            writeln!(
                w,
                "outside {}: {:.2}% of the samples, {:.2}% of the exact instructions (left out; shares are within {})",
                quote_name(&a.anchor),
                s.outside_anchor_sampled * 100.0,
                s.outside_anchor_exact * 100.0,
                quote_name(&a.anchor)
            )?;
        }
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
                quote_name(&c.stack.join(";"))
            )?;
        }
    }
    Ok(())
}
