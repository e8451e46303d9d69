//! The parts of `check`'s report (`proftrust_report::check::CheckReport`, the `--json`
//! schema, docs/check.md): rows, warnings and findings, filled from this crate's statistics
//! and rendered by `proftrust-report`.

use serde::Serialize;

/// What a row (or the whole profile) can be used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The share is known precisely enough to act on (optimise, compare, report it).
    Act,
    /// The order against other rows holds, the size does not: rank only.
    RankOnly,
    /// Indistinguishable from sampling noise.
    Noise,
}

impl Verdict {
    /// As the text table prints it.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Act => "act on it",
            Verdict::RankOnly => "rank only",
            Verdict::Noise => "noise",
        }
    }
}

/// How finely the samples behind a row are attributed: the facts the verdicts stand on
/// (issue 29, "verdicts know what they stand on"), whatever provides them (a symbol table, a
/// function range recovered from the binary, DWARF).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attribution {
    /// No function: the sample is in a module (or nowhere known) but in no function's range.
    Module,
    /// A function (its range and name), no source: no inline frames, no line.
    Function,
    /// The debug information's inline chain and source line too.
    Line,
}

impl Attribution {
    /// As the reasons name it.
    pub fn label(self) -> &'static str {
        match self {
            Attribution::Module => "module",
            Attribution::Function => "function",
            Attribution::Line => "line",
        }
    }
}

/// The sampled event and what it measures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckEvent {
    /// Name as the file states it (`cpu-clock`, `cycles:pp`).
    pub name: String,
    /// Kind (`cpu-clock`, `task-clock`, `cycles`, `instructions`, `raw`, `other`).
    pub kind: String,
    /// What a sample's share estimates (`time on CPU`, `retired instructions`, ...).
    pub measures: String,
    /// Precise level (`:p` count, 0-3).
    pub precise: u8,
    /// Period as recorded (`fixed 100003`, `frequency 4000 Hz`, `unknown`).
    pub period: String,
    /// Whether the period was randomised (seed 001 §4).
    pub randomized: bool,
}

/// One row: a function, inline function, source line or basic block.
///
/// A new per-row measurement (a column of the text table) is an `Option` field here, skipped
/// in JSON when absent, plus one entry in the report crate's list of extra columns
/// (`proftrust_report::check`), which shows it only when some row has it: `run_low`/`run_high`
/// are the first such.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckRow {
    /// Name (function; `inline (inlined in function)`; `file:line`; `function@0xSTART` for a
    /// block).
    pub name: String,
    /// Samples attributed to it.
    pub samples: u64,
    /// `samples / total`.
    pub share: f64,
    /// Lower bound of the stated interval (see `interval`).
    pub ci_low: f64,
    /// Upper bound of the stated interval.
    pub ci_high: f64,
    /// Method of the stated interval: `wilson`, or `batch-means` where the row's samples
    /// cluster in time.
    pub interval: String,
    /// The Wilson score interval.
    pub wilson_low: f64,
    /// The Wilson score interval.
    pub wilson_high: f64,
    /// The batch-means interval over time slices.
    pub batch_low: f64,
    /// The batch-means interval over time slices.
    pub batch_high: f64,
    /// Batch variance over binomial variance (> 1: clustered in time).
    pub inflation: f64,
    /// Interval for the share another run of the same program and input would show
    /// (functions only; the method is the report's `run_interval`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_low: Option<f64>,
    /// Upper bound of `run_low`'s interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_high: Option<f64>,
    /// Whether its share is told apart from the next row's (`None` for the last row).
    pub distinct_from_next: Option<bool>,
    /// Running states (runs of consecutive samples in this row, seed 002 §5.1.2), when the
    /// samples have time stamps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs: Option<u64>,
    /// Mean running-state length over the sampling interval (`R` of seed 002 eq. 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub r_mean: Option<f64>,
    /// The row's share of the time the branch stacks measured (their cycle counts, the
    /// "hardware time"), when the samples carry branch stacks with cycles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hardware_time: Option<f64>,
    /// Bootstrap interval of `hardware_time` (the stated confidence).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hardware_time_low: Option<f64>,
    /// Bootstrap interval of `hardware_time`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hardware_time_high: Option<f64>,
    /// Branch stacks (samples' windows) that measured a range of the row: what
    /// `hardware_time` rests on. The `hardware-time` flag needs as many windows as samples
    /// as the noise floor (`proftrust_pipeline`'s check, docs/check.md "Hardware time").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hardware_time_windows: Option<u64>,
    /// The finest attribution that at least 95% of the row's samples have.
    pub attribution: Attribution,
    /// Warning kinds that apply to the row (`granularity`, `aliasing`, `skid`, `clustering`,
    /// `hardware-time`: the sampled share and the hardware time disagree beyond both
    /// intervals).
    pub flags: Vec<String>,
    /// What the row can be used for.
    pub verdict: Verdict,
    /// Why.
    pub reason: String,
}

