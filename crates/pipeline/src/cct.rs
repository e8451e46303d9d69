//! `cct`: the exact calling context tree of a program (seed 003 §4) from its QEMU block
//! trace, with the timing model's cycles and misses per record; the gprof problem measured
//! on it; and, given a call-chain sample file, the sampled contexts compared with it.

use crate::error::{bail, bail_options, Context, Result};
use crate::trace::{self, BinaryCode, TraceOptions, Traced};
use crate::Events;
use proftrust_binary::Symbolizer;
use proftrust_model::{ModuleTable, RunOutcome, SampleSet, Warning, WarningKind};
use proftrust_paths::{
    compare_cct, gprof_comparison, sampled_cct_with, Cct, FunctionMap, GprofComparison,
    ProfilerOptions, SampledComparison,
};
pub use proftrust_report::cct::{CctBackedge, CctContext, CctRecord, CctReport};
use std::path::{Path, PathBuf};

/// Weight of the exact CCT's collapsed stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FoldedMetric {
    /// Exclusive instructions.
    #[default]
    Instructions,
    /// Exclusive modelled cycles.
    Cycles,
    /// Exclusive modelled L1D misses.
    L1Misses,
    /// Exclusive modelled last-level cache misses.
    LlcMisses,
}

impl proftrust_model::named::Named for FoldedMetric {
    const ALL: &'static [(Self, &'static str, &'static str)] = &[
        (
            FoldedMetric::Instructions,
            "instructions",
            "Exclusive instructions",
        ),
        (FoldedMetric::Cycles, "cycles", "Exclusive modelled cycles"),
        (
            FoldedMetric::L1Misses,
            "l1-misses",
            "Exclusive modelled L1D misses",
        ),
        (
            FoldedMetric::LlcMisses,
            "llc-misses",
            "Exclusive modelled last-level cache misses",
        ),
    ];
}
proftrust_model::named_from_str!(FoldedMetric);

/// Settings of [`execute`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CctOptions {
    /// The program and its arguments. Default empty (an error: give one).
    pub command: Vec<String>,
    /// A call-chain sample file of the same program to compare with the exact CCT.
    /// Default none.
    pub samples: Option<PathBuf>,
    /// Compare contexts from the outermost frame of this function (frame-pointer unwinding
    /// cannot see libc's start-up frames); `None` compares whole stacks. Default `main`.
    pub anchor: Option<String>,
    /// Put the exact CCT as collapsed stacks with this weight in [`CctReport::folded`].
    /// Default none.
    pub folded: Option<FoldedMetric>,
    /// Put the sampled contexts as collapsed stacks in [`CctReport::sampled_folded`] (with
    /// [`CctOptions::samples`]). Default false.
    pub sampled_folded: bool,
    /// Timing model and QEMU's settings. Default [`TraceOptions::default`].
    pub trace: TraceOptions,
    /// Let the program's output through. Default false.
    pub show_output: bool,
}

impl Default for CctOptions {
    fn default() -> Self {
        CctOptions {
            command: Vec::new(),
            samples: None,
            anchor: Some("main".to_string()),
            folded: None,
            sampled_folded: false,
            trace: TraceOptions::default(),
            show_output: false,
        }
    }
}

