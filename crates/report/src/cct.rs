//! The report of `cct` (the exact calling context tree, seed 003 §4, the gprof problem
//! measured on it, and sampled contexts compared with it): its data, which is the `--json`
//! document (keys in field order), and the text report.

use crate::quote_name;
use proftrust_model::RunOutcome;
use proftrust_paths::SampledComparison;
use serde::Serialize;
use std::fmt::Write as _;

/// What `cct` found. Serialised, it is the `--json` contract (docs/paths.md); the
/// `#[serde(skip)]` fields feed the text report and the folded files only.
#[derive(Debug, Clone, Serialize)]
pub struct CctReport {
    /// The program and its arguments.
    pub program: Vec<String>,
    /// How the run ended.
    pub outcome: Option<RunOutcome>,
    /// The timing model, described.
    pub cycle_model: String,
    /// Instructions in all records.
    pub total_instructions: u64,
    /// Modelled cycles in all records.
    pub total_cycles: u64,
    /// Modelled L1D misses in all records.
    pub total_l1_misses: u64,
    /// Modelled last-level cache misses in all records.
    pub total_llc_misses: u64,
    /// Records (the root aside).
    pub nodes: usize,
    /// Average out-degree.
    pub avg_degree: f64,
    /// Height.
    pub height: u32,
    /// Average depth of the leaves.
    pub avg_leaf_depth: f64,
    /// Most records of one procedure.
    pub max_replication: usize,
    /// That procedure.
    pub max_replicated_procedure: Option<String>,
    /// Distinct call sites.
    pub call_sites: usize,
    /// Recursion backedges.
    pub backedges: usize,
    /// Returns without a matching call.
    pub unmatched_returns: u64,
    /// Frames left without a return (longjmp, exceptions).
    pub unwound_frames: u64,
    /// Tail calls.
    pub tail_calls: u64,
    /// Transfers neither call nor return nor inside a function.
    pub unexplained_transfers: u64,
    /// Share of the instructions gprof's equal-cost-per-call assumption misplaces.
    pub gprof_epsilon: f64,
    /// Calling contexts with their exact and gprof-estimated instructions.
    pub contexts: Vec<CctContext>,
    /// The tree's records.
    pub records: Vec<CctRecord>,
    /// Recursion backedges (record ids).
    pub recursion_backedges: Vec<CctBackedge>,
    /// Epsilon of the sampled contexts, with a sample file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epsilon_sampled: Option<f64>,
    /// Sampled against exact contexts, with a sample file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled: Option<SampledComparison>,
    /// Samples whose missing caller (no frame at the sampled address) was restored from the
    /// direct call at their first return address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled_frames_repaired: Option<u64>,
    /// Samples whose missing caller could not be restored (indirect call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled_frames_unrepaired: Option<u64>,
    /// Warnings about the binary, the trace and the samples.
    pub warnings: Vec<crate::Warning>,
    /// The function sampled contexts are compared from (`None`: whole stacks).
    #[serde(skip)]
    pub anchor: Option<String>,
    /// The exact CCT as collapsed stacks, when asked for.
    #[serde(skip)]
    pub folded: Option<Vec<u8>>,
    /// The sampled contexts as collapsed stacks, when asked for.
    #[serde(skip)]
    pub sampled_folded: Option<Vec<u8>>,
}

/// A calling context.
#[derive(Debug, Clone, Serialize)]
pub struct CctContext {
    /// Outermost frame first.
    pub stack: Vec<String>,
    /// Exact instructions (exclusive).
    pub instructions: u64,
    /// Their share of all.
    pub share: f64,
    /// What gprof's assumption gives the context.
    pub gprof: f64,
    /// Modelled cycles (exclusive).
    #[serde(skip)]
    pub cycles: u64,
    /// Modelled L1D misses (exclusive).
    #[serde(skip)]
    pub l1_misses: u64,
}

