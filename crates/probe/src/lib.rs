//! # proftrust-probe
//!
//! Probes that time acyclic paths on real hardware for variational path profiling (seed
//! 004, Perelman, Chilimbi & Calder, "Variational Path Profiling"), on machines without LBR.
//! Users put a *boundary* at the top of each hot loop body and at the entry of each hot
//! function (seed 004 §4.2: "all of our acyclic paths either start at a procedure entry or a
//! loop backward branch and also end at one of these points"), and wrap the conditions of
//! the branches in between so that the path's branch history is recorded.
//!
//! * [`boundary`], [`branch`], [`Session`] — the Rust API; `include/proftrust_probe.h` is
//!   the same for C (header-only: `PT_BOUNDARY()`, `PT_BRANCH(c)`; the session starts and
//!   writes itself).
//! * [`Bursty`] — the dispatch check's nCheck / nInstr counters (seed 004 §4.1), shared
//!   with the analysis (the virtual PMU source samples paths with it).
//! * [`format`](mod@format) — the versioned probe file both write and `proftrust vpp --source probe`
//!   reads.
//!
//! Design constraints: the only `unsafe` is in `sys.rs` (TSC reads, `cpuid`, the load bias
//! from `dl_iterate_phdr`); no allocation and no lock on the fast path; the file is written
//! through a temporary file renamed into place.
#![warn(missing_docs)]

mod bursty;
pub mod format;
mod runtime;
mod sys;

pub use bursty::{expected_timed, splitmix64, Bursty, BurstyOptions, Step};
pub use format::{ProbeError, ProbeFile, ProbeSample};
pub use runtime::{boundary, branch, ProbeOptions, Session};

/// Path of the C header, for build scripts: `-I` this directory's parent.
pub const C_HEADER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/include/proftrust_probe.h");
