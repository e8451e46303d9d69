//! # proftrust-vpp
//!
//! Variational path profiling (seed 004, Perelman, Chilimbi & Calder, "Variational Path
//! Profiling"): which acyclic paths vary most in execution time, because that variation —
//! not the time of the fastest run — is what an optimisation (a prefetch, say) can win.
//!
//! Entry points:
//!
//! * nouns: [`PathSignature`] (entry address + branch history, seed 004 §5.1),
//!   [`TimedPathSample`], [`PathTimes`], [`PathTimings`];
//! * sources, each producing [`PathTimings`]: [`TracePathTimer`] (the exact block trace
//!   timed by the virtual PMU, a [`BlockVisitor`](proftrust_model::BlockVisitor)),
//!   [`lbr_timings`] (LBR stacks with cycle counts), [`probe_timings`] (a
//!   `proftrust-probe` file);
//! * analysis (§5): [`analyze`] (basetime, net variation, shares, ranking),
//!   [`top_delta_histograms`] (Figs. 2 and 6), [`ranked`] / [`top_k_difference`] (hot paths
//!   by frequency and time against VPP, Fig. 11);
//! * stability (§5.3): [`compare_runs`] (Figs. 4 and 5);
//! * instrumentation bias (§4.2): [`estimate_bias`] and [`AnalysisOptions::bias`].
//!
//! Design constraints: pure analysis — no files, no processes (the CLI runs programs and
//! reads files); addresses are module-relative SVMAs of the program's main executable;
//! times are integers in the source's unit ([`TimeUnit`]) and kept as exact histograms.
//!
//! Entry point: [`analyze`] over per-path timings (from any source):
//!
//! ```
//! use proftrust_model::Svma;
//! use proftrust_vpp::{analyze, AnalysisOptions, BranchHistory, PathSignature, PathTimings, TimeUnit};
//!
//! let mut t = PathTimings::new(TimeUnit::Cycles);
//! let p = PathSignature::new(Svma(0x1000), BranchHistory::new());
//! for time in [10, 10, 10, 40] {
//!     t.add(p.clone(), time);
//! }
//! let a = analyze(&t, &AnalysisOptions::default());
//! // basetime 10; net variation = total - count x basetime = 70 - 40 = 30 (seed 004).
//! assert_eq!((a.paths[0].basetime, a.paths[0].net_variation), (10, 30));
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod analysis;
mod bias;
mod lbr;
mod probe;
mod signature;
mod signatures;
mod stability;
mod timings;
mod trace;

pub use analysis::{
    analyze, delta_histogram, path_variation, path_variation_quantised, ranked,
    top_delta_histograms, top_k_difference, AnalysisOptions, DeltaHistogram, PathVariation,
    Ranking, TimeBase, TopKDifference, VppAnalysis,
};
pub use bias::{choose_calibration, estimate_bias, timer_resolution, BiasEstimate};
pub use lbr::{lbr_timings, LbrSourceStats};
pub use probe::{probe_resolution, probe_timings, timed_coverage};
pub use signature::{BranchHistory, PathSignature};
pub use signatures::SignatureMap;
pub use stability::{compare_runs, StabilityComparison};
pub use timings::{PathInfo, PathTimes, PathTimings, TimeUnit, TimedPathSample};
pub use trace::{TracePathTimer, TraceSourceOptions, TraceTimings};

/// Why a variational path analysis could not be done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A signature string that does not parse.
    #[error("{text:?} is not a path signature ({why}); expected ENTRY-BITS such as 0x401120-110")]
    BadSignature {
        /// The text, shortened.
        text: String,
        /// What is wrong.
        why: &'static str,
    },
}