/// A record of the tree.
#[derive(Debug, Clone, Serialize)]
pub struct CctRecord {
    /// Id.
    pub id: u32,
    /// Parent's id.
    pub parent: Option<u32>,
    /// Procedure.
    pub procedure: String,
    /// Call site (hex).
    pub site: Option<String>,
    /// Depth.
    pub depth: u32,
    /// Calls.
    pub calls: u64,
    /// Instructions.
    pub instructions: u64,
    /// Modelled cycles.
    pub cycles: u64,
    /// Modelled L1D misses.
    pub l1_misses: u64,
    /// Modelled last-level cache misses.
    pub llc_misses: u64,
}

/// A recursion backedge.
#[derive(Debug, Clone, Serialize)]
pub struct CctBackedge {
    /// From record.
    pub from: u32,
    /// To record.
    pub to: u32,
    /// Calls along it.
    pub calls: u64,
}

impl CctReport {
    /// The JSON document (keys in field order), pretty-printed, without a final newline.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }

    /// The text report: the tree's statistics, gprof's error, the `top` contexts and, with
    /// samples, the `top` sampled contexts. Warnings are not included.
    pub fn render_text(&self, top: usize) -> String {
        let mut w = String::new();
        // An abnormal end is said in the report itself, not only on stderr.
        if let Some(x) = self
            .outcome
            .as_ref()
            .and_then(|o| o.sentence("the program", "the contexts"))
        {
            _ = writeln!(w, "warning: {x}");
        }
        _ = writeln!(
            w,
            "CCT: {} records, height {} (average leaf depth {:.1}), average degree {:.2}, max replication {} ({}), {} call sites, {} recursion backedges",
            self.nodes,
            self.height,
            self.avg_leaf_depth,
            self.avg_degree,
            self.max_replication,
            quote_name(self.max_replicated_procedure.as_deref().unwrap_or_default()),
            self.call_sites,
            self.backedges
        );
        _ = writeln!(
            w,
            "unmatched returns {}, unwound frames {}, tail calls {}, unexplained transfers {}",
            self.unmatched_returns,
            self.unwound_frames,
            self.tail_calls,
            self.unexplained_transfers
        );
        _ = writeln!(
            w,
            "gprof's equal-cost-per-call assumption misplaces {:.2}% of the instructions across contexts",
            self.gprof_epsilon * 100.0
        );
        _ = writeln!(w, "timing: {}", self.cycle_model);
        _ = writeln!(
            w,
            "\n{:>12} {:>7} {:>12} {:>12} {:>9}  context",
            "instructions", "share", "gprof", "cycles", "L1D miss"
        );
        for c in self.contexts.iter().take(top) {
            _ = writeln!(
                w,
                "{:>12} {:>6.2}% {:>12.0} {:>12} {:>9}  {}",
                c.instructions,
                c.share * 100.0,
                c.gprof,
                c.cycles,
                c.l1_misses,
                quote_name(&c.stack.join(";"))
            );
        }
        if let Some(s) = &self.sampled {
            self.render_sampled(&mut w, s, top);
        }
        w
    }

    fn render_sampled(&self, w: &mut String, s: &SampledComparison, top: usize) {
        _ = writeln!(
            w,
            "\nsampled contexts: epsilon {:.4}, {} exact / {} sampled contexts, {} missed ({:.2}% of instructions), {} spurious, {} inside their 95% Wilson interval",
            s.epsilon,
            s.exact_contexts,
            s.sampled_contexts,
            s.missed,
            s.missed_share * 100.0,
            s.spurious,
            s.within_ci
        );
        if let Some(anchor) = &self.anchor {
            let anchor = quote_name(anchor);
            _ = writeln!(
                w,
                "outside {anchor}: {:.2}% of the samples, {:.2}% of the exact instructions (left out; shares are within {anchor})",
                s.outside_anchor_sampled * 100.0,
                s.outside_anchor_exact * 100.0,
            );
        }
        _ = writeln!(
            w,
            "{:>8} {:>7} {:>17} {:>7}  context",
            "samples", "share", "95% CI", "exact"
        );
        for c in s.contexts.iter().take(top) {
            _ = writeln!(
                w,
                "{:>8} {:>6.2}% [{:>6.2}, {:>6.2}] {:>6.2}%  {}",
                c.samples,
                c.share * 100.0,
                c.ci.0 * 100.0,
                c.ci.1 * 100.0,
                c.exact_share * 100.0,
                quote_name(&c.stack.join(";"))
            );
        }
    }
}
