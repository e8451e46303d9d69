//! # proftrust-sim
//!
//! Sampling simulators: why (and when) a sampled share can be trusted.
//!
//! * [`sampling`] — the running-state model of seed 002 (Wen et al.): timelines of tasks with
//!   a running granularity, a sampler with random start, interval jitter and noise on the unit
//!   of events, the piecewise binomial model (eqs. 1-9), the paper's Tables 2-6 as presets,
//!   the cases where the argument breaks (aliasing, fragmented self time) and the coverage of
//!   the Wilson interval `audit` prints.
//! * [`granularity`] — running granularity, sampling-interval distribution and the variance of
//!   a second event per interval measured on a real [`proftrust_model::SampleSet`] (seed 002
//!   §5.1, Figs. 6-9), plus small SVG histograms.
//!
//! Design constraints: no I/O (callers read files and write outputs), all randomness from
//! seeded ChaCha8 streams so every result is reproducible from its seed, and simulation cost
//! proportional to what a sampler observes (samples and runs), never to resource units.
//!
//! Entry point: a paper preset ([`sampling::run_preset`]), seeded:
//!
//! ```
//! use proftrust_sim::sampling::{run_preset, Preset, PresetOptions};
//!
//! let mut o = PresetOptions::default();
//! o.reps = 20;
//! o.seed = 7;
//! let report = run_preset(Preset::Table2, &o)?;
//! assert_eq!((report.reps, report.seed), (20, 7));
//! # Ok::<(), proftrust_sim::SimError>(())
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod error;
pub mod granularity;
pub mod sampling;

pub use error::SimError;
