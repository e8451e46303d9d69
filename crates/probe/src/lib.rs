//! # proftrust-probe
//!
//! Probes that time acyclic paths on real hardware for variational path profiling (seed
//! 004, Perelman, Chilimbi & Calder, "Variational Path Profiling"), on machines without LBR.
//! Users put a *boundary* at the top of each hot loop body and at the entry of each hot
//! function (seed 004 §4.2: "all of our acyclic paths either start at a procedure entry or a
//! loop backward branch and also end at one of these points"), and wrap the conditions of
//! the branches in between so that the path's branch history is recorded.
//!
//! * [`probe_for!`], [`boundary`], [`branch`], [`Session`] — the Rust API;
//!   `include/proftrust_probe.h` is the same for C (header-only: `PT_FOR(...)`,
//!   `PT_BOUNDARY()`, `PT_BRANCH(c)`; the session starts and writes itself). `probe_for!` /
//!   `PT_FOR` write a loop as bursty tracing's two copies (seed 004 §4.1): a clean copy with
//!   only a countdown on the back edge, and a probed copy for the timed iterations.
//! * [`Bursty`] — the dispatch check's nCheck / nInstr counters (seed 004 §4.1), shared
//!   with the analysis (the virtual PMU source samples paths with it).
//! * [`format`](mod@format) — the versioned probe file both write and `proftrust vpp --source probe`
//!   reads.
//!
//! Design constraints: the only `unsafe` is in `sys.rs` (TSC reads, `cpuid`, the load bias
//! from `dl_iterate_phdr`); no allocation and no lock on the fast path; the file is written
//! through a temporary file renamed into place.
//!
//! Bursty tracing, the dispatch check every boundary runs (seed 004 §4.1): with nCheck 3 and
//! nInstr 1, a path is timed after every three clean ones, as the closed form says:
//!
//! ```
//! use proftrust_probe::{expected_timed, Bursty, BurstyOptions};
//!
//! let mut opts = BurstyOptions::default();
//! (opts.n_check, opts.n_instr) = (3, 1);
//! let mut b = Bursty::new(opts);
//! let timed = (0..1000).filter(|_| b.boundary().ends_timed).count() as u64;
//! assert_eq!(timed, expected_timed(1000, 3, 1));
//! assert!((240..=260).contains(&timed), "{timed}");
//! ```
#![warn(missing_docs)]

mod bursty;
pub mod format;
mod runtime;
mod sys;

pub use bursty::{expected_timed, splitmix64, Bursty, BurstyOptions, Step};
pub use format::{ProbeError, ProbeFile, ProbeSample};
pub use runtime::{boundary, branch, Clean, Hold, ProbeOptions, Probed, Session};

/// Path of the C header, for build scripts: `-I` this directory's parent.
pub const C_HEADER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/include/proftrust_probe.h");
