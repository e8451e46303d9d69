//! # proftrust-paths
//!
//! Below functions: which *path* through a procedure and which *calling context* costs the
//! time (seed 003, Ammons, Ball & Larus, "Exploiting Hardware Performance Counters with Flow
//! and Context Sensitive Profiling", PLDI'97).
//!
//! Entry points:
//!
//! * [`PathNumbering`] — Ball-Larus numbering of one [`Cfg`](proftrust_model::Cfg) (seed 003
//!   §2): backedges replaced by pseudo-edges, `NumPaths`, edge values, path regeneration.
//! * [`Profiler`] — a [`BlockVisitor`](proftrust_model::BlockVisitor) over the exact block
//!   trace that builds the exact [`PathProfile`] (frequency, instructions, cycles, L1 and LLC
//!   misses per path from a [`CostModel`], seed 003 §3) and the exact [`Cct`] (seed 003 §4)
//!   in one pass.
//! * [`classify_hot`], [`hot_paths_covering`] — hot, dense and sparse paths and procedures
//!   (seed 003 §6).
//! * [`gprof_comparison`] — the gprof problem, measured per context.
//! * [`sampled_cct`] / [`sampled_cct_with`] / [`compare_cct`] — the calling contexts a
//!   call-chain sampler sees (with callers a frame-pointer chain misses restored from the
//!   code, [`CodeOracle`]), with Wilson intervals, against the exact CCT.
//! * [`lbr_paths`] — path frequency estimates from LBR branch stacks; [`lbr_timed_paths`]
//!   also times every path instance from the stacks' cycle counts.
//! * [`profile_staged`] — the same profile and CCT with the cost model on the trace's
//!   thread and the profiler on a second one ([`BlockCosts`], [`Profiler::block_costed`]).
//! * [`Profiler::on_path`] — every completed path instance with its own metrics, as it
//!   completes (variational path profiling needs per-instance times).
//! * [`Cct::write_folded`] — flame-graph folded stacks.
//!
//! Design constraints: no I/O except writers over `Write`; addresses are module-relative
//! ([`Svma`](proftrust_model::Svma)); path ids are `u128` computed with checked arithmetic, a
//! function whose path count does not fit is reported as degraded ([`Error::TooManyPaths`]),
//! never wrapped.
//!
//! Entry point: Ball-Larus numbering of a function's CFG ([`PathNumbering`]), then path
//! profiles of a traced run ([`Profiler`]):
//!
//! ```
//! use proftrust_binary::Binary;
//! use proftrust_paths::PathNumbering;
//!
//! let b = Binary::open("../cli/tests/golden/fixtures/tiny".as_ref()).unwrap();
//! let cfg = b.cfg(b.function_by_name("work").unwrap()).unwrap();
//! let n = PathNumbering::new(&cfg)?;
//! assert!(n.num_paths() >= 3); // if / else if / else in a loop
//! # Ok::<(), proftrust_paths::Error>(())
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod cct;
mod funcs;
mod hot;
mod lbr;
mod numbering;
mod profile;
mod sampled;
mod staged;

pub use cct::{gprof_comparison, Cct, CctNode, CctStats, GprofComparison, GprofContext, NodeId};
pub use funcs::{FuncIdx, FunctionMap, ProgramCfgs};
pub use hot::{
    classify_hot, hot_paths_covering, HotClass, HotMetric, HotOptions, HotReport, ProcSummary,
};
pub use lbr::{compare_lbr, lbr_paths, lbr_timed_paths, LbrComparison, LbrPaths, LbrTimedPaths};
pub use numbering::{DagEdge, DagEdgeKind, DagNode, PathNumbering, RegeneratedPath, Step};
pub use profile::{
    CostModel, FlatCpi, FunctionPathStats, InstrCost, PathKey, PathMetrics, PathProfile,
    PerInstruction, Profiler, ProfilerOptions,
};
pub use sampled::{
    compare_cct, sampled_cct, sampled_cct_with, CodeOracle, ContextShare, NoCode, SampledCct,
    SampledComparison,
};
pub use staged::{profile_staged, BlockCosts, Staged};

/// Why a paths analysis could not be done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The function has more entry-to-exit paths than fit in 128 bits.
    #[error("function {function}: too many paths (NumPaths overflows 128 bits at block {block}); paths are not numbered for it, use block or edge counts instead")]
    TooManyPaths {
        /// Function name.
        function: String,
        /// Block where the count overflowed.
        block: u32,
    },
    /// The CFG has no blocks.
    #[error("function {function}: empty CFG, nothing to number")]
    EmptyCfg {
        /// Function name.
        function: String,
    },
    /// An edge refers to a block that does not exist.
    #[error("function {function}: edge {from} -> {to} refers to a block outside the CFG ({blocks} blocks); the CFG is malformed")]
    BadEdge {
        /// Function name.
        function: String,
        /// Source block.
        from: u32,
        /// Target block.
        to: u32,
        /// Number of blocks.
        blocks: usize,
    },
    /// A path id outside `[0, NumPaths(entry))`.
    #[error(
        "function {function}: path id {id} is out of range (the function has {num_paths} paths)"
    )]
    PathOutOfRange {
        /// Function name.
        function: String,
        /// The id asked for.
        id: u128,
        /// NumPaths(entry).
        num_paths: u128,
    },
    /// Nothing to compare (no samples, no executions).
    #[error("{what}: nothing to compare ({why})")]
    Empty {
        /// Which comparison.
        what: &'static str,
        /// Why.
        why: String,
    },
}
