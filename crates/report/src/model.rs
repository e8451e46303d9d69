//! The audit report: what `--json` prints.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One audit: configuration, metrics, per-function rows, and optional detail.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditReport {
    /// What was compared and how.
    pub config: AuditConfig,
    /// The accuracy metrics.
    pub metrics: Metrics,
    /// Per-function rows, sorted by exact share, largest first.
    pub functions: Vec<FunctionRow>,
    /// Per-instruction picture of the hottest function (seed 001 Fig. 1), when available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hottest: Option<InstructionPicture>,
    /// Metrics against the sampling period (`--sweep`); empty otherwise.
    #[serde(default)]
    pub sweep: Vec<SweepPoint>,
    /// Warnings the reader must see (weighting caveats, lost samples, unattributed samples).
    #[serde(default)]
    pub warnings: Vec<crate::Warning>,
    /// Per audited binary: its samples in named functions, in functions recovered from
    /// FDEs without a name (`gawk!sub_46dd00`), and in no function (rows of their own
    /// address).
    #[serde(default)]
    pub attribution: Vec<crate::attribution::ModuleAttribution>,
    /// The same comparison after undoing skid (`--correct-skid`, seed 000), when asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrected: Option<CorrectedSide>,
    /// The processes on both sides, by name, when the exact side lists its process images
    /// (a run of this version; docs/processes.md, "Process trees"); empty for a truth file
    /// that does not list them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<ProcessRow>,
}

/// The process images of one name (the kernel's `comm`: `sort`, `sh`) on both sides of an
/// audit: how many each side has, their samples and exact instructions, and whether they
/// were compared.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessRow {
    /// The process name (`comm`), or what it started as (`sh, forked`).
    pub name: String,
    /// How the images began: `started` (the program started), `forked`, `exec`, with
    /// `, then exec` when an `execve` replaced them (the exec'd image is a row of its own).
    pub start: String,
    /// Images of this name in the samples.
    pub sampled_images: u64,
    /// Images of this name the exact run counted.
    pub exact_images: u64,
    /// Their samples (the compared event).
    pub samples: u64,
    /// Share of the compared samples (0 when left out).
    pub sampled_share: f64,
    /// Their exact instructions.
    pub exact_instructions: u64,
    /// Share of the compared exact instructions (0 when left out).
    pub exact_share: f64,
    /// Process ids in the samples.
    pub sampled_pids: Vec<u32>,
    /// Process ids in the exact run.
    pub exact_pids: Vec<u32>,
    /// Why these images are left out of both sides; `None` when compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_out: Option<String>,
}

/// The skid-corrected profile compared with the same truth: the metrics and per-function
/// shares the raw ones sit beside.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CorrectedSide {
    /// Skid assumed, in cycles.
    pub skid: f64,
    /// Solver (`flow`: whole-program flow correction; see `proftrust correct`).
    pub method: String,
    /// Metrics of the corrected profile against the truth (intervals do not apply: the
    /// corrected counts are estimates, not binomial samples).
    pub metrics: Metrics,
    /// Per function: the corrected share (same order and names as the raw rows).
    pub functions: Vec<CorrectedFunction>,
}

/// One function of the corrected profile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CorrectedFunction {
    /// Function name, as in the raw rows.
    pub name: String,
    /// Corrected instruction estimate.
    pub corrected_instructions: f64,
    /// Corrected share of the audited binaries' instructions.
    pub corrected_share: f64,
}

/// Configuration of an audit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditConfig {
    /// proftrust version.
    pub proftrust_version: String,
    /// Seed of every random choice (period randomisation); printed in every report.
    pub seed: u64,
    /// `instructions` or `cycles-estimate`: what the exact side counts.
    pub truth_weight: String,
    /// How the cycle estimate is formed when `truth_weight` is `cycles-estimate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truth_weight_formula: Option<String>,
    /// Sampled event name (`cpu-clock`, `cycles`).
    pub event: String,
    /// Sampling period (events, or ns for clock events), when fixed.
    pub period: Option<u64>,
    /// Sampling frequency, Hz, when the recording asked for one (`-F`; the kernel adjusts
    /// the period as it goes). Absent for a fixed period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_hz: Option<u64>,
    /// Whether the period was randomised (seed 001 §4).
    pub randomized: bool,
    /// Where the samples came from (file path, or `recorded`).
    pub samples_source: String,
    /// Where the truth came from (file path, or the backend that counted).
    pub truth_source: String,
    /// Exact backend (`qemu`, `callgrind`).
    pub truth_backend: String,
    /// The audited binary.
    pub binary: String,
    /// Why this binary, when proftrust chose it (no `--binary`): the share of the samples
    /// it holds, and the program's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary_reason: Option<String>,
    /// Its build-id, hex, when known.
    pub build_id: Option<String>,
    /// The profiled command line, when known.
    pub command: Vec<String>,
    /// Versions of the external tools involved (`perf`, `valgrind`, `qemu-x86_64`).
    pub tool_versions: BTreeMap<String, String>,
    /// Exact share from which a function without samples takes part in the rank metrics
    /// (Kendall tau-b, top-k overlap); sampled functions always do.
    #[serde(default)]
    pub rank_threshold: f64,
    /// Set when proftrust was interrupted (SIGINT, SIGTERM, SIGHUP) while it recorded or
    /// counted: which signal, in which phase, and what the report then holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    /// No exact counts: the audit was interrupted before its exact run. The rows hold the
    /// samples alone; every exact column is zero and every metric `null`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truth_missing: bool,
}