/// Traces the program and builds its calling context tree report. Notes and progress go
/// to `events`; warnings are in the report.
pub fn execute(o: &CctOptions, events: &dyn Events) -> Result<CctReport> {
    let Some(prog) = o.command.first() else {
        bail_options!("give the program to run");
    };
    let p = trace::load_program(prog)?;
    let program = std::slice::from_ref(&p.path);
    // Read the samples first: a bad file fails before the (slow) trace.
    let samples = o
        .samples
        .as_deref()
        .map(|f| read_samples(f, program, events))
        .transpose()?;
    let build = ProfilerOptions {
        paths: false,
        cct: true,
    };
    let Traced {
        cct,
        outcome,
        cycle_model,
        ..
    } = trace::trace(&p, &o.command[1..], &o.trace, build, o.show_output, events)?;
    let mut warnings = p.warnings.clone();
    warnings.extend(outcome.warning("the program", "the contexts"));
    let folded_mark = folded_mark(&outcome);
    let names = function_names(&cct, samples.as_ref(), program, &mut warnings);
    let stats = cct.stats();
    let gprof = exact_gprof(&cct, &names, &outcome, &mut warnings)?;
    let total: u64 = cct.nodes().iter().map(|n| n.instructions).sum();
    let sampled = samples
        .as_ref()
        .map(|s| compare_samples(s, &cct, &names, program, o, &folded_mark, events))
        .transpose()?;
    let folded = o
        .folded
        .map(|metric| exact_folded(&cct, &names, metric, &folded_mark))
        .transpose()?;
    let (sampled, repaired, sampled_folded) = match sampled {
        Some(s) => (
            Some(s.comparison),
            Some((s.repaired, s.unrepaired)),
            s.folded,
        ),
        None => (None, None, None),
    };
    Ok(CctReport {
        program: o.command.clone(),
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
        contexts: contexts(&cct, &names, &gprof, total),
        records: records(&cct, &names),
        recursion_backedges: recursion_backedges(&cct),
        epsilon_sampled: sampled.as_ref().map(|s| s.epsilon),
        sampled,
        sampled_frames_repaired: repaired.map(|x| x.0),
        sampled_frames_unrepaired: repaired.map(|x| x.1),
        warnings,
        anchor: o.anchor.clone(),
        folded,
        sampled_folded,
    })
}

/// The first line of the folded files: the run's outcome as a comment flame-graph tools
/// skip (empty for a whole run), so a file written on an interrupt does not look like a
/// whole run.
fn folded_mark(outcome: &RunOutcome) -> Vec<u8> {
    outcome
        .sentence("the program", "these stacks")
        .map(|w| proftrust_model::folded_comment(&w).into_bytes())
        .unwrap_or_default()
}

/// The function names of the traced modules and, if any, of the sampled ones.
fn function_names(
    cct: &Cct,
    samples: Option<&SampleSet>,
    program: &[PathBuf],
    warnings: &mut Vec<Warning>,
) -> FunctionMap {
    let mut names = FunctionMap::default();
    add_names(&mut names, &cct.modules, program, warnings);
    if let Some(s) = samples {
        add_names(&mut names, &s.modules, program, warnings);
    }
    names.finish()
}

/// The exact contexts compared with gprof's assumption; empty, with a warning, when a run
/// cut short left no instruction in the trace.
fn exact_gprof(
    cct: &Cct,
    names: &FunctionMap,
    outcome: &RunOutcome,
    warnings: &mut Vec<Warning>,
) -> Result<GprofComparison> {
    match gprof_comparison(cct, names) {
        // A run cut short before anything reached the trace (a fatal signal loses QEMU's
        // trace buffers; an interrupt at the start): say so instead of failing.
        Err(proftrust_paths::Error::Empty { .. })
            if !matches!(outcome, RunOutcome::Exited { code: 0 }) =>
        {
            warnings.push(Warning::new(
                WarningKind::EndedEarly,
                "the trace holds no instruction",
            ));
            Ok(GprofComparison {
                epsilon: 0.0,
                contexts: Vec::new(),
            })
        }
        r => r.context("comparing with gprof's assumption"),
    }
}

/// The sampled contexts compared with the exact ones.
struct SampledSide {
    comparison: SampledComparison,
    /// Samples whose missing caller frame was restored.
    repaired: u64,
    /// Samples whose missing caller frame could not be restored.
    unrepaired: u64,
    /// The sampled contexts as collapsed stacks, if asked for.
    folded: Option<Vec<u8>>,
}

