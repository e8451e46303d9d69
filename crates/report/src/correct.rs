//! The report of `correct` (skid correction of an instruction profile, seed 000 §2): its
//! data, the text table and the JSON document (keys sorted, as `serde_json` maps print).

use crate::quote_name;
use serde::Serialize;
use std::fmt::Write as _;

/// What `correct` found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CorrectReport {
    /// The binary whose code was corrected (as given).
    pub binary: String,
    /// Skid undone, in cycles.
    pub skid: f64,
    /// `flow`, `gibbs` or `lsq`.
    pub solver: String,
    /// Emulation of the loop solvers (`Mixed`, `PerLoop`).
    pub emulation: String,
    /// Seed of the Gibbs sampler.
    pub seed: u64,
    /// Per function (innermost inline frame; other modules grouped), most raw instructions
    /// first.
    pub functions: Vec<CorrectedFunctionRow>,
    /// Loops corrected on their own (loop solvers).
    pub loops: Vec<CorrectedLoop>,
    /// The whole-program solution (flow solver).
    pub flow: Option<FlowSummary>,
    /// Per basic block of the modelled code.
    pub blocks: Vec<CorrectedBlock>,
    /// Instructions whose estimate changed, in address order.
    pub instructions: Vec<CorrectedInstruction>,
    /// What was left alone and why.
    pub skipped: Vec<String>,
    /// Epsilon before and after, when exact counts were given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<CorrectMetrics>,
}

/// One function's instructions and IPC, raw and corrected (and true, with exact counts).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CorrectedFunctionRow {
    /// Name.
    pub name: String,
    /// Sampled instructions (samples x period).
    pub raw_instructions: f64,
    /// Corrected instructions.
    pub corrected_instructions: f64,
    /// Sampled cycles.
    pub cycles: f64,
    /// Raw instructions / cycles.
    pub raw_ipc: Option<f64>,
    /// Corrected instructions / cycles.
    pub corrected_ipc: Option<f64>,
    /// Exact instructions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub true_instructions: Option<u64>,
    /// Exact IPC (with exact cycles).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub true_ipc: Option<f64>,
}

/// One loop corrected on its own.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CorrectedLoop {
    /// Function.
    pub function: String,
    /// Header address.
    pub header: String,
    /// Basic blocks.
    pub blocks: usize,
    /// Simple loops.
    pub simple_loops: usize,
    /// Fitted frequency of each simple loop.
    pub frequencies: Vec<f64>,
    /// `phi` at the start.
    pub phi_start: f64,
    /// `phi` at the solution.
    pub phi: f64,
    /// Iterations run.
    pub iterations: usize,
    /// Whether the solver converged.
    pub converged: bool,
}

/// The flow solver's solution, summarised.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowSummary {
    /// Modelled functions.
    pub functions: Vec<String>,
    /// Black boxes (shared libraries through PLT stubs).
    pub boxes: Vec<String>,
    /// Modelled blocks.
    pub blocks: usize,
    /// `phi` of the raw fit.
    pub phi_start: f64,
    /// `phi` at the solution.
    pub phi: f64,
    /// Iterations run.
    pub iterations: usize,
    /// Whether the convergence rule was met.
    pub converged: bool,
    /// Largest relative violation of flow conservation.
    pub max_conservation_error: f64,
}

/// One basic block, raw and corrected instructions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CorrectedBlock {
    /// Function.
    pub function: String,
    /// Start address.
    pub start: String,
    /// Raw instructions.
    pub raw: f64,
    /// Corrected instructions.
    pub corrected: f64,
}

/// One instruction whose estimate changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CorrectedInstruction {
    /// Address.
    pub address: String,
    /// Function.
    pub function: String,
    /// Raw instructions.
    pub raw: f64,
    /// Corrected instructions.
    pub corrected: f64,
}

/// Epsilon (seed 000) of the raw and corrected profiles against exact counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CorrectMetrics {
    /// Function level, raw.
    pub epsilon_function_raw: f64,
    /// Function level, corrected.
    pub epsilon_function_corrected: f64,
    /// Instruction level, raw.
    pub epsilon_instruction_raw: f64,
    /// Instruction level, corrected.
    pub epsilon_instruction_corrected: f64,
}

impl CorrectReport {
    /// The JSON document: every object's keys in sorted order, pretty-printed.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(&serde_json::to_value(self)?)
    }

    /// The text report: the solver's summary, loops, skips, the function table and epsilon.
    pub fn render_text(&self) -> String {
        let mut o = String::new();
        match &self.flow {
            Some(f) => {
                _ = writeln!(
                    o,
                    "skid {} cycles, solver flow: {} function(s), {} block(s), {}; phi \
                 {:.3e} -> {:.3e} ({} iterations{})",
                    self.skid,
                    f.functions.len(),
                    f.blocks,
                    if f.boxes.is_empty() {
                        "no shared library modelled as a black box".to_string()
                    } else {
                        format!(
                            "black boxes (shared libraries): {}",
                            quote_name(&f.boxes.join(", "))
                        )
                    },
                    f.phi_start,
                    f.phi,
                    f.iterations,
                    if f.converged { "" } else { ", not converged" }
                )
            }
            None => {
                _ = writeln!(
                    o,
                    "skid {} cycles, solver {}, seed {}; {} loop(s) corrected",
                    self.skid,
                    self.solver,
                    self.seed,
                    self.loops.len()
                )
            }
        }
        for l in &self.loops {
            _ = writeln!(
                o,
                "  loop {} in {}: {} blocks, {} simple loops, phi {:.3e} -> {:.3e} ({} iterations{})",
                l.header,
                quote_name(&l.function),
                l.blocks,
                l.simple_loops,
                l.phi_start,
                l.phi,
                l.iterations,
                if l.converged { "" } else { ", not converged" }
            );
        }
        for s in &self.skipped {
            _ = writeln!(o, "  skipped: {}", quote_name(s));
        }
        let fmt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.3}"));
        _ = writeln!(
            o,
            "{:<32} {:>14} {:>14} {:>8} {:>8} {:>14} {:>8}",
            "function", "raw instr", "corrected", "raw IPC", "corr IPC", "true instr", "true IPC"
        );
        for f in &self.functions {
            _ = writeln!(
                o,
                "{:<32} {:>14.0} {:>14.0} {:>8} {:>8} {:>14} {:>8}",
                quote_name(&f.name),
                f.raw_instructions,
                f.corrected_instructions,
                fmt(f.raw_ipc),
                fmt(f.corrected_ipc),
                f.true_instructions.map_or("-".into(), |v| v.to_string()),
                fmt(f.true_ipc)
            );
        }
        if let Some(m) = &self.metrics {
            _ = writeln!(
                o,
                "epsilon function: raw {:.4} corrected {:.4}; instruction: raw {:.4} corrected {:.4}",
                m.epsilon_function_raw,
                m.epsilon_function_corrected,
                m.epsilon_instruction_raw,
                m.epsilon_instruction_corrected,
            );
        }
        o
    }
}