/// The accuracy metrics. `None` (JSON `null`) when a metric is undefined for this input,
/// e.g. Kendall tau with fewer than two functions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Weighted NRMSE of seed 001 at instruction level.
    pub nrmse_sr: Option<f64>,
    /// Sample coverage of seed 001.
    pub sc: Option<f64>,
    /// Order deviation of seed 001 (block order levels), as printed (`/m` inside the root).
    pub od: Option<f64>,
    /// Order deviation per seed 001 §4.2's prose (no `/m`: the samples' RMS level
    /// deviation; "OD 2.0 means deviated by 2").
    #[serde(default)]
    pub od_prose: Option<f64>,
    /// Mis-attribution ε per outermost function (seed 000).
    pub epsilon_function: Option<f64>,
    /// ε per innermost inlined function.
    pub epsilon_inline: Option<f64>,
    /// ε per basic block.
    pub epsilon_block: Option<f64>,
    /// ε per instruction address.
    pub epsilon_instruction: Option<f64>,
    /// Kendall tau-b between the sampled and exact function rankings.
    pub kendall_tau: Option<f64>,
    /// Top-5 overlap of the function rankings.
    pub top5_overlap: Option<f64>,
    /// Top-10 overlap of the function rankings.
    pub top10_overlap: Option<f64>,
    /// Share of functions above 1% exact share that got at least one sample.
    pub coverage: Option<f64>,
    /// N_S: samples in the audited binary.
    pub samples: u64,
    /// Samples outside the audited binary (other modules, kernel), not compared.
    pub samples_elsewhere: u64,
    /// N_I: executed instructions in the audited binary.
    pub instructions: u64,
    /// Exact weight total (equals `instructions` for the `instructions` weighting).
    pub exact_weight: u64,
    /// m: distinct sampled instruction addresses.
    pub sampled_ips: u64,
    /// Functions whose exact share lies outside the 95% interval of the sampled share.
    pub functions_outside_ci: u64,
    /// Of those, the functions with enough samples (observed or expected) to call the
    /// difference bias (`proftrust_metrics::evidence`); the rest rest on too few samples.
    #[serde(default)]
    pub functions_biased: u64,
    /// The metrics that rest on too few samples to be evidence, by key (`kendall_tau`,
    /// `coverage`, ...), with the reason (`proftrust_metrics::evidence::too_few`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub too_few: BTreeMap<String, String>,
}

impl FunctionRow {
    /// Whether the row is worth showing in a table or plot: it has samples, or at least
    /// 0.01% of the exact weight.
    pub fn is_visible(&self) -> bool {
        self.samples > 0 || self.exact_share >= 1e-4
    }
}

/// One function.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionRow {
    /// Name (demangled); `prog!sub_1234` for a function recovered from an FDE; the address
    /// `prog+0x1234` where no function covers it.
    pub name: String,
    /// Samples whose IP is in the function.
    pub samples: u64,
    /// `samples / N_S`.
    pub sampled_share: f64,
    /// Lower end of the 95% Wilson interval of the sampled share.
    pub ci_low: f64,
    /// Upper end.
    pub ci_high: f64,
    /// Exact executed instructions in the function.
    pub exact_instructions: u64,
    /// Exact weight (instructions or cycle estimate, see `config.truth_weight`).
    pub exact_weight: u64,
    /// `exact_weight / total weight`.
    pub exact_share: f64,
    /// `sampled_share − exact_share`.
    pub difference: f64,
    /// Whether `exact_share` lies outside `[ci_low, ci_high]`.
    pub outside_ci: bool,
    /// Whether the difference is bias: outside the interval with enough samples (observed,
    /// or expected from the exact share) to say so; the `!` of the reports.
    #[serde(default)]
    pub bias: bool,
}

/// Per-instruction comparison inside one function (seed 001 Fig. 1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InstructionPicture {
    /// The function.
    pub function: String,
    /// Its instructions (executed or sampled), by address.
    pub rows: Vec<InstructionRow>,
}

/// One instruction of [`InstructionPicture`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InstructionRow {
    /// Module-relative address (SVMA).
    pub address: u64,
    /// Samples at this address.
    pub samples: u64,
    /// Share of the function's samples.
    pub sampled_share: f64,
    /// Exact executions.
    pub exact: u64,
    /// Share of the function's exact weight.
    pub exact_share: f64,
    /// The instruction as `objdump -d` prints it (AT&T syntax), when the binary's code could
    /// be decoded (x86-64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// Metrics at one sampling period of a sweep.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// The period (events or ns).
    pub period: u64,
    /// Whether randomisation was on.
    pub randomized: bool,
    /// Samples in the binary.
    pub samples: u64,
    /// NRMSE_SR.
    pub nrmse_sr: Option<f64>,
    /// SC.
    pub sc: Option<f64>,
    /// OD as printed.
    pub od: Option<f64>,
    /// OD per the paper's prose (no `/m`).
    #[serde(default)]
    pub od_prose: Option<f64>,
    /// ε per function.
    pub epsilon_function: Option<f64>,
}
