//! `cct`: the exact calling context tree of a program (seed 003 §4) from its QEMU block
//! trace, with the timing model's cycles and misses per record; the gprof problem measured
//! on it; and, given a call-chain sample file, the sampled contexts compared with it.

use crate::error::{bail, Context, Result};
use crate::trace::{self, BinaryCode, TraceOptions, Traced};
use crate::Events;
use proftrust_binary::Symbolizer;
use proftrust_model::{ModuleTable, RunOutcome, SampleSet};
use proftrust_paths::{
    compare_cct, gprof_comparison, sampled_cct_with, FunctionMap, ProfilerOptions,
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
        bail!("give the program to run");
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
    warnings.extend(proftrust_report::outcome_warning(&outcome, "the contexts"));
    // The folded files carry the same mark as their first line (a comment flame-graph
    // tools skip): a file written on an interrupt must not look like a whole run.
    let folded_mark = proftrust_report::outcome_warning(&outcome, "these stacks")
        .map(|w| proftrust_model::folded_comment(&w).into_bytes())
        .unwrap_or_default();
    let mut names = FunctionMap::default();
    add_names(&mut names, &cct.modules, program, &mut warnings);
    if let Some(s) = &samples {
        add_names(&mut names, &s.modules, program, &mut warnings);
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
    let anchor = o.anchor.as_deref();
    let mut sampled_folded = None;
    let sampled = match &samples {
        Some(s) => {
            let sym = Symbolizer::new(&s.modules, program);
            let sc = sampled_cct_with(s, &names, None, &BinaryCode::new(&sym));
            if sc.repaired > 0 || sc.unrepaired > 0 {
                events.note(&format!(
                    "{} sample(s) fell where their function had no frame (frameless leaf, prologue or epilogue): caller restored from the direct call at the first return address for {}, not restorable for {} (indirect call, or code without frame pointers)",
                    sc.repaired + sc.unrepaired,
                    sc.repaired,
                    sc.unrepaired
                ));
            }
            if o.sampled_folded {
                let mut buf = folded_mark.clone();
                sc.write_folded(&mut buf)
                    .context("writing the sampled contexts as collapsed stacks")?;
                sampled_folded = Some(buf);
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
    let folded = match o.folded {
        Some(metric) => {
            let mut buf = folded_mark.clone();
            cct.write_folded_by(&names, &mut buf, |n| match metric {
                FoldedMetric::Instructions => n.instructions,
                FoldedMetric::Cycles => n.cycles,
                FoldedMetric::L1Misses => n.l1_misses,
                FoldedMetric::LlcMisses => n.llc_misses,
            })
            .context("writing the CCT as collapsed stacks")?;
            Some(buf)
        }
        None => None,
    };
    let cyc = cct.context_metric(&names, None, |n| n.cycles);
    let l1 = cct.context_metric(&names, None, |n| n.l1_misses);
    let contexts = gprof
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
        .collect();
    let records = cct
        .nodes()
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
        .collect();
    let recursion_backedges = cct
        .backedges()
        .into_iter()
        .map(|(f, t, c)| CctBackedge {
            from: f.0,
            to: t.0,
            calls: c,
        })
        .collect();
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
        contexts,
        records,
        recursion_backedges,
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