/// Builds the sampled CCT of `s` and compares it with the exact `cct`.
fn compare_samples(
    s: &SampleSet,
    cct: &Cct,
    names: &FunctionMap,
    program: &[PathBuf],
    o: &CctOptions,
    folded_mark: &[u8],
    events: &dyn Events,
) -> Result<SampledSide> {
    let sym = Symbolizer::new(&s.modules, program);
    let sc = sampled_cct_with(s, names, None, &BinaryCode::new(&sym));
    if sc.repaired > 0 || sc.unrepaired > 0 {
        events.note(&format!(
            "{} sample(s) fell where their function had no frame (frameless leaf, prologue or epilogue): caller restored from the direct call at the first return address for {}, not restorable for {} (indirect call, or code without frame pointers)",
            sc.repaired + sc.unrepaired,
            sc.repaired,
            sc.unrepaired
        ));
    }
    let folded = if o.sampled_folded {
        let mut buf = folded_mark.to_vec();
        sc.write_folded(&mut buf)
            .context("writing the sampled contexts as collapsed stacks")?;
        Some(buf)
    } else {
        None
    };
    let exact = cct.context_instructions(names, None);
    let comparison = compare_cct(&sc, &exact, o.anchor.as_deref())
        .context("comparing sampled and exact contexts")?;
    Ok(SampledSide {
        comparison,
        repaired: sc.repaired,
        unrepaired: sc.unrepaired,
        folded,
    })
}

/// The exact CCT as collapsed stacks weighted by `metric`, after `folded_mark`.
fn exact_folded(
    cct: &Cct,
    names: &FunctionMap,
    metric: FoldedMetric,
    folded_mark: &[u8],
) -> Result<Vec<u8>> {
    let mut buf = folded_mark.to_vec();
    cct.write_folded_by(names, &mut buf, |n| match metric {
        FoldedMetric::Instructions => n.instructions,
        FoldedMetric::Cycles => n.cycles,
        FoldedMetric::L1Misses => n.l1_misses,
        FoldedMetric::LlcMisses => n.llc_misses,
    })
    .context("writing the CCT as collapsed stacks")?;
    Ok(buf)
}

/// The report's contexts: gprof's comparison with each context's cycles and L1D misses.
fn contexts(
    cct: &Cct,
    names: &FunctionMap,
    gprof: &GprofComparison,
    total: u64,
) -> Vec<CctContext> {
    let cyc = cct.context_metric(names, None, |n| n.cycles);
    let l1 = cct.context_metric(names, None, |n| n.l1_misses);
    gprof
        .contexts
        .iter()
        .map(|c| CctContext {
            stack: c.stack.clone(),
            instructions: c.exact,
            share: c.exact as f64 / total.max(1) as f64,
            gprof: c.gprof,
            cycles: cyc.get(&c.stack).copied().unwrap_or(0),
            l1_misses: l1.get(&c.stack).copied().unwrap_or(0),
        })
        .collect()
}

/// One record per CCT node but the root.
fn records(cct: &Cct, names: &FunctionMap) -> Vec<CctRecord> {
    cct.nodes()
        .iter()
        .skip(1)
        .map(|n| CctRecord {
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
        .collect()
}

/// The CCT's recursion backedges.
fn recursion_backedges(cct: &Cct) -> Vec<CctBackedge> {
    cct.backedges()
        .into_iter()
        .map(|(f, t, c)| CctBackedge {
            from: f.0,
            to: t.0,
            calls: c,
        })
        .collect()
}

/// Adds every function of every module's binary to `map`.
fn add_names(
    map: &mut FunctionMap,
    modules: &ModuleTable,
    extra: &[PathBuf],
    warnings: &mut Vec<Warning>,
) {
    let sym = Symbolizer::new(modules, extra);
    for (i, m) in modules.iter() {
        if let Some(b) = sym.binary(i) {
            for f in b.functions() {
                map.insert(m.file_name(), f.start.0, f.end().0, &f.name);
            }
        }
    }
    warnings.extend(crate::warnings::all_symbols(sym.warnings()));
}

/// Reads a sample file that must hold call chains.
fn read_samples(path: &Path, binaries: &[PathBuf], events: &dyn Events) -> Result<SampleSet> {
    let s = crate::load::samples(path, binaries, events)?;
    if !s.samples.iter().any(|x| !x.callchain.is_empty()) {
        bail!(
            "{}: no sample has a call chain; record with call graphs (`proftrust record -g` or `perf record -g`)",
            path.display()
        );
    }
    Ok(s)
}
