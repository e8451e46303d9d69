//! # proftrust-check
//!
//! The statistics of `proftrust check`: how far one sampled profile can be trusted when the
//! run cannot be repeated, from its own samples and the binary's code (docs/check.md). No
//! I/O: the pipeline (`proftrust_pipeline::check`) loads the samples and the binaries, keys
//! every sample by function, inline function, line and block, and calls these in turn.
//!
//! * [`rows`] — per level, counts per time slice into shares with Wilson and batch-means
//!   intervals and a verdict (act on it / rank only / noise) with count floors and the
//!   attribution the row stands on (seed 002 §3.3-3.5, eqs. 1-9).
//! * [`runs`] — intervals for another run of the same program and input: from the spread
//!   between several recordings, or from one by a calibrated over-dispersion.
//! * [`aliasing`] — recurrence of sampled instructions, and the sampled function following
//!   the sampling instant modulo the period (a period locked to a cycle of the program; seed
//!   001 §3.1, §4.2; seed 002 §3.3).
//! * [`code`] — the skid shadow after slow instructions and calls, and blocks locked onto one
//!   instruction (seed 000 §1.2, eqs. 1-2).
//! * [`verdict`] — the profile's verdict and the finest level it can be trusted at.
//! * [`warn`] — the warnings, in words, from the findings.
//! * [`report`] — the report's data (the `--json` schema).
//!
//! Running states (seed 002 §5.1.2) come from `proftrust_sim::granularity::running_states`,
//! the rule the granularity analysis uses too.
//!
//! ```
//! use proftrust_check::report::{Attribution, Verdict};
//! use proftrust_check::rows::{rows, IntervalChoice, Level, RowRules};
//!
//! // 120 samples in two time slices: f has 60 + 30, g 0 + 30.
//! let names = vec!["f".to_string(), "g".to_string()];
//! let counts = vec![vec![60, 30], vec![0, 30]];
//! let level = Level {
//!     names: &names,
//!     counts: &counts,
//!     sizes: &[60, 60],
//!     attribution: &[Attribution::Line, Attribution::Line],
//!     needs: Attribution::Function,
//!     states: None,
//!     note: None,
//! };
//! let rules = RowRules {
//!     n: 120,
//!     confidence: 0.95,
//!     interval: IntervalChoice::Wilson,
//!     act_precision: 0.2,
//!     noise_precision: 0.5,
//!     aliased: false,
//! };
//! let r = rows(&level, &rules);
//! assert_eq!((r[0].name.as_str(), r[0].samples), ("f", 90));
//! assert_eq!(r[0].verdict, Verdict::RankOnly); // ±12%, but 90 samples < 97
//! assert_eq!(r[1].verdict, Verdict::RankOnly); // ±32%
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod aliasing;
pub mod code;
pub mod report;
pub mod rows;
pub mod runs;
pub mod verdict;
pub mod warn;
