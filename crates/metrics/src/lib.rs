//! # proftrust-metrics
//!
//! How far a sampling profile is from the exact truth, as numbers. Pure functions, no I/O.
//!
//! Entry points:
//!
//! * [`hotspot_metrics`] — NRMSE_SR, SC and OD of Wu & Mencer (seed 001 §3.2) over the sampled
//!   IP histogram, with [`dense_order_levels`] for the order levels (ties share a level).
//! * [`epsilon`] — the mis-attribution share `1/2 Σ |s/N_S − e/N_I|` (seed 000 §4) at any
//!   granularity (function, innermost inlined function, block, instruction): the key type is
//!   the caller's.
//! * [`wilson_interval`] — confidence interval of a sampled share.
//! * [`resolution`] — a profile's own statistical resolution (batch-means intervals, the
//!   smallest share told from zero, neighbouring ranks, samples needed), for `check`.
//! * [`fleet`] — fleet-scale statistics from per-host sums (issue 16): a function's fleet
//!   share with a cluster-robust interval (ratio estimator, hosts as clusters), the difference
//!   of two fleets, Benjamini-Hochberg q-values, per-host deviations, samples or hosts needed.
//! * [`kendall_tau_b`], [`top_k_overlap`], [`function_coverage`] — rank agreement and coverage.
//! * [`compare()`] — joins a [`SampleSet`](proftrust_model::SampleSet) and an
//!   [`ExactProfile`](proftrust_model::ExactProfile) of the same binary on module-relative
//!   addresses and computes all of the above ([`Comparison`]); attribution (function, inline
//!   frame, block) comes from the caller through the [`Attribution`] trait.
//! * [`cycles_estimate`] — the documented cycle estimate from callgrind's simulated events.
//! * [`lbr_time()`] — time per fall-through range from branch stacks with cycle counts
//!   (Intel LBR, Arm BRBE), charged to instructions, with bootstrap intervals.
//! * [`evidence`] — minimum-evidence rules: which metrics and verdicts rest on too few samples
//!   (seed 002's binomial sampling model).
//!
//! Design constraints: every function takes plain counts (`u64`) so that the caller decides
//! what a "unit" is (an instruction address, a block, a function); degenerate input (no
//! samples, no executed instructions) is an [`Error`], never a NaN.
//!
//! Entry points: [`compare()`] (a sample set against an exact profile), and the metrics on
//! their own, e.g. epsilon (seed 000) and the Wilson interval:
//!
//! ```
//! // 100 samples: 60 in f, 40 in g; exactly, f ran 50% of the instructions.
//! let eps = proftrust_metrics::epsilon([("f", 60), ("g", 40)], [("f", 500), ("g", 500)])?;
//! assert!((eps - 0.10).abs() < 1e-12); // a tenth of the samples sit in the wrong function
//! let (lo, hi) = proftrust_metrics::wilson_interval(60, 100, proftrust_metrics::Z_95);
//! // [0.502, 0.690]: the exact 50% lies outside, the sampled share is significantly off.
//! assert!(0.50 < lo && lo < 0.51 && 0.68 < hi && hi < 0.70);
//! # Ok::<(), proftrust_metrics::Error>(())
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod compare;
mod cycles;
pub mod dist;
pub mod evidence;
pub mod fleet;
pub mod lbr_time;
mod order;
mod rank;
pub mod resolution;
mod share;

pub use compare::{
    check_same_program, compare, sampled_functions, Attribution, CompareOptions, Comparison,
    FunctionComparison, TruthWeight, LBR_TIME_COLUMN, TIME_MODEL_COLUMN,
};
pub use cycles::{cycles_estimate, CYCLES_FORMULA};
pub use lbr_time::{lbr_time, LbrTime, RangeCode, RangeTime};
pub use order::{dense_order_levels, hotspot_metrics, HotspotMetrics, SampledIp};
pub use rank::{function_coverage, kendall_tau_b, top_k_overlap};
pub use share::{epsilon, wilson_interval, wilson_interval_of_share, Z_95};