/// "Record N× longer for ±x% on the top k".
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetAdvice {
    /// Wanted half-width of the intervals, as a share (0.01 = ±1%).
    pub precision: f64,
    /// Rows it applies to (the top k functions).
    pub top: usize,
    /// How many times the current samples are needed (<= 1: reached).
    pub factor: f64,
    /// Samples needed.
    pub samples_needed: u64,
    /// The advice in words.
    pub message: String,
}

/// The recurrence measurement of aliasing (seeds 001, 002): sampled instruction addresses
/// recurring beyond what independent samples give ([`crate::aliasing::recurrence`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AliasingCheck {
    /// Consecutive-sample pairs in one function examined (same thread).
    pub pairs: u64,
    /// Lag (in samples) with the strongest excess recurrence.
    pub lag: u64,
    /// Pairs at that lag landing on the same instruction.
    pub same_observed: f64,
    /// Expected same-instruction pairs if samples were independent of the code's phase.
    pub same_expected: f64,
    /// Observed over expected.
    pub ratio: f64,
    /// `(observed - expected) / sd`.
    pub z: f64,
    /// Whether shares may be biased by aliasing.
    pub flagged: bool,
}

/// The phase-lock measurement of aliasing ([`crate::aliasing::phase_lock`]): whether the
/// sampled function changes between consecutive samples where the sampling instant moved
/// against the period, as it does when the period is locked to a cycle of the program.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseLock {
    /// The sampling period the shifts are measured against (the event's unit, ns for time
    /// events; the median of the samples' periods).
    pub period: u64,
    /// Pairs of consecutive samples of one thread without a gap (at most 4 periods apart).
    pub pairs: u64,
    /// Of them, pairs whose function differs.
    pub changes: u64,
    /// Median phase shift (distance of the interval to the nearest multiple of the period,
    /// in the period's unit) of the pairs whose function changed.
    pub shift_changed: f64,
    /// The same for the pairs whose function did not change.
    pub shift_unchanged: f64,
    /// Mann-Whitney z of the shifts, changed pairs against unchanged ones.
    pub z: f64,
    /// Probability that a changed pair's shift exceeds an unchanged pair's (0.5 when the
    /// function does not depend on the sampling instant).
    pub auc: f64,
    /// Uninterrupted stretches of the threads (runs of samples without a gap): with a locked
    /// period, each samples the program's cycle at one phase.
    pub stretches: u64,
    /// Functions whose changes follow the phase shifts (their shares are suspect).
    pub functions: Vec<String>,
    /// Whether the period is locked to a cycle of the program.
    pub flagged: bool,
}

/// How the rows' `run_low`/`run_high` were computed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunInterval {
    /// `recordings` (the spread of the shares between the recordings given), `overdispersion`
    /// (one recording: the sampling variance plus a between-run variance calibrated on
    /// repeated runs), or `stretches` (one phase-locked recording: each uninterrupted stretch
    /// counts as one look at the program's cycle).
    pub method: String,
    /// Recordings the interval rests on.
    pub recordings: usize,
    /// The between-run dispersion `tau` of the overdispersion model (`None` for
    /// `recordings`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tau: Option<f64>,
    /// The method in words.
    pub note: String,
}

/// Samples without a function in one module (issue 29: every report states the share of
/// samples without a function, per module).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModuleAttribution {
    /// Module file name (`[unknown]` for addresses in no module).
    pub module: String,
    /// Samples of the checked event in the module.
    pub samples: u64,
    /// Of them, samples in no function.
    pub without_function: u64,
    /// `without_function / samples`.
    pub share: f64,
}

/// Recording health (issue 14 item 5).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckHealth {
    /// Samples the kernel reported lost.
    pub lost: u64,
    /// `PERF_RECORD_THROTTLE` records in the file (0 also when its format cannot hold them:
    /// `perf script` text, callgrind).
    pub throttled: Option<u64>,
    /// Time running over time enabled of the event (< 1: multiplexed), when the file carries
    /// the times (`PERF_FORMAT_TOTAL_TIME_*` read values; `proftrust record`'s files).
    pub running_ratio: Option<f64>,
    /// Share of the samples with no function (no binary, no symbol, no recovered range).
    pub unsymbolized: f64,
    /// Per module with samples without a function: how many (modules where every sample has
    /// a function are left out).
    pub unattributed: Vec<ModuleAttribution>,
    /// Modules with samples whose binary has no line information.
    pub no_debug_info: Vec<String>,
    /// How the program ended, when known.
    pub outcome: Option<String>,
}

/// The finest granularity whose rows can be acted on, and why not finer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Granularity {
    /// `function`, `inline`, `line`, `block`, `instruction`, or `none`.
    pub level: String,
    /// Why the next finer level is not trustworthy.
    pub reason: String,
}