/// Why a metric could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No samples at all (N_S = 0): every share would divide by zero.
    #[error("no samples to compare ({what}): the sampled profile is empty in this scope")]
    NoSamples {
        /// Which metric or scope.
        what: &'static str,
    },
    /// No executed instructions (N_I = 0).
    #[error("no executed instructions ({what}): the exact profile is empty in this scope")]
    NoExecutions {
        /// Which metric or scope.
        what: &'static str,
    },
    /// Two inputs that must be parallel have different lengths.
    #[error("{what}: {left} values against {right}; the inputs must be parallel")]
    LengthMismatch {
        /// Which metric.
        what: &'static str,
        /// Length of the first input.
        left: usize,
        /// Length of the second input.
        right: usize,
    },
    /// The samples or the truth come from another build of the binary.
    #[error("{side} {} from another build of {binary}: build-id {found} there, {expected} in the binary; re-run both on the same build or pass the matching --binary", verb(side, "come", "comes"))]
    BuildIdMismatch {
        /// `samples` or `truth`.
        side: &'static str,
        /// The binary's file name.
        binary: String,
        /// Build-id in the profile.
        found: String,
        /// Build-id of the binary.
        expected: String,
    },
    /// The audited binary does not occur in one of the profiles.
    #[error("the {side} {} nothing from {binary} (they name: {present}); samples and truth must come from the same program", verb(side, "contain", "contains"))]
    BinaryNotInProfile {
        /// `samples` or `truth`.
        side: &'static str,
        /// The binary's file name.
        binary: String,
        /// Modules the profile does name (first few).
        present: String,
    },
    /// The audited binary occurs in the samples, but no sample of the chosen event lies in it.
    #[error("no samples in {binary}: all {elsewhere} samples lie in other modules or the kernel; profile longer, lower the period, or audit the module that has them (--binary)")]
    NoSamplesInBinary {
        /// The binary's file name.
        binary: String,
        /// Samples outside the scope.
        elsewhere: u64,
    },
    /// The truth holds no executed instruction of the audited binary.
    #[error(
        "the truth has no executed instruction in {binary}; was it counted for the same program?"
    )]
    NoExecutionsInBinary {
        /// The binary's file name.
        binary: String,
    },
    /// `--truth-weight cycles-estimate` without the callgrind events it needs.
    #[error("the truth has no {missing} column: the cycle estimate needs callgrind run with --cache-sim=yes --branch-sim=yes (found columns: {found})")]
    MissingCostColumn {
        /// The missing event name.
        missing: String,
        /// The columns present.
        found: String,
    },
    /// `--truth-weight time-model` on a truth without the timing model's column.
    #[error("the truth has no time column (found: {found}): --truth-weight time-model needs an exact profile with edges (`proftrust truth`) or the virtual PMU's (`proftrust vpmu --mode tip --cpi-model cache-sim --exact FILE`), or let audit run the program; --truth-weight lbr-time needs samples with branch stacks that carry cycle counts")]
    MissingTimeColumn {
        /// The columns present.
        found: String,
    },
    /// A sampled IP claims more real executions than the total (r_i > N_I).
    #[error("{what}: an exact count {count} exceeds the total {total}")]
    CountExceedsTotal {
        /// Which metric.
        what: &'static str,
        /// The offending count.
        count: u64,
        /// The total it exceeds.
        total: u64,
    },
}

/// The verb agreeing with a side of a comparison: `samples` is plural, `truth` singular.
fn verb(side: &str, plural: &'static str, singular: &'static str) -> &'static str {
    if side == "samples" {
        plural
    } else {
        singular
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 32 item 10: "the truth contain nothing" read wrong; each side agrees.
    #[test]
    fn sides_agree_with_their_verbs() {
        let e = |side| Error::BinaryNotInProfile {
            side,
            binary: "prog".into(),
            present: "other".into(),
        };
        assert!(e("truth")
            .to_string()
            .starts_with("the truth contains nothing from prog"));
        assert!(e("samples")
            .to_string()
            .starts_with("the samples contain nothing from prog"));
        let b = Error::BuildIdMismatch {
            side: "truth",
            binary: "prog".into(),
            found: "ab".into(),
            expected: "cd".into(),
        };
        assert!(
            b.to_string()
                .starts_with("truth comes from another build of prog"),
            "{b}"
        );
    }
}
